//! Aliased roots: `run` and `resume` refuse, with exit 2 and nothing written, any set-up
//! where two of the bundle (`--out`), its `/output`, the folder `/scratch` is made in
//! (`TMPDIR`), an `--input` and the `--host-dir` overlap — equal, nested either way, through
//! a symbolic link or through a bind mount. Every folder is compared byte for byte and
//! timestamp for timestamp before and after.
//!
//! Pairs that cannot be built are said so where they would be: nothing that exists can be
//! inside a bundle folder that must be new or empty, nor inside `/scratch` (a fresh folder
//! made in `TMPDIR`), so "X inside the bundle" is tried on `resume` (the bundle exists
//! then, with its `/output`) and "X inside /scratch" reduces to "TMPDIR inside X".

use crate::support::cli::s;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Everything under `root`, not following links: kind, size, modes, times, bytes.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let md = std::fs::symlink_metadata(&p).unwrap();
        let mut entry = format!(
            "mode={:o} size={} mtime={}.{} ctime-free",
            md.mode(),
            md.len(),
            md.mtime(),
            md.mtime_nsec()
        );
        if md.file_type().is_symlink() {
            entry.push_str(&format!(
                " -> {}",
                std::fs::read_link(&p).unwrap().display()
            ));
        } else if md.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
        } else {
            entry.push_str(&format!(" bytes={:?}", std::fs::read(&p).unwrap()));
        }
        out.insert(p, entry);
    }
    out
}

struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    fn new() -> Layout {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        for d in ["in/sub", "host/sub", "tmp", "empty", "parent"] {
            std::fs::create_dir_all(t.join(d)).unwrap();
        }
        std::fs::write(t.join("in/data.txt"), "input data\n").unwrap();
        std::fs::write(t.join("host/keep.txt"), "host data\n").unwrap();
        std::fs::write(
            t.join("agent.toml"),
            "name = \"roots\"\nmodel = \"script:script.json\"\ntools = [\"copy_to_host\"]\n\
             approve = \"destructive\"\n",
        )
        .unwrap();
        std::fs::write(
            t.join("script.json"),
            r#"[{"tool_calls": [{"id": "c1", "name": "copy_to_host",
                 "arguments": {"path": "/input/data.txt", "host_path": "copied.txt"}}]},
                {"text": "copied"}]"#,
        )
        .unwrap();
        Layout { dir }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

