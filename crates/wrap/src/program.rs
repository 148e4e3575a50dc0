//! Finding the program before anything is written: a name is looked up on the caller's
//! `PATH`, a path is taken from the caller's folder, and the file (with its `#!`
//! interpreter) must be something the sandbox shows: the system folders, a `--read-only`
//! grant, the workspace or the inputs.

use std::path::{Path, PathBuf};

use provrun_sandbox::WORKSPACE_INSIDE;

use crate::error::WrapError;

/// Where host folders appear inside the sandbox.
#[derive(Debug, Clone)]
pub struct Visible {
    /// Host folders shown at their own paths (system folders, read-only grants),
    /// canonical.
    pub same_path: Vec<PathBuf>,
    /// The workspace on the host (canonical), shown at [`WORKSPACE_INSIDE`] (`None`: the
    /// bundle's own, empty at the start).
    pub workspace: Option<PathBuf>,
}

impl Visible {
    /// The path inside the sandbox of the host file `path` (canonical), if it is shown.
    pub fn inside(&self, path: &Path) -> Option<PathBuf> {
        if let Some(rest) = self
            .workspace
            .as_deref()
            .and_then(|w| path.strip_prefix(w).ok())
        {
            return Some(Path::new(WORKSPACE_INSIDE).join(rest));
        }
        self.same_path
            .iter()
            .any(|d| path.starts_with(d))
            .then(|| path.to_path_buf())
    }
}

/// The program to run, as the sandbox names it, and its host file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The host file (canonical).
    pub host: PathBuf,
    /// Its path inside the sandbox (what `argv[0]` becomes).
    pub inside: PathBuf,
}

/// Finds `program` (from the command line) for a caller in `cwd` with `path_var` as
/// `PATH`, and checks the sandbox shows it and its interpreter.
///
/// The program runs as the caller typed it: `inside` is the path as found (not the file a
/// link leads to) whenever the sandbox shows that path and every link on the way from it
/// to the file — so that a virtualenv's `bin/python`, a link to the base interpreter,
/// still finds its `pyvenv.cfg` and runs as the virtualenv. Otherwise it is the file's
/// own path.
///
/// # Errors
///
/// [`WrapError::SetUp`] when the program is not found or not executable, or the sandbox
/// does not show it or its script interpreter.
pub fn resolve(
    program: &str,
    cwd: &Path,
    path_var: Option<&str>,
    visible: &Visible,
) -> Result<Resolved, WrapError> {
    let found = find(program, cwd, path_var)?;
    let host = std::fs::canonicalize(&found)
        .map_err(|e| WrapError::SetUp(format!("the program `{}`: {e}", found.display())))?;
    let real = visible
        .inside(&host)
        .ok_or_else(|| not_shown(program, &host))?;
    let inside = as_typed(&found, visible).unwrap_or(real);
    if let Some(interpreter) = interpreter(&host, path_var)? {
        let real = std::fs::canonicalize(&interpreter).unwrap_or(interpreter.clone());
        if visible.inside(&real).is_none() {
            return Err(not_shown(&format!("{program}'s interpreter"), &real));
        }
    }
    Ok(Resolved { host, inside })
}

/// The file `program` names for a caller in `cwd` with `path_var` as `PATH`, as an
/// absolute path that is not resolved through links.
fn find(program: &str, cwd: &Path, path_var: Option<&str>) -> Result<PathBuf, WrapError> {
    let found = if program.contains('/') {
        let p = cwd.join(program);
        is_executable(&p).then_some(p)
    } else {
        search_path(program, path_var).map(|p| cwd.join(p))
    };
    let Some(found) = found else {
        return Err(WrapError::SetUp(if program.contains('/') {
            format!("the program `{program}` does not exist or is not executable")
        } else {
            format!("the program `{program}` is not on PATH")
        }));
    };
    std::path::absolute(&found)
        .map_err(|e| WrapError::SetUp(format!("the program `{}`: {e}", found.display())))
}

/// The path inside the sandbox of `path` as typed (absolute, not resolved), when the
/// sandbox shows it and each link it leads through: a relative link within what is
/// shown, an absolute one to a folder shown at its own path.
fn as_typed(path: &Path, visible: &Visible) -> Option<PathBuf> {
    use std::path::Component;
    let plain = |p: &Path| {
        p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
    };
    if !plain(path) {
        return None;
    }
    let inside = visible.inside(path)?;
    let mut at = path.to_path_buf();
    // As many hops as the kernel follows.
    for _ in 0..40 {
        let Ok(target) = std::fs::read_link(&at) else {
            return Some(inside);
        };
        let next = if target.is_absolute() {
            let shown = plain(&target) && visible.same_path.iter().any(|d| target.starts_with(d));
            if !shown {
                return None;
            }
            target
        } else {
            let next = at.parent()?.join(&target);
            if !plain(&next) || visible.inside(&next).is_none() {
                return None;
            }
            next
        };
        at = next;
    }
    None
}

