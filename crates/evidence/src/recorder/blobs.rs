//! The blob store: content-addressed blobs, in a pack (layout 2) or one file each
//! (layout 1), written (and synced as the policy says) before any event names them.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::commit::SyncItem;
use super::durability::DurableState;
use super::guard::lock;
use super::{Durability, Durable, INLINE_LIMIT, Recorder};
use crate::canonical::to_canonical_string;
use crate::error::{EvidenceError, Result};
use crate::event::{BlobRef, Digest};
use crate::fsutil::{self, sha256_hex};
use crate::pack::PackWriter;

impl Recorder {
    /// Store `bytes` as a content-addressed blob (in the pack, or at
    /// `blobs/sha256/<hex>` in a [`BlobLayout::Loose`](super::BlobLayout::Loose) bundle) and return its ref. The blob is written completely (and, under `PerEvent`/`GroupCommit`, synced)
    /// before this returns, so before any event that names it.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Io`] when the blob cannot be written or synced;
    /// [`EvidenceError::LogBroken`] after an earlier failed write or sync;
    /// [`EvidenceError::OutOfOrder`] once the bundle is finished.
    pub fn put_blob(&self, bytes: &[u8], media_type: &str) -> Result<BlobRef> {
        self.put_blob_async(bytes, media_type).wait()
    }

    /// Like [`Recorder::put_blob`], the sync (if any) running on the sync thread.
    pub fn put_blob_async(&self, bytes: &[u8], media_type: &str) -> Durable<BlobRef> {
        match self.put_blob_inner(bytes, media_type, true) {
            Ok(d) => d,
            Err(e) => Durable::ready(Err(e)),
        }
    }

    /// Store a blob that the next event recorded will name: like
    /// [`Recorder::put_blob_async`], but under `GroupCommit` it does not ask for a sync of
    /// its own: the blob is synced in the same batch as (and before) the log line of the
    /// next event, whose [`Durable`] therefore covers both (the returned one resolves at
    /// once). Under the other policies it is
    /// [`Recorder::put_blob_async`] (under `PerEvent` it resolves once the blob is synced).
    pub fn put_blob_for_next_event(&self, bytes: &[u8], media_type: &str) -> Durable<BlobRef> {
        let wait = self.inner.durability != Durability::GroupCommit;
        match self.put_blob_inner(bytes, media_type, wait) {
            Ok(d) => d,
            Err(e) => Durable::ready(Err(e)),
        }
    }

    pub(super) fn put_blob_inner(
        &self,
        bytes: &[u8],
        media_type: &str,
        wait: bool,
    ) -> Result<Durable<BlobRef>> {
        if let Some(observer) = self.observer() {
            observer.blob(bytes, media_type);
        }
        if let Some(pack) = &self.inner.pack {
            return self.put_packed(pack, bytes, media_type, wait);
        }
        let hex = sha256_hex(bytes);
        let blob = BlobRef {
            digest: Digest {
                sha256: hex.clone(),
            },
            size: bytes.len() as u64,
            media_type: media_type.to_owned(),
        };
        let dir = self.inner.root.join("blobs/sha256");
        let written = fsutil::store_new(&dir, &hex, bytes)
            .map_err(|e| EvidenceError::io("write blob", dir.join(&hex), e))?;
        let durability = self.inner.durability;
        let Some(shared) = self.inner.sync.as_ref().filter(|_| durability.syncs()) else {
            return Ok(Durable::ready(Ok(blob)));
        };
        // The blob's data and its name in `blobs/sha256/` are synced before the log.
        let item = match written {
            // Per-event policies sync it soon: keep the descriptor instead of reopening.
            Some(f) if durability.syncs_each_event() => SyncItem::File(f, dir.join(&hex)),
            _ => SyncItem::Path(dir.join(&hex)),
        };
        let mut st = lock(&shared.state);
        st.pending_files.push(item);
        st.pending_dirs.push(dir);
        st.dirty = true;
        if !durability.syncs_each_event() || !wait {
            return Ok(Durable::ready(Ok(blob)));
        }
        let ticket = shared.request_locked(&mut st);
        drop(st);
        Ok(Durable {
            state: DurableState::Waiting {
                shared: Arc::clone(shared),
                ticket,
                value: Some(blob),
            },
        })
    }

    /// [`Recorder::put_blob_inner`] for a pack: append the blob's new chunks and its
    /// index record, then have the pack synced as the policy says (before any event
    /// naming the blob, under the per-event policies).
    pub(super) fn put_packed(
        &self,
        pack: &Mutex<PackWriter>,
        bytes: &[u8],
        media_type: &str,
        wait: bool,
    ) -> Result<Durable<BlobRef>> {
        let durability = self.inner.durability;
        let (digest, file) = {
            let mut w = lock(pack);
            let (digest, _) = w
                .put(bytes)
                .map_err(|e| EvidenceError::io("write blob", &w.path, e))?;
            tracing::trace!(pack_len = w.len(), "blob packed");
            let file = match durability.syncs() {
                true => Some(SyncItem::Pack(
                    w.handle()
                        .map_err(|e| EvidenceError::io("open", &w.path, e))?,
                    w.path.clone(),
                )),
                false => None,
            };
            (digest, file)
        };
        let blob = BlobRef {
            digest: Digest {
                sha256: hex::encode(digest),
            },
            size: bytes.len() as u64,
            media_type: media_type.to_owned(),
        };
        let (Some(shared), Some(file)) = (self.inner.sync.as_ref(), file) else {
            return Ok(Durable::ready(Ok(blob)));
        };
        let mut st = lock(&shared.state);
        if !st
            .pending_files
            .iter()
            .any(|f| matches!(f, SyncItem::Pack(..)))
        {
            st.pending_files.push(file);
        }
        st.dirty = true;
        if !durability.syncs_each_event() || !wait {
            return Ok(Durable::ready(Ok(blob)));
        }
        let ticket = shared.request_locked(&mut st);
        drop(st);
        Ok(Durable {
            state: DurableState::Waiting {
                shared: Arc::clone(shared),
                ticket,
                value: Some(blob),
            },
        })
    }

    /// Prepare a tool argument or result for a [`crate::ToolCalled`] payload: returns
    /// `(value, None)` when its canonical JSON is at most [`INLINE_LIMIT`] bytes, else
    /// stores it as an `application/json` blob and returns `(null, Some(blob))`.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Canonical`] when `value` holds a number that is not finite; as
    /// [`Recorder::put_blob`] when it is stored as a blob.
    pub fn tool_value(&self, value: Value) -> Result<(Value, Option<BlobRef>)> {
        let text = to_canonical_string(&value)?;
        if text.len() <= INLINE_LIMIT {
            return Ok((value, None));
        }
        let blob = self.put_blob(text.as_bytes(), "application/json")?;
        Ok((Value::Null, Some(blob)))
    }
}
