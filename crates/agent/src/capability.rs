//! The evidence capability: middleware that writes provrun's evidence for any agent loop.
//!
//! [`EvidenceModel`] wraps any [`Model`] and writes one `model_called` event for every
//! request, streamed or not, failed or not. [`ToolEvidence`] writes the `tool_called`
//! events: exactly one completed event per call, plus a `deferred` one for a call that
//! waits, with the `output_tool` and `provider_run` flags of the seed. The backend uses
//! both; code with its own loop can use them directly.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use provrun_capture::{Body, ModelExchange, record_model_exchange, record_tool_call};
use provrun_evidence::{Recorder, ToolCalled, TraceImported};
use provrun_model::{
    JSON_MEDIA_TYPE, Message, Model, ModelError, ModelRequest, ModelResponse, RawExchange,
    SSE_MEDIA_TYPE, StreamDelta, ToolCall,
};
use provrun_tools::ToolOutput;
use serde_json::Value;

use crate::arguments::arguments_value;
use crate::error::AgentError;
use crate::output::OutputSchema;

/// What the model is told when its final result is accepted.
pub const OUTPUT_ACCEPTED: &str = "final result accepted";

/// The format name of the message history a `trace_imported` blob holds.
pub const TRACE_FORMAT: &str = "provrun-messages/1";

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A [`Model`] that records every request it passes on as `model_called`.
///
/// With an output tool name set, a streamed response that calls that tool has its
/// `tool_called` (`output_tool: true`) written *before* its `model_called`, as the seed
/// requires (the output is checked while the stream is still open).
pub struct EvidenceModel {
    inner: Arc<dyn Model>,
    recorder: Recorder,
    output_tool: Option<String>,
    output_schema: Option<OutputSchema>,
    /// Model requests recorded so far in the run (to name a streamed answer's call).
    requests: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for EvidenceModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvidenceModel")
            .field("inner", &self.inner.name())
            .field("output_tool", &self.output_tool)
            .finish_non_exhaustive()
    }
}

impl EvidenceModel {
    /// Wrap `inner`, recording into `recorder`.
    pub fn new(inner: Arc<dyn Model>, recorder: Recorder) -> Self {
        Self {
            inner,
            recorder,
            output_tool: None,
            output_schema: None,
            requests: Arc::default(),
        }
    }

