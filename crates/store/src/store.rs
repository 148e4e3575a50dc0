//! [`Store`]: a place that holds many bundles — a folder (`DEST/<id>`, or `DEST/<id>.tar`)
//! or a bucket prefix (`PREFIX/<id>.tar`) — listed, opened by id, streamed as a tar, and
//! given finished bundles.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::bucket::Bucket;
use crate::error::{Result, StoreError};
use crate::location::{EVENTS_FILE, Location, check_id, is_url};
use crate::open::{OpenBundle, open_in};
use crate::tarball::{TarChunks, tar_folder, tar_folder_stream};

/// One bundle a [`Store`] holds, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The bundle's id: its folder's name, or its tar's name without `.tar`.
    pub id: String,
    /// Where it is (a folder, a tar file, or an object URL).
    pub location: Location,
    /// Its size in bytes: the tar's, or the sum of the folder's files.
    pub size: u64,
    /// When it last changed (the folder's `events.jsonl`, the tar file, the object), when
    /// known.
    pub modified: Option<SystemTime>,
}

/// The tar of one bundle, ready to send.
pub struct TarDownload {
    /// Its length in bytes, when known before it is made (a stored tar's; a folder's tar
    /// is made while it is read).
    pub size: Option<u64>,
    /// The bytes, in chunks.
    pub chunks: TarChunks,
}

impl std::fmt::Debug for TarDownload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TarDownload")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
enum Place {
    Folder(PathBuf),
    Bucket(Bucket),
}

/// A place that holds many bundles, each known by an id ([`check_id`]): a local folder
/// whose entries are bundle folders `<id>/` (or tars `<id>.tar`), or a bucket prefix whose
/// objects are `<id>.tar`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    place: Place,
    scratch: Option<PathBuf>,
}

impl Store {
    /// The store `text` names: an `s3://`/`file://` URL is a bucket prefix, anything else
    /// a local folder (which need not exist yet). A bad URL or an unsupported scheme is
    /// [`StoreError::BadUrl`].
    ///
    /// # Errors
    ///
    /// [`StoreError::BadUrl`] when `text` is a URL that does not parse, names a scheme this build
    /// does not speak, or has no usable object path.
    pub fn open(text: &str) -> Result<Store> {
        if is_url(text) {
            Ok(Store {
                place: Place::Bucket(Bucket::open(text)?),
                scratch: None,
            })
        } else {
            Ok(Store::folder(text))
        }
    }

    /// The local folder `path` as a store.
    pub fn folder(path: impl Into<PathBuf>) -> Store {
        Store {
            place: Place::Folder(path.into()),
            scratch: None,
        }
    }

    /// Unpack the tars this store opens under `dir` instead of `TMPDIR`.
    pub fn with_scratch(mut self, dir: impl Into<PathBuf>) -> Store {
        self.scratch = Some(dir.into());
        self
    }

    /// The store as the user named it (a path, or a URL without a trailing `/`).
    pub fn name(&self) -> String {
        match &self.place {
            Place::Folder(p) => p.display().to_string(),
            Place::Bucket(b) => b.url().to_owned(),
        }
    }

    /// The local folder of a folder store; `None` for a bucket.
    pub fn folder_path(&self) -> Option<&Path> {
        match &self.place {
            Place::Folder(p) => Some(p),
            Place::Bucket(_) => None,
        }
    }

    /// Whether this store is a bucket prefix (bundles are kept as tar objects).
    pub fn is_bucket(&self) -> bool {
        matches!(self.place, Place::Bucket(_))
    }

    /// Where the bundle `id` is (or would be put): `DEST/<id>`, or `PREFIX/<id>.tar`.
    pub fn location_of(&self, id: &str) -> Location {
        match &self.place {
            Place::Folder(p) => Location::Folder(p.join(id)),
            Place::Bucket(b) => Location::Object(b.object_url(id)),
        }
    }

    /// [`Store::location_of`] as the user would name it.
    pub fn bundle_name(&self, id: &str) -> String {
        self.location_of(id).name()
    }

    /// Check that the store takes writes before anything is built for it: a bucket gets
    /// a probe object written and deleted; a folder is made if missing.
    ///
    /// # Errors
    ///
    /// [`StoreError::Object`] when the probe object cannot be written or deleted;
    /// [`StoreError::Io`] when the folder cannot be made.
    pub async fn probe(&self) -> Result<()> {
        match &self.place {
            Place::Bucket(b) => b.probe().await,
            Place::Folder(p) => std::fs::create_dir_all(p)
                .map_err(|e| StoreError::io("make", p.display().to_string(), e)),
        }
    }

