//! The workspace's changes: what the wrapped program created, modified and deleted in its
//! workspace, compared with the workspace as it was when the program started, each entry
//! with its size and SHA-256 before and after (`file_changed` events); and, when the
//! workspace is a git repository, the change as `git diff` prints it, kept as a blob
//! (`workspace_changed`).
//!
//! Both snapshots walk the workspace without following a link (a link is compared by its
//! target text). Files are hashed up to a budget; past it they are compared by size,
//! inode and mtime, and counted as not hashed.
//!
//! The diff never runs the repository's own git configuration, hooks or filters, which
//! the program could have changed: each snapshot is staged into a private git folder of
//! wrap's own (`GIT_DIR`, with the workspace as the work tree, no system or global
//! configuration, no fsmonitor, no hooks, no external diff or text conversion), and the
//! two trees are diffed there. The user's repository is only read.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use provrun_evidence::{FileChanged, WorkspaceChanged, escape_path_bytes};
use sha2::Digest as _;

/// Bytes hashed by one snapshot at most; later files are compared by size and times.
const HASH_BUDGET: u64 = 2 << 30;
/// Entries one snapshot takes at most.
const MAX_ENTRIES: usize = 200_000;
/// How deep a snapshot walks.
const MAX_DEPTH: usize = 64;
/// The largest diff kept (a longer one is cut, and says so).
const MAX_DIFF_BYTES: usize = 64 << 20;

/// One entry of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    size: u64,
    sha256: Option<String>,
    /// Inode and mtime: the version when not hashed (not ctime: handing the workspace to
    /// the command user, as root, changes every file's ctime).
    version: (u64, i64, i64),
}

/// The workspace at one moment.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    entries: BTreeMap<String, Entry>,
    unhashed: u64,
    /// Entries left out (over the cap, too deep, unreadable folders).
    pub(crate) left_out: u64,
}

impl Snapshot {
    /// Walks `root` (never following a link).
    pub(crate) fn take(root: &Path) -> Snapshot {
        let mut snap = Snapshot::default();
        let mut budget = HASH_BUDGET;
        walk(root, "", 0, &mut snap, &mut budget);
        snap
    }
}

fn walk(dir: &Path, rel: &str, depth: usize, snap: &mut Snapshot, budget: &mut u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        snap.left_out += 1;
        return;
    };
    let mut names: Vec<_> = entries.flatten().collect();
    names.sort_by_key(std::fs::DirEntry::file_name);
    for e in names {
        if snap.entries.len() >= MAX_ENTRIES {
            snap.left_out += 1;
            continue;
        }
        let name = escape_path_bytes(e.file_name().as_encoded_bytes());
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let Ok(md) = std::fs::symlink_metadata(e.path()) else {
            snap.left_out += 1;
            continue;
        };
        let version = (md.ino(), md.mtime(), md.mtime_nsec());
        if md.is_dir() {
            if depth < MAX_DEPTH {
                walk(&e.path(), &path, depth + 1, snap, budget);
            } else {
                snap.left_out += 1;
            }
            continue;
        }
        let entry = if md.file_type().is_symlink() {
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            let bytes = target.as_os_str().as_encoded_bytes();
            Entry {
                kind: "symlink",
                size: bytes.len() as u64,
                sha256: Some(hex::encode(sha2::Sha256::digest(bytes))),
                version,
            }
        } else if md.is_file() {
            let sha256 = if md.len() <= *budget {
                *budget -= md.len();
                hash_file(&e.path())
            } else {
                None
            };
            if sha256.is_none() {
                snap.unhashed += 1;
            }
            Entry {
                kind: "file",
                size: md.len(),
                sha256,
                version,
            }
        } else {
            Entry {
                kind: "other",
                size: 0,
                sha256: None,
                version,
            }
        };
        snap.entries.insert(path, entry);
    }
}

/// A regular file's SHA-256, opened without following a link.
fn hash_file(path: &Path) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
        .ok()?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(hex::encode(h.finalize()))
}

/// Whether two versions of an entry differ.
fn differs(a: &Entry, b: &Entry) -> bool {
    if a.kind != b.kind || a.size != b.size {
        return true;
    }
    match (&a.sha256, &b.sha256) {
        (Some(x), Some(y)) => x != y,
        // Not hashed on one side: by inode and mtime.
        _ => a.version != b.version,
    }
}

