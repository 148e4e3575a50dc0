//! Object storage through the `object_store` crate: which store and object path a URL
//! names, and a [`Bucket`], a prefix under which bundles are kept as `<prefix>/<id>.tar`.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::StreamExt as _;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload};

use crate::error::{Result, StoreError};
use crate::location::check_id;

/// The store and the object path a URL names: `s3://bucket/key…` (configured by the
/// standard `AWS_*` variables: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`, …) or `file:///folder/…`.
pub(crate) fn store_for(text: &str) -> Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    let bad = |message: String| StoreError::BadUrl {
        url: text.to_owned(),
        message,
    };
    let url = url::Url::parse(text).map_err(|e| bad(format!("not a URL: {e}")))?;
    let path = ObjectPath::from_url_path(url.path())
        .map_err(|e| bad(format!("not a usable object path: {e}")))?;
    match url.scheme() {
        "s3" | "s3a" => {
            let store = object_store::aws::AmazonS3Builder::from_env()
                .with_url(text)
                .build()
                .map_err(|e| bad(e.to_string()))?;
            Ok((Arc::new(store), path))
        }
        "file" => Ok((Arc::new(object_store::local::LocalFileSystem::new()), path)),
        other => Err(bad(format!(
            "`{other}://` is not supported (use s3://BUCKET/PREFIX, with AWS_ENDPOINT_URL for \
             another S3-compatible store, or file:///FOLDER)"
        ))),
    }
}

/// The bytes of the object at `path` of `store`; `url` names it in messages.
pub(crate) async fn get(
    store: &dyn ObjectStore,
    path: &ObjectPath,
    url: &str,
) -> Result<Option<Bytes>> {
    match store.get(path).await {
        Ok(got) => got
            .bytes()
            .await
            .map(Some)
            .map_err(|e| StoreError::object("read", url, e)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(StoreError::object("read", url, e)),
    }
}

/// An object store and the prefix under which bundles are kept, one `<id>.tar` each.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    /// The URL as the user gave it, without a trailing `/`, for messages.
    url: String,
}

/// One bundle object a listing found.
pub(crate) struct Object {
    pub(crate) id: String,
    pub(crate) size: u64,
    pub(crate) modified: SystemTime,
}

impl Bucket {
    /// The bucket and prefix a URL names.
    pub(crate) fn open(text: &str) -> Result<Self> {
        let (store, prefix) = store_for(text)?;
        Ok(Bucket {
            store,
            prefix,
            url: text.trim_end_matches('/').to_string(),
        })
    }

    /// The URL of the prefix.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    fn object(&self, id: &str) -> ObjectPath {
        self.prefix.clone().join(format!("{id}.tar"))
    }

    /// Where the bundle of `id` is, as a URL.
    pub(crate) fn object_url(&self, id: &str) -> String {
        format!("{}/{id}.tar", self.url)
    }

    /// Write and delete a probe object, so that a destination that refuses writes is
    /// found before anything is built for it.
    pub(crate) async fn probe(&self) -> Result<()> {
        let probe = self.prefix.clone().join(".provrun-batch-probe");
        self.store
            .put(
                &probe,
                PutPayload::from_static(b"provrun batch write probe\n"),
            )
            .await
            .map_err(|e| StoreError::object("write to", &self.url, e))?;
        self.store
            .delete(&probe)
            .await
            .map_err(|e| StoreError::object("delete from", &self.url, e))
    }

    /// The tar of bundle `id` as a stream of chunks and its size, if the bucket holds it.
    pub(crate) async fn stream(&self, id: &str) -> Result<Option<(u64, crate::TarChunks)>> {
        let url = self.object_url(id);
        match self.store.get(&self.object(id)).await {
            Ok(got) => {
                let size = got.meta.size;
                let stream = got
                    .into_stream()
                    .map(move |chunk| chunk.map_err(|e| StoreError::object("read", &url, e)));
                Ok(Some((size, Box::pin(stream))))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StoreError::object("read", url, e)),
        }
    }

    /// Put `tar` as the object of `id` (one PUT: the object appears whole or not at all).
    pub(crate) async fn put_tar(&self, id: &str, tar: Vec<u8>) -> Result<()> {
        self.store
            .put(&self.object(id), PutPayload::from(tar))
            .await
            .map(|_| ())
            .map_err(|e| StoreError::object("upload", self.object_url(id), e))
    }

    /// Every `<id>.tar` directly under the prefix whose id is a safe name, in id order.
    pub(crate) async fn list(&self) -> Result<Vec<Object>> {
        let mut listing = self.store.list(Some(&self.prefix));
        let mut found = Vec::new();
        let depth = self.prefix.parts().count() + 1;
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| StoreError::object("list", &self.url, e))?;
            if meta.location.parts().count() != depth {
                continue;
            }
            let Some(id) = meta
                .location
                .filename()
                .and_then(|name| name.strip_suffix(".tar"))
            else {
                continue;
            };
            if check_id(id).is_ok() {
                found.push(Object {
                    id: id.to_owned(),
                    size: meta.size,
                    modified: meta.last_modified.into(),
                });
            }
        }
        found.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(found)
    }
}
