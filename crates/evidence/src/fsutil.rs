//! File-system helpers that never follow symlinks and never open special files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest as _, Sha256};

/// Deepest directory nesting walked inside `input/`, `output/` or `blobs/`.
const MAX_DEPTH: usize = 64;

/// Whether `e` says the process (`EMFILE`) or the system (`ENFILE`) has no file
/// descriptor left.
pub(crate) fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// How long in all a step that finds no descriptor free waits for other runs to give
/// theirs back (see [`with_descriptors`]).
pub(crate) const DESCRIPTOR_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `step`, tried again while its error is for want of descriptors (`short` says which),
/// with pauses from 5 ms doubling up to 200 ms, until `wait` has passed; then its last
/// result. Thousands of runs woken at once each open a few files to finish; those that
/// find none free wait for the others instead of failing. Only for steps that change
/// nothing when they fail: a read, or a whole file written again from the start.
pub(crate) fn with_descriptors<T, E: std::fmt::Display>(
    wait: std::time::Duration,
    short: impl Fn(&E) -> bool,
    mut step: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = std::time::Instant::now() + wait;
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match step() {
            Err(e) if short(&e) && std::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, ?pause, "out of descriptors; waiting for others to give theirs back");
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(200));
            }
            r => return r,
        }
    }
}

/// Open a regular file for reading without following a final symlink and without
/// blocking on a FIFO; anything that is not a regular file is refused.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    open_regular_len(path).map(|(file, _)| file)
}

/// [`open_regular`], with the file's length when it was opened.
fn open_regular_len(path: &Path) -> io::Result<(File, u64)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((file, meta.len()))
}

/// SHA-256 hex and length of a regular file, read in chunks; with `sync`, the file's
/// data is also flushed to stable storage.
pub(crate) fn hash_file(path: &Path, sync: bool) -> io::Result<(String, u64)> {
    let (hex, size, file) = hash_open(path)?;
    if sync {
        file.sync_data()?;
        synced_file(path);
    }
    Ok((hex, size))
}

/// SHA-256 hex and length of a regular file, and the file, still open.
pub(crate) fn hash_open(path: &Path) -> io::Result<(String, u64, File)> {
    hash_open_bounded(path, None)
}

/// [`hash_open`], refusing (without reading further) a file longer than `bound` bytes.
pub(crate) fn hash_open_bounded(
    path: &Path,
    bound: Option<u64>,
) -> io::Result<(String, u64, File)> {
    let (mut file, hint) = open_regular_len(path)?;
    let too_long = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the file grew while it was read",
        )
    };
    if bound.is_some_and(|b| hint > b) {
        return Err(too_long());
    }
    let mut hasher = Sha256::new();
    // A buffer the file's size (one extra byte to see the end in one read), at most
    // 64 KiB: most files here are small, and zeroing 64 KiB for each was a visible cost.
    let len =
        usize::try_from(hint.saturating_add(1)).map_or(64 * 1024, |n| n.clamp(512, 64 * 1024));
    let mut buf = vec![0u8; len];
    let mut size = 0u64;
    loop {
        // Never more than one byte past the bound.
        let want = match bound {
            Some(b) => usize::try_from(b.saturating_sub(size).saturating_add(1))
                .map_or(buf.len(), |n| n.min(buf.len())),
            None => buf.len(),
        };
        let n = match file.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
        if bound.is_some_and(|b| size > b) {
            return Err(too_long());
        }
    }
    Ok((hex::encode(hasher.finalize()), size, file))
}

/// SHA-256 hex of bytes.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One regular file found by [`walk_files`].
#[derive(Debug, Clone)]
pub(crate) struct FoundFile {
    /// `/`-separated path relative to the walked root.
    pub rel: String,
    /// Full path.
    pub path: PathBuf,
}

/// Files under a root, and what could not be accepted.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Regular files, sorted by `rel` (byte order).
    pub files: Vec<FoundFile>,
    /// Symlinks, special files, non-UTF-8 names, unreadable directories.
    pub problems: Vec<String>,
}

/// List the regular files under `root`, recursively, never following symlinks.
pub(crate) fn walk_files(root: &Path) -> Walk {
    let mut walk = Walk::default();
    walk_into(root, "", 0, &mut walk);
    walk.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    walk
}

