//! Collecting a run's outputs: whatever an agent left under `output/`, the bundle keeps
//! regular files and folders only, within the output quota, and says what it left out.

use std::ffi::OsStr;
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::event::{OutputSkipped, escape_path_bytes};

/// Deepest folder nesting walked under `output/` (deeper entries are left out).
const MAX_DEPTH: usize = 64;

/// What [`crate::Recorder::finish_with`] accepts as outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputPolicy {
    /// Most bytes, by apparent size (a sparse file counts by its length), of all the
    /// outputs together. Files are taken in path order; a file that does not fit in
    /// what is left is left out (an `output_skipped` event with reason `over_quota`),
    /// and the recorder never reads more than this many bytes of outputs.
    pub max_total_bytes: u64,
}

impl Default for OutputPolicy {
    /// No quota.
    fn default() -> Self {
        OutputPolicy {
            max_total_bytes: u64::MAX,
        }
    }
}

/// A regular file accepted as an output.
#[derive(Debug)]
pub(crate) struct Accepted {
    /// `/`-separated path relative to `output/` (valid UTF-8).
    pub rel: String,
    /// Full path.
    pub path: PathBuf,
    /// Apparent size when it was listed.
    pub size: u64,
}

/// The outputs, and what was left out (and removed from the bundle).
#[derive(Debug, Default)]
pub(crate) struct Collected {
    /// Accepted files, in path order.
    pub files: Vec<Accepted>,
    /// Left-out entries, in path order.
    pub skipped: Vec<OutputSkipped>,
}

/// Walk `root` (the bundle's `output/`), never following a symlink: strip set-uid,
/// set-gid and sticky bits (and give the owner read access, folders write and search
/// access, so the bundle can be read and cleaned), accept regular files with UTF-8 names
/// that fit in the quota, and remove everything else from the bundle, recording it.
pub(crate) fn collect(root: &Path, policy: &OutputPolicy) -> io::Result<Collected> {
    let mut out = Collected::default();
    let mut budget = policy.max_total_bytes;
    let meta = fs::symlink_metadata(root)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "output is not a folder",
        ));
    }
    tidy_mode(root, &meta, true)?;
    walk(root, &[], 0, &mut budget, &mut out)?;
    Ok(out)
}

fn walk(
    dir: &Path,
    prefix: &[u8],
    depth: usize,
    budget: &mut u64,
    out: &mut Collected,
) -> io::Result<()> {
    let mut names: Vec<Vec<u8>> = Vec::new();
    let entries = crate::fsutil::with_descriptors(
        crate::fsutil::DESCRIPTOR_WAIT,
        crate::fsutil::out_of_descriptors,
        || fs::read_dir(dir),
    )?;
    for entry in entries {
        names.push(entry?.file_name().as_bytes().to_vec());
    }
    names.sort();
    for name in names {
        let mut rel = prefix.to_vec();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(&name);
        let path = dir.join(OsStr::from_bytes(&name));
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let kind = kind_of(&meta);
        let utf8 = std::str::from_utf8(&rel).ok().map(str::to_owned);
        let mut skip = |reason: &str, size: Option<u64>| -> io::Result<()> {
            remove(&path, &meta)?;
            out.skipped.push(OutputSkipped {
                path: escape_path_bytes(&rel),
                path_hex: hex::encode(&rel),
                kind: kind.to_owned(),
                reason: reason.to_owned(),
                size,
            });
            Ok(())
        };
        let Some(rel_str) = utf8 else {
            skip("name_not_utf8", meta.is_file().then_some(meta.len()))?;
            continue;
        };
        if meta.is_dir() {
            if depth + 1 > MAX_DEPTH {
                skip("too_deep", None)?;
                continue;
            }
            tidy_mode(&path, &meta, true)?;
            let (files, skipped, left) = (out.files.len(), out.skipped.len(), *budget);
            match walk(&path, &rel, depth + 1, budget, out) {
                Ok(()) => {}
                // No descriptor left, even after waiting: the folder is fine, the walk
                // fails (a folder is never removed for that).
                Err(e) if crate::fsutil::out_of_descriptors(&e) => return Err(e),
                Err(e) => {
                    // The whole folder goes: forget what was taken from it.
                    out.files.truncate(files);
                    out.skipped.truncate(skipped);
                    *budget = left;
                    tracing::warn!(path = %rel_str, error = %e, "an output folder cannot be read: left out");
                    fs::remove_dir_all(&path)?;
                    out.skipped.push(OutputSkipped {
                        path: escape_path_bytes(&rel),
                        path_hex: hex::encode(&rel),
                        kind: kind.to_owned(),
                        reason: "unreadable".to_owned(),
                        size: None,
                    });
                }
            }
        } else if meta.is_file() {
            let size = meta.len();
            if size > *budget {
                skip("over_quota", Some(size))?;
                continue;
            }
            tidy_mode(&path, &meta, false)?;
            *budget -= size;
            out.files.push(Accepted {
                rel: rel_str,
                path,
                size,
            });
        } else {
            skip("not_regular", None)?;
        }
    }
    Ok(())
}

/// The `kind` an [`OutputSkipped`] names for an entry.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "file"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() {
        "block_device"
    } else if t.is_char_device() {
        "char_device"
    } else {
        "unknown"
    }
}

/// Drop set-uid, set-gid and sticky bits; a folder gets owner rwx, a file owner read.
fn tidy_mode(path: &Path, meta: &Metadata, dir: bool) -> io::Result<()> {
    let mode = meta.permissions().mode() & 0o7777;
    let want = (mode & 0o777) | if dir { 0o700 } else { 0o400 };
    if mode != want {
        fs::set_permissions(path, fs::Permissions::from_mode(want))?;
    }
    Ok(())
}

/// Remove a left-out entry from the bundle (a folder with all it holds).
fn remove(path: &Path, meta: &Metadata) -> io::Result<()> {
    let r = if meta.is_dir() {
        // Folders below may lack write or search access for their owner.
        make_removable(path, 0);
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Give every folder under `dir` owner rwx (never following a symlink), so that
/// `remove_dir_all` can empty it.
fn make_removable(dir: &Path, depth: usize) {
    if depth > MAX_DEPTH * 4 {
        return;
    }
    if let Ok(meta) = fs::symlink_metadata(dir)
        && meta.is_dir()
    {
        let _ = tidy_mode(dir, &meta, true);
        if let Ok(entries) = fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    make_removable(&e.path(), depth + 1);
                }
            }
        }
    }
}
