//! Event envelope, event types, confidence levels and the typed payload of every event.

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
}

impl EventType {
    /// All event types, in the order they are documented.
    pub const ALL: [EventType; 10] = [
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
    /// SHA-256 hex of the previous line's bytes (without its `\n`); `None` for seq 0.
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Tool name.
    pub name: String,
    /// SHA-256 hex of the canonical JSON of the tool's parameter schema.
    pub schema_sha256: String,
}

/// Payload of `run_started` (seq 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}
impl Payload for ModelCalled {
    const TYPE: EventType = EventType::ModelCalled;
}

/// Payload of `tool_called`: one call of a function tool.
///
/// `arguments` and `result` hold JSON inline; when the canonical JSON of either is longer
/// than [`crate::INLINE_LIMIT`] bytes, [`crate::Recorder::tool_value`] moves it to a blob,
/// the inline field becomes `null` and `arguments_blob` / `result_blob` names the blob.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCalled {
    /// Tool name.
    pub name: String,
    /// The call id as the model sent it (what the wire says; the OpenAI backend makes
    /// one up when the model sent none). Models reuse ids across turns and some send
    /// none, so it need not be unique in a run: [`ToolCalled::run_call_id`] is.
    pub call_id: String,
    /// The call's id in this run, unique whatever the model sent (added later; absent
    /// in older logs, where `call_id` identifies the call): `STEP.N`, the `N`th call
    /// (from 1) of the model's response to request `STEP`, or `STEP.pN` for the `N`th
    /// tool a provider ran itself in that response. A deferred call and its completion
    /// share it; decisions, hooks, `show` and replay use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_call_id: Option<String>,
    /// Arguments as received (a JSON object, or the raw string when it did not parse).
    pub arguments: Value,
    /// Result as given to the model; `null` while deferred.
    pub result: Value,
    /// Whether the tool succeeded.
    pub ok: bool,
    /// Wall time of the call.
    pub duration_ms: u64,
    /// The call waits (for approval or for the caller); it is written again when it runs.
    pub deferred: bool,
    /// The call is the answer through an output tool.
    pub output_tool: bool,
    /// The provider ran the tool itself; recorded with confidence `parsed`.
    pub provider_run: bool,
    /// Tool mode (`in_process`, `client_round_trip`, `remote_mcp`...), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Blob holding the arguments when they were too large to inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_blob: Option<BlobRef>,
    /// Blob holding the result when it was too large to inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_blob: Option<BlobRef>,
    /// What decided a completed call's result (added after format 1 first shipped; absent
    /// in older logs and on deferred calls): `tool` (the tool ran and this is its output),
    /// `hook` (a before hook denied or replaced the call: the tool did not run),
    /// `after_hook` (the tool ran and an after hook rewrote its output), `approval` (a
    /// resume denied the call), `caller` (the caller gave the result of a call it runs),
    /// `runtime` (the runtime answered without a tool: an unknown tool, a call beside a
    /// final result, the output tool's verdict), `provider` (the provider ran it).
    /// Replay reruns only what a tool decided and takes the rest from the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// A `remote_mcp` call's MCP details: the server reached (`server`, observed), the
    /// tool's name there (`tool`), and what the server claimed (`claims`, whose own
    /// `confidence` is `parsed`); see docs/evidence.md. `null` with `mcp_blob` set when too
    /// large to inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Value>,
    /// Blob holding `mcp` when it was too large to inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_blob: Option<BlobRef>,
    /// The confinement of a program the call ran (`run_command`, a manifest command
    /// tool): mode, Landlock, seccomp, bubblewrap, namespaces, uid and limits, or
    /// `{"ran": false}` for a `run_command` call whose program never started. Added with
    /// `run_started.details.sandbox.command_records = 1`; absent in older logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<Value>,
    /// When the call started, on a clock that counts every start and every end of the
    /// calls of one model turn from 1 (added later; absent in older logs, on deferred
    /// calls, and on calls the runtime answered without dispatching them). A call `a`
    /// ran before `b` exactly when `a.end_order < b.start_order`; calls whose spans
    /// overlap ran together (only calls that just read do). Replay runs a turn's calls
    /// in the same order and checks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_order: Option<u64>,
    /// When the call ended, on the clock of [`ToolCalled::start_order`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_order: Option<u64>,
    /// The call was stopped at `tool_timeout_s` (added later; absent means `false`).
    /// Replay does not run it again: it answers it from the recording, as for a call
    /// to an MCP server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// The run was cancelled while the call ran, and the call was stopped (added later;
    /// absent means `false`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// The tool's display label for this call (its `x-summary` with the call's arguments
    /// filled in, e.g. `Read /input/notes.txt`), for tools that have one (added later;
    /// absent in older logs). For people reading the log; nothing checks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// On a deferred call waiting for approval: the tool's confirmation prompt with the
    /// call's arguments filled in (its `x-confirm`, e.g. `Delete /output/a.txt?`), for
    /// tools that have one (added later; absent in older logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<String>,
    /// The arguments the tool ran with, when a before hook rewrote the model's (which stay
    /// in `arguments`); a JSON object, or the raw string. Added later: absent when nothing
    /// rewrote them. Replay runs the tool with these, as the recording did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten_arguments: Option<Value>,
    /// Blob holding `rewritten_arguments` when they were too large to inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten_arguments_blob: Option<BlobRef>,
    /// Who rewrote the arguments: the name the before hook gave
    /// (`HookDecision::Rewrite`'s `by`). Present exactly when `rewritten_arguments` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten_by: Option<String>,
    /// On a deferred call: what it waits for in the running process, when the run does
    /// not pause for it — `permit`: a hook waits for the caller's permit or denial
    /// (`RunControl::permit` / `deny`), and the call's completion follows in the same
    /// segment. Absent on calls that pause the run (added later; absent in older logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_for: Option<String>,
}
impl ToolCalled {
    /// The id that identifies the call in its run: [`ToolCalled::run_call_id`] where the
    /// log has it, else (older logs) the model's `call_id`.
    pub fn key(&self) -> &str {
        self.run_call_id.as_deref().unwrap_or(&self.call_id)
    }
}

