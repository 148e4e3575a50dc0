//! Watching a recorder: an observer is told of each blob stored and each event written,
//! as they happen, so a caller can act on a run while it goes (live telemetry).

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
