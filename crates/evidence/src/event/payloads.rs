//! The [`Payload`] trait and the payload of every event type but `tool_called` (in
//! `tool_called.rs`): run start and end, staged inputs, outputs produced or skipped,
//! model requests, imported traces, declarations and steering messages. Each payload a
//! caller builds implements `Default`, so a literal ends with `..Default::default()` and
//! survives new fields (see the crate's documentation).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{BlobRef, Confidence, EventType};

/// A typed event payload: knows its event type and the confidence it is recorded with.
pub trait Payload: Serialize {
    /// The event type this payload is written as.
    const TYPE: EventType;
    /// The confidence it is written with.
    fn confidence(&self) -> Confidence {
        Confidence::Observed
    }
}

/// A tool offered to the model, with the digest of its JSON Schema.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Tool name.
    pub name: String,
    /// SHA-256 hex of the canonical JSON of the tool's parameter schema.
    pub schema_sha256: String,
}

/// Payload of `run_started` (seq 0).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStarted {
    /// Identifier of what ran the agent, e.g. `provrun/0.1.0`; copied into the statement.
    pub builder: String,
    /// SHA-256 hex of the agent spec's bytes; copied into the statement.
    pub agent_spec_digest: String,
    /// Agent name.
    pub agent: String,
    /// Model identifier.
    pub model: String,
    /// Tools offered, with schema digests.
    pub tools: Vec<ToolInfo>,
    /// Run limits (steps, quotas...), as JSON.
    pub limits: Value,
    /// Anything else the runtime wants on record (e.g. a degraded sandbox); `null` if none.
    #[serde(default)]
    pub details: Value,
}
impl Payload for RunStarted {
    const TYPE: EventType = EventType::RunStarted;
}

/// Payload of `input_staged` and `output_produced`: one file of the bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Path relative to `input/` or `output/`, `/`-separated.
    pub path: String,
    /// SHA-256 hex of the file's bytes.
    pub sha256: String,
    /// Length in bytes.
    pub size: u64,
}

/// Payload of `input_staged`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InputStaged(pub FileRecord);
impl Payload for InputStaged {
    const TYPE: EventType = EventType::InputStaged;
}

/// Payload of `output_produced`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OutputProduced(pub FileRecord);
impl Payload for OutputProduced {
    const TYPE: EventType = EventType::OutputProduced;
}

/// Payload of `output_skipped`: an entry found under `output/` when the run (or a
/// paused segment) ended that is not one of its outputs. The recorder removes it from
/// the bundle, so the bundle holds regular files and folders only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSkipped {
    /// Path relative to `output/`, `/`-separated, escaped losslessly: bytes that are not
    /// UTF-8 are written `\xHH` and a backslash `\\` (see [`escape_path_bytes`]).
    pub path: String,
    /// The path's raw bytes, lower-case hex (what `path` escapes).
    pub path_hex: String,
    /// What the entry is: `symlink`, `fifo`, `socket`, `block_device`, `char_device`,
    /// `file`, `directory` or `unknown`.
    pub kind: String,
    /// Why it was left out: `not_regular` (not a regular file or folder),
    /// `name_not_utf8`, `over_quota` (its apparent size does not fit in what the output
    /// quota has left), `too_deep` (nested deeper than the recorder walks) or
    /// `unreadable`.
    pub reason: String,
    /// Apparent size in bytes of a file (as its metadata says; for `over_quota`, what
    /// did not fit), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}
impl Payload for OutputSkipped {
    const TYPE: EventType = EventType::OutputSkipped;
}

