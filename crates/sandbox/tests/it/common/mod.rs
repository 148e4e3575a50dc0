//! Shared test fixture: a bundle-like layout with staged inputs, a canary folder next to the
//! roots, a host folder, and snapshots to prove that nothing outside the sandbox changed.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use provrun_sandbox::{Limits, Sandbox, stage_inputs};

/// What a snapshot records for one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    File { bytes: Vec<u8>, mode: u32, ino: u64 },
    Dir { mode: u32 },
    Link(PathBuf),
    Other,
}

/// A recursive, never-following snapshot of a directory.
pub(crate) fn snapshot(root: &Path) -> BTreeMap<PathBuf, Node> {
    snapshot_except(root, &[])
}

/// Like [`snapshot`], skipping the subtrees at the relative paths in `skip`.
pub(crate) fn snapshot_except(root: &Path, skip: &[&str]) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in rd.flatten() {
            let p = entry.path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_owned();
            if skip.iter().any(|s| rel == Path::new(s)) {
                continue;
            }
            let node = if md.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&p).unwrap())
            } else if md.is_dir() {
                stack.push(p.clone());
                Node::Dir {
                    mode: md.permissions().mode(),
                }
            } else if md.is_file() {
                Node::File {
                    bytes: std::fs::read(&p).unwrap(),
                    mode: md.permissions().mode(),
                    ino: md.ino(),
                }
            } else {
                Node::Other
            };
            out.insert(rel, node);
        }
    }
    out
}

/// The original input files, as the user had them.
pub(crate) const INPUTS: &[(&str, &[u8])] = &[
    ("a.txt", b"alpha\nbeta\n"),
    ("docs/b.md", b"# B\n\nsome text\n"),
    ("docs/deep/c.txt", b"c"),
    ("bin.dat", b"\x00\x01\xff\xfe binary"),
];

pub(crate) struct Env {
    pub tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub src: PathBuf,
    pub input: PathBuf,
    pub output: PathBuf,
    pub scratch: PathBuf,
    pub canary: PathBuf,
    pub host: PathBuf,
    pub sb: Sandbox,
    pub limits: Limits,
}

impl Env {
    pub(crate) fn new() -> Env {
        Env::with_limits(Limits::default())
    }

    pub(crate) fn with_limits(limits: Limits) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_owned();
        let src = base.join("src");
        let input = base.join("bundle/input");
        let output = base.join("bundle/output");
        let scratch = base.join("scratch");
        let canary = base.join("canary");
        let host = base.join("host");
        for (rel, bytes) in INPUTS {
            let p = src.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        std::fs::create_dir_all(canary.join("sub")).unwrap();
        std::fs::write(canary.join("secret.txt"), b"do not touch").unwrap();
        std::fs::write(canary.join("sub/x"), b"x").unwrap();
        std::fs::create_dir_all(host.join("in")).unwrap();
        std::fs::write(host.join("in/data.csv"), b"a,b\n1,2\n").unwrap();
        let staged = stage_inputs(&input, &[&src], &limits).unwrap();
        assert_eq!(staged, ["a.txt", "bin.dat", "docs/b.md", "docs/deep/c.txt"]);
        let sb = Sandbox::new(&input, &output, &scratch, limits.clone())
            .unwrap()
            .with_host_dir(&host)
            .unwrap();
        Env {
            tmp,
            base,
            src,
            input,
            output,
            scratch,
            canary,
            host,
            sb,
            limits,
        }
    }

    /// Re-opens the sandbox (e.g. after preparing files behind its back).
    pub(crate) fn reopen(&mut self, limits: Limits) {
        self.limits = limits.clone();
        self.sb = Sandbox::new(&self.input, &self.output, &self.scratch, limits)
            .unwrap()
            .with_host_dir(&self.host)
            .unwrap();
    }

    /// Everything outside the writable roots: inputs, sources, canary, host folder.
    pub(crate) fn outside(&self) -> BTreeMap<PathBuf, Node> {
        snapshot_except(&self.base, &["bundle/output", "scratch"])
    }

    /// Asserts that every staged input is byte-identical to its source and read-only.
    pub(crate) fn assert_inputs_intact(&self) {
        for (rel, bytes) in INPUTS {
            let p = self.input.join(rel);
            assert_eq!(std::fs::read(&p).unwrap(), *bytes, "input {rel} changed");
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o444, "input {rel} is not read-only");
            assert_eq!(std::fs::read(self.src.join(rel)).unwrap(), *bytes);
        }
    }

    pub(crate) fn symlink(&self, target: impl AsRef<Path>, link: impl AsRef<Path>) {
        std::os::unix::fs::symlink(target, link).unwrap();
    }

    pub(crate) fn mkfifo(&self, path: &Path) {
        let st = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

/// Whether every confinement layer is there; else a loud skip (a failure under `CI=true`).
pub(crate) fn confinement_ready() -> bool {
    let support = provrun_sandbox::Sandbox::command_support();
    if support.is_complete() {
        return true;
    }
    let why = support.missing_summary();
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("CI must run the confinement tests for real, but this machine lacks: {why}");
    }
    eprintln!(
        "\n\
         ************************************************************************\n\
         **  WARNING: COMMAND CONFINEMENT TESTS SKIPPED                        **\n\
         **  this machine lacks: {why}\n\
         **  install bubblewrap (apt-get install bubblewrap) and allow user     **\n\
         **  namespaces to run them; CI=true makes this a failure              **\n\
         ************************************************************************\n"
    );
    false
}
