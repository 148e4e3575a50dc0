//! Bundles in object storage: a batch's `--out s3://bucket/prefix` (or `file:///folder`)
//! through the `object_store` crate, each bundle one object `<prefix>/<id>.tar` (a plain tar
//! of its folder); and [`load_bundle`], which turns what a user names — a bundle folder, a
//! bundle `.tar`, or such a URL — into a folder the evidence crate can read.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload};

/// An object store and the prefix under which a batch keeps its bundles.
pub(crate) struct Bucket {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    /// The URL as the user gave it, for messages.
    pub(crate) url: String,
}

/// Whether `text` names object storage rather than a local path.
pub(crate) fn is_url(text: &str) -> bool {
    text.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// The store and the object path a URL names: `s3://bucket/key…` (configured by the
/// standard `AWS_*` variables: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`, …) or `file:///folder/…`.
fn store_for(text: &str) -> Result<(Arc<dyn ObjectStore>, ObjectPath), String> {
    let url = url::Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
    let path = ObjectPath::from_url_path(url.path())
        .map_err(|e| format!("`{text}`: not a usable object path: {e}"))?;
    match url.scheme() {
        "s3" | "s3a" => {
            let store = object_store::aws::AmazonS3Builder::from_env()
                .with_url(text)
                .build()
                .map_err(|e| format!("`{text}`: {e}"))?;
            Ok((Arc::new(store), path))
        }
        "file" => Ok((Arc::new(object_store::local::LocalFileSystem::new()), path)),
        other => Err(format!(
            "`{text}`: `{other}://` is not supported (use s3://BUCKET/PREFIX, with \
             AWS_ENDPOINT_URL for another S3-compatible store, or file:///FOLDER)"
        )),
    }
}

impl Bucket {
    /// The bucket and prefix of a batch's `--out` URL.
    pub(crate) fn open(text: &str) -> Result<Self, String> {
        let (store, prefix) = store_for(text)?;
        Ok(Bucket {
            store,
            prefix,
            url: text.trim_end_matches('/').to_string(),
        })
    }

    fn object(&self, id: &str) -> ObjectPath {
        self.prefix.clone().join(format!("{id}.tar"))
    }

    /// Where the bundle of `id` is, as a URL.
    pub(crate) fn object_url(&self, id: &str) -> String {
        format!("{}/{id}.tar", self.url)
    }

    /// Write and delete a probe object, so that a destination that refuses writes is
    /// found before anything runs.
    pub(crate) async fn probe(&self) -> Result<(), String> {
        let probe = self.prefix.clone().join(".provrun-batch-probe");
        self.store
            .put(
                &probe,
                PutPayload::from_static(b"provrun batch write probe\n"),
            )
            .await
            .map_err(|e| format!("cannot write to `{}`: {e}", self.url))?;
        self.store
            .delete(&probe)
            .await
            .map_err(|e| format!("cannot delete from `{}`: {e}", self.url))
    }

    /// The tar of bundle `id`, if the bucket holds one.
    pub(crate) async fn fetch(&self, id: &str) -> Result<Option<bytes::Bytes>, String> {
        let object = self.object(id);
        match self.store.get(&object).await {
            Ok(got) => got
                .bytes()
                .await
                .map(Some)
                .map_err(|e| format!("cannot read `{}`: {e}", self.object_url(id))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(format!("cannot read `{}`: {e}", self.object_url(id))),
        }
    }

    /// Upload the bundle folder `bundle` as `<prefix>/<id>.tar` (one PUT: the object
    /// appears whole or not at all).
    pub(crate) async fn upload(&self, id: &str, bundle: &Path) -> Result<(), String> {
        let folder = bundle.to_path_buf();
        let bytes = tokio::task::spawn_blocking(move || tar_folder(&folder))
            .await
            .map_err(|e| format!("cannot pack the bundle: {e}"))??;
        self.store
            .put(&self.object(id), PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| format!("cannot upload `{}`: {e}", self.object_url(id)))
    }
}

/// A plain tar of a folder's contents (names relative to it, in sorted order, symlinks
/// kept as links, times and owners zeroed so that the same bundle gives the same bytes).
pub(crate) fn tar_folder(folder: &Path) -> Result<Vec<u8>, String> {
    fn walk(dir: &Path, rel: &Path, out: &mut Vec<(PathBuf, PathBuf)>) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = e.path();
            let name = rel.join(e.file_name());
            let is_dir = e.file_type()?.is_dir();
            out.push((path.clone(), name.clone()));
            if is_dir {
                walk(&path, &name, out)?;
            }
        }
        Ok(())
    }
    let mut items = Vec::new();
    walk(folder, Path::new(""), &mut items)
        .map_err(|e| format!("cannot read `{}`: {e}", folder.display()))?;
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Deterministic);
    for (path, name) in items {
        builder
            .append_path_with_name(&path, &name)
            .map_err(|e| format!("cannot pack `{}`: {e}", path.display()))?;
    }
    builder
        .into_inner()
        .map_err(|e| format!("cannot pack `{}`: {e}", folder.display()))
}