fn provrun(args: &[String], tmpdir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(args)
        .env("TMPDIR", tmpdir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// Runs `args` with `TMPDIR=tmpdir` and asserts exit 2, an overlap message, and that
/// nothing under the layout changed.
#[track_caller]
fn refused(layout: &Layout, args: &[String], tmpdir: &Path, what: &str) {
    let before = snapshot(layout.dir.path());
    let out = provrun(args, tmpdir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert!(
        err.contains("is inside") || err.contains("is the same folder as"),
        "{what}: {err}"
    );
    assert!(err.contains("must be separate folders"), "{what}: {err}");
    let after = snapshot(layout.dir.path());
    assert_eq!(before, after, "{what}: something changed");
}

fn run_args(l: &Layout, out: &Path, inputs: &[&Path], host: Option<&Path>) -> Vec<String> {
    let mut a = vec!["run".into(), s(&l.p("agent.toml")), "--out".into(), s(out)];
    for i in inputs {
        a.extend(["--input".into(), s(i)]);
    }
    if let Some(h) = host {
        a.extend(["--host-dir".into(), s(h)]);
    }
    a
}

#[test]
fn run_refuses_every_overlapping_pair_and_writes_nothing() {
    let l = Layout::new();
    let tmp = l.p("tmp");
    let (input, host, empty) = (l.p("in"), l.p("host"), l.p("empty"));
    let cases: Vec<(&str, Vec<String>, PathBuf)> = vec![
        // bundle · input
        (
            "bundle = input",
            run_args(&l, &empty, &[&empty], None),
            tmp.clone(),
        ),
        (
            "bundle inside input",
            run_args(&l, &input.join("bundle"), &[&input], None),
            tmp.clone(),
        ),
        (
            "bundle deep inside input",
            run_args(&l, &input.join("sub/new/bundle"), &[&input], None),
            tmp.clone(),
        ),
        // bundle · host
        (
            "bundle = host",
            run_args(&l, &empty, &[], Some(&empty)),
            tmp.clone(),
        ),
        (
            "bundle inside host",
            run_args(&l, &host.join("bundle"), &[], Some(&host)),
            tmp.clone(),
        ),
        // bundle · scratch (TMPDIR)
        (
            "TMPDIR = bundle",
            run_args(&l, &empty, &[], None),
            empty.clone(),
        ),
        // input · host
        (
            "input = host",
            run_args(&l, &l.p("parent/b"), &[&host], Some(&host)),
            tmp.clone(),
        ),
        (
            "input inside host",
            run_args(&l, &l.p("parent/b"), &[&host.join("keep.txt")], Some(&host)),
            tmp.clone(),
        ),
        (
            "host inside input",
            run_args(&l, &l.p("parent/b"), &[&input], Some(&input.join("sub"))),
            tmp.clone(),
        ),
        // input · scratch
        (
            "TMPDIR = input",
            run_args(&l, &l.p("parent/b"), &[&input], None),
            input.clone(),
        ),
        (
            "TMPDIR inside input",
            run_args(&l, &l.p("parent/b"), &[&input], None),
            input.join("sub"),
        ),
        // host · scratch
        (
            "TMPDIR = host",
            run_args(&l, &l.p("parent/b"), &[], Some(&host)),
            host.clone(),
        ),
        (
            "TMPDIR inside host",
            run_args(&l, &l.p("parent/b"), &[], Some(&host)),
            host.join("sub"),
        ),
    ];
    for (what, args, tmpdir) in cases {
        refused(&l, &args, &tmpdir, what);
    }
}

#[test]
fn a_symbolic_link_does_not_hide_an_overlap() {
    let l = Layout::new();
    let tmp = l.p("tmp");
    std::os::unix::fs::symlink(l.p("in"), l.p("in-link")).unwrap();
    std::os::unix::fs::symlink(l.p("host"), l.p("host-link")).unwrap();
    std::os::unix::fs::symlink(l.p("in/sub"), l.p("tmp-link")).unwrap();
    let cases: Vec<(&str, Vec<String>, PathBuf)> = vec![
        (
            "bundle inside input via a link",
            run_args(&l, &l.p("in-link/bundle"), &[&l.p("in")], None),
            tmp.clone(),
        ),
        (
            "input via a link = host",
            run_args(
                &l,
                &l.p("parent/b"),
                &[&l.p("host-link")],
                Some(&l.p("host")),
            ),
            tmp.clone(),
        ),
        (
            "host via a link holds the bundle",
            run_args(&l, &l.p("host/b"), &[], Some(&l.p("host-link"))),
            tmp.clone(),
        ),
        (
            "TMPDIR via a link inside input",
            run_args(&l, &l.p("parent/b"), &[&l.p("in")], None),
            l.p("tmp-link"),
        ),
    ];
    for (what, args, tmpdir) in cases {
        refused(&l, &args, &tmpdir, what);
    }
}

/// Unmounts on drop, so a failed assertion leaves no mount behind.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_bind_mount_does_not_hide_an_overlap() {
    let root = is_root();
    if !root {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI runs as root: the bind-mount case must run there"
        );
        eprintln!("SKIPPED a_bind_mount_does_not_hide_an_overlap: needs root for mount --bind");
        return;
    }
    let l = Layout::new();
    let tmp = l.p("tmp");
    for m in ["mnt-in", "mnt-host"] {
        std::fs::create_dir(l.p(m)).unwrap();
    }
    let bind = |from: &Path, to: &Path| {
        let ok = Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(to)
            .status()
            .unwrap()
            .success();
        assert!(
            ok,
            "mount --bind {} {} failed",
            from.display(),
            to.display()
        );
        Mounted(to.to_path_buf())
    };
    let _a = bind(&l.p("in"), &l.p("mnt-in"));
    let _b = bind(&l.p("host"), &l.p("mnt-host"));
    let cases: Vec<(&str, Vec<String>, PathBuf)> = vec![
        (
            "bundle inside input's bind mount",
            run_args(&l, &l.p("mnt-in/bundle"), &[&l.p("in")], None),
            tmp.clone(),
        ),
        (
            "input's bind mount = host",
            run_args(
                &l,
                &l.p("parent/b"),
                &[&l.p("mnt-host")],
                Some(&l.p("host")),
            ),
            tmp.clone(),
        ),
        (
            "host's bind mount holds the bundle",
            run_args(&l, &l.p("host/b"), &[], Some(&l.p("mnt-host"))),
            tmp.clone(),
        ),
        (
            "TMPDIR in input's bind mount",
            run_args(&l, &l.p("parent/b"), &[&l.p("in")], None),
            l.p("mnt-in/sub"),
        ),
    ];
    for (what, args, tmpdir) in cases {
        refused(&l, &args, &tmpdir, what);
    }
}

fn is_root() -> bool {
    // `id -u` keeps this test free of an extra dependency.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

#[test]
fn resume_re_checks_the_roots() {
    let l = Layout::new();
    let tmp = l.p("tmp");
    let bundle = l.p("parent/bundle");
    let out = provrun(
        &run_args(&l, &bundle, &[&l.p("in/data.txt")], Some(&l.p("host"))),
        &tmp,
    );
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resume = |host: &Path| {
        vec![
            "resume".to_string(),
            s(&bundle),
            "--approve".into(),
            "c1".into(),
            "--host-dir".into(),
            s(host),
        ]
    };
    let host = l.p("host");
    let cases: Vec<(&str, Vec<String>, PathBuf)> = vec![
        (
            "host = /output",
            resume(&bundle.join("output")),
            tmp.clone(),
        ),
        (
            "host inside the bundle",
            resume(&bundle.join("input")),
            tmp.clone(),
        ),
        ("host = bundle", resume(&bundle), tmp.clone()),
        ("host holds the bundle", resume(&l.p("parent")), tmp.clone()),
        ("TMPDIR = /output", resume(&host), bundle.join("output")),
        ("TMPDIR = bundle", resume(&host), bundle.clone()),
        ("TMPDIR inside host", resume(&host), host.join("sub")),
    ];
    for (what, args, tmpdir) in cases {
        refused(&l, &args, &tmpdir, what);
    }
    // With separate folders the same resume goes ahead.
    let out = provrun(&resume(&host), &tmp);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(host.join("copied.txt")).unwrap(),
        "input data\n"
    );
}
