//! [`RigEvidence`]: the shared handle the model, HTTP and tool wrappers record through.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use provrun_capture::{
    Body, Capture, CaptureBuilder, CaptureError, JSON_MEDIA_TYPE, ModelExchange, ToolCallRecord,
};
use provrun_evidence::{Finished, RunStatus};
use rig_core::completion::AssistantContent;
use rig_core::tool::ToolDyn;
use serde_json::Value;

use crate::error::RigError;

/// One HTTP exchange as the [`EvidenceHttpClient`](crate::EvidenceHttpClient) saw it on the wire.
#[derive(Debug, Clone)]
pub(crate) struct WireExchange {
    pub(crate) request: Bytes,
    pub(crate) request_type: String,
    pub(crate) response: Option<Bytes>,
    pub(crate) response_type: String,
    pub(crate) duration: Duration,
    pub(crate) error: Option<String>,
}

impl WireExchange {
    /// The exchange as the capture records it: both sides raw, so `observed`.
    pub(crate) fn to_exchange(&self) -> ModelExchange<'_> {
        ModelExchange {
            request: Some(Body::raw(self.request.as_ref(), self.request_type.as_str())),
            response: self
                .response
                .as_ref()
                .map(|b| Body::raw(b.as_ref(), self.response_type.as_str())),
            duration_ms: millis(self.duration),
            error: self.error.clone(),
            usage: Value::Null,
            ..ModelExchange::default()
        }
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A tool call the model asked for, waiting for the tool wrapper to run it: its id pairs
/// the `tool_called` event with the model's request.
#[derive(Debug)]
struct AskedCall {
    name: String,
    arguments: Value,
    id: String,
}

#[derive(Debug)]
struct Inner {
    capture: Capture,
    /// Exchanges the HTTP wrapper saw and nobody has recorded yet.
    wire: Mutex<Vec<WireExchange>>,
    /// Tool calls the last responses asked for, oldest first.
    asked: Mutex<VecDeque<AskedCall>>,
    /// Held across one model call, so the wire exchanges it drains are its own.
    pub(crate) turn: tokio::sync::Mutex<()>,
    calls: AtomicU64,
    /// The run's totals, for `run_finished.usage`.
    requests: AtomicU64,
    tool_calls: AtomicU64,
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves plain data behind: keep using it.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Evidence for one rig run: wrap the run's model ([`RigEvidence::model`]), optionally its
/// provider's HTTP client ([`RigEvidence::http_client`], for the wire's bytes) and its tools
/// ([`RigEvidence::tool`], [`RigEvidence::sandboxed`]), run the agent as usual, then
/// [`RigEvidence::finish`]. Cheap to clone; clones record into one bundle.
#[derive(Debug, Clone)]
pub struct RigEvidence {
    inner: Arc<Inner>,
}

/// The `builder` a rig run's `run_started` names unless the capture was given another.
pub const RIG_BUILDER: &str = concat!("provrun-rig/", env!("CARGO_PKG_VERSION"));

impl RigEvidence {
    /// Record into an open capture (see [`Capture::builder`]; [`DeclareRigTools`] declares
    /// rig tools on its builder).
    pub fn new(capture: Capture) -> Self {
        RigEvidence {
            inner: Arc::new(Inner {
                capture,
                wire: Mutex::new(Vec::new()),
                asked: Mutex::new(VecDeque::new()),
                turn: tokio::sync::Mutex::new(()),
                calls: AtomicU64::new(0),
                requests: AtomicU64::new(0),
                tool_calls: AtomicU64::new(0),
                input_tokens: AtomicU64::new(0),
                output_tokens: AtomicU64::new(0),
            }),
        }
    }

    /// A capture builder for `bundle` whose `run_started.builder` is [`RIG_BUILDER`].
    pub fn builder(bundle: impl Into<std::path::PathBuf>) -> CaptureBuilder {
        Capture::builder(bundle).builder(RIG_BUILDER)
    }

    /// The capture underneath (its bundle, run id, recorder).
    pub fn capture(&self) -> &Capture {
        &self.inner.capture
    }

    /// The run's totals so far, with the keys a native run's `run_finished.usage` has:
    /// `requests` (model exchanges recorded), `tool_calls`, and the `input_tokens` and
    /// `output_tokens` rig's responses reported.
    pub fn usage(&self) -> Value {
        let i = &self.inner;
        serde_json::json!({
            "requests": i.requests.load(Ordering::Relaxed),
            "tool_calls": i.tool_calls.load(Ordering::Relaxed),
            "input_tokens": i.input_tokens.load(Ordering::Relaxed),
            "output_tokens": i.output_tokens.load(Ordering::Relaxed),
        })
    }