    /// The number of model requests the run had already made before this model records
    /// (a resumed run's): a streamed answer through the output tool is recorded with the
    /// run-unique id of its call, which counts the run's requests.
    pub fn with_requests_made(self, requests: u64) -> Self {
        self.requests
            .store(requests, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// The name of the output tool whose streamed calls are recorded before the request.
    pub fn with_output_tool(mut self, name: impl Into<String>) -> Self {
        self.output_tool = Some(name.into());
        self
    }

    /// The schema a streamed answer is checked against before it is recorded: one that
    /// does not follow it is recorded as a failed result with why. Without a schema,
    /// every answer is recorded as accepted.
    pub fn with_output_schema(mut self, schema: OutputSchema) -> Self {
        self.output_schema = Some(schema);
        self
    }

    async fn record(
        &self,
        stream: bool,
        started: Instant,
        result: &Result<ModelResponse, ModelError>,
    ) -> Result<(), ModelError> {
        let duration_ms = millis(started.elapsed());
        let empty = RawExchange::default();
        // A hand-written model's response without wire bytes: its parsed content rendered
        // as a Chat Completions body, so it is kept and a replay reads it back.
        let rendered = match result {
            Ok(r) if !r.has_wire_bytes() => Some(r.rendered_exchange(self.inner.name())),
            _ => None,
        };
        let (raw, usage, finish_reason, error) = match result {
            Ok(r) => (
                rendered.as_ref().unwrap_or(&r.raw),
                serde_json::to_value(r.usage).unwrap_or(Value::Null),
                r.finish_reason.as_ref().map(|f| f.as_str().to_string()),
                None,
            ),
            Err(e) => (
                e.exchange().unwrap_or(&empty),
                Value::Null,
                None,
                Some(e.to_string()),
            ),
        };
        let request_type = if raw.request_media_type.is_empty() {
            JSON_MEDIA_TYPE
        } else {
            raw.request_media_type.as_str()
        };
        let response_type = raw.response_media_type.clone().unwrap_or_else(|| {
            if stream {
                SSE_MEDIA_TYPE
            } else {
                JSON_MEDIA_TYPE
            }
            .to_string()
        });
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let attempts = if raw.attempts.len() > 1 {
            raw.attempts
                .iter()
                .filter_map(|a| serde_json::to_value(a).ok())
                .collect()
        } else {
            Vec::new()
        };
        // The model's own bytes: always raw, so the event is `observed`.
        let exchange = ModelExchange {
            model: self.inner.name().to_string(),
            stream,
            request: Some(Body::raw(&raw.request_body[..], request_type)),
            response: Some(Body::raw(&raw.response_body[..], response_type)),
            usage,
            finish_reason,
            duration_ms,
            error,
            attempts,
            response_rendered: rendered.is_some(),
            ..ModelExchange::default()
        };
        record_model_exchange(&self.recorder, &exchange)
            .await
            .map_err(evidence_failed)?;
        Ok(())
    }
}

/// Evidence that cannot be written ends the run: a run whose evidence is incomplete must
/// not go on as if it were recorded.
fn evidence_failed(e: provrun_capture::CaptureError) -> ModelError {
    ModelError::Function(format!("recording evidence failed: {e}"))
}

#[async_trait]
impl Model for EvidenceModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn base_url(&self) -> Option<&str> {
        self.inner.base_url()
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let started = Instant::now();
        let result = self.inner.request(request).await;
        self.record(false, started, &result).await?;
        result
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let started = Instant::now();
        let result = self.inner.request_stream(request, on_delta).await;
        if let (Ok(response), Some(output_tool)) = (&result, &self.output_tool) {
            // The first answer is the one the loop takes; other calls of the response,
            // a second answer among them, are recorded by the loop as not run.
            if let Some(index) = response
                .tool_calls
                .iter()
                .position(|c| &c.name == output_tool)
            {
                let call = &response.tool_calls[index];
                let step = self.requests.load(std::sync::atomic::Ordering::SeqCst) + 1;
                let uid = crate::state::call_uid(step, index);
                let verdict = match self
                    .output_schema
                    .as_ref()
                    .map(|s| s.check(&call.arguments))
                {
                    Some(Err(why)) => ToolOutput::fail(why),
                    _ => ToolOutput::succeed(OUTPUT_ACCEPTED),
                };
                ToolEvidence::new(self.recorder.clone())
                    .output_verdict_as(call, &uid, &verdict, 0)
                    .await
                    .map_err(|e| ModelError::Function(e.to_string()))?;
            }
        }
        self.record(true, started, &result).await?;
        result
    }
}

/// Writes `tool_called` events.
#[derive(Debug, Clone)]
pub struct ToolEvidence {
    recorder: Recorder,
    /// Tools whose calls run a confined program (their events record the confinement).
    command_tools: std::sync::Arc<std::collections::BTreeSet<String>>,
    /// Each tool's summary and confirmation templates (`x-summary`, `x-confirm`), by name.
    templates: std::sync::Arc<std::collections::BTreeMap<String, Templates>>,
}

/// A tool's display texts, before a call's arguments fill them in.
#[derive(Debug, Clone, Default)]
pub struct Templates {
    /// The `x-summary` template.
    pub summary: Option<String>,
    /// The `x-confirm` template.
    pub confirm: Option<String>,
}

/// What decided a completed call's result (the `decided_by` member of `tool_called`).
///
/// Replay reruns the calls a tool decided and takes the others' results from the log,
/// since the hooks, approvals and callers that decided them are not there to ask again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecidedBy {
    /// The tool ran; the result is its output.
    Tool,
    /// A before hook denied or replaced the call; the tool did not run.
    Hook,
    /// The tool ran and an after hook rewrote its output.
    AfterHook,
    /// A resume denied the call; the tool did not run.
    Approval,
    /// The caller ran the call (a client round trip, or a result given on resume).
    Caller,
    /// The runtime answered without a tool: an unknown tool, a call beside a final
    /// result, the output tool's verdict.
    Runtime,
    /// The provider ran the tool itself.
    Provider,
}

impl DecidedBy {
    /// The name evidence records.
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Tool => "tool",
            DecidedBy::Hook => "hook",
            DecidedBy::AfterHook => "after_hook",
            DecidedBy::Approval => "approval",
            DecidedBy::Caller => "caller",
            DecidedBy::Runtime => "runtime",
            DecidedBy::Provider => "provider",
        }
    }

    /// The value of a recorded name, `None` for an unknown one.
    pub fn parse(name: &str) -> Option<Self> {
        [
            DecidedBy::Tool,
            DecidedBy::Hook,
            DecidedBy::AfterHook,
            DecidedBy::Approval,
            DecidedBy::Caller,
            DecidedBy::Runtime,
            DecidedBy::Provider,
        ]
        .into_iter()
        .find(|d| d.as_str() == name)
    }
}

