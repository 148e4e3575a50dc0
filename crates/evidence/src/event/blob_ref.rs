//! References to blobs: a SHA-256 [`Digest`], a [`BlobRef`] and how one is recognised
//! in a payload, and every blob ref of a JSON value collected.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A SHA-256 digest as in-toto and blob refs spell it: `{"sha256": hex}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Digest {
    /// Lower-case hex of the SHA-256 digest.
    pub sha256: String,
}

/// A reference to a content-addressed blob: in the bundle's pack (`blobs/pack`), or at
/// `blobs/sha256/<hex>` in a bundle of the first (loose) layout. Read it with
/// [`crate::read_blob`] under either.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlobRef {
    /// Digest of the blob's bytes.
    pub digest: Digest,
    /// Length in bytes.
    pub size: u64,
    /// Media type of the bytes, e.g. `application/json` or `text/event-stream`.
    pub media_type: String,
}

impl BlobRef {
    /// Path of the blob relative to the bundle root in a bundle of the first, loose
    /// layout ([`crate::BlobLayout::Loose`]); a packed blob has no path of its own.
    pub fn relative_path(&self) -> String {
        format!("blobs/sha256/{}", self.digest.sha256)
    }

    /// Recognise a JSON value that is a blob ref: an object with exactly the keys
    /// `digest` (an object with a string `sha256`), `size` (an unsigned integer) and
    /// `media_type` (a string).
    pub fn from_value(v: &Value) -> Option<BlobRef> {
        let obj = v.as_object()?;
        if obj.len() != 3 || !obj.contains_key("media_type") {
            return None;
        }
        let digest = obj.get("digest")?.as_object()?;
        if digest.len() != 1 {
            return None;
        }
        Some(BlobRef {
            digest: Digest {
                sha256: digest.get("sha256")?.as_str()?.to_owned(),
            },
            size: obj.get("size")?.as_u64()?,
            media_type: obj.get("media_type")?.as_str()?.to_owned(),
        })
    }
}

/// Collect every blob ref anywhere in a JSON value.
pub(crate) fn collect_refs(v: &Value, out: &mut Vec<BlobRef>) {
    if let Some(b) = BlobRef::from_value(v) {
        out.push(b);
        return;
    }
    match v {
        Value::Array(items) => items.iter().for_each(|i| collect_refs(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect_refs(i, out)),
        _ => {}
    }
}