/// Escape a path's raw bytes losslessly as text: valid UTF-8 stays as it is, except a
/// backslash, written `\\`; every byte that is not part of valid UTF-8 is written
/// `\xHH` (two lower-case hex digits).
pub fn escape_path_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Payload of `model_called`: one model request, streamed or not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelCalled {
    /// Model identifier.
    pub model: String,
    /// Whether the streamed API was used.
    pub stream: bool,
    /// The raw request bytes, as a blob.
    pub request: Option<BlobRef>,
    /// The raw response bytes (SSE verbatim when streamed), as a blob.
    pub response: Option<BlobRef>,
    /// Token usage as the model reported it.
    pub usage: Value,
    /// Why the model stopped, if known.
    pub finish_reason: Option<String>,
    /// Wall time of the request.
    pub duration_ms: u64,
    /// The error, if the request failed.
    pub error: Option<String>,
    /// Each HTTP attempt when the request was retried (status, error, duration,
    /// `Retry-After`), oldest first; empty when it took one attempt or none was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Value>,
    /// The model handed back no wire bytes (a hand-written `Model`): `response` holds its
    /// parsed response rendered by the runtime as a Chat Completions JSON body, not bytes
    /// a server sent. Added later; absent means `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub response_rendered: bool,
    /// The HTTP facts of an exchange a recording proxy saw (`provrun wrap`): `api`,
    /// `method`, `path`, `status`, `upstream` and the headers each way without
    /// credentials. Added later; absent for a runtime's own requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Value>,
    /// The tool calls the response asked for, as the wire parser read them (`call_id`,
    /// `name`), when the exchange was recorded by a proxy that does not run them. Added
    /// later; absent (empty) otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<Value>,
}
impl Payload for ModelCalled {
    const TYPE: EventType = EventType::ModelCalled;
}

/// Payload of `trace_imported`: the whole message history, once after the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceImported {
    /// The history, as a blob.
    pub trace: BlobRef,
    /// Name of the history's format, e.g. `provrun-messages/1`.
    pub format: String,
    /// Number of messages in it.
    pub messages: u64,
    /// Where the history was read from, when it was a file the run left (a wrapped
    /// program's session log, relative to its private `HOME`). Added later; absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}
impl Payload for TraceImported {
    const TYPE: EventType = EventType::TraceImported;
    fn confidence(&self) -> Confidence {
        Confidence::Parsed
    }
}

/// How a run (or a segment of it) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// The agent answered.
    Finished,
    /// The run failed; the bundle still verifies.
    Failed,
    /// The run was cancelled.
    Cancelled,
    /// The run waits (approval, client round trip) and will be resumed with
    /// [`crate::Recorder::reopen`].
    Paused,
}

impl RunStatus {
    /// The name used in event lines.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Paused => "paused",
        }
    }
}

/// Payload of `run_finished`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFinished {
    /// How the run ended.
    pub status: RunStatus,
    /// Number of events in the log including this one (= its seq + 1).
    pub event_count: u64,
    /// Number of `output_produced` events directly before this one: the outputs of
    /// the run (or of the paused segment).
    pub outputs: u64,
    /// Usage totals (tokens, requests...), as JSON.
    pub usage: Value,
    /// Error message of a failed run.
    #[serde(default)]
    pub error: Option<String>,
}
impl Payload for RunFinished {
    const TYPE: EventType = EventType::RunFinished;
}

/// Payload of `declared`: what a tool says, unchecked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Declared {
    /// Who declares it (the tool's name, set by the runtime when it hands out the
    /// [`crate::Declarer`]); `null` if not set.
    pub source: Option<String>,
    /// What kind of statement this is, free-form (e.g. `license`, `fetched_url`).
    pub kind: String,
    /// The statement itself.
    pub data: Value,
}
impl Payload for Declared {
    const TYPE: EventType = EventType::Declared;
    fn confidence(&self) -> Confidence {
        Confidence::Declared
    }
}

/// Payload of `steered`: a message the caller sent the running agent (`RunControl::steer`,
/// `provrun run --steer-file`), which the loop added to the history as a user message
/// just before model request `before_request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steered {
    /// The message's text (UTF-8), as a blob.
    pub text: BlobRef,
    /// The model request (counted from 1 over the whole run, resumes included) that is
    /// the first to carry the message.
    pub before_request: u64,
}
impl Payload for Steered {
    const TYPE: EventType = EventType::Steered;
}
