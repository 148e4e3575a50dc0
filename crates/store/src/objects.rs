//! A prefix of object storage read and written object by object: files of a layout other
//! programs also read as plain objects (a transparency log's tiles and checkpoint), under an
//! `s3://`, `file://` or `http(s)://` URL. Keys are `/`-separated paths below the prefix.
//! Writes are conditional where the store allows it: an object made only if it is not
//! there (`If-None-Match: *`), or replaced only if it is still the version read
//! (`If-Match: ETAG`) — what several writers need to share one log safely.

use std::sync::Arc;

use futures_util::StreamExt as _;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt as _, PutMode, PutPayload, UpdateVersion};

use crate::error::{Result, StoreError};

/// The version of an object as read: what a conditional replacement must still find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(UpdateVersion);

/// Objects below one URL prefix.
#[derive(Debug, Clone)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    /// The URL as given, without a trailing `/`, for messages.
    url: String,
    /// Whether the store can list its objects (a plain web server cannot).
    listable: bool,
}

impl Objects {
    /// The objects below `url`: `s3://BUCKET/PREFIX` (configured by the standard `AWS_*`
    /// variables), `file:///FOLDER` or `http(s)://HOST/PATH` (read only, and not listed).
    ///
    /// # Errors
    ///
    /// [`StoreError::BadUrl`] for a URL that is not one, of a scheme not spoken here, or
    /// whose path is no object path.
    pub fn open(url: &str) -> Result<Objects> {
        let trimmed = url.trim_end_matches('/');
        let bad = |message: String| StoreError::BadUrl {
            url: url.to_owned(),
            message,
        };
        let parsed = url::Url::parse(trimmed).map_err(|e| bad(format!("not a URL: {e}")))?;
        if matches!(parsed.scheme(), "http" | "https") {
            // Plain http:// is allowed when it is what the URL says (a ledger served on
            // loopback or inside a cluster).
            let options =
                object_store::ClientOptions::new().with_allow_http(parsed.scheme() == "http");
            let store = object_store::http::HttpBuilder::new()
                .with_url(trimmed)
                .with_client_options(options)
                .build()
                .map_err(|e| bad(e.to_string()))?;
            return Ok(Objects {
                store: Arc::new(store),
                prefix: ObjectPath::default(),
                url: trimmed.to_owned(),
                listable: false,
            });
        }
        let (store, prefix) = crate::bucket::store_for(trimmed)?;
        Ok(Objects {
            store,
            prefix,
            url: trimmed.to_owned(),
            listable: true,
        })
    }

    /// The URL of the prefix.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether [`Objects::list`] can answer (a plain web server cannot be listed).
    pub fn listable(&self) -> bool {
        self.listable
    }

    fn path(&self, key: &str) -> Result<ObjectPath> {
        let mut path = self.prefix.clone();
        for part in key.split('/') {
            if part.is_empty() || part == "." || part == ".." {
                return Err(StoreError::BadUrl {
                    url: format!("{}/{key}", self.url),
                    message: "not a plain object key".into(),
                });
            }
            path = path.join(part);
        }
        Ok(path)
    }

