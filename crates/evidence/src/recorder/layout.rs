//! Which of the two blob layouts a bundle uses, and the names the layouts give in the bundle
//! and in `run_started`.

use serde_json::Value;

/// How a bundle stores its blobs. Readers take both; [`Recorder::create`](super::Recorder::create) writes
/// [`BlobLayout::Pack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BlobLayout {
    /// Layout 1: one file per blob, `blobs/sha256/<hex>` (every bundle written before
    /// the pack existed). `run_started` has no `blob_store` member.
    Loose,
    /// Layout 2: one append-only pack, `blobs/pack`, whose blobs are cut into
    /// content-defined chunks, each stored once and compressed. `run_started` says
    /// `"blob_store": "pack"`.
    #[default]
    Pack,
}

/// The `run_started` payload member that names the blob layout.
pub(crate) const BLOB_STORE_KEY: &str = "blob_store";
/// The pack's path inside a bundle.
pub(crate) const PACK_FILE: &str = "blobs/pack";

impl BlobLayout {
    /// The layout's name as `run_started.blob_store` spells it (`loose` is never written:
    /// it is the meaning of an absent member).
    pub fn as_str(self) -> &'static str {
        match self {
            BlobLayout::Loose => "loose",
            BlobLayout::Pack => "pack",
        }
    }

    /// The layout a `run_started` payload declares: `Loose` without a `blob_store`
    /// member, `Pack` for `"pack"`; `None` for anything else.
    pub fn of_run_started(payload: &Value) -> Option<BlobLayout> {
        match payload.get(BLOB_STORE_KEY) {
            None => Some(BlobLayout::Loose),
            Some(Value::String(s)) if s == "pack" => Some(BlobLayout::Pack),
            Some(_) => None,
        }
    }
}