/// The flags and mode of one `tool_called` event.
#[derive(Debug, Clone, Default)]
pub struct CallFlags {
    /// The call waits (approval or the caller).
    pub deferred: bool,
    /// The call is the answer through an output tool.
    pub output_tool: bool,
    /// The provider ran it.
    pub provider_run: bool,
    /// The tool's mode, when known.
    pub mode: Option<String>,
    /// What decided the result (completed calls only).
    pub decided_by: Option<DecidedBy>,
    /// A `remote_mcp` call's MCP details (the `mcp` object of the event).
    pub mcp: Option<Value>,
    /// When the call started and ended, on the turn's clock (see
    /// `provrun_evidence::ToolCalled::start_order`).
    pub order: Option<(u64, u64)>,
    /// The call was stopped at its time limit.
    pub timed_out: bool,
    /// The run was cancelled while the call ran, and the call was stopped.
    pub cancelled: bool,
    /// The call's run-unique id (`provrun_evidence::ToolCalled::run_call_id`): `STEP.N`.
    pub run_call_id: Option<String>,
    /// The arguments a before hook rewrote the model's to, and who rewrote them.
    pub rewritten: Option<(Value, String)>,
    /// On a deferred call: what it waits for in the running process (`permit`: a hook
    /// waits for [`crate::RunControl::permit`]); `None` for a call that pauses the run.
    pub waits_for: Option<String>,
}

impl ToolEvidence {
    /// Record into `recorder`.
    pub fn new(recorder: Recorder) -> Self {
        Self {
            recorder,
            command_tools: Default::default(),
            templates: Default::default(),
        }
    }

    /// Each tool's summary and confirmation templates, by name: a call of a tool with a
    /// summary records it filled in (`summary`), a deferred call its confirmation
    /// (`confirm`).
    pub fn with_templates(
        mut self,
        templates: impl IntoIterator<Item = (String, Templates)>,
    ) -> Self {
        self.templates = std::sync::Arc::new(templates.into_iter().collect());
        self
    }

