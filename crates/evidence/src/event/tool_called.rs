//! The payload of `tool_called`: one call of a function tool, with every field added to
//! it since format 1 first shipped.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{BlobRef, Confidence, EventType, Payload};

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
