//! The test step runs from a copy of the repository with nothing beside it, so a test that
//! reads a file from outside the repository (a fixture left in a sibling folder on the
//! developer's machine, say) fails here rather than on a user's plain clone.
//!
//! The copy is a `git clone` of the checkout's `HEAD` at `target-standalone/provrun`, with
//! the working tree's uncommitted changes and untracked (not ignored) files laid over it,
//! so `cargo xtask ci` tests what is on disk, committed or not. Builds share the checkout's
//! target folder (`CARGO_TARGET_DIR`), so dependencies are not compiled twice.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder the copy goes in; the copy is `provrun` inside it, with no sibling. Not
/// under `target/`: the shared target folder must not hold the sources, or trybuild takes
/// the test files' paths for build outputs and cannot make them relative. (`.gitignore`
/// leaves out `/target-*`.)
const COPY_PARENT: &str = "target-standalone";

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("could not start git {args:?}: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "git {args:?} in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// NUL-separated paths from git's `-z` output.
fn paths(out: &[u8]) -> impl Iterator<Item = PathBuf> + '_ {
    out.split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
}

/// Make (or remake) the copy and give back its root; `None` when the checkout is not a
/// git work tree (an unpacked tarball), where the tests run in place.
pub(crate) fn prepare(root: &Path) -> Result<Option<PathBuf>, String> {
    let Ok(head) = git(root, &["rev-parse", "--verify", "HEAD"]) else {
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&head).trim().to_owned();
    let parent = root.join(COPY_PARENT);
    let copy = parent.join("provrun");
    if copy.exists() {
        std::fs::remove_dir_all(&copy)
            .map_err(|e| format!("could not remove the old copy {}: {e}", copy.display()))?;
    }
    std::fs::create_dir_all(&parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let copy_arg = copy.to_string_lossy().into_owned();
    let root_arg = root.to_string_lossy().into_owned();
    git(
        &parent,
        &[
            "clone",
            "--quiet",
            "--shared",
            "--no-checkout",
            &root_arg,
            &copy_arg,
        ],
    )?;
    git(&copy, &["checkout", "--quiet", "--detach", &head])?;

    // Lay the working tree over the commit: changed and deleted tracked files (staged or
    // not), then untracked files that are not ignored.
    let changed = git(root, &["diff", "--name-only", "--no-renames", "-z", "HEAD"])?;
    let untracked = git(root, &["ls-files", "--others", "--exclude-standard", "-z"])?;
    let mut laid = 0usize;
    for rel in paths(&changed).chain(paths(&untracked)) {
        let from = root.join(&rel);
        let to = copy.join(&rel);
        match std::fs::symlink_metadata(&from) {
            Ok(meta) if meta.is_file() => {
                if let Some(dir) = to.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
                std::fs::copy(&from, &to)
                    .map_err(|e| format!("could not copy {} into the copy: {e}", from.display()))?;
                laid += 1;
            }
            Ok(meta) if meta.file_type().is_symlink() => {
                let target =
                    std::fs::read_link(&from).map_err(|e| format!("{}: {e}", from.display()))?;
                let _ = std::fs::remove_file(&to);
                if let Some(dir) = to.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
                std::os::unix::fs::symlink(&target, &to)
                    .map_err(|e| format!("{}: {e}", to.display()))?;
                laid += 1;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Deleted in the working tree.
                let _ = std::fs::remove_file(&to);
                laid += 1;
            }
            Err(e) => return Err(format!("{}: {e}", from.display())),
        }
    }
    // The point of the copy: nothing sits beside it.
    let siblings: Vec<String> = std::fs::read_dir(&parent)
        .map_err(|e| format!("{}: {e}", parent.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "provrun")
        .collect();
    if !siblings.is_empty() {
        return Err(format!(
            "{} holds more than the copy ({}); remove it and run again",
            parent.display(),
            siblings.join(", ")
        ));
    }
    println!(
        "    copy of {} at {} ({laid} uncommitted paths laid over it)",
        &head[..head.len().min(12)],
        copy.display()
    );
    Ok(Some(copy))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) {
        git(dir, args).unwrap();
    }

    #[test]
    fn the_copy_holds_the_commit_with_the_working_tree_over_it_and_nothing_beside_it() {
        let tmp = std::env::temp_dir().join(format!("xtask-standalone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let repo = tmp.join("repo");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        // A sibling the copy must not see.
        std::fs::create_dir_all(tmp.join("shared")).unwrap();
        sh(&repo, &["init", "--quiet"]);
        std::fs::write(repo.join(".gitignore"), "/target\n").unwrap();
        std::fs::write(repo.join("kept.txt"), "committed\n").unwrap();
        std::fs::write(repo.join("changed.txt"), "old\n").unwrap();
        std::fs::write(repo.join("gone.txt"), "bye\n").unwrap();
        std::fs::write(repo.join("staged.txt"), "old\n").unwrap();
        sh(&repo, &["add", "."]);
        sh(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "--quiet",
                "-m",
                "one",
            ],
        );
        std::fs::write(repo.join("changed.txt"), "new\n").unwrap();
        std::fs::remove_file(repo.join("gone.txt")).unwrap();
        std::fs::write(repo.join("staged.txt"), "staged\n").unwrap();
        sh(&repo, &["add", "staged.txt"]);
        std::fs::write(repo.join("sub/untracked.txt"), "fresh\n").unwrap();
        std::fs::create_dir_all(repo.join("target/debug")).unwrap();
        std::fs::write(repo.join("target/debug/ignored"), "build output\n").unwrap();

        // Twice: the second run replaces the first copy.
        for _ in 0..2 {
            let copy = prepare(&repo)
                .unwrap()
                .expect("a git checkout gives a copy");
            let read = |p: &str| std::fs::read_to_string(copy.join(p)).ok();
            assert_eq!(read("kept.txt").as_deref(), Some("committed\n"));
            assert_eq!(read("changed.txt").as_deref(), Some("new\n"));
            assert_eq!(read("staged.txt").as_deref(), Some("staged\n"));
            assert_eq!(read("sub/untracked.txt").as_deref(), Some("fresh\n"));
            assert_eq!(read("gone.txt"), None);
            assert!(!copy.join("target").exists(), "ignored files stay out");
            assert!(!copy.parent().unwrap().join("shared").exists());
            let names: Vec<_> = std::fs::read_dir(copy.parent().unwrap())
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(names, ["provrun"]);
        }
        // Not a git checkout: the tests run in place.
        let plain = tmp.join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(prepare(&plain).unwrap(), None);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