    /// The names of the tools whose calls run a confined program: a call of one that its
    /// tool decided without a confinement record (the program never started) is recorded
    /// with `confinement: {"ran": false}`.
    pub fn with_command_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.command_tools = std::sync::Arc::new(names.into_iter().collect());
        self
    }

    /// Write one `tool_called`. `result` is `None` for a deferred call.
    ///
    /// # Errors
    ///
    /// [`AgentError::Evidence`] when a blob or the event cannot be written.
    pub async fn record(
        &self,
        name: &str,
        call_id: &str,
        arguments: Value,
        result: Option<&ToolOutput>,
        duration_ms: u64,
        flags: CallFlags,
    ) -> Result<u64, AgentError> {
        let templates = self.templates.get(name);
        let summary = templates
            .and_then(|t| t.summary.as_deref())
            .map(|t| provrun_tools::fill_template_json(t, &arguments));
        let confirm = templates
            .and_then(|t| t.confirm.as_deref())
            .filter(|_| flags.deferred)
            .map(|t| provrun_tools::fill_template_json(t, &arguments));
        let (result_value, ok) = match result {
            Some(out) => (Value::String(out.content.clone()), out.ok),
            None => (Value::Null, false),
        };
        // A program's confinement, as the tool reported it; a command tool's call its tool
        // decided without one never started its program (refused, or timed out first).
        let confinement = match result {
            Some(out) => out.confinement.clone().or_else(|| {
                (self.command_tools.contains(name)
                    && !flags.deferred
                    && flags.decided_by == Some(DecidedBy::Tool))
                .then(|| serde_json::json!({"ran": false}))
            }),
            None => None,
        };
        let (rewritten_arguments, rewritten_arguments_blob, rewritten_by) = match flags.rewritten {
            Some((value, by)) => {
                let (inline, blob) = self.recorder.tool_value(value)?;
                (Some(inline), blob, Some(by))
            }
            None => (None, None, None),
        };
        let call = ToolCalled {
            name: name.to_string(),
            call_id: call_id.to_string(),
            run_call_id: flags.run_call_id,
            arguments,
            result: result_value,
            ok,
            duration_ms,
            deferred: flags.deferred,
            output_tool: flags.output_tool,
            provider_run: flags.provider_run,
            mode: flags.mode,
            decided_by: flags.decided_by.map(|d| d.as_str().to_string()),
            mcp: flags.mcp,
            confinement,
            start_order: flags.order.map(|o| o.0),
            end_order: flags.order.map(|o| o.1),
            timed_out: flags.timed_out,
            cancelled: flags.cancelled,
            summary,
            confirm,
            rewritten_arguments,
            rewritten_arguments_blob,
            rewritten_by,
            waits_for: flags.waits_for,
            ..ToolCalled::default()
        };
        let seq = record_tool_call(&self.recorder, call, false).await?;
        Ok(seq)
    }

    /// Record a completed call of a function tool, and what decided its result.
    ///
    /// # Errors
    ///
    /// As [`ToolEvidence::record`].
    pub async fn completed(
        &self,
        call: &ToolCall,
        output: &ToolOutput,
        duration_ms: u64,
        mode: Option<String>,
        decided_by: DecidedBy,
    ) -> Result<u64, AgentError> {
        let flags = CallFlags {
            mode,
            decided_by: Some(decided_by),
            ..CallFlags::default()
        };
        self.completed_with(call, output, duration_ms, flags).await
    }

    /// Record a completed call with any flags: for a tool that ran in an MCP server, its
    /// `mcp` details (see [`CallFlags::mcp`]) beside its mode and what decided it.
    ///
    /// # Errors
    ///
    /// As [`ToolEvidence::record`].
    pub async fn completed_with(
        &self,
        call: &ToolCall,
        output: &ToolOutput,
        duration_ms: u64,
        flags: CallFlags,
    ) -> Result<u64, AgentError> {
        self.record(
            &call.name,
            &call.id,
            arguments_value(&call.arguments),
            Some(output),
            duration_ms,
            flags,
        )
        .await
    }

    /// Record the process trail of a command a call ran (`run_command`, a manifest
    /// command tool): each process as `process_ran` and the trail's end as
    /// `trail_recorded`, owned by the call (`call_id`, and `run_call_id` when given).
    ///
    /// # Errors
    ///
    /// [`AgentError::Evidence`] when an event cannot be written.
    pub async fn command_trail(
        &self,
        call_id: &str,
        run_call_id: Option<&str>,
        trail: &provrun_sandbox::Trail,
    ) -> Result<(), AgentError> {
        let owner = provrun_capture::processes::command_owner(call_id, run_call_id);
        provrun_capture::processes::record_trail(&self.recorder, &owner, trail).await?;
        Ok(())
    }

    /// Record the process trail of an MCP stdio server as it stands when the run ends:
    /// the processes that ended, those still running (without an end), and the trail's
    /// summary so far, owned by the server `name`.
    ///
    /// # Errors
    ///
    /// [`AgentError::Evidence`] when an event cannot be written.
    pub async fn server_trail(
        &self,
        name: &str,
        feed: &provrun_sandbox::TrailFeed,
    ) -> Result<(), AgentError> {
        let owner = provrun_capture::processes::server_owner(name);
        // The digests of the executables still being made (a large server binary).
        let settling = feed.clone();
        let _ = tokio::task::spawn_blocking(move || {
            settling.settle(std::time::Duration::from_secs(30))
        })
        .await;
        let mut processes = feed.take_finished();
        processes.extend(feed.running());
        processes.sort_by_key(|p| p.id);
        let mut summary = feed.summary_so_far();
        summary.error = Some(
            "the server was still running when the run ended: its trail ends here, and the \
             processes then running have no end"
                .to_owned(),
        );
        let trail = provrun_sandbox::Trail { processes, summary };
        provrun_capture::processes::record_trail(&self.recorder, &owner, &trail).await?;
        Ok(())
    }

    /// Record that a call waits (for approval, or for the caller to run it).
    ///
    /// # Errors
    ///
    /// As [`ToolEvidence::record`].
    pub async fn deferred(&self, call: &ToolCall, mode: Option<String>) -> Result<u64, AgentError> {
        self.deferred_flags(call, None, mode).await
    }

    /// [`ToolEvidence::deferred`] with the call's run-unique id `run_call_id`.
    ///
    /// # Errors
    ///
    /// As [`ToolEvidence::record`].
    pub async fn deferred_as(
        &self,
        call: &ToolCall,
        run_call_id: &str,
        mode: Option<String>,
    ) -> Result<u64, AgentError> {
        self.deferred_flags(call, Some(run_call_id.to_string()), mode)
            .await
    }

    async fn deferred_flags(
        &self,
        call: &ToolCall,
        run_call_id: Option<String>,
        mode: Option<String>,
    ) -> Result<u64, AgentError> {
        self.record(
            &call.name,
            &call.id,
            arguments_value(&call.arguments),
            None,
            0,
            CallFlags {
                deferred: true,
                mode,
                run_call_id,
                ..CallFlags::default()
            },
        )
        .await
    }

    /// Record the answer given through the output tool, accepted.
    ///
    /// # Errors
    ///
    /// As [`ToolEvidence::record`].
    pub async fn output_tool(&self, call: &ToolCall, duration_ms: u64) -> Result<u64, AgentError> {
        self.output_verdict(call, &ToolOutput::succeed(OUTPUT_ACCEPTED), duration_ms)
            .await
    }

    /// Record the answer given through the output tool with the verdict the model sees:
    /// accepted, or failed with why (arguments that do not follow the output schema).
    ///
    /// # Errors
    ///
    /// As [`ToolEvidence::record`].
    pub async fn output_verdict(
        &self,
        call: &ToolCall,
        verdict: &ToolOutput,
        duration_ms: u64,
    ) -> Result<u64, AgentError> {
        self.output_record(call, None, verdict, duration_ms).await
    }

    /// [`ToolEvidence::output_verdict`] with the call's run-unique id `run_call_id`.
    ///
    /// # Errors
    ///
    /// As [`ToolEvidence::record`].
    pub async fn output_verdict_as(
        &self,
        call: &ToolCall,
        run_call_id: &str,
        verdict: &ToolOutput,
        duration_ms: u64,
    ) -> Result<u64, AgentError> {
        self.output_record(call, Some(run_call_id.to_string()), verdict, duration_ms)
            .await
    }

    async fn output_record(
        &self,
        call: &ToolCall,
        run_call_id: Option<String>,
        verdict: &ToolOutput,
        duration_ms: u64,
    ) -> Result<u64, AgentError> {
        self.record(
            &call.name,
            &call.id,
            arguments_value(&call.arguments),
            Some(verdict),
            duration_ms,
            CallFlags {
                output_tool: true,
                decided_by: Some(DecidedBy::Runtime),
                run_call_id,
                ..CallFlags::default()
            },
        )
        .await
    }

    /// Record the tools a provider ran itself (confidence `parsed`).
    ///
    /// # Errors
    ///
    /// [`AgentError::Evidence`] when an event or blob cannot be written.
    pub async fn provider_runs(&self, response: &ModelResponse) -> Result<(), AgentError> {
        self.provider_record(None, response).await
    }

    /// [`ToolEvidence::provider_runs`] for the response to model request `step`: each run
    /// gets the run-unique id `STEP.pN` (`N` from 1).
    ///
    /// # Errors
    ///
    /// As [`ToolEvidence::provider_runs`].
    pub async fn provider_runs_at(
        &self,
        step: u64,
        response: &ModelResponse,
    ) -> Result<(), AgentError> {
        self.provider_record(Some(step), response).await
    }

    async fn provider_record(
        &self,
        step: Option<u64>,
        response: &ModelResponse,
    ) -> Result<(), AgentError> {
        let id = response.id.as_deref().unwrap_or("response");
        for (i, call) in response.provider_tool_calls.iter().enumerate() {
            let arguments = call
                .arguments
                .as_deref()
                .map(arguments_value)
                .unwrap_or(Value::Null);
            let output = ToolOutput::succeed(call.output.clone().unwrap_or_default());
            self.record(
                &call.kind,
                &format!("{id}:provider:{i}"),
                arguments,
                Some(&output),
                0,
                CallFlags {
                    provider_run: true,
                    mode: Some("provider".to_string()),
                    decided_by: Some(DecidedBy::Provider),
                    run_call_id: step.map(|s| format!("{s}.p{}", i + 1)),
                    ..CallFlags::default()
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Write the whole message history once, as `trace_imported` (confidence `parsed`).
    ///
    /// # Errors
    ///
    /// [`AgentError::Bundle`] when the history cannot be serialised;
    /// [`AgentError::Evidence`] when its blob or the event cannot be written.
    pub async fn trace(&self, messages: &[Message]) -> Result<u64, AgentError> {
        let bytes = serde_json::to_vec(messages).map_err(|e| AgentError::Bundle {
            path: self.recorder.bundle_dir().to_path_buf(),
            message: format!("cannot serialise the message history: {e}"),
        })?;
        let trace = self
            .recorder
            .put_blob_for_next_event(&bytes, "application/json")
            .await?;
        Ok(self
            .recorder
            .record_async(&TraceImported {
                trace,
                format: TRACE_FORMAT.to_string(),
                messages: messages.len() as u64,
                source: None,
            })
            .await?)
    }
}