fn walk_into(dir: &Path, prefix: &str, depth: usize, walk: &mut Walk) {
    // Problems name paths relative to the walked root, never the host's path to it.
    let here = if prefix.is_empty() { "." } else { prefix };
    if depth > MAX_DEPTH {
        walk.problems.push(format!("{here}: nested too deeply"));
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            walk.problems.push(format!("{here}: cannot list: {e}"));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                walk.problems.push(format!("{here}: cannot list: {e}"));
                continue;
            }
        };
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            use std::os::unix::ffi::OsStrExt;
            let raw = entry.file_name();
            let escaped = crate::event::escape_path_bytes(raw.as_bytes());
            let shown = if prefix.is_empty() {
                escaped
            } else {
                format!("{prefix}/{escaped}")
            };
            walk.problems.push(format!("{shown}: name is not UTF-8"));
            continue;
        };
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let ft = match entry.file_type() {
            Ok(t) => t,
            Err(e) => {
                walk.problems.push(format!("{rel}: cannot stat: {e}"));
                continue;
            }
        };
        if ft.is_symlink() {
            walk.problems
                .push(format!("{rel}: is a symlink (not followed)"));
        } else if ft.is_dir() {
            walk_into(&path, &rel, depth + 1, walk);
        } else if ft.is_file() {
            walk.files.push(FoundFile { rel, path });
        } else {
            walk.problems.push(format!("{rel}: is not a regular file"));
        }
    }
}

/// fsync a directory so that names created in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()?;
    synced_dir(dir);
    Ok(())
}

/// Tell the sync probe (feature `sync-probe`) that `path`'s data was synced.
#[cfg(feature = "sync-probe")]
pub(crate) fn synced_file(path: &Path) {
    crate::probe::report(crate::probe::SyncPoint::File {
        path: path.to_path_buf(),
    });
}

/// Tell the sync probe (feature `sync-probe`) that the directory `path` was synced.
#[cfg(feature = "sync-probe")]
pub(crate) fn synced_dir(path: &Path) {
    crate::probe::report(crate::probe::SyncPoint::Dir {
        path: path.to_path_buf(),
    });
}

/// Tell the sync probe (feature `sync-probe`) that the log at `path` is durable up to
/// `len` bytes.
#[cfg(feature = "sync-probe")]
pub(crate) fn synced_log(path: &Path, len: u64) {
    crate::probe::report(crate::probe::SyncPoint::Log {
        path: path.to_path_buf(),
        len,
    });
}

/// Without the `sync-probe` feature: nothing.
#[cfg(not(feature = "sync-probe"))]
#[inline(always)]
pub(crate) fn synced_file(_path: &Path) {}

/// Without the `sync-probe` feature: nothing.
#[cfg(not(feature = "sync-probe"))]
#[inline(always)]
pub(crate) fn synced_dir(_path: &Path) {}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary name in `dir`, unique within this process and across processes.
pub(crate) fn temp_path(dir: &Path, stem: &str) -> PathBuf {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{stem}.tmp-{}-{n}", std::process::id()))
}

/// Store `bytes` as `dir/name` unless that name exists, so that the name never holds
/// partial content: the bytes go to an unnamed file (`O_TMPFILE`) that is linked into
/// place once complete (where the file system cannot do that, a temporary name renamed
/// into place). Returns the open file when it wrote one, `None` when `dir/name` already
/// existed as a regular file of the same length (content-addressed: the same bytes).
pub(crate) fn store_new(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<Option<File>> {
    let path = dir.join(name);
    match store_unnamed(dir, &path, bytes) {
        Ok(written) => Ok(written),
        Err(e) if fallback_needed(&e) => store_renamed(dir, name, &path, bytes),
        Err(e) => Err(e),
    }
}

/// Whether an `O_TMPFILE` + `linkat` failure means "not supported here" (old kernel,
/// a file system without `O_TMPFILE`, no `/proc`) rather than a real error.
fn fallback_needed(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL | libc::ENOENT | libc::EXDEV)
    )
}

fn existing_matches(path: &Path, len: usize) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == len as u64)
}