    /// The bytes of the object at `key`, if there is one; an object larger than `max`
    /// bytes is refused (its size is checked before its bytes are read where the store
    /// says it, and while reading otherwise).
    ///
    /// # Errors
    ///
    /// [`StoreError::Object`] when the store fails or the object is larger than `max`.
    pub async fn get(&self, key: &str, max: u64) -> Result<Option<Vec<u8>>> {
        let name = format!("{}/{key}", self.url);
        let got = match self.store.get(&self.path(key)?).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(StoreError::object("read", name, e)),
        };
        let too_large = |size: u64| StoreError::Object {
            action: "read",
            name: name.clone(),
            source: Box::new(object_store::Error::Generic {
                store: "provrun",
                source: format!("{size} bytes or more, larger than the {max} bytes allowed").into(),
            }),
        };
        if got.meta.size > max {
            return Err(too_large(got.meta.size));
        }
        let mut out = Vec::with_capacity(got.meta.size as usize);
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| StoreError::object("read", &name, e))?;
            out.extend_from_slice(&chunk);
            if out.len() as u64 > max {
                return Err(too_large(out.len() as u64));
            }
        }
        Ok(Some(out))
    }

    /// The bytes of the object at `key` and its version (what [`Objects::replace`] needs),
    /// if there is one; at most `max` bytes.
    ///
    /// # Errors
    ///
    /// As [`Objects::get`].
    pub async fn get_versioned(&self, key: &str, max: u64) -> Result<Option<(Vec<u8>, Version)>> {
        let name = format!("{}/{key}", self.url);
        let got = match self.store.get(&self.path(key)?).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(StoreError::object("read", name, e)),
        };
        let version = Version(UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        });
        if got.meta.size > max {
            return Err(StoreError::Object {
                action: "read",
                name,
                source: Box::new(object_store::Error::Generic {
                    store: "provrun",
                    source: format!("{} bytes, more than the {max} allowed", got.meta.size).into(),
                }),
            });
        }
        let bytes = got
            .bytes()
            .await
            .map_err(|e| StoreError::object("read", &name, e))?;
        Ok(Some((bytes.to_vec(), version)))
    }

    /// Make the object at `key` with `bytes`, only if there is none (`If-None-Match: *`).
    /// `Ok(false)` when one is already there (it is left as it is).
    ///
    /// # Errors
    ///
    /// [`StoreError::Object`] when the store fails, or cannot make an object conditionally.
    pub async fn create(&self, key: &str, bytes: Vec<u8>) -> Result<bool> {
        match self
            .store
            .put_opts(
                &self.path(key)?,
                PutPayload::from(bytes),
                PutMode::Create.into(),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(StoreError::object(
                "write",
                format!("{}/{key}", self.url),
                e,
            )),
        }
    }

    /// Replace the object at `key` with `bytes`, only if it is still `version` (`If-Match`).
    /// `Ok(false)` when it changed meanwhile (nothing is written).
    ///
    /// # Errors
    ///
    /// [`StoreError::Object`] when the store fails, or cannot replace conditionally.
    pub async fn replace(&self, key: &str, bytes: Vec<u8>, version: &Version) -> Result<bool> {
        match self
            .store
            .put_opts(
                &self.path(key)?,
                PutPayload::from(bytes),
                PutMode::Update(version.0.clone()).into(),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) => Ok(false),
            Err(e) => Err(StoreError::object(
                "replace",
                format!("{}/{key}", self.url),
                e,
            )),
        }
    }

    /// Delete the object at `key` (nothing there is not an error).
    ///
    /// # Errors
    ///
    /// [`StoreError::Object`] when the store fails.
    pub async fn delete(&self, key: &str) -> Result<()> {
        match self.store.delete(&self.path(key)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(StoreError::object(
                "delete",
                format!("{}/{key}", self.url),
                e,
            )),
        }
    }

    /// Every object key below `under` (a key prefix such as `tile`), relative to the
    /// prefix, sorted.
    ///
    /// # Errors
    ///
    /// [`StoreError::Object`] when the store cannot list (a plain web server) or fails.
    pub async fn list(&self, under: &str) -> Result<Vec<String>> {
        if !self.listable {
            return Err(StoreError::BadUrl {
                url: self.url.clone(),
                message: "a web server's objects cannot be listed".into(),
            });
        }
        let base = self.path(under)?;
        let skip = self.prefix.parts().count();
        let mut listing = self.store.list(Some(&base));
        let mut out = Vec::new();
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| StoreError::object("list", &self.url, e))?;
            let parts: Vec<String> = meta
                .location
                .parts()
                .skip(skip)
                .map(|p| p.as_ref().to_owned())
                .collect();
            out.push(parts.join("/"));
        }
        out.sort();
        Ok(out)
    }
}