/// The changes from `before` to `after`, by path, and the summary (without the diff).
pub(crate) fn compare(before: &Snapshot, after: &Snapshot) -> (Vec<FileChanged>, WorkspaceChanged) {
    let mut changes = Vec::new();
    let mut summary = WorkspaceChanged {
        unhashed: before.unhashed.max(after.unhashed),
        ..WorkspaceChanged::default()
    };
    let paths: std::collections::BTreeSet<&String> =
        before.entries.keys().chain(after.entries.keys()).collect();
    for path in paths {
        let (b, a) = (before.entries.get(path), after.entries.get(path));
        let change = match (b, a) {
            (None, Some(_)) => "created",
            (Some(_), None) => "deleted",
            (Some(b), Some(a)) if differs(b, a) => "modified",
            _ => continue,
        };
        match change {
            "created" => summary.created += 1,
            "deleted" => summary.deleted += 1,
            _ => summary.modified += 1,
        }
        changes.push(FileChanged {
            path: path.clone(),
            change: change.to_owned(),
            kind: a.or(b).map_or("other", |e| e.kind).to_owned(),
            before_sha256: b.and_then(|e| e.sha256.clone()),
            after_sha256: a.and_then(|e| e.sha256.clone()),
            before_size: b.map(|e| e.size),
            after_size: a.map(|e| e.size),
        });
    }
    (changes, summary)
}

/// A git repository's working state staged into a private git folder, for the diff.
#[derive(Debug)]
pub(crate) struct GitSnapshot {
    /// The private folder (removed with it).
    dir: tempfile::TempDir,
    workspace: PathBuf,
    /// The tree of the workspace when the program started.
    before: Result<String, String>,
}

impl GitSnapshot {
    /// When `workspace` is a git repository (it holds `.git`), stages its files as they
    /// are now; `None` otherwise.
    pub(crate) fn take(workspace: &Path) -> Option<GitSnapshot> {
        std::fs::symlink_metadata(workspace.join(".git")).ok()?;
        let dir = tempfile::Builder::new()
            .prefix("provrun-wrap-git-")
            .tempdir()
            .ok()?;
        let mut snap = GitSnapshot {
            dir,
            workspace: workspace.to_path_buf(),
            before: Err(String::new()),
        };
        snap.before = snap.init().and_then(|()| snap.tree("before"));
        Some(snap)
    }

