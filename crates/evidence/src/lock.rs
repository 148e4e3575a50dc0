//! One writer per bundle: [`BundleLock`], an OS advisory lock (`flock`) on the bundle's
//! log, `events.jsonl`.
//!
//! The lock is taken on the very descriptor the writer appends to the log with (kept
//! open for the writer's life, while the pack's is given back whenever the run waits), so
//! no file is added to the bundle (`verify` refuses files it does not know), a waiting run
//! holds no extra descriptor, and the lock goes away with the process that holds it,
//! however that process ends: a crashed writer never leaves a stale lock behind. The
//! descriptor is close-on-exec, so programs a run starts do not inherit it.

use std::fs::File;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use crate::error::{EvidenceError, Result};

/// An exclusive lock on a bundle: while it is held, no other [`BundleLock`] on the same
/// folder can be taken, in this process or another. Released when dropped.
///
/// [`crate::Recorder::create`] and [`crate::Recorder::reopen`] take one and hold it for
/// the recorder's life; a caller that must read a bundle before it writes (a resume
/// reads the paused state first) takes it with [`BundleLock::acquire`] and hands it to
/// [`crate::Recorder::reopen_locked`].
#[derive(Debug)]
pub struct BundleLock {
    /// The bundle's log, open for appending: the locked descriptor. `None` only once
    /// [`BundleLock::into_log`] has taken it (which consumes the lock).
    log: Option<File>,
    path: PathBuf,
}

impl BundleLock {
    /// Lock the bundle at `dir` (its `events.jsonl`, opened for appending), without
    /// waiting: a bundle another writer holds is refused with
    /// [`EvidenceError::BundleLocked`], naming the holder's process id where the system
    /// shows it (`/proc/locks`).
    ///
    /// # Errors
    ///
    /// [`EvidenceError::BundleLocked`] when another writer holds the bundle;
    /// [`EvidenceError::Io`] when its `events.jsonl` cannot be opened for appending or
    /// locked.
    pub fn acquire(dir: impl AsRef<Path>) -> Result<BundleLock> {
        let path = dir.as_ref().to_path_buf();
        let log_path = path.join(crate::names::EVENTS_FILE);
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&log_path)
            .map_err(|e| EvidenceError::io("open", &log_path, e))?;
        Self::lock(log, path)
    }

    /// Lock `log`, the open log of the bundle at `path`.
    pub(crate) fn lock(log: File, path: PathBuf) -> Result<BundleLock> {
        match flock(&log, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(BundleLock {
                log: Some(log),
                path,
            }),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(EvidenceError::BundleLocked {
                holder: holder_pid(&log),
                path,
            }),
            Err(e) => Err(EvidenceError::io("lock", &path, e.into())),
        }
    }

    /// The folder this lock holds.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the log at the lock's bundle path is still the one locked (it was not
    /// moved away or replaced).
    pub(crate) fn is_current(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let log_path = self.path.join(crate::names::EVENTS_FILE);
        let Some(log) = &self.log else {
            return false;
        };
        match (log.metadata(), std::fs::symlink_metadata(log_path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    /// The locked log, for the recorder to append with: the recorder releases the lock
    /// when its last clone goes.
    pub(crate) fn into_log(mut self) -> File {
        self.log
            .take()
            .expect("a BundleLock holds its log until into_log consumes it")
    }
}

impl Drop for BundleLock {
    /// Released explicitly, not by closing the descriptor: a child process forked by
    /// another thread holds a copy until it execs, and the lock would live as long.
    fn drop(&mut self) {
        if let Some(log) = &self.log {
            release(log);
        }
    }
}

/// Give up the lock held through `log` (a finished writer's log): another writer may
/// take the bundle at once, whoever still holds a copy of the descriptor.
pub(crate) fn release(log: &File) {
    if let Err(e) = flock(log, FlockOperation::Unlock) {
        tracing::warn!(error = %e, "could not release the bundle lock");
    }
}

/// The process id holding a `flock` on `file`, read from `/proc/locks` (Linux): `None`
/// where that file is missing or names no holder.
fn holder_pid(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let dev = meta.dev();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    parse_holder(&locks, major, minor, meta.ino())
}

/// The pid of the `FLOCK` line of `/proc/locks` text that names the file `major:minor:ino`
/// (the device numbers in hex, the inode in decimal). Lines of waiters (`->`) are skipped.
fn parse_holder(locks: &str, major: u32, minor: u32, ino: u64) -> Option<u32> {
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF"
        if fields.get(1) != Some(&"FLOCK") || fields.len() < 6 {
            continue;
        }
        let mut id = fields[5].split(':');
        let (Some(ma), Some(mi), Some(i)) = (id.next(), id.next(), id.next()) else {
            continue;
        };
        let same = u32::from_str_radix(ma, 16).ok() == Some(major)
            && u32::from_str_radix(mi, 16).ok() == Some(minor)
            && i.parse::<u64>().ok() == Some(ino);
        if same {
            return fields[4].parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_and_names_this_process() {
        let dir = tempfile_dir("second");
        std::fs::write(dir.join("events.jsonl"), b"").unwrap();
        let first = BundleLock::acquire(&dir).unwrap();
        let err = BundleLock::acquire(&dir).unwrap_err();
        match &err {
            EvidenceError::BundleLocked { path, holder } => {
                assert_eq!(path, &dir);
                if Path::new("/proc/locks").exists() {
                    assert_eq!(*holder, Some(std::process::id()));
                }
            }
            other => panic!("{other}"),
        }
        assert!(
            err.to_string().contains(&dir.display().to_string()),
            "{err}"
        );
        // A copy of the descriptor (a forked child's, until it execs) does not keep the
        // bundle held once the lock is dropped.
        let copy = first.log.as_ref().unwrap().try_clone().unwrap();
        drop(first);
        BundleLock::acquire(&dir).expect("free again once the holder is dropped");
        drop(copy);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn proc_locks_lines_are_matched_by_device_and_inode() {
        let text = "1: POSIX  ADVISORY  WRITE 99 08:01:77 0 EOF\n\
                    2: FLOCK  ADVISORY  WRITE 1234 fd:0a:77 0 EOF\n\
                    2: -> FLOCK  ADVISORY  WRITE 555 fd:0a:77 0 EOF\n";
        assert_eq!(parse_holder(text, 0xfd, 0x0a, 77), Some(1234));
        assert_eq!(parse_holder(text, 8, 1, 77), None);
        assert_eq!(parse_holder("garbage\n1: FLOCK\n", 8, 1, 77), None);
    }

    fn tempfile_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "provrun-lock-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
