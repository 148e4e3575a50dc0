//! File-system primitives under a cap-std directory: a link-free walk, safe opens, atomic
//! writes, listings and usage scans. Shared by the sandbox roots and the host folder.

use std::io::{self, Read, Write};
use std::ops::Deref;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::fs::{Dir, FileType, FileTypeExt, Metadata, MetadataExt, OpenOptions, OpenOptionsExt};
use serde::Serialize;

use crate::error::{Result, SandboxError};

/// Names of in-flight temporary files start with this; listings hide them.
pub(crate) const TEMP_PREFIX: &str = ".provrun-tmp-";

/// Largest buffer reserved up front for a read; larger reads grow as bytes arrive.
pub(crate) const INITIAL_BUFFER: u64 = 16 << 20;

/// Most entries a listing reads before it stops counting.
pub(crate) const MAX_SCAN_ENTRIES: usize = 100_000;

/// Turns a list of names into the path shown in messages (virtual, or host-relative).
pub(crate) type Show<'a> = &'a dyn Fn(&[String]) -> String;

/// A directory handle that is either a root (borrowed) or opened below it (owned).
pub(crate) enum DirRef<'a> {
    Borrowed(&'a Dir),
    Owned(Dir),
}

impl Deref for DirRef<'_> {
    type Target = Dir;
    fn deref(&self) -> &Dir {
        match self {
            DirRef::Borrowed(d) => d,
            DirRef::Owned(d) => d,
        }
    }
}

/// What kind of entry a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed).
    Symlink,
    /// A FIFO, socket, device or anything else.
    Other,
}

impl EntryKind {
    /// A one-character marker for listings: `/` for directories, `@` for links, `?` for
    /// other special files, nothing for regular files.
    pub fn marker(self) -> &'static str {
        match self {
            EntryKind::File => "",
            EntryKind::Dir => "/",
            EntryKind::Symlink => "@",
            EntryKind::Other => "?",
        }
    }

    pub(crate) fn of(ft: &FileType) -> EntryKind {
        if ft.is_symlink() {
            EntryKind::Symlink
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirEntryInfo {
    /// The entry's name (a name that is not UTF-8 is shown with U+FFFD replacements).
    pub name: String,
    /// What it is; links are reported, never followed.
    pub kind: EntryKind,
    /// Size in bytes for files and links (the link's own size), 0 for directories.
    pub size: u64,
}

/// The result of listing one directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirListing {
    /// The directory listed, as a virtual path (or host-relative for host listings).
    pub path: String,
    /// Entries sorted by name, at most `Limits::max_list_entries` of them.
    pub entries: Vec<DirEntryInfo>,
    /// How many entries the directory holds (counting stops at 100 000).
    pub total: usize,
    /// Whether entries were left out because of the cap.
    pub truncated: bool,
}

/// Bytes and entries in use in the writable roots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Bytes of regular files (by their size, so sparse files count in full).
    pub bytes: u64,
    /// Entries: files, directories, links and anything else.
    pub files: u64,
}

/// The per-sandbox quota over /output and /scratch.
pub(crate) struct Quota {
    pub(crate) max_bytes: u64,
    pub(crate) max_files: u64,
    pub(crate) used: Mutex<Usage>,
}

/// A reservation taken before a write and settled after it.
pub(crate) struct Reservation<'q> {
    quota: &'q Quota,
    add_bytes: u64,
    old_bytes: u64,
    add_files: u64,
    settled: bool,
}

impl Quota {
    fn lock(&self) -> std::sync::MutexGuard<'_, Usage> {
        // A poisoned lock only means another thread panicked mid-update; the counts stay usable.
        self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn usage(&self) -> Usage {
        *self.lock()
    }

    pub(crate) fn set(&self, usage: Usage) {
        *self.lock() = usage;
    }