/// The base installation a Python virtualenv's interpreter needs, for `program` and the
/// interpreter its `#!` line names: the folder above the `home` its `pyvenv.cfg` names
/// (the folder beside the interpreter, or the one above it), canonical, when the sandbox
/// does not show it already; the caller shows it read-only.
///
/// # Errors
///
/// [`WrapError::SetUp`] when a `pyvenv.cfg` names a `home` that does not exist, or one
/// whose installation is a top-level folder (granting `/` or `/opt` whole is left to the
/// caller's `--read-only`).
pub fn python_homes(
    program: &str,
    cwd: &Path,
    path_var: Option<&str>,
    visible: &Visible,
) -> Result<Vec<PathBuf>, WrapError> {
    let Ok(found) = find(program, cwd, path_var) else {
        // `resolve` says what is wrong.
        return Ok(Vec::new());
    };
    let mut candidates = vec![found.clone()];
    if let Ok(real) = std::fs::canonicalize(&found)
        && let Ok(Some(interpreter)) = interpreter(&real, path_var)
    {
        candidates.push(interpreter);
    }
    let mut homes = Vec::new();
    for exe in candidates {
        let Some(bin) = exe.parent() else { continue };
        let cfg = [bin.join("pyvenv.cfg"), bin.join("../pyvenv.cfg")]
            .into_iter()
            .find(|c| c.is_file());
        let Some(cfg) = cfg else { continue };
        let Some(home) = pyvenv_home(&cfg) else {
            continue;
        };
        let home = std::fs::canonicalize(&home).map_err(|e| {
            WrapError::SetUp(format!(
                "`{}` names the base installation `{}` (its `home`), which cannot be found: {e}",
                cfg.display(),
                home.display()
            ))
        })?;
        let prefix = home.parent().unwrap_or(&home).to_path_buf();
        if visible.inside(&prefix).is_some() {
            continue;
        }
        if prefix.components().count() < 3 {
            return Err(WrapError::SetUp(format!(
                "`{}` names the base installation `{}`: grant what the interpreter needs with \
                 --read-only (wrap grants a virtualenv's base installation itself only below a \
                 top-level folder)",
                cfg.display(),
                prefix.display()
            )));
        }
        if !homes.contains(&prefix) {
            homes.push(prefix);
        }
    }
    Ok(homes)
}

/// The `home = …` line of a `pyvenv.cfg`.
fn pyvenv_home(cfg: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cfg).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })
}

fn not_shown(what: &str, host: &Path) -> WrapError {
    let folder = host.parent().unwrap_or(host);
    WrapError::SetUp(format!(
        "`{what}` is `{}`, which the sandbox does not show: grant its installation with \
         --read-only (e.g. --read-only {})",
        host.display(),
        folder.display()
    ))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn search_path(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    std::env::split_paths(path_var.unwrap_or("/usr/local/bin:/usr/bin:/bin"))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// The interpreter a script's `#!` line names (`/usr/bin/env NAME` looked up on
/// `path_var`), if the file is a script.
fn interpreter(file: &Path, path_var: Option<&str>) -> Result<Option<PathBuf>, WrapError> {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| WrapError::SetUp(format!("the program `{}`: {e}", file.display())))?;
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return Ok(None);
    };
    let line =
        String::from_utf8_lossy(line.split(|b| *b == b'\n').next().unwrap_or(&[])).into_owned();
    let mut words = line.split_whitespace();
    let Some(first) = words.next() else {
        return Ok(None);
    };
    if Path::new(first).file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'));
        return Ok(match name {
            Some(n) => Some(search_path(n, path_var).ok_or_else(|| {
                WrapError::SetUp(format!(
                    "the program `{}` runs `{n}` (its #! line), which is not on PATH",
                    file.display()
                ))
            })?),
            None => Some(PathBuf::from(first)),
        });
    }
    Ok(Some(PathBuf::from(first)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn script(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn programs_are_found_and_must_be_shown() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (tools, ws) = (base.join("tools"), base.join("ws"));
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        script(&tools.join("agent"), "#!/bin/sh\necho hi\n");
        script(&ws.join("local.sh"), "#!/usr/bin/env sh\n");
        script(&tools.join("weird"), "#!/opt/nowhere/python\n");
        let visible = Visible {
            same_path: vec![PathBuf::from("/usr"), PathBuf::from("/bin"), tools.clone()],
            workspace: Some(ws.clone()),
        };
        let path = format!("{}:/usr/bin:/bin", tools.display());
        let r = resolve("agent", &base, Some(&path), &visible).unwrap();
        assert_eq!(r.inside, tools.join("agent"));
        let r = resolve("./ws/local.sh", &base, Some(&path), &visible).unwrap();
        assert_eq!(r.inside, PathBuf::from("/workspace/local.sh"));
        let e = resolve("absent-program", &base, Some(&path), &visible).unwrap_err();
        assert!(e.to_string().contains("not on PATH"), "{e}");
        let e = resolve("weird", &base, Some(&path), &visible).unwrap_err();
        assert!(e.to_string().contains("interpreter"), "{e}");
        let hidden = Visible {
            same_path: vec![PathBuf::from("/usr")],
            workspace: Some(ws),
        };
        let e = resolve("agent", &base, Some(&path), &hidden).unwrap_err();
        assert!(e.to_string().contains("--read-only"), "{e}");
        assert!(e.nothing_written());
    }
}
