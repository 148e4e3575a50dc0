//! File-system helpers that never follow symlinks and never open special files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest as _, Sha256};

/// Deepest directory nesting walked inside `input/`, `output/` or `blobs/`.
const MAX_DEPTH: usize = 64;

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
    let (mut file, hint) = open_regular_len(path)?;
    if sync {
        file.sync_data()?;
        synced_file(path);
    }
    let mut hasher = Sha256::new();
    // A buffer the file's size (one extra byte to see the end in one read), at most
    // 64 KiB: most files here are small, and zeroing 64 KiB for each was a visible cost.
    let len =
        usize::try_from(hint.saturating_add(1)).map_or(64 * 1024, |n| n.clamp(512, 64 * 1024));
    let mut buf = vec![0u8; len];
    let mut size = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), size))
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
    if depth > MAX_DEPTH {
        walk.problems
            .push(format!("{}: nested too deeply", dir.display()));
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            walk.problems
                .push(format!("{}: cannot list: {e}", dir.display()));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                walk.problems
                    .push(format!("{}: cannot list: {e}", dir.display()));
                continue;
            }
        };
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            walk.problems
                .push(format!("{}: name is not UTF-8", path.display()));
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