    /// Reserves room for a file of `new_bytes` replacing one of `old_bytes` (and
    /// `add_files` new entries), or says which quota it would break.
    pub(crate) fn reserve(
        &self,
        path: &str,
        new_bytes: u64,
        old_bytes: u64,
        add_files: u64,
    ) -> Result<Reservation<'_>> {
        let mut used = self.lock();
        let needed = used
            .bytes
            .saturating_sub(old_bytes)
            .saturating_add(new_bytes);
        if new_bytes > old_bytes && needed > self.max_bytes {
            return Err(SandboxError::QuotaBytes {
                path: path.to_owned(),
                needed,
                used: used.bytes,
                max: self.max_bytes,
            });
        }
        let files = used.files.saturating_add(add_files);
        if add_files > 0 && files > self.max_files {
            return Err(SandboxError::QuotaFiles {
                path: path.to_owned(),
                needed: files,
                max: self.max_files,
            });
        }
        used.bytes = used.bytes.saturating_add(new_bytes);
        used.files = files;
        Ok(Reservation {
            quota: self,
            add_bytes: new_bytes,
            old_bytes,
            add_files,
            settled: false,
        })
    }
}

impl Reservation<'_> {
    /// The write happened: the old file's bytes are gone.
    pub(crate) fn commit(mut self) {
        let mut used = self.quota.lock();
        used.bytes = used.bytes.saturating_sub(self.old_bytes);
        self.settled = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.settled {
            let mut used = self.quota.lock();
            used.bytes = used.bytes.saturating_sub(self.add_bytes);
            used.files = used.files.saturating_sub(self.add_files);
        }
    }
}

/// A human name for a non-regular file type.
pub(crate) fn kind_name(ft: &FileType) -> &'static str {
    if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_symlink() {
        "symbolic link"
    } else if ft.is_dir() {
        "directory"
    } else {
        "special file"
    }
}