impl Payload for ToolCalled {
    const TYPE: EventType = EventType::ToolCalled;
    fn confidence(&self) -> Confidence {
        if self.provider_run {
            Confidence::Parsed
        } else {
            Confidence::Observed
        }
    }
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// An event's payload read as its type's struct: what a reader matches on instead of
/// looking fields up by name in [`Event::payload`] (a misspelt field is then a compile
/// error, not a silent `null`).
///
/// Get it with [`Event::typed`] for an event of [`crate::read_events`], or read a whole
/// log with [`crate::read_typed_events`], which also reads event types this version
/// does not know (as [`EventPayload::Unknown`]). New event types may be added, so a
/// `match` needs a wildcard arm.
// `ToolCalled` is far larger than the rest; it is also most of a log's events, so boxing
// it would add an allocation to most events rather than save space.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventPayload {
    /// `run_started`.
    RunStarted(RunStarted),
    /// `input_staged`.
    InputStaged(InputStaged),
    /// `model_called`.
    ModelCalled(ModelCalled),
    /// `tool_called`.
    ToolCalled(ToolCalled),
    /// `trace_imported`.
    TraceImported(TraceImported),
    /// `output_produced`.
    OutputProduced(OutputProduced),
    /// `output_skipped`.
    OutputSkipped(OutputSkipped),
    /// `run_finished`.
    RunFinished(RunFinished),
    /// `declared`.
    Declared(Declared),
    /// `steered`.
    Steered(Steered),
    /// An event type this version does not know (written by a later one): its name and
    /// its payload as JSON.
    Unknown {
        /// The event line's `type`.
        kind: String,
        /// The payload, untouched.
        payload: Value,
    },
}

impl EventPayload {
    /// Read the payload of the event at `seq` whose `type` is `kind`. A type this version
    /// does not know gives [`EventPayload::Unknown`]; a known type whose payload misses a
    /// field or has one of the wrong type gives [`crate::EvidenceError::MalformedPayload`],
    /// naming the event's seq and the field.
    pub fn parse(seq: u64, kind: &str, payload: &Value) -> crate::Result<EventPayload> {
        let Some(known) = EventType::from_name(kind) else {
            return Ok(EventPayload::Unknown {
                kind: kind.to_owned(),
                payload: payload.clone(),
            });
        };
        EventPayload::parse_known(seq, known, payload)
    }