    fn git(&self, index: &str) -> Command {
        let mut cmd = Command::new("git");
        let git_dir = self.dir.path().join("git");
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_DIR", &git_dir)
            .env("GIT_WORK_TREE", &self.workspace)
            .env("GIT_INDEX_FILE", self.dir.path().join(index))
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("LC_ALL", "C")
            .args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "safe.directory=*",
                "-c",
                "core.autocrlf=false",
                "-c",
                "core.quotePath=false",
                "-c",
                "diff.noprefix=false",
            ])
            .current_dir(&self.workspace)
            .stdin(Stdio::null());
        cmd
    }

    fn init(&self) -> Result<(), String> {
        let out = Command::new("git")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args(["init", "--quiet", "--bare"])
            .arg(self.dir.path().join("git"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("git cannot run: {e}"))?;
        checked(&out, "git init")
    }

    /// Stages the workspace's files into `index` and writes their tree.
    fn tree(&self, index: &str) -> Result<String, String> {
        let out = self
            .git(index)
            .args(["add", "--all", "--force", "--", "."])
            .output()
            .map_err(|e| format!("git cannot run: {e}"))?;
        checked(&out, "git add")?;
        let out = self
            .git(index)
            .arg("write-tree")
            .output()
            .map_err(|e| format!("git cannot run: {e}"))?;
        checked(&out, "git write-tree")?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The unified diff from the start to now, as `git diff` prints it.
    pub(crate) fn diff(&self) -> Result<Vec<u8>, String> {
        let before = self.before.clone()?;
        let after = self.tree("after")?;
        let out = self
            .git("after")
            .args([
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                "--no-renames",
                &before,
                &after,
            ])
            .output()
            .map_err(|e| format!("git cannot run: {e}"))?;
        checked(&out, "git diff")?;
        let mut diff = out.stdout;
        if diff.len() > MAX_DIFF_BYTES {
            let total = diff.len();
            diff.truncate(MAX_DIFF_BYTES);
            diff.extend_from_slice(
                format!(
                    "\n[provrun: the diff is {total} bytes; the first {MAX_DIFF_BYTES} are kept]\n"
                )
                .as_bytes(),
            );
        }
        Ok(diff)
    }
}

fn checked(out: &std::process::Output, what: &str) -> Result<(), String> {
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(format!("{what} failed ({}): {}", out.status, err.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_created_modified_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("keep.txt"), "same").unwrap();
        std::fs::write(root.join("edit.txt"), "old").unwrap();
        std::fs::write(root.join("gone.txt"), "bye").unwrap();
        let before = Snapshot::take(root);
        std::fs::write(root.join("edit.txt"), "new!").unwrap();
        std::fs::remove_file(root.join("gone.txt")).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/new.txt"), "hi").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("link")).unwrap();
        let after = Snapshot::take(root);
        let (changes, summary) = compare(&before, &after);
        let got: Vec<(&str, &str, &str)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.change.as_str(), c.kind.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("edit.txt", "modified", "file"),
                ("gone.txt", "deleted", "file"),
                ("link", "created", "symlink"),
                ("sub/new.txt", "created", "file")
            ]
        );
        assert_eq!(
            (summary.created, summary.modified, summary.deleted),
            (2, 1, 1)
        );
        let edit = &changes[0];
        assert_eq!(
            edit.before_sha256.as_deref(),
            Some(hex::encode(sha2::Sha256::digest(b"old")).as_str())
        );
        assert_eq!(edit.after_size, Some(4));
    }

    #[test]
    fn a_git_workspace_gives_its_diff_without_running_its_configuration() {
        if Command::new("git").arg("--version").output().is_err() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let run = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(ws)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        };
        run(&["init", "-q"]);
        std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
        run(&["add", "a.txt"]);
        run(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "a",
        ]);
        let snap = GitSnapshot::take(ws).unwrap();
        // The program's doings: an edit, a new file, and a hostile configuration that
        // would run a command if git read it.
        std::fs::write(ws.join("a.txt"), "one\nthree\n").unwrap();
        std::fs::write(ws.join("b.txt"), "new\n").unwrap();
        let marker = dir.path().join("ran");
        std::fs::write(
            ws.join(".git/config"),
            format!(
                "[core]\n\tfsmonitor = touch {}\n[diff]\n\texternal = touch {}\n",
                marker.display(),
                marker.display()
            ),
        )
        .unwrap();
        let diff = String::from_utf8(snap.diff().unwrap()).unwrap();
        assert!(diff.contains("diff --git a/a.txt b/a.txt"), "{diff}");
        assert!(diff.contains("-two\n+three\n"), "{diff}");
        assert!(diff.contains("+++ b/b.txt"), "{diff}");
        assert!(!marker.exists(), "the repository's configuration ran");
    }
}

/// The workspace as it was before the program ran: its entries and, for a git
/// repository, its staged tree.
#[derive(Debug)]
pub(crate) struct Before {
    workspace: PathBuf,
    snapshot: Snapshot,
    git: Option<GitSnapshot>,
}

impl Before {
    /// Takes the snapshots of `workspace` (blocking: call before the program starts).
    pub(crate) fn take(workspace: &Path) -> Before {
        Before {
            workspace: workspace.to_path_buf(),
            snapshot: Snapshot::take(workspace),
            git: GitSnapshot::take(workspace),
        }
    }

    /// Once the program has ended: records each change (`file_changed`, by path) and
    /// the whole (`workspace_changed`, with the git diff as a blob).
    ///
    /// # Errors
    ///
    /// [`crate::WrapError`] when an event or the blob cannot be written.
    pub(crate) async fn record(
        self,
        capture: &provrun_capture::Capture,
    ) -> Result<WorkspaceChanged, crate::WrapError> {
        let compared = tokio::task::spawn_blocking(move || {
            let after = Snapshot::take(&self.workspace);
            let (changes, mut summary) = compare(&self.snapshot, &after);
            summary.git = self.git.is_some();
            let diff = self.git.as_ref().map(GitSnapshot::diff);
            (changes, summary, diff)
        })
        .await
        .map_err(|e| crate::WrapError::Program(format!("comparing the workspace: {e}")))?;
        let (changes, mut summary, diff) = compared;
        let recorder = capture.recorder();
        for c in &changes {
            recorder.record_async(c).await?;
        }
        match diff {
            Some(Ok(bytes)) => {
                summary.diff = Some(
                    recorder
                        .put_blob_for_next_event(&bytes, "text/x-diff")
                        .await?,
                );
            }
            Some(Err(e)) => summary.diff_error = Some(e),
            None => {}
        }
        recorder.record_async(&summary).await?;
        Ok(summary)
    }
}
