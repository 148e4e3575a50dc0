//! Opening one bundle for reading: [`open`] (and [`open_blocking`]) turn a [`Location`]
//! into an [`OpenBundle`], a folder the evidence crate reads — the folder itself, or a
//! tar unpacked into a temporary folder that lives as long as the value.

use std::path::{Path, PathBuf};

use crate::bucket::{get, store_for};
use crate::error::{Result, StoreError};
use crate::location::{EVENTS_FILE, Location};
use crate::tarball::{tar_folder, untar};

/// A bundle ready to read: a folder, perhaps unpacked into a temporary one that is
/// removed when this value is dropped.
#[derive(Debug)]
pub struct OpenBundle {
    dir: PathBuf,
    location: Location,
    _unpacked: Option<tempfile::TempDir>,
}

impl OpenBundle {
    /// The bundle folder to read (for a tar or an object, the unpacked copy).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the bundle came from.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The bundle as the user named it, for messages and labels.
    pub fn name(&self) -> String {
        self.location.name()
    }

    /// Whether [`OpenBundle::dir`] is an unpacked copy rather than the bundle itself.
    pub fn is_copy(&self) -> bool {
        self._unpacked.is_some()
    }

    /// Whether the folder has an evidence log (`events.jsonl`, a regular file): a folder
    /// without one is no bundle at all (a bundle whose log does not parse still has one).
    pub fn has_log(&self) -> bool {
        std::fs::symlink_metadata(self.dir.join(EVENTS_FILE)).is_ok_and(|m| m.is_file())
    }

    /// [`StoreError::NotABundle`] unless [`OpenBundle::has_log`].
    ///
    /// # Errors
    ///
    /// [`StoreError::NotABundle`] when the folder has no `events.jsonl` file.
    pub fn require_log(&self) -> Result<()> {
        if self.has_log() {
            Ok(())
        } else {
            Err(StoreError::NotABundle(self.name()))
        }
    }

    /// Make a change to the opened copy the bundle's own: nothing to do for a folder
    /// (changed in place); a local tar is packed again and written over its file
    /// atomically (a new file beside it, synced, renamed over it); a bucket object is not
    /// replaced ([`StoreError::ReadOnly`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::ReadOnly`] for a bucket object; for a local tar, [`StoreError::Io`] when the
    /// folder cannot be packed or the new file cannot be written and renamed over the old one.
    pub fn write_back(&self) -> Result<()> {
        match &self.location {
            Location::Folder(_) => Ok(()),
            Location::TarFile(path) => replace_file(path, &tar_folder(&self.dir)?),
            Location::Object(_) => self.location.check_write_back(),
        }
    }
}

/// Write `bytes` over `path` atomically: a temporary file beside it, synced, renamed.
fn replace_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let name = path.display().to_string();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".provrun-tar-")
        .tempfile_in(&parent)
        .map_err(|e| StoreError::io("write beside", name.clone(), e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| StoreError::io("write", name.clone(), e))?;
    tmp.persist(path)
        .map_err(|e| StoreError::io("replace", name, e.error))?;
    Ok(())
}

/// Unpack `bytes` (the tar named `name`) into a new temporary folder under `scratch`
/// (default: `TMPDIR`), in a folder named `stem`.
pub(crate) fn unpack(
    bytes: &[u8],
    name: &str,
    stem: &str,
    scratch: Option<&Path>,
) -> Result<(PathBuf, tempfile::TempDir)> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("provrun-bundle-");
    let tmp = match scratch {
        Some(dir) => builder.tempdir_in(dir),
        None => builder.tempdir(),
    }
    .map_err(|e| StoreError::io("make a temporary folder for", name, e))?;
    let dir = tmp.path().join(stem);
    untar(bytes, &dir, name)?;
    Ok((dir, tmp))
}