    fn parse_known(seq: u64, kind: EventType, payload: &Value) -> crate::Result<EventPayload> {
        fn de<T: serde::de::DeserializeOwned>(
            seq: u64,
            kind: EventType,
            payload: &Value,
        ) -> crate::Result<T> {
            serde_path_to_error::deserialize(payload).map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                let reason = inner.to_string();
                // serde names a missing field in its message, at the path of the object
                // that lacks it.
                let missing = reason
                    .strip_prefix("missing field `")
                    .and_then(|r| r.split('`').next());
                let field = match (path.as_str(), missing) {
                    (".", Some(name)) => name.to_owned(),
                    (".", None) => "(payload)".to_owned(),
                    (p, Some(name)) => format!("{p}.{name}"),
                    (p, None) => p.to_owned(),
                };
                crate::EvidenceError::MalformedPayload {
                    seq,
                    kind: kind.as_str(),
                    field,
                    reason,
                }
            })
        }
        Ok(match kind {
            EventType::RunStarted => EventPayload::RunStarted(de(seq, kind, payload)?),
            EventType::InputStaged => EventPayload::InputStaged(de(seq, kind, payload)?),
            EventType::ModelCalled => EventPayload::ModelCalled(de(seq, kind, payload)?),
            EventType::ToolCalled => EventPayload::ToolCalled(de(seq, kind, payload)?),
            EventType::TraceImported => EventPayload::TraceImported(de(seq, kind, payload)?),
            EventType::OutputProduced => EventPayload::OutputProduced(de(seq, kind, payload)?),
            EventType::OutputSkipped => EventPayload::OutputSkipped(de(seq, kind, payload)?),
            EventType::RunFinished => EventPayload::RunFinished(de(seq, kind, payload)?),
            EventType::Declared => EventPayload::Declared(de(seq, kind, payload)?),
            EventType::Steered => EventPayload::Steered(de(seq, kind, payload)?),
        })
    }

    /// The event type, `None` for [`EventPayload::Unknown`].
    pub fn event_type(&self) -> Option<EventType> {
        Some(match self {
            EventPayload::RunStarted(_) => EventType::RunStarted,
            EventPayload::InputStaged(_) => EventType::InputStaged,
            EventPayload::ModelCalled(_) => EventType::ModelCalled,
            EventPayload::ToolCalled(_) => EventType::ToolCalled,
            EventPayload::TraceImported(_) => EventType::TraceImported,
            EventPayload::OutputProduced(_) => EventType::OutputProduced,
            EventPayload::OutputSkipped(_) => EventType::OutputSkipped,
            EventPayload::RunFinished(_) => EventType::RunFinished,
            EventPayload::Declared(_) => EventType::Declared,
            EventPayload::Steered(_) => EventType::Steered,
            EventPayload::Unknown { .. } => return None,
        })
    }

    /// The event line's `type`, as written.
    pub fn type_name(&self) -> &str {
        match self {
            EventPayload::Unknown { kind, .. } => kind,
            known => known.event_type().map_or("", EventType::as_str),
        }
    }

    /// The `tool_called` payload, if this is one.
    pub fn as_tool_called(&self) -> Option<&ToolCalled> {
        match self {
            EventPayload::ToolCalled(t) => Some(t),
            _ => None,
        }
    }

    /// The `model_called` payload, if this is one.
    pub fn as_model_called(&self) -> Option<&ModelCalled> {
        match self {
            EventPayload::ModelCalled(m) => Some(m),
            _ => None,
        }
    }

    /// The `run_finished` payload, if this is one.
    pub fn as_run_finished(&self) -> Option<&RunFinished> {
        match self {
            EventPayload::RunFinished(f) => Some(f),
            _ => None,
        }
    }
}

impl Event {
    /// This event's payload as its type's struct. An event of [`crate::read_events`] has
    /// been checked against its type already, so this fails only for an event built or
    /// changed by hand ([`crate::EvidenceError::MalformedPayload`], naming the seq and
    /// the field).
    pub fn typed(&self) -> crate::Result<EventPayload> {
        EventPayload::parse_known(self.seq, self.kind, &self.payload)
    }
}

