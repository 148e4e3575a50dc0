//! The names of a bundle's own files, which the recorder, the lock and the readers share.

/// The evidence log.
pub(crate) const EVENTS_FILE: &str = "events.jsonl";
/// The in-toto statement over the bundle.
pub(crate) const STATEMENT_FILE: &str = "statement.json";