fn store_unnamed(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<Option<File>> {
    use std::os::fd::AsRawFd;
    let mut f = OpenOptions::new()
        .write(true)
        .mode(0o644)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(dir)?;
    f.write_all(bytes)?;
    let proc_path = format!("/proc/self/fd/{}", f.as_raw_fd());
    match rustix::fs::linkat(
        rustix::fs::CWD,
        proc_path.as_str(),
        rustix::fs::CWD,
        path,
        rustix::fs::AtFlags::SYMLINK_FOLLOW,
    ) {
        Ok(()) => Ok(Some(f)),
        Err(e) if e == rustix::io::Errno::EXIST => {
            if existing_matches(path, bytes.len()) {
                Ok(None)
            } else {
                // Something else holds the name (e.g. left by an older writer): replace
                // it atomically with the right bytes.
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("blob");
                store_renamed(dir, name, path, bytes)
            }
        }
        Err(e) => Err(io::Error::from_raw_os_error(e.raw_os_error())),
    }
}

fn store_renamed(dir: &Path, name: &str, path: &Path, bytes: &[u8]) -> io::Result<Option<File>> {
    if existing_matches(path, bytes.len()) {
        return Ok(None);
    }
    let tmp = temp_path(dir, name);
    let written = (|| -> io::Result<File> {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        fs::rename(&tmp, path)?;
        Ok(f)
    })();
    match written {
        Ok(f) => Ok(Some(f)),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Write `bytes` to a new temporary file in `dir` named after `name` (not synced);
/// returns its path and the open file. The caller renames it into place.
pub(crate) fn write_temp(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<(PathBuf, File)> {
    let tmp = temp_path(dir, name);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).map(|()| f));
    match written {
        Ok(f) => Ok((tmp, f)),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Write `bytes` to `dir/name` atomically (temporary file, then rename). With `sync`,
/// the file is synced before the rename and the directory after it.
pub(crate) fn write_atomic(dir: &Path, name: &str, bytes: &[u8], sync: bool) -> io::Result<()> {
    let tmp = temp_path(dir, name);
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        if sync {
            f.sync_data()?;
            #[cfg(feature = "sync-probe")]
            synced_file(&dir.join(name));
        }
        fs::rename(&tmp, dir.join(name))?;
        if sync {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_new_writes_once_and_leaves_no_temporary_file() {
        let dir = tempfile_dir();
        let first = store_new(&dir, "abc", b"hello").expect("store");
        assert!(first.is_some(), "the first store writes the file");
        let second = store_new(&dir, "abc", b"hello").expect("store again");
        assert!(second.is_none(), "the same bytes are stored once");
        assert_eq!(fs::read(dir.join("abc")).expect("read"), b"hello");
        let names: Vec<_> = fs::read_dir(&dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("abc")]);
        // A wrong file under the name (e.g. torn by an older writer) is replaced.
        fs::write(dir.join("def"), b"to").expect("write");
        assert!(
            store_new(&dir, "def", b"torn bytes")
                .expect("store")
                .is_some()
        );
        assert_eq!(fs::read(dir.join("def")).expect("read"), b"torn bytes");
        fs::remove_dir_all(&dir).expect("clean up");
    }

    fn tempfile_dir() -> PathBuf {
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "provrun-evidence-fsutil-{}-{n}",
            std::process::id()
        ));
        fs::create_dir_all(&dir).expect("create");
        dir
    }

    #[test]
    fn a_step_short_of_descriptors_is_tried_again_until_it_succeeds() {
        let mut tries = 0;
        let r = with_descriptors(
            std::time::Duration::from_secs(5),
            out_of_descriptors,
            || {
                tries += 1;
                if tries < 3 {
                    Err(io::Error::from_raw_os_error(libc::EMFILE))
                } else {
                    Ok(tries)
                }
            },
        );
        assert_eq!(r.unwrap(), 3);
    }

    #[test]
    fn other_errors_and_a_wait_that_runs_out_are_returned() {
        let mut tries = 0;
        let r: io::Result<()> = with_descriptors(
            std::time::Duration::from_secs(5),
            out_of_descriptors,
            || {
                tries += 1;
                Err(io::Error::from_raw_os_error(libc::EACCES))
            },
        );
        assert!(!out_of_descriptors(&r.unwrap_err()));
        assert_eq!(tries, 1, "an error other than EMFILE is not tried again");
        let mut tries = 0;
        let r: io::Result<()> = with_descriptors(
            std::time::Duration::from_millis(50),
            out_of_descriptors,
            || {
                tries += 1;
                Err(io::Error::from_raw_os_error(libc::ENFILE))
            },
        );
        assert!(out_of_descriptors(&r.unwrap_err()));
        assert!(tries > 1, "tried {tries} times");
    }
}