/// A human name for a non-regular file type, from `std` metadata.
pub(crate) fn std_kind_name(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

fn is_not_found(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

/// Explains why `name` in `dir` could not be used as a directory.
fn classify_dir_failure(
    dir: &Dir,
    names: &[String],
    i: usize,
    err: io::Error,
    show: Show<'_>,
) -> SandboxError {
    let here = show(&names[..=i]);
    match dir.symlink_metadata(&names[i]) {
        Ok(md) if md.file_type().is_symlink() => SandboxError::SymlinkRefused {
            path: show(names),
            link: here,
        },
        Ok(md) if !md.is_dir() => SandboxError::NotADirectory { path: here },
        Err(e) if is_not_found(&e) => SandboxError::NotFound { path: here },
        _ => SandboxError::io("opening directory", here, err),
    }
}

/// Walks from `root` through the directories `names` without following any link.
///
/// With `create`, missing directories are made (each one reserved against the quota, if any).
pub(crate) fn walk<'a>(
    root: &'a Dir,
    names: &[String],
    show: Show<'_>,
    create: Option<Option<&Quota>>,
) -> Result<DirRef<'a>> {
    let mut cur = DirRef::Borrowed(root);
    for i in 0..names.len() {
        let name = &names[i];
        let next = match cur.open_dir_nofollow(name) {
            Ok(d) => d,
            Err(e) if is_not_found(&e) && create.is_some() => {
                let here = show(&names[..=i]);
                let reservation = match create.flatten() {
                    Some(q) => Some(q.reserve(&here, 0, 0, 1)?),
                    None => None,
                };
                match cur.create_dir(name) {
                    Ok(()) => {
                        if let Some(r) = reservation {
                            r.commit();
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => drop(reservation),
                    Err(e) => return Err(SandboxError::io("creating directory", here, e)),
                }
                cur.open_dir_nofollow(name)
                    .map_err(|e| classify_dir_failure(&cur, names, i, e, show))?
            }
            Err(e) => return Err(classify_dir_failure(&cur, names, i, e, show)),
        };
        cur = DirRef::Owned(next);
    }
    Ok(cur)
}

/// Checks lstat metadata of a file target; `Ok(None)` when nothing is there.
fn check_file_target(md: &Metadata, names: &[String], show: Show<'_>) -> Result<()> {
    let ft = md.file_type();
    if ft.is_symlink() {
        let p = show(names);
        return Err(SandboxError::SymlinkRefused {
            path: p.clone(),
            link: p,
        });
    }
    if ft.is_dir() {
        return Err(SandboxError::IsADirectory { path: show(names) });
    }
    if !ft.is_file() {
        return Err(SandboxError::NotARegularFile {
            path: show(names),
            kind: kind_name(&ft),
        });
    }
    Ok(())
}

/// Opens the regular file at `names` for reading: no link followed, FIFOs and devices refused
/// before they are opened (and opened non-blocking, so a swap cannot hang). Returns the file
/// and its size.
pub(crate) fn open_read(
    root: &Dir,
    names: &[String],
    show: Show<'_>,
) -> Result<(std::fs::File, u64)> {
    let Some((last, parents)) = names.split_last() else {
        return Err(SandboxError::IsADirectory { path: show(names) });
    };
    let parent = walk(root, parents, show, None)?;
    let md = parent.symlink_metadata(last).map_err(|e| {
        if is_not_found(&e) {
            SandboxError::NotFound { path: show(names) }
        } else {
            SandboxError::io("reading", show(names), e)
        }
    })?;
    check_file_target(&md, names, show)?;
    let mut opts = OpenOptions::new();
    opts.read(true).follow(FollowSymlinks::No).nonblock(true);
    let file = match parent.open_with(last, &opts) {
        Ok(f) => f.into_std(),
        // Swapped since the check: say what it became.
        Err(e) => {
            let swapped = match parent.symlink_metadata(last) {
                Ok(md) => check_file_target(&md, names, show).err(),
                Err(gone) if is_not_found(&gone) => {
                    Some(SandboxError::NotFound { path: show(names) })
                }
                Err(_) => None,
            };
            return Err(swapped.unwrap_or_else(|| SandboxError::io("opening", show(names), e)));
        }
    };
    let fmd = file
        .metadata()
        .map_err(|e| SandboxError::io("reading", show(names), e))?;
    if !fmd.is_file() {
        return Err(SandboxError::NotARegularFile {
            path: show(names),
            kind: std_kind_name(&fmd.file_type()),
        });
    }
    Ok((file, fmd.len()))
}

/// Reads the whole regular file at `names`, refusing files above `max` bytes.
pub(crate) fn read_whole(
    root: &Dir,
    names: &[String],
    show: Show<'_>,
    max: u64,
) -> Result<Vec<u8>> {
    let (file, size) = open_read(root, names, show)?;
    if size > max {
        return Err(SandboxError::FileTooLarge {
            path: show(names),
            size,
            max,
        });
    }
    let mut buf = Vec::with_capacity(size.min(INITIAL_BUFFER) as usize);
    file.take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| SandboxError::io("reading", show(names), e))?;
    if buf.len() as u64 > max {
        return Err(SandboxError::FileTooLarge {
            path: show(names),
            size: buf.len() as u64,
            max,
        });
    }
    Ok(buf)
}

/// What an atomic write found and did.
pub(crate) struct Written {
    pub(crate) created: bool,
    pub(crate) old_size: Option<u64>,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `content` to `names` under `root`: parents made as needed (no link followed), the
/// target refused if it is a link, a directory, a special file or hard-linked elsewhere, the
/// bytes written to a fresh temporary file in the same directory and renamed over the target.
pub(crate) fn atomic_write(
    root: &Dir,
    names: &[String],
    content: &[u8],
    show: Show<'_>,
    quota: Option<&Quota>,
) -> Result<Written> {
    let Some((last, parents)) = names.split_last() else {
        return Err(SandboxError::IsADirectory { path: show(names) });
    };
    let parent = walk(root, parents, show, Some(quota))?;
    let old = match parent.symlink_metadata(last) {
        Ok(md) => {
            check_file_target(&md, names, show)?;
            if md.nlink() > 1 {
                return Err(SandboxError::HardLinked {
                    path: show(names),
                    links: md.nlink(),
                });
            }
            Some((md.len(), md.mode() & 0o7777))
        }
        Err(e) if is_not_found(&e) => None,
        Err(e) => return Err(SandboxError::io("writing", show(names), e)),
    };
    let old_size = old.map(|(size, _)| size);
    let reservation = match quota {
        Some(q) => Some(q.reserve(
            &show(names),
            content.len() as u64,
            old_size.unwrap_or(0),
            u64::from(old_size.is_none()),
        )?),
        None => None,
    };

    // A replaced file keeps its permission bits (minus set-id bits); a new one gets 0644.
    let mode = old.map_or(0o644, |(_, mode)| mode & 0o777);
    let mut opts = OpenOptions::new();
    opts.write(true)
        .create_new(true)
        .follow(FollowSymlinks::No)
        .mode(mode);
    let pid = std::process::id();
    let (tmp_name, file) = {
        let mut attempt = 0;
        loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = format!("{TEMP_PREFIX}{pid}-{n}");
            match parent.open_with(&tmp, &opts) {
                Ok(f) => break (tmp, f.into_std()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 16 => attempt += 1,
                Err(e) => return Err(SandboxError::io("writing", show(names), e)),
            }
        }
    };
    let written = file
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .and_then(|()| (&file).write_all(content));
    drop(file);
    let result = written.and_then(|()| parent.rename(&tmp_name, &parent, last));
    if let Err(e) = result {
        let _ = parent.remove_file(&tmp_name);
        return Err(SandboxError::io("writing", show(names), e));
    }
    if let Some(r) = reservation {
        r.commit();
    }
    Ok(Written {
        created: old_size.is_none(),
        old_size,
    })
}

/// Lists the directory at `names`, sorted by name, at most `cap` entries; never follows links.
pub(crate) fn list(root: &Dir, names: &[String], show: Show<'_>, cap: usize) -> Result<DirListing> {
    let dir = walk(root, names, show, None)?;
    let path = show(names);
    let mut found: Vec<std::ffi::OsString> = Vec::new();
    let mut total = 0usize;
    let entries = dir
        .entries()
        .map_err(|e| SandboxError::io("listing", path.clone(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SandboxError::io("listing", path.clone(), e))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(TEMP_PREFIX) {
            continue;
        }
        total += 1;
        found.push(name);
        if total >= MAX_SCAN_ENTRIES {
            break;
        }
    }
    found.sort();
    let truncated = found.len() > cap;
    found.truncate(cap);
    let mut out = Vec::with_capacity(found.len());
    for name in found {
        let (kind, size) = match dir.symlink_metadata(&name) {
            Ok(md) => {
                let kind = EntryKind::of(&md.file_type());
                (kind, if kind == EntryKind::Dir { 0 } else { md.len() })
            }
            // Vanished between listing and stat: report what we know.
            Err(_) => (EntryKind::Other, 0),
        };
        out.push(DirEntryInfo {
            name: name.to_string_lossy().into_owned(),
            kind,
            size,
        });
    }
    Ok(DirListing {
        path,
        entries: out,
        total,
        truncated,
    })
}

/// Counts bytes and entries below `root`, never following links, at most `max_depth` deep.
pub(crate) fn scan_usage(root: &Dir, max_depth: usize) -> io::Result<Usage> {
    let mut usage = Usage::default();
    let mut stack: Vec<(Dir, usize)> = vec![(root.try_clone()?, 0)];
    while let Some((dir, depth)) = stack.pop() {
        // A folder a command left without read or search permission for its owner (this
        // process's user) is opened up again rather than left unmeasured.
        let entries = match dir.entries() {
            Err(e)
                if e.kind() == io::ErrorKind::PermissionDenied
                    && crate::access::restore_own_dir(&dir)? =>
            {
                dir.entries()?
            }
            other => other?,
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let md = match dir.symlink_metadata(&name) {
                Ok(md) => md,
                Err(e) if is_not_found(&e) => continue,
                Err(e) => return Err(e),
            };
            usage.files += 1;
            if md.is_file() {
                usage.bytes = usage.bytes.saturating_add(md.len());
            } else if md.is_dir()
                && depth < max_depth
                && let Ok(sub) = dir.open_dir_nofollow(&name)
            {
                stack.push((sub, depth + 1));
            }
        }
    }
    Ok(usage)
}
