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
use provrun_evidence::{BlobRef, ModelCalled, Recorder, ToolCalled, TraceImported};
use provrun_model::{
    JSON_MEDIA_TYPE, Message, Model, ModelError, ModelRequest, ModelResponse, RawExchange,
    SSE_MEDIA_TYPE, StreamDelta, ToolCall,
};
use provrun_tools::ToolOutput;
use serde_json::Value;

use crate::error::AgentError;

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
        }
    }

    /// The name of the output tool whose streamed calls are recorded before the request.
    pub fn with_output_tool(mut self, name: impl Into<String>) -> Self {
        self.output_tool = Some(name.into());
        self
    }

    async fn blob(&self, bytes: &[u8], media_type: &str) -> Result<Option<BlobRef>, ModelError> {
        if bytes.is_empty() {
            return Ok(None);
        }
        // Synced with the `model_called` line that names it (one sync, not three).
        self.recorder
            .put_blob_for_next_event(bytes, media_type)
            .await
            .map(Some)
            .map_err(evidence_failed)
    }

    async fn record(
        &self,
        stream: bool,
        started: Instant,
        result: &Result<ModelResponse, ModelError>,
    ) -> Result<(), ModelError> {
        let duration_ms = millis(started.elapsed());
        let empty = RawExchange::default();
        let (raw, usage, finish_reason, error) = match result {
            Ok(r) => (
                &r.raw,
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
        let request = self.blob(&raw.request_body, request_type).await?;
        let response = self.blob(&raw.response_body, &response_type).await?;
        let attempts = if raw.attempts.len() > 1 {
            raw.attempts
                .iter()
                .filter_map(|a| serde_json::to_value(a).ok())
                .collect()
        } else {
            Vec::new()
        };
        self.recorder
            .record_async(&ModelCalled {
                model: self.inner.name().to_string(),
                stream,
                request,
                response,
                usage,
                finish_reason,
                duration_ms,
                error,
                attempts,
            })
            .await
            .map_err(evidence_failed)?;
        Ok(())
    }
}

/// Evidence that cannot be written ends the run: a run whose evidence is incomplete must
/// not go on as if it were recorded.
fn evidence_failed(e: provrun_evidence::EvidenceError) -> ModelError {
    ModelError::Function(format!("recording evidence failed: {e}"))
}

#[async_trait]
impl Model for EvidenceModel {
    fn name(&self) -> &str {
        self.inner.name()
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
            let tools = ToolEvidence::new(self.recorder.clone());
            for call in response
                .tool_calls
                .iter()
                .filter(|c| &c.name == output_tool)
            {
                tools
                    .output_tool(call, 0)
                    .await
                    .map_err(|e| ModelError::Function(e.to_string()))?;
            }
        }
        self.record(true, started, &result).await?;
        result
    }
}

/// The arguments as evidence keeps them: the parsed JSON when the text parses, else the
/// text itself as a JSON string.
pub fn arguments_value(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Writes `tool_called` events.
#[derive(Debug, Clone)]
pub struct ToolEvidence {
    recorder: Recorder,
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
}

impl ToolEvidence {
    /// Record into `recorder`.
    pub fn new(recorder: Recorder) -> Self {
        Self { recorder }
    }

    /// Write one `tool_called`. `result` is `None` for a deferred call.
    pub async fn record(
        &self,
        name: &str,
        call_id: &str,
        arguments: Value,
        result: Option<&ToolOutput>,
        duration_ms: u64,
        flags: CallFlags,
    ) -> Result<u64, AgentError> {
        let (arguments, arguments_blob) = self.recorder.tool_value(arguments)?;
        let (result_value, ok) = match result {
            Some(out) => (Value::String(out.content.clone()), out.ok),
            None => (Value::Null, false),
        };
        let (result_value, result_blob) = self.recorder.tool_value(result_value)?;
        let seq = self
            .recorder
            .record_async(&ToolCalled {
                name: name.to_string(),
                call_id: call_id.to_string(),
                arguments,
                result: result_value,
                ok,
                duration_ms,
                deferred: flags.deferred,
                output_tool: flags.output_tool,
                provider_run: flags.provider_run,
                mode: flags.mode,
                arguments_blob,
                result_blob,
            })
            .await?;
        Ok(seq)
    }

    /// Record a completed call of a function tool.
    pub async fn completed(
        &self,
        call: &ToolCall,
        output: &ToolOutput,
        duration_ms: u64,
        mode: Option<String>,
    ) -> Result<u64, AgentError> {
        self.record(
            &call.name,
            &call.id,
            arguments_value(&call.arguments),
            Some(output),
            duration_ms,
            CallFlags {
                mode,
                ..CallFlags::default()
            },
        )
        .await
    }

    /// Record that a call waits (for approval, or for the caller to run it).
    pub async fn deferred(&self, call: &ToolCall, mode: Option<String>) -> Result<u64, AgentError> {
        self.record(
            &call.name,
            &call.id,
            arguments_value(&call.arguments),
            None,
            0,
            CallFlags {
                deferred: true,
                mode,
                ..CallFlags::default()
            },
        )
        .await
    }

    /// Record the answer given through the output tool; its result is the arguments.
    pub async fn output_tool(&self, call: &ToolCall, duration_ms: u64) -> Result<u64, AgentError> {
        let output = ToolOutput::succeed("final result accepted");
        self.record(
            &call.name,
            &call.id,
            arguments_value(&call.arguments),
            Some(&output),
            duration_ms,
            CallFlags {
                output_tool: true,
                ..CallFlags::default()
            },
        )
        .await
    }

    /// Record the tools a provider ran itself (confidence `parsed`).
    pub async fn provider_runs(&self, response: &ModelResponse) -> Result<(), AgentError> {
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
                    ..CallFlags::default()
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Write the whole message history once, as `trace_imported` (confidence `parsed`).
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
            })
            .await?)
    }
}