/// Unpack a bundle tar into `into` (made if missing). Entries that would land outside it
/// (absolute names, `..`, links out) are refused by the tar crate's `unpack_in`.
pub(crate) fn untar(bytes: &[u8], into: &Path) -> Result<(), String> {
    std::fs::create_dir_all(into).map_err(|e| format!("cannot make `{}`: {e}", into.display()))?;
    let mut archive = tar::Archive::new(Cursor::new(bytes));
    archive.set_preserve_permissions(false);
    archive.set_preserve_mtime(false);
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar archive: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("not a tar archive: {e}"))?;
        let name = entry
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        match entry.unpack_in(into) {
            Ok(true) => {}
            Ok(false) => return Err(format!("the archive's entry `{name}` leaves the bundle")),
            Err(e) => return Err(format!("cannot unpack `{name}`: {e}")),
        }
    }
    Ok(())
}

/// A bundle ready to read: a folder, perhaps unpacked into a temporary one that lives as
/// long as this value.
pub(crate) struct LoadedBundle {
    /// The bundle folder.
    pub(crate) path: PathBuf,
    _unpacked: Option<tempfile::TempDir>,
}

/// What `verify`, `show` (and other readers of a bundle) accept: a bundle folder, a bundle
/// `.tar` file (as `batch` uploads), or the URL of one (`s3://bucket/prefix/id.tar`,
/// `file:///…/id.tar`). A tar is unpacked into a temporary folder.
pub(crate) fn load_bundle(arg: &Path) -> Result<LoadedBundle, String> {
    let text = arg.to_string_lossy();
    let bytes = if is_url(&text) {
        let (store, object) = store_for(&text)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        runtime.block_on(async {
            match store.get(&object).await {
                Ok(got) => got
                    .bytes()
                    .await
                    .map_err(|e| format!("cannot read `{text}`: {e}")),
                Err(object_store::Error::NotFound { .. }) => Err(format!("no bundle at `{text}`")),
                Err(e) => Err(format!("cannot read `{text}`: {e}")),
            }
        })?
    } else if arg.is_file() {
        std::fs::read(arg)
            .map_err(|e| format!("cannot read `{}`: {e}", arg.display()))?
            .into()
    } else {
        return Ok(LoadedBundle {
            path: arg.to_path_buf(),
            _unpacked: None,
        });
    };
    let tmp = tempfile::Builder::new()
        .prefix("provrun-bundle-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary folder: {e}"))?;
    let name = Path::new(text.rsplit('/').next().unwrap_or("bundle"))
        .file_stem()
        .map_or_else(|| "bundle".into(), |s| s.to_os_string());
    let path = tmp.path().join(name);
    untar(&bytes, &path).map_err(|e| format!("`{text}`: {e}"))?;
    Ok(LoadedBundle {
        path,
        _unpacked: Some(tmp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_url("s3://bucket/prefix"));
        assert!(is_url("file:///tmp/x"));
        assert!(!is_url("/tmp/x"));
        assert!(!is_url("relative/a://b"));
        assert!(!is_url("://x"));
    }

    #[test]
    fn a_folder_round_trips_through_tar_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("blobs/sha256")).unwrap();
        std::fs::write(src.join("events.jsonl"), "{}\n").unwrap();
        std::fs::write(src.join("blobs/sha256/ab"), [0u8, 1, 2, 255]).unwrap();
        let tar = tar_folder(&src).unwrap();
        assert_eq!(tar, tar_folder(&src).unwrap(), "not deterministic");
        let back = dir.path().join("back");
        untar(&tar, &back).unwrap();
        assert_eq!(std::fs::read(back.join("events.jsonl")).unwrap(), b"{}\n");
        assert_eq!(
            std::fs::read(back.join("blobs/sha256/ab")).unwrap(),
            [0u8, 1, 2, 255]
        );
    }

    #[test]
    fn an_archive_that_leaves_its_folder_is_refused() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(2);
        header.set_mode(0o644);
        // Written raw: the builder itself refuses `..` in names.
        let name = b"../escaped";
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        header.set_cksum();
        builder.append(&header, &b"hi"[..]).unwrap();
        let tar = builder.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let into = dir.path().join("in");
        assert!(untar(&tar, &into).is_err());
        assert!(!dir.path().join("escaped").exists());
        assert!(untar(b"not a tar at all, not even close to 512 bytes", &into).is_err());
    }
}