/// One event of a log read with [`crate::read_typed_events`]: the envelope, the
/// payload as JSON, and the payload as its type's struct.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TypedEvent {
    /// The run this log belongs to.
    pub run_id: String,
    /// Position in the log, from 0.
    pub seq: u64,
    /// SHA-256 hex of the previous line's bytes (without its `\n`); `None` for seq 0.
    pub prev: Option<String>,
    /// RFC 3339 UTC time the event was recorded.
    pub ts: String,
    /// How the runtime knows.
    pub confidence: Confidence,
    /// The payload as written.
    pub payload: Value,
    /// The payload as its type's struct ([`EventPayload::Unknown`] for a type this
    /// version does not know).
    pub body: EventPayload,
}

impl TypedEvent {
    /// The event type, `None` for one this version does not know.
    pub fn kind(&self) -> Option<EventType> {
        self.body.event_type()
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

/// Check that `payload` has the fields its event type requires, and that `confidence`
/// is one the type may carry. Returns a description of the problem.
pub(crate) fn check_payload(
    kind: EventType,
    confidence: Confidence,
    payload: &Value,
) -> Result<(), String> {
    fn parse<T: serde::de::DeserializeOwned>(p: &Value) -> Result<T, String> {
        T::deserialize(p).map_err(|e| e.to_string())
    }
    let want = match kind {
        EventType::RunStarted => parse::<RunStarted>(payload).map(|p| p.confidence())?,
        EventType::InputStaged => parse::<InputStaged>(payload).map(|p| p.confidence())?,
        EventType::ModelCalled => parse::<ModelCalled>(payload).map(|p| p.confidence())?,
        EventType::ToolCalled => parse::<ToolCalled>(payload).map(|p| p.confidence())?,
        EventType::TraceImported => parse::<TraceImported>(payload).map(|p| p.confidence())?,
        EventType::OutputProduced => parse::<OutputProduced>(payload).map(|p| p.confidence())?,
        EventType::OutputSkipped => parse::<OutputSkipped>(payload).map(|p| p.confidence())?,
        EventType::RunFinished => parse::<RunFinished>(payload).map(|p| p.confidence())?,
        EventType::Declared => parse::<Declared>(payload).map(|p| p.confidence())?,
        EventType::Steered => parse::<Steered>(payload).map(|p| p.confidence())?,
    };
    check_confidence(kind, want, confidence)
}

/// Check that an event of type `kind` whose payload calls for confidence `want` may be
/// written with `confidence`. Returns a description of the problem.
pub(crate) fn check_confidence(
    kind: EventType,
    want: Confidence,
    confidence: Confidence,
) -> Result<(), String> {
    // A writer may always claim less than it could: a model exchange or a tool call that
    // the runtime did not see itself (integrated loops, imported traces) is `parsed`.
    let weaker_ok = confidence == Confidence::Parsed
        && want == Confidence::Observed
        && matches!(kind, EventType::ModelCalled | EventType::ToolCalled);
    if want != confidence && !weaker_ok {
        return Err(format!(
            "a {} event must have confidence {}, not {}",
            kind.as_str(),
            want.as_str(),
            confidence.as_str()
        ));
    }
    Ok(())
}

impl EventPayload {
    /// The confidence the payload calls for (`None` for an unknown type).
    pub(crate) fn wanted_confidence(&self) -> Option<Confidence> {
        Some(match self {
            EventPayload::RunStarted(p) => p.confidence(),
            EventPayload::InputStaged(p) => p.confidence(),
            EventPayload::ModelCalled(p) => p.confidence(),
            EventPayload::ToolCalled(p) => p.confidence(),
            EventPayload::TraceImported(p) => p.confidence(),
            EventPayload::OutputProduced(p) => p.confidence(),
            EventPayload::OutputSkipped(p) => p.confidence(),
            EventPayload::RunFinished(p) => p.confidence(),
            EventPayload::Declared(p) => p.confidence(),
            EventPayload::Steered(p) => p.confidence(),
            EventPayload::Unknown { .. } => return None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_serialise_as_documented() {
        assert_eq!(
            serde_json::to_value(Confidence::Observed).unwrap(),
            json!("observed")
        );
        assert_eq!(
            serde_json::to_value(Confidence::Parsed).unwrap(),
            json!("parsed")
        );
        assert_eq!(
            serde_json::to_value(Confidence::Declared).unwrap(),
            json!("declared")
        );
        for t in EventType::ALL {
            assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
            assert_eq!(EventType::from_name(t.as_str()), Some(t));
        }
        assert_eq!(EventType::from_name("nope"), None);
    }

    #[test]
    fn a_steered_event_names_its_text_blob_and_is_observed() {
        let blob = json!({"digest": {"sha256": "ab"}, "size": 3, "media_type": "text/plain"});
        let good = json!({"text": blob, "before_request": 2});
        assert!(check_payload(EventType::Steered, Confidence::Observed, &good).is_ok());
        // Only the runtime sees a message arrive: never parsed or declared.
        assert!(check_payload(EventType::Steered, Confidence::Parsed, &good).is_err());
        assert!(check_payload(EventType::Steered, Confidence::Declared, &good).is_err());
        // The text inline instead of as a blob, or no request number: refused.
        let inline = json!({"text": "hello", "before_request": 2});
        assert!(check_payload(EventType::Steered, Confidence::Observed, &inline).is_err());
        let unplaced = json!({"text": blob});
        assert!(check_payload(EventType::Steered, Confidence::Observed, &unplaced).is_err());
    }

    #[test]
    fn blob_ref_shape() {
        let b = BlobRef {
            digest: Digest {
                sha256: "ab".into(),
            },
            size: 3,
            media_type: "text/plain".into(),
        };
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(
            v,
            json!({"digest":{"sha256":"ab"},"size":3,"media_type":"text/plain"})
        );
        assert_eq!(BlobRef::from_value(&v), Some(b));
        assert_eq!(
            BlobRef::from_value(&json!({"digest":{"sha256":"ab"},"size":3})),
            None
        );
    }

    #[test]
    fn tool_call_confidence_follows_provider_run() {
        let mut t = ToolCalled {
            name: "x".into(),
            call_id: "c".into(),
            arguments: json!({}),
            result: json!(null),
            ok: true,
            duration_ms: 0,
            deferred: false,
            output_tool: false,
            provider_run: false,
            mode: None,
            arguments_blob: None,
            result_blob: None,
            decided_by: None,
            mcp: None,
            mcp_blob: None,
            ..ToolCalled::default()
        };
        assert_eq!(t.confidence(), Confidence::Observed);
        t.provider_run = true;
        assert_eq!(t.confidence(), Confidence::Parsed);
        let v = serde_json::to_value(&t).unwrap();
        assert!(check_payload(EventType::ToolCalled, Confidence::Parsed, &v).is_ok());
        assert!(check_payload(EventType::ToolCalled, Confidence::Observed, &v).is_err());
        assert!(check_payload(EventType::Declared, Confidence::Declared, &v).is_err());
        // An observed call may be written as parsed (a weaker claim), never the reverse.
        t.provider_run = false;
        let v = serde_json::to_value(&t).unwrap();
        assert!(check_payload(EventType::ToolCalled, Confidence::Parsed, &v).is_ok());
        assert!(check_payload(EventType::ToolCalled, Confidence::Declared, &v).is_err());
    }

    #[test]
    fn model_calls_may_be_parsed_but_other_types_keep_their_confidence() {
        let m = ModelCalled {
            model: "m".into(),
            stream: false,
            request: None,
            response: None,
            usage: json!(null),
            finish_reason: None,
            duration_ms: 0,
            error: None,
            attempts: Vec::new(),
            response_rendered: false,
        };
        let v = serde_json::to_value(&m).unwrap();
        assert!(check_payload(EventType::ModelCalled, Confidence::Observed, &v).is_ok());
        assert!(check_payload(EventType::ModelCalled, Confidence::Parsed, &v).is_ok());
        assert!(check_payload(EventType::ModelCalled, Confidence::Declared, &v).is_err());
        let f = FileRecord {
            path: "a".into(),
            sha256: "00".into(),
            size: 0,
        };
        let v = serde_json::to_value(InputStaged(f)).unwrap();
        assert!(check_payload(EventType::InputStaged, Confidence::Parsed, &v).is_err());
    }
}
