//! Where a ledger's files are read from: its folder, or any other home of the tlog-tiles
//! layout — a bucket (`s3://`, `file://`) or a web server the folder is published on
//! (`http(s)://`) — behind [`LogFiles`], so that checking a log, proving inclusion and
//! consistency, and auditing read the same way from all of them.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::io::Read as _;

use crate::error::{LedgerError, Result};

/// The folder of the tiles in a ledger.
pub const TILE_DIR: &str = "tile";

/// Read a file of at most `max` bytes, refusing a symlink or anything but a regular file.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| LedgerError::io("open", path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| LedgerError::io("stat", path, e))?;
    if !meta.is_file() {
        return Err(LedgerError::BadTile(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| LedgerError::io("read", path, e))?;
    if bytes.len() as u64 > max {
        return Err(LedgerError::BadTile(format!(
            "{} is larger than a tile can be",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Every regular file below `dir/tile` (and temporary files at the top), as
/// `/`-separated paths relative to `dir`; symlinks and special files are listed too (as
/// themselves: they are never read), so a check can refuse them.
///
/// # Errors
///
/// [`LedgerError::Io`] when a folder cannot be listed; [`LedgerError::BadTile`] when folders
/// nest more than 32 deep.
pub fn list_files(dir: &Path) -> Result<Vec<String>> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>, depth: usize) -> Result<()> {
        if depth > 32 {
            return Err(LedgerError::BadTile(format!("{rel}: nested too deeply")));
        }
        let entries = std::fs::read_dir(dir).map_err(|e| LedgerError::io("list", dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| LedgerError::io("list", dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = format!("{rel}/{name}");
            let ft = entry
                .file_type()
                .map_err(|e| LedgerError::io("stat", entry.path(), e))?;
            if ft.is_dir() {
                walk(&entry.path(), &child, out, depth + 1)?;
            } else {
                out.push(child);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    let tiles = dir.join(TILE_DIR);
    if std::fs::symlink_metadata(&tiles).is_ok_and(|m| m.is_dir()) {
        walk(&tiles, TILE_DIR, &mut out, 0)?;
    }
    out.sort();
    Ok(out)
}

/// Read access to a ledger's files by their path in the layout (`checkpoint`,
/// `ledger.json`, `tile/0/000.p/5`, …).
pub trait LogFiles: Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe {
    /// The file at `path`, at most `max` bytes; `Ok(None)` when there is none.
    ///
    /// # Errors
    ///
    /// [`LedgerError::Io`] or [`LedgerError::Remote`] when it cannot be read;
    /// [`LedgerError::BadTile`] when it is larger than `max` or not a regular file.
    fn read(&self, path: &str, max: u64) -> Result<Option<Vec<u8>>>;

    /// Every file below `tile/`, as paths from the ledger's root, sorted; `Ok(None)` when
    /// this home cannot be listed (a web server).
    ///
    /// # Errors
    ///
    /// [`LedgerError::Io`] or [`LedgerError::Remote`] when the listing fails.
    fn list_tiles(&self) -> Result<Option<Vec<String>>>;

    /// Where the ledger is, for messages: a folder's path or a URL.
    fn describe(&self) -> String;

    /// The folder, when the ledger is one (the checks that look at a folder's other
    /// entries, and writers, need it).
    fn folder(&self) -> Option<&Path> {
        None
    }
}

impl<T: LogFiles + ?Sized> LogFiles for &T {
    fn read(&self, path: &str, max: u64) -> Result<Option<Vec<u8>>> {
        (**self).read(path, max)
    }
    fn list_tiles(&self) -> Result<Option<Vec<String>>> {
        (**self).list_tiles()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn folder(&self) -> Option<&Path> {
        (**self).folder()
    }
}

impl<T: LogFiles + ?Sized> LogFiles for Arc<T> {
    fn read(&self, path: &str, max: u64) -> Result<Option<Vec<u8>>> {
        (**self).read(path, max)
    }
    fn list_tiles(&self) -> Result<Option<Vec<String>>> {
        (**self).list_tiles()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn folder(&self) -> Option<&Path> {
        (**self).folder()
    }
}

/// A ledger in a local folder. Files are read without following a symlink.
#[derive(Debug, Clone)]
pub struct Folder {
    dir: PathBuf,
}

impl Folder {
    /// The ledger folder at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Folder {
        Folder { dir: dir.into() }
    }
}

impl LogFiles for Folder {
    fn read(&self, path: &str, max: u64) -> Result<Option<Vec<u8>>> {
        match read_bounded(&self.dir.join(path), max) {
            Err(LedgerError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(None)
            }
            other => other.map(Some),
        }
    }

    fn list_tiles(&self) -> Result<Option<Vec<String>>> {
        list_files(&self.dir).map(Some)
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }

    fn folder(&self) -> Option<&Path> {
        Some(&self.dir)
    }
}

/// A ledger under an object-storage or web URL (`s3://BUCKET/PREFIX`, `file:///FOLDER`,
/// `https://HOST/PATH`), read object by object.
#[derive(Debug)]
pub struct Remote {
    // The store client and the runtime hold no state a panic could leave half-changed for a
    // reader: a request either completes or fails.
    objects: AssertUnwindSafe<provrun_store::Objects>,
    runtime: AssertUnwindSafe<tokio::runtime::Runtime>,
}

impl Remote {
    /// The ledger at `url`.
    ///
    /// # Errors
    ///
    /// [`LedgerError::Remote`] for a URL the store cannot use, or when no runtime can be
    /// started for its requests.
    pub fn open(url: &str) -> Result<Remote> {
        let objects =
            provrun_store::Objects::open(url).map_err(|e| LedgerError::Remote(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LedgerError::Remote(format!("cannot start a runtime: {e}")))?;
        Ok(Remote {
            objects: AssertUnwindSafe(objects),
            runtime: AssertUnwindSafe(runtime),
        })
    }

    /// The objects it reads.
    pub fn objects(&self) -> &provrun_store::Objects {
        &self.objects
    }

    /// Run one request to its end on this ledger's runtime, from a thread of its own (so
    /// that a caller inside another runtime can call it too).
    pub fn block_on<T: Send>(&self, f: impl std::future::Future<Output = T> + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| self.runtime.block_on(f))
                .join()
                .expect("a ledger request's thread does not panic")
        })
    }
}

impl LogFiles for Remote {
    fn read(&self, path: &str, max: u64) -> Result<Option<Vec<u8>>> {
        self.block_on(self.objects.get(path, max))
            .map_err(|e| LedgerError::Remote(e.to_string()))
    }

    fn list_tiles(&self) -> Result<Option<Vec<String>>> {
        if !self.objects.listable() {
            return Ok(None);
        }
        self.block_on(self.objects.list(TILE_DIR))
            .map(Some)
            .map_err(|e| LedgerError::Remote(e.to_string()))
    }

    fn describe(&self) -> String {
        self.objects.url().to_owned()
    }
}

/// The ledger a command names: a URL (`s3://`, `file://`, `http://`, `https://`) or a
/// folder. Anything else with `://` is refused rather than taken for a folder.
///
/// # Errors
///
/// [`LedgerError::Remote`] for a URL of a scheme not spoken here or that cannot be used.
pub fn open_files(location: &str) -> Result<Arc<dyn LogFiles>> {
    if location.contains("://") {
        return Ok(Arc::new(Remote::open(location)?));
    }
    Ok(Arc::new(Folder::new(location)))
}

/// Run a future to its end on a current-thread runtime of its own, in a thread of its own
/// (so that a caller inside another runtime may call it too).
///
/// # Errors
///
/// [`LedgerError::Remote`] when no runtime can be started.
pub(crate) fn run_blocking<T: Send>(f: impl std::future::Future<Output = T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|rt| rt.block_on(f))
                .map_err(|e| LedgerError::Remote(format!("cannot start a runtime: {e}")))
        })
        .join()
        .expect("a ledger request's thread does not panic")
    })
}
