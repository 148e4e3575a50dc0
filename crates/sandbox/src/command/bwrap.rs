//! Building the command line: bubblewrap's arguments and the helper's.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{DEVICES, ETC_FILES, HELPER_INSIDE, SANDBOX_PATH, SYSTEM_DIRS};
use crate::sandbox::RootPaths;

pub(super) fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}

/// Where the writable roots appear inside the sandbox, where the program starts and what
/// its `HOME` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Where the output root is mounted.
    pub output: &'static str,
    /// Where the scratch root is mounted.
    pub scratch: &'static str,
    /// The working folder.
    pub cwd: &'static str,
    /// `HOME`.
    pub home: &'static str,
}

/// A command's layout: `/output`, and `/scratch` as working folder and home.
pub(crate) const COMMAND_LAYOUT: Layout = Layout {
    output: "/output",
    scratch: "/scratch",
    cwd: "/scratch",
    home: "/scratch",
};

/// The variables every confined program starts with (`PATH`, `HOME`, `TMPDIR`, `LANG`),
/// before its own. They, and the program's own, are bubblewrap's environment (which it
/// passes on): never on its command line, where `/proc/PID/cmdline` would show every
/// value to every local user for as long as the program runs.
pub(crate) fn sandbox_env(layout: &Layout) -> [(&'static str, &'static str); 4] {
    [
        ("PATH", SANDBOX_PATH),
        ("HOME", layout.home),
        ("TMPDIR", "/tmp"),
        ("LANG", "C.UTF-8"),
    ]
}

/// bubblewrap's arguments, up to (not including) the program it runs. They hold no
/// variable: bubblewrap is started with the program's environment instead (see
/// [`sandbox_env`]).
pub(crate) fn bwrap_args(
    roots: &RootPaths,
    helper: Option<&Path>,
    tmp_bytes: u64,
) -> Vec<OsString> {
    bwrap_args_in(roots, helper, tmp_bytes, &COMMAND_LAYOUT)
}

/// [`bwrap_args`] with the writable roots, the working folder and `HOME` where `layout`
/// says.
pub(crate) fn bwrap_args_in(
    roots: &RootPaths,
    helper: Option<&Path>,
    tmp_bytes: u64,
    layout: &Layout,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = [
        "--unshare-user",
        "--unshare-all",
        "--disable-userns",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--hostname",
        "provrun",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    .map(os)
    .into();
    for dir in SYSTEM_DIRS {
        let p = Path::new(dir);
        match std::fs::symlink_metadata(p) {
            Ok(md) if md.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(p) {
                    a.extend([os("--symlink"), target.into(), os(*dir)]);
                }
            }
            Ok(md) if md.is_dir() => a.extend([os("--ro-bind"), os(*dir), os(*dir)]),
            _ => {}
        }
    }
    a.extend(["--dir", "/etc"].map(os));
    for f in ETC_FILES {
        let p = Path::new("/etc").join(f);
        if p.exists() {
            a.extend([os("--ro-bind"), p.clone().into(), p.into()]);
        }
    }
    a.extend(["--proc", "/proc", "--dev", "/dev", "--size"].map(os));
    a.push(os(tmp_bytes.max(4096).to_string()));
    a.extend(["--tmpfs", "/tmp"].map(os));
    a.extend([os("--ro-bind"), roots.input.clone().into(), os("/input")]);
    a.extend([os("--bind"), roots.output.clone().into(), os(layout.output)]);
    a.extend([
        os("--bind"),
        roots.scratch.clone().into(),
        os(layout.scratch),
    ]);
    if let Some(h) = helper {
        a.extend([os("--ro-bind"), h.into(), os(HELPER_INSIDE)]);
    }
    a.extend([os("--chdir"), os(layout.cwd), os("--")]);
    a
}

