//! Event envelope, event types, confidence levels and the typed payload of every event.
//!
//! The code: `envelope` (an event line: its type, confidence and fields), `blob_ref`
//! (digests and blob refs), `payloads` (each event type's payload but `tool_called`'s),
//! `tool_called`, `wrapped` (the events of a wrapped program's run), `observed` (what a
//! program did besides its traffic: processes, workspace changes, calls on the wire), `typed` (a payload
//! read as its type's struct), `check` (which confidence each payload may carry).

mod blob_ref;
mod check;
mod envelope;
mod observed;
mod payloads;
#[cfg(test)]
mod tests;
mod tool_called;
mod typed;
mod wrapped;

pub(crate) use blob_ref::collect_refs;
pub use blob_ref::{BlobRef, Digest};
pub(crate) use check::{check_confidence, check_payload};
pub use envelope::{Confidence, Event, EventType, FORMAT_VERSION};
pub use observed::{
    ArgvTotal, FileChanged, ProcessRan, ToolCallSeen, TrailOwner, TrailRecorded, WorkspaceChanged,
};
pub use payloads::{
    Declared, FileRecord, InputStaged, ModelCalled, OutputProduced, OutputSkipped, Payload,
    RunFinished, RunStarted, RunStatus, Steered, ToolInfo, TraceImported, escape_path_bytes,
};
pub use tool_called::ToolCalled;
pub use typed::{EventPayload, TypedEvent};
pub use wrapped::{ConnectionHandled, HttpExchanged, ProgramExited, StreamRecord};