    /// Record any wire exchanges not yet claimed by a model call, then finish the run
    /// (outputs, `run_finished`, statement). `run_finished.usage` is [`RigEvidence::usage`]
    /// with the members of `usage` (a JSON object; `null` for none) laid over it; `error`
    /// is the message of a failed run.
    ///
    /// # Errors
    ///
    /// [`RigError::Capture`] when a leftover wire exchange, the outputs, `run_finished` or the
    /// statement cannot be recorded or written.
    pub async fn finish(
        self,
        status: RunStatus,
        usage: Value,
        error: Option<String>,
    ) -> Result<Finished, RigError> {
        self.record_stray_wire().await?;
        let mut totals = self.usage();
        match (usage, &mut totals) {
            (Value::Object(given), Value::Object(map)) => map.extend(given),
            (Value::Null, _) => {}
            (other, _) => totals = other,
        }
        let capture = self.inner.capture.clone();
        drop(self);
        Ok(capture.finish(status, totals, error)?)
    }

    pub(crate) fn count_tokens(&self, input: u64, output: u64) {
        self.inner.input_tokens.fetch_add(input, Ordering::Relaxed);
        self.inner
            .output_tokens
            .fetch_add(output, Ordering::Relaxed);
    }

    pub(crate) async fn lock_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner.turn.lock().await
    }

    pub(crate) fn push_wire(&self, exchange: WireExchange) {
        locked(&self.inner.wire).push(exchange);
    }

    pub(crate) fn take_wire(&self) -> Vec<WireExchange> {
        std::mem::take(&mut *locked(&self.inner.wire))
    }

    /// Wire exchanges made outside a wrapped model call are still exchanges with the
    /// model: record them, observed, before anything else.
    pub(crate) async fn record_stray_wire(&self) -> Result<(), CaptureError> {
        for wire in self.take_wire() {
            self.record_exchange(wire.to_exchange()).await?;
        }
        Ok(())
    }

    pub(crate) async fn record_exchange(
        &self,
        exchange: ModelExchange<'_>,
    ) -> Result<u64, CaptureError> {
        let seq = self.inner.capture.model_exchange(exchange).await?;
        self.inner.requests.fetch_add(1, Ordering::Relaxed);
        Ok(seq)
    }

    pub(crate) async fn record_tool(&self, call: ToolCallRecord) -> Result<u64, CaptureError> {
        let seq = self.inner.capture.tool_call(call).await?;
        self.inner.tool_calls.fetch_add(1, Ordering::Relaxed);
        Ok(seq)
    }

    /// Remember the tool calls a response asks for, so the tool wrapper can use their ids.
    pub(crate) fn note_asked<'a>(&self, choice: impl Iterator<Item = &'a AssistantContent>) {
        let mut asked = locked(&self.inner.asked);
        for item in choice {
            if let AssistantContent::ToolCall(call) = item {
                asked.push_back(AskedCall {
                    name: call.function.name.clone(),
                    arguments: call.function.arguments.clone(),
                    id: call.id.clone(),
                });
            }
        }
    }

    /// The id of the oldest asked call of `name` with these arguments (or, failing that,
    /// of `name`), or a fresh `rig-call-N` when the model's request was not seen.
    pub(crate) fn call_id(&self, name: &str, arguments: &Value) -> String {
        let mut asked = locked(&self.inner.asked);
        let position = asked
            .iter()
            .position(|a| a.name == name && &a.arguments == arguments)
            .or_else(|| asked.iter().position(|a| a.name == name));
        if let Some(i) = position
            && let Some(call) = asked.remove(i)
        {
            return call.id;
        }
        let n = self.inner.calls.fetch_add(1, Ordering::Relaxed) + 1;
        format!("rig-call-{n}")
    }
}

/// Declare rig tools on a capture builder, so `run_started` lists them with the digest of
/// their parameter schema.
pub trait DeclareRigTools: Sized {
    /// Declare one rig tool (its name and parameter schema).
    ///
    /// # Errors
    ///
    /// [`RigError::Capture`] when the tool's parameter schema cannot be recorded as canonical
    /// JSON.
    fn rig_tool(self, tool: &dyn ToolDyn) -> Result<Self, RigError>;
}

impl DeclareRigTools for CaptureBuilder {
    fn rig_tool(self, tool: &dyn ToolDyn) -> Result<Self, RigError> {
        Ok(self.tool(tool.name(), &tool.parameters())?)
    }
}

/// The media type of a JSON body, for headers that do not say.
pub(crate) fn media_type(header: Option<&str>) -> String {
    header
        .filter(|h| !h.trim().is_empty())
        .unwrap_or(JSON_MEDIA_TYPE)
        .to_string()
}