/// The helper's arguments, including its own path when `inside` (under bubblewrap the
/// helper is the program bubblewrap runs). `roots` are the paths as the command sees them.
pub(super) fn helper_args(
    roots: &RootPaths,
    inside: bool,
    require: &[&str],
    limits: &BTreeMap<String, u64>,
    probe: bool,
    extra_read_only: &[PathBuf],
) -> Vec<OsString> {
    helper_args_in(
        roots,
        inside,
        &HelperExtras {
            require,
            limits,
            probe,
            extra_read_only,
            layout: &COMMAND_LAYOUT,
            forwards: &[],
        },
    )
}

/// What [`helper_args_in`] adds to the roots: the layers required, the limits, probing,
/// extra read-only paths, the layout inside and the ports to forward.
pub(super) struct HelperExtras<'a> {
    pub require: &'a [&'a str],
    pub limits: &'a BTreeMap<String, u64>,
    pub probe: bool,
    pub extra_read_only: &'a [PathBuf],
    pub layout: &'a Layout,
    pub forwards: &'a [crate::forward::Forward],
}

/// [`helper_args`] with the writable roots where `extras.layout` puts them inside, and
/// `--forward` for each of `extras.forwards`.
pub(super) fn helper_args_in(
    roots: &RootPaths,
    inside: bool,
    extras: &HelperExtras<'_>,
) -> Vec<OsString> {
    let HelperExtras {
        require,
        limits,
        probe,
        extra_read_only,
        layout,
        forwards,
    } = *extras;
    let mut a = Vec::new();
    if inside {
        a.push(os(HELPER_INSIDE));
    }
    if probe {
        a.push(os("--probe"));
    }
    for r in require {
        a.extend([os("--require"), os(*r)]);
    }
    let (input, output, scratch) = if inside {
        (
            PathBuf::from("/input"),
            PathBuf::from(layout.output),
            PathBuf::from(layout.scratch),
        )
    } else {
        (
            roots.input.clone(),
            roots.output.clone(),
            roots.scratch.clone(),
        )
    };
    let mut read_only: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    read_only.push(PathBuf::from("/etc"));
    read_only.push(input);
    read_only.extend(extra_read_only.iter().cloned());
    if inside {
        // Inside the PID namespace /proc shows only the sandbox's own processes.
        read_only.extend([HELPER_INSIDE, "/proc", "/dev"].map(PathBuf::from));
    }
    for p in read_only {
        a.extend([os("--ro"), p.into()]);
    }
    let mut read_write = vec![output, scratch];
    if inside {
        read_write.push(PathBuf::from("/tmp"));
    }
    for p in read_write {
        a.extend([os("--rw"), p.into()]);
    }
    for d in DEVICES {
        a.extend([os("--dev"), os(*d)]);
    }
    for (k, v) in limits {
        a.extend([os("--limit"), os(format!("{k}={v}"))]);
    }
    for f in forwards {
        a.extend([os("--forward"), os(f.to_arg())]);
    }
    a.push(os("--"));
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bwrap_arguments_bind_the_roots_at_their_names() {
        let roots = RootPaths {
            input: "/h/in".into(),
            output: "/h/out".into(),
            scratch: "/h/scr".into(),
        };
        let a: Vec<String> = bwrap_args(&roots, None, 1 << 20)
            .into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let joined = a.join(" ");
        assert!(joined.contains("--ro-bind /h/in /input"), "{joined}");
        assert!(joined.contains("--bind /h/out /output"), "{joined}");
        assert!(joined.contains("--bind /h/scr /scratch"), "{joined}");
        assert!(joined.contains("--unshare-all"), "{joined}");
        // No variable on the command line: they are bubblewrap's environment.
        assert!(
            !joined.contains("--setenv") && !joined.contains("--clearenv"),
            "{joined}"
        );
        assert!(joined.contains("--size 1048576 --tmpfs /tmp"), "{joined}");
        assert!(a.last().is_some_and(|l| l == "--"));
    }
}
