//! Watching a recorder: an observer is told of each blob stored and each event written,
//! as they happen, so a caller can act on a run while it goes (live telemetry).

use std::sync::Arc;

use super::Recorder;
use crate::event::Event;

/// Told of a recorder's writes as they happen. Both calls come from the thread that
/// writes (the event's under the log's lock, so in the log's order): they must return
/// at once (hand the work to another thread) and must not record anything themselves.
pub trait RecordObserver: Send + Sync {
    /// A blob is being stored (`bytes` as stored, and its media type); the events that
    /// name it come after.
    fn blob(&self, bytes: &[u8], media_type: &str);
    /// An event was written to the log (its line is in the file).
    fn event(&self, event: &Event);
}

impl Recorder {
    /// Tell `observer` of every blob and event written from now on, by this recorder and
    /// its clones. A recorder takes one observer; a second is refused (returned).
    pub fn observe(
        &self,
        observer: Arc<dyn RecordObserver>,
    ) -> std::result::Result<(), Arc<dyn RecordObserver>> {
        self.inner.observer.set(observer)
    }

    pub(super) fn observer(&self) -> Option<&Arc<dyn RecordObserver>> {
        self.inner.observer.get()
    }
}