    /// Every bundle the store holds, in id order. In a folder: each sub-folder with an
    /// `events.jsonl`, and each `<id>.tar` (a folder wins over a tar of the same id);
    /// hidden entries and names that are not safe ids are left out.
    ///
    /// # Errors
    ///
    /// [`StoreError::Object`] when the bucket cannot be listed; [`StoreError::NotFound`] when the
    /// folder does not exist; [`StoreError::Io`] when it cannot be read; [`StoreError::Task`] when
    /// the listing task dies.
    pub async fn list(&self) -> Result<Vec<Listed>> {
        match &self.place {
            Place::Bucket(b) => Ok(b
                .list()
                .await?
                .into_iter()
                .map(|o| Listed {
                    location: Location::Object(b.object_url(&o.id)),
                    id: o.id,
                    size: o.size,
                    modified: Some(o.modified),
                })
                .collect()),
            Place::Folder(p) => {
                let p = p.clone();
                tokio::task::spawn_blocking(move || list_folder(&p))
                    .await
                    .map_err(|e| StoreError::Task(format!("cannot list: {e}")))?
            }
        }
    }

    /// Open the bundle `id` for reading, or `None` when the store has none of that id.
    /// An id that is not a safe name is [`StoreError::BadId`] (ids come from requests).
    ///
    /// # Errors
    ///
    /// [`StoreError::BadId`] for an unsafe id; otherwise the errors of [`crate::open`] other than
    /// [`StoreError::NotFound`] (a missing bundle is `Ok(None)`).
    pub async fn open_bundle(&self, id: &str) -> Result<Option<OpenBundle>> {
        check_id(id)?;
        let location = match &self.place {
            Place::Bucket(b) => Location::Object(b.object_url(id)),
            Place::Folder(p) => match local_entry(p, id) {
                Some(location) => location,
                None => return Ok(None),
            },
        };
        match open_in(&location, self.scratch.as_deref()).await {
            Ok(open) => Ok(Some(open)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The bundle `id` as a tar, in chunks (a stored tar as it is; a folder packed while
    /// it is read, as [`crate::tar_folder`] packs it), or `None` when there is no such
    /// bundle. Must be called within a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`StoreError::BadId`] for an unsafe id; [`StoreError::Object`] when the bucket refuses the
    /// read; [`StoreError::Io`] or [`StoreError::Task`] when a stored tar file cannot be
    /// opened. Errors met while the chunks are read come as items of the stream.
    pub async fn tar(&self, id: &str) -> Result<Option<TarDownload>> {
        check_id(id)?;
        match &self.place {
            Place::Bucket(b) => Ok(b.stream(id).await?.map(|(size, chunks)| TarDownload {
                size: Some(size),
                chunks,
            })),
            Place::Folder(p) => match local_entry(p, id) {
                Some(Location::Folder(dir)) => Ok(Some(TarDownload {
                    size: None,
                    chunks: tar_folder_stream(dir),
                })),
                Some(Location::TarFile(file)) => {
                    let (size, chunks) = file_stream(&file).await?;
                    Ok(Some(TarDownload {
                        size: Some(size),
                        chunks,
                    }))
                }
                _ => Ok(None),
            },
        }
    }

    /// Put the finished bundle folder `bundle` into the store as `id`: into a bucket as
    /// one `<id>.tar` (one PUT: it appears whole or not at all, replacing an object of
    /// that id; `bundle` is left for the caller to remove); into a folder by renaming it
    /// to `DEST/<id>` (nothing to do when it is there already), which must not exist and
    /// must be on the same file system (build it under [`Store::folder_path`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::BadId`] for an unsafe id; [`StoreError::Io`] when the folder cannot be made,
    /// `DEST/<id>` already exists or the rename fails (packing, for a bucket);
    /// [`StoreError::Object`] when the upload fails; [`StoreError::Task`] when packing dies.
    pub async fn put(&self, id: &str, bundle: &Path) -> Result<()> {
        check_id(id)?;
        match &self.place {
            Place::Bucket(b) => {
                let folder = bundle.to_path_buf();
                let tar = tokio::task::spawn_blocking(move || tar_folder(&folder))
                    .await
                    .map_err(|e| StoreError::Task(format!("cannot pack the bundle: {e}")))??;
                b.put_tar(id, tar).await
            }
            Place::Folder(p) => {
                let to = p.join(id);
                if same_place(bundle, &to) {
                    return Ok(());
                }
                std::fs::create_dir_all(p)
                    .map_err(|e| StoreError::io("make", p.display().to_string(), e))?;
                if std::fs::symlink_metadata(&to).is_ok() {
                    return Err(StoreError::io(
                        "put a bundle at",
                        to.display().to_string(),
                        std::io::Error::from(std::io::ErrorKind::AlreadyExists),
                    ));
                }
                std::fs::rename(bundle, &to)
                    .map_err(|e| StoreError::io("move the bundle to", to.display().to_string(), e))
            }
        }
    }
}

/// Whether `a` and `b` name the same existing folder.
fn same_place(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The bundle `id` in the folder `dir`: `<id>/` with a log, else `<id>.tar`.
fn local_entry(dir: &Path, id: &str) -> Option<Location> {
    let folder = dir.join(id);
    if std::fs::symlink_metadata(folder.join(EVENTS_FILE)).is_ok_and(|m| m.is_file())
        && std::fs::symlink_metadata(&folder).is_ok_and(|m| m.is_dir())
    {
        return Some(Location::Folder(folder));
    }
    let tar = dir.join(format!("{id}.tar"));
    std::fs::symlink_metadata(&tar)
        .is_ok_and(|m| m.is_file())
        .then_some(Location::TarFile(tar))
}

/// A local tar file's size and its bytes in chunks.
async fn file_stream(file: &Path) -> Result<(u64, TarChunks)> {
    use futures_util::StreamExt as _;
    let name = file.display().to_string();
    let opened = tokio::task::spawn_blocking({
        let file = file.to_path_buf();
        move || std::fs::File::open(&file).and_then(|f| f.metadata().map(|m| (f, m.len())))
    })
    .await
    .map_err(|e| StoreError::Task(format!("cannot open the tar: {e}")))?
    .map_err(|e| StoreError::io("read", name.clone(), e))?;
    let (file, size) = opened;
    let chunks = futures_util::stream::unfold(Some(file), move |state| {
        let name = name.clone();
        async move {
            let mut file = state?;
            let read = tokio::task::spawn_blocking(move || {
                use std::io::Read as _;
                let mut buf = vec![0u8; 64 * 1024];
                let n = file.read(&mut buf)?;
                buf.truncate(n);
                Ok::<_, std::io::Error>((file, buf))
            })
            .await;
            match read {
                Ok(Ok((_, buf))) if buf.is_empty() => None,
                Ok(Ok((file, buf))) => Some((Ok(bytes::Bytes::from(buf)), Some(file))),
                Ok(Err(e)) => Some((Err(StoreError::io("read", name, e)), None)),
                Err(e) => Some((Err(StoreError::Task(format!("cannot read: {e}"))), None)),
            }
        }
    })
    .boxed();
    Ok((size, chunks))
}

/// The bundles of a local folder (see [`Store::list`]).
fn list_folder(dir: &Path) -> Result<Vec<Listed>> {
    let name = dir.display().to_string();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound(name));
        }
        Err(e) => return Err(StoreError::io("list", name, e)),
    };
    let mut found: std::collections::BTreeMap<String, Listed> = Default::default();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", name.clone(), e))?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let (id, is_tar) = match file_name.strip_suffix(".tar") {
            Some(stem) => (stem.to_owned(), true),
            None => (file_name.clone(), false),
        };
        // A folder wins over a tar of the same id, whichever is read first.
        if check_id(&id).is_err() || (is_tar && found.contains_key(&id)) {
            continue;
        }
        if let Some(listed) = listed_entry(dir, &id, is_tar) {
            found.insert(id, listed);
        }
    }
    Ok(found.into_values().collect())
}

/// One entry of a folder store as a listing shows it; `None` when it is no bundle.
fn listed_entry(dir: &Path, id: &str, is_tar: bool) -> Option<Listed> {
    if is_tar {
        let path = dir.join(format!("{id}.tar"));
        let meta = std::fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_file())?;
        return Some(Listed {
            id: id.to_owned(),
            location: Location::TarFile(path),
            size: meta.len(),
            modified: meta.modified().ok(),
        });
    }
    let path = dir.join(id);
    std::fs::symlink_metadata(&path)
        .ok()
        .filter(|m| m.is_dir())?;
    let log = std::fs::symlink_metadata(path.join(EVENTS_FILE))
        .ok()
        .filter(|m| m.is_file())?;
    Some(Listed {
        id: id.to_owned(),
        size: folder_size(&path),
        modified: log.modified().ok(),
        location: Location::Folder(path),
    })
}

/// The sum of the sizes of the regular files under `dir` (links not followed).
fn folder_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => folder_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}
