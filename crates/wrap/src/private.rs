//! The private folder a wrapped run keeps in `TMPDIR`: `provrun-wrap-XXXX/` holding the
//! program's `home/` (bound at its `HOME`), the proxy's `sockets/` (bound read-only for
//! the forwarder) and a `lock` the run holds locked (`flock`) while it lasts. The folder
//! is removed when the run ends; one left behind by a provrun that was killed (its lock
//! then free) is removed by the next wrapped run that starts with the same `TMPDIR`.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The prefix of a run's private folder in `TMPDIR`.
pub const PREFIX: &str = "provrun-wrap-";

/// A folder without a lock this old is one whose run died while making it.
const UNLOCKED_GRACE: Duration = Duration::from_secs(60);

/// A run's private folder, locked while it is held, removed when it is dropped.
#[derive(Debug)]
pub struct Private {
    dir: tempfile::TempDir,
    _lock: fs::File,
}

impl Private {
    /// Makes a new private folder in `tmp`, with `home/` (and `home/.codex`, which the
    /// Codex CLI wants to exist) and `sockets/`, and locks it.
    ///
    /// # Errors
    ///
    /// The I/O error of making the folder, its parts or its lock.
    pub fn new(tmp: &Path) -> io::Result<Private> {
        let dir = tempfile::Builder::new().prefix(PREFIX).tempdir_in(tmp)?;
        let lock = fs::File::create(dir.path().join("lock"))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
        fs::create_dir(dir.path().join("home"))?;
        fs::create_dir(dir.path().join("home/.codex"))?;
        fs::create_dir(dir.path().join("sockets"))?;
        Ok(Private { dir, _lock: lock })
    }

    /// The program's `HOME` on the host.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The folder of the proxy's sockets.
    pub fn sockets(&self) -> PathBuf {
        self.dir.path().join("sockets")
    }
}

/// Removes the private folders in `tmp` that no running provrun holds: of this user,
/// with a `lock` that takes a lock at once (its run is gone), or without one and older
/// than a minute. Returns the folders removed; one that cannot be removed is logged and
/// left.
pub fn clean_stale(tmp: &Path) -> Vec<PathBuf> {
    let me = rustix::process::geteuid().as_raw();
    let Ok(entries) = fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // `provrun-wrap-home-…` and `provrun-wrap-sockets-…` are an older layout, whose
        // runs cannot be told apart from live ones: left alone.
        if !name.starts_with(PREFIX)
            || name.starts_with("provrun-wrap-home-")
            || name.starts_with("provrun-wrap-sockets-")
        {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        if !stale(&path, &meta) {
            continue;
        }
        make_removable(&path, 0);
        match fs::remove_dir_all(&path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "removed the private folder of a wrapped run that did not end");
                removed.push(path);
            }
            Err(e) => tracing::warn!(
                path = %path.display(),
                "the private folder of a wrapped run that did not end cannot be removed: {e}"
            ),
        }
    }
    removed
}

/// Whether the run of the private folder `dir` is gone.
fn stale(dir: &Path, meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::OpenOptionsExt as _;
    let lock = fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(dir.join("lock"));
    match lock {
        // Taken at once: nobody holds it. Dropping the file lets it go again.
        Ok(f) => {
            rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age > UNLOCKED_GRACE),
        Err(_) => false,
    }
}

/// Gives every folder under `dir` (this user's) owner rwx, without following a link, so
/// that a folder the program locked (`chmod 000`) can be emptied.
fn make_removable(dir: &Path, depth: usize) {
    use std::os::unix::fs::PermissionsExt as _;
    if depth > 256 {
        return;
    }
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    if meta.mode() & 0o700 != 0o700 {
        let _ = fs::set_permissions(
            dir,
            fs::Permissions::from_mode((meta.mode() & 0o7777) | 0o700),
        );
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                make_removable(&e.path(), depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_folder_stays_and_one_whose_run_is_gone_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let held = Private::new(tmp.path()).unwrap();
        let gone = Private::new(tmp.path()).unwrap();
        let gone_dir = gone.home().parent().unwrap().to_path_buf();
        // A run killed: its folder stays, its lock goes with the process.
        let Private { dir, _lock } = gone;
        let kept = dir.keep();
        drop(_lock);
        std::fs::create_dir(kept.join("home/locked")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(
            kept.join("home/locked"),
            std::fs::Permissions::from_mode(0o000),
        )
        .unwrap();
        // Someone else's folder of the same name, and a young folder without a lock.
        let young = tmp.path().join("provrun-wrap-young");
        std::fs::create_dir(&young).unwrap();
        let removed = clean_stale(tmp.path());
        assert_eq!(removed, std::slice::from_ref(&gone_dir));
        assert!(!gone_dir.exists());
        assert!(held.home().is_dir());
        assert!(young.is_dir());
    }
}