/// The name a tar's folder gets: its file name without `.tar`.
fn stem_of(name: &str) -> String {
    Path::new(name.rsplit('/').next().unwrap_or("bundle"))
        .file_stem()
        .map_or_else(|| "bundle".into(), |s| s.to_string_lossy().into_owned())
}

/// The bytes of a tar `location` names (a local file or an object).
async fn tar_bytes(location: &Location) -> Result<bytes::Bytes> {
    match location {
        Location::Object(url) => {
            let (store, object) = store_for(url)?;
            get(&*store, &object, url)
                .await?
                .ok_or_else(|| StoreError::NotFound(url.clone()))
        }
        Location::TarFile(path) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || read_file(&path))
                .await
                .map_err(|e| StoreError::Task(format!("cannot read the tar: {e}")))?
        }
        Location::Folder(_) => Err(StoreError::Task("a folder is no tar".into())),
    }
}

fn read_file(path: &Path) -> Result<bytes::Bytes> {
    std::fs::read(path)
        .map(bytes::Bytes::from)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => StoreError::NotFound(path.display().to_string()),
            _ => StoreError::io("read", path.display().to_string(), e),
        })
}

/// Open the bundle at `location` for reading: a folder as it is, a tar (a file or an
/// object) unpacked into a temporary folder in `TMPDIR`. An object that is not there is
/// [`StoreError::NotFound`]; a tar that cannot be unpacked is [`StoreError::Tar`].
///
/// The folder is not checked to be a bundle: [`OpenBundle::require_log`] does that.
///
/// # Errors
///
/// [`StoreError::NotFound`] when the tar or object is not there; [`StoreError::BadUrl`] for a
/// URL this build cannot read; [`StoreError::Io`] or [`StoreError::Object`] when reading fails;
/// [`StoreError::Tar`] when the tar cannot be unpacked; [`StoreError::Task`] when a blocking
/// task dies.
pub async fn open(location: &Location) -> Result<OpenBundle> {
    open_in(location, None).await
}

/// [`open`], unpacking under `scratch` instead of `TMPDIR` (e.g. a work folder on a
/// larger disk).
///
/// # Errors
///
/// As [`open`]; [`StoreError::Io`] also when no temporary folder can be made under `scratch`.
pub async fn open_in(location: &Location, scratch: Option<&Path>) -> Result<OpenBundle> {
    if let Location::Folder(path) = location {
        return Ok(OpenBundle {
            dir: path.clone(),
            location: location.clone(),
            _unpacked: None,
        });
    }
    let bytes = tar_bytes(location).await?;
    let name = location.name();
    let stem = stem_of(&name);
    let scratch = scratch.map(Path::to_path_buf);
    let (dir, tmp) =
        tokio::task::spawn_blocking(move || unpack(&bytes, &name, &stem, scratch.as_deref()))
            .await
            .map_err(|e| StoreError::Task(format!("cannot unpack the tar: {e}")))??;
    Ok(OpenBundle {
        dir,
        location: location.clone(),
        _unpacked: Some(tmp),
    })
}

/// [`open`] for code that is not async: a folder or a local tar is opened on this
/// thread; an object is fetched on a runtime of its own. Call it outside any tokio
/// runtime (within one, use [`open`]).
///
/// # Errors
///
/// As [`open`]; also [`StoreError::Task`] when the runtime for fetching an object cannot be
/// started.
pub fn open_blocking(location: &Location) -> Result<OpenBundle> {
    match location {
        Location::Folder(path) => Ok(OpenBundle {
            dir: path.clone(),
            location: location.clone(),
            _unpacked: None,
        }),
        Location::TarFile(path) => {
            let bytes = read_file(path)?;
            let name = location.name();
            let (dir, tmp) = unpack(&bytes, &name, &stem_of(&name), None)?;
            Ok(OpenBundle {
                dir,
                location: location.clone(),
                _unpacked: Some(tmp),
            })
        }
        Location::Object(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Task(format!("cannot start the runtime: {e}")))?
            .block_on(open(location)),
    }
}
