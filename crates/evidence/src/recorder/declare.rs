//! The declarer: the handle tools get, which can append `declared` events only.

use serde_json::Value;

use super::{Durable, Recorder};
use crate::error::Result;
use crate::event::Declared;

impl Recorder {
    /// A handle that can append `declared` events and nothing else; give it to tools.
    pub fn declarer(&self) -> Declarer {
        Declarer {
            recorder: self.clone(),
            source: None,
        }
    }

    /// Like [`Recorder::declarer`], with every event naming `source` (e.g. the tool).
    pub fn declarer_for(&self, source: impl Into<String>) -> Declarer {
        Declarer {
            recorder: self.clone(),
            source: Some(source.into()),
        }
    }
}

/// A handle that can append `declared` events and nothing else. Tools get this, never
/// the [`Recorder`]: they can add claims (with confidence `declared`) but cannot write
/// any other event type or confidence, nor rewrite anything.
#[derive(Clone)]
pub struct Declarer {
    recorder: Recorder,
    source: Option<String>,
}

impl std::fmt::Debug for Declarer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Declarer")
            .field("source", &self.source)
            .finish()
    }
}

impl Declarer {
    fn payload(&self, kind: &str, data: Value) -> Declared {
        Declared {
            source: self.source.clone(),
            kind: kind.to_owned(),
            data,
        }
    }

    /// Append a `declared` event of `kind` with `data`; returns its seq.
    ///
    /// # Errors
    ///
    /// As [`Recorder::record`](crate::Recorder::record).
    pub fn declare(&self, kind: &str, data: Value) -> Result<u64> {
        self.recorder.record(&self.payload(kind, data))
    }

    /// Like [`Declarer::declare`], without blocking on fsync.
    pub fn declare_async(&self, kind: &str, data: Value) -> Durable<u64> {
        self.recorder.record_async(&self.payload(kind, data))
    }
}
