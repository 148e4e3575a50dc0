//! The envelope of an event line: the format version, the event types, the confidence
//! levels and [`Event`], one parsed line with its payload as JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version number written in every event line's `v` field.
pub const FORMAT_VERSION: u64 = 1;

/// How the runtime knows what an event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// The runtime saw it happen itself (it made the request, ran the tool, hashed the file).
    Observed,
    /// The runtime read it from someone else's account (a provider's response, an imported trace).
    Parsed,
    /// A tool said so; nothing checked it.
    Declared,
}

impl Confidence {
    /// The name used in event lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Observed => "observed",
            Confidence::Parsed => "parsed",
            Confidence::Declared => "declared",
        }
    }
}

/// The `type` of an event line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// First event (seq 0): who runs what.
    RunStarted,
    /// One per staged input file.
    InputStaged,
    /// One per model request.
    ModelCalled,
    /// One per tool call (twice for a deferred one).
    ToolCalled,
    /// The whole message history, imported once after the run.
    TraceImported,
    /// One per produced output file.
    OutputProduced,
    /// One per entry left in the outputs that is not recorded as an output (a symlink, a
    /// special file, a name that is not UTF-8, a file over the output quota).
    OutputSkipped,
    /// Last event of a run (or of a paused segment).
    RunFinished,
    /// Something a tool declared about itself.
    Declared,
    /// A message the caller sent a running agent, added to the history before a model
    /// request (added later; older logs have none).
    Steered,
    /// An exchange through `provrun wrap`'s proxy that is not a model request (added
    /// later; older logs have none).
    HttpExchanged,
    /// A connection a wrapped program asked the proxy for, tunnelled or refused (added
    /// later).
    ConnectionHandled,
    /// How a wrapped program ended (added later).
    ProgramExited,
    /// A process a confined program started, as the tracer saw it (added later).
    ProcessRan,
    /// How a trail of processes ended (added later).
    TrailRecorded,
    /// An entry of a wrapped program's workspace it changed (added later).
    FileChanged,
    /// A wrapped program's changes to its workspace as a whole (added later).
    WorkspaceChanged,
    /// A tool call seen on a wrapped program's wire, and its result (added later).
    ToolCallSeen,
}

impl EventType {
    /// All event types, in the order they are documented.
    pub const ALL: [EventType; 18] = [
        EventType::RunStarted,
        EventType::InputStaged,
        EventType::ModelCalled,
        EventType::ToolCalled,
        EventType::TraceImported,
        EventType::OutputProduced,
        EventType::OutputSkipped,
        EventType::RunFinished,
        EventType::Declared,
        EventType::Steered,
        EventType::HttpExchanged,
        EventType::ConnectionHandled,
        EventType::ProgramExited,
        EventType::ProcessRan,
        EventType::TrailRecorded,
        EventType::FileChanged,
        EventType::WorkspaceChanged,
        EventType::ToolCallSeen,
    ];

    /// The name used in event lines.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::RunStarted => "run_started",
            EventType::InputStaged => "input_staged",
            EventType::ModelCalled => "model_called",
            EventType::ToolCalled => "tool_called",
            EventType::TraceImported => "trace_imported",
            EventType::OutputProduced => "output_produced",
            EventType::OutputSkipped => "output_skipped",
            EventType::RunFinished => "run_finished",
            EventType::Declared => "declared",
            EventType::Steered => "steered",
            EventType::HttpExchanged => "http_exchanged",
            EventType::ConnectionHandled => "connection_handled",
            EventType::ProgramExited => "program_exited",
            EventType::ProcessRan => "process_ran",
            EventType::TrailRecorded => "trail_recorded",
            EventType::FileChanged => "file_changed",
            EventType::WorkspaceChanged => "workspace_changed",
            EventType::ToolCallSeen => "tool_call_seen",
        }
    }

    /// Parse an event line's `type`.
    pub fn from_name(name: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// One parsed event line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Format version, always [`FORMAT_VERSION`].
    pub v: u64,
    /// The run this log belongs to.
    pub run_id: String,
    /// Position in the log, from 0.
    pub seq: u64,
    /// The previous line's chain hash (the SHA-256 hex of its bytes without the `\n`, or
    /// of its commitment form in a chain-2 log, docs/evidence.md §2a); `None` for seq 0.
    pub prev: Option<String>,
    /// RFC 3339 UTC time the event was recorded.
    pub ts: String,
    /// Event type.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// How the runtime knows.
    pub confidence: Confidence,
    /// Type-specific fields.
    pub payload: Value,
}
