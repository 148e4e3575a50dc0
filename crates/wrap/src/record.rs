//! [`Recording`]: what the proxy saw, written into the bundle through the capture crate —
//! each generation as a `model_called` (the bytes as they crossed the proxy, read by the
//! wire parsers for usage, tool calls and finish reason), each other exchange as an
//! `http_exchanged`, each tunnel or refusal as a `connection_handled` — and the tool
//! calls each response asked for, kept to link the session log's calls to them.

use std::sync::Arc;

use bytes::Bytes;
use provrun_capture::{Body, Capture, ModelExchange};
use provrun_evidence::{ConnectionHandled, HttpExchanged};
use provrun_model::{RawExchange, WireApi};
use serde_json::{Value, json};

use crate::proxy::redact::Masker;
use crate::proxy::route::{Api, Route};

/// One exchange through the proxy, as it crossed it.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The API side it came in on.
    pub api: Api,
    /// What it is.
    pub route: Route,
    /// The request body as the program sent it.
    pub request: Bytes,
    /// Its media type.
    pub request_type: String,
    /// The response body as the upstream sent it (after any redaction; see `http`).
    pub response: Bytes,
    /// Its media type, when there was one.
    pub response_type: Option<String>,
    /// The HTTP status, when a response came.
    pub status: Option<u16>,
    /// The HTTP facts recorded with it (`model_called.http`, `http_exchanged.http`).
    pub http: Value,
    /// Wall time from the request to the end of the response.
    pub duration_ms: u64,
    /// What went wrong, when it did not complete.
    pub error: Option<String>,
}

/// A tool call a recorded response asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskedCall {
    /// The call's id on the wire.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
}

#[derive(Debug, Default)]
struct State {
    /// The calls each `model_called` asked for, in log order (request STEP is index
    /// STEP − 1).
    steps: Vec<Vec<AskedCall>>,
    other_exchanges: u64,
    connections: u64,
    refused: u64,
    input_tokens: u64,
    output_tokens: u64,
    /// The tool calls and results seen on the wire.
    wire: crate::wire_calls::WireCalls,
    /// Exchanges and tunnels recorded as cut (still in flight when wrap stopped waiting).
    cut: u64,
    /// Connections over the proxy's bound counted but not recorded one by one.
    unrecorded_refusals: u64,
}

/// The totals of a recording, for `run_finished.usage` and the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Model generations recorded.
    pub requests: u64,
    /// Other exchanges recorded.
    pub other_exchanges: u64,
    /// Connections asked of the proxy (tunnelled, refused or failed).
    pub connections: u64,
    /// Of those, refused.
    pub refused: u64,
    /// Input tokens the responses reported.
    pub input_tokens: u64,
    /// Output tokens the responses reported.
    pub output_tokens: u64,
}

/// The recorder of a wrapped run: shared by every connection of the proxy. Writes are
/// serialised, so that the n-th `model_called` in the log is the n-th step here.
#[derive(Clone)]
pub struct Recording {
    capture: Capture,
    state: Arc<tokio::sync::Mutex<State>>,
    /// Masks the secrets in every string derived from an exchange (set by the proxy).
    masker: Arc<std::sync::OnceLock<Masker>>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("bundle", &self.capture.bundle_dir())
            .finish()
    }
}

impl Recording {
    /// Records into `capture`'s bundle.
    pub fn new(capture: Capture) -> Self {
        Recording {
            capture,
            state: Arc::default(),
            masker: Arc::default(),
        }
    }

    /// Masks what `masker` finds in every string this recording (and each of its clones)
    /// derives from an exchange or a connection — errors, parsed fields, the `http`
    /// object — before it is written. The first masker given stays.
    pub fn mask_with(&self, masker: Masker) {
        let _ = self.masker.set(masker);
    }

    fn mask(&self, text: String) -> String {
        match self.masker.get() {
            Some(m) => m.mask_str(&text),
            None => text,
        }
    }

    fn mask_value(&self, mut v: Value) -> Value {
        if let Some(m) = self.masker.get() {
            m.mask_value(&mut v);
        }
        v
    }

    /// The capture it records through.
    pub fn capture(&self) -> &Capture {
        &self.capture
    }

    /// Records one exchange: a generation as `model_called`, anything else as
    /// `http_exchanged`.
    ///
    /// # Errors
    ///
    /// [`CaptureError`](provrun_capture::CaptureError) when a body blob or the event cannot be
    /// written.
    pub async fn exchange(&self, ex: Exchange) -> Result<(), provrun_capture::CaptureError> {
        match ex.route {
            Route::Generation(wire) => self.generation(wire, ex).await,
            Route::Other(kind) => self.other(kind, ex).await,
        }
    }

    async fn generation(
        &self,
        wire: WireApi,
        ex: Exchange,
    ) -> Result<(), provrun_capture::CaptureError> {
        let parsed = wire.parse_response(RawExchange {
            request_body: ex.request.clone(),
            request_media_type: ex.request_type.clone(),
            response_body: ex.response.clone(),
            response_media_type: ex.response_type.clone(),
            status: ex.status,
            attempts: Vec::new(),
        });
        let (usage, finish_reason, calls, parse_error) = match &parsed {
            Ok(r) => (
                serde_json::to_value(r.usage).unwrap_or(Value::Null),
                r.finish_reason.as_ref().map(|f| f.as_str().to_owned()),
                asked_calls(r),
                None,
            ),
            Err(e) => (Value::Null, None, Vec::new(), Some(e.to_string())),
        };
        // Everything read from the exchange is masked: a parser decodes escapes the
        // masker saw as escapes, and its messages may quote the body.
        let calls: Vec<AskedCall> = calls
            .into_iter()
            .map(|c| AskedCall {
                call_id: self.mask(c.call_id),
                name: self.mask(c.name),
            })
            .collect();
        let finish_reason = finish_reason.map(|f| self.mask(f));
        let error = ex.error.clone().or(parse_error).map(|e| self.mask(e));
        let stream = ex
            .response_type
            .as_deref()
            .is_some_and(|t| t.starts_with("text/event-stream"))
            || serde_json::from_slice::<Value>(&ex.request)
                .is_ok_and(|v| v["stream"] == Value::Bool(true));
        let exchange = ModelExchange {
            model: self.mask(model_name(wire, &ex.request)),
            stream,
            request: Some(Body::raw(&ex.request[..], ex.request_type.as_str())),
            response: Some(Body::raw(
                &ex.response[..],
                ex.response_type
                    .as_deref()
                    .unwrap_or("application/octet-stream"),
            )),
            usage,
            finish_reason,
            duration_ms: ex.duration_ms,
            error,
            http: Some(self.mask_value(ex.http.clone())),
            tool_calls: calls
                .iter()
                .map(|c| json!({"call_id": c.call_id, "name": c.name}))
                .collect(),
            ..ModelExchange::default()
        };
        let mut state = self.state.lock().await;
        self.capture.model_exchange(exchange).await?;
        if let Ok(r) = &parsed {
            state.input_tokens += r.usage.input_tokens;
            state.output_tokens += r.usage.output_tokens;
        }
        state.steps.push(calls);
        let step = state.steps.len() as u64;
        state
            .wire
            .observe(step, wire, &ex.request, parsed.as_ref().ok());
        Ok(())
    }

    async fn other(
        &self,
        kind: &'static str,
        ex: Exchange,
    ) -> Result<(), provrun_capture::CaptureError> {
        let recorder = self.capture.recorder();
        let mut state = self.state.lock().await;
        let request = match ex.request.is_empty() {
            true => None,
            false => Some(
                recorder
                    .put_blob_for_next_event(&ex.request, &ex.request_type)
                    .await?,
            ),
        };
        let response = match ex.response.is_empty() {
            true => None,
            false => Some(
                recorder
                    .put_blob_for_next_event(
                        &ex.response,
                        ex.response_type
                            .as_deref()
                            .unwrap_or("application/octet-stream"),
                    )
                    .await?,
            ),
        };
        recorder
            .record_async(&HttpExchanged {
                kind: kind.to_owned(),
                request,
                response,
                http: self.mask_value(ex.http),
                duration_ms: ex.duration_ms,
                error: ex.error.map(|e| self.mask(e)),
            })
            .await?;
        state.other_exchanges += 1;
        Ok(())
    }

    /// Records a connection the program asked the proxy for.
    ///
    /// # Errors
    ///
    /// [`CaptureError`](provrun_capture::CaptureError) when the event cannot be written.
    pub async fn connection(
        &self,
        c: ConnectionHandled,
    ) -> Result<(), provrun_capture::CaptureError> {
        let c = ConnectionHandled {
            host: self.mask(c.host),
            reason: c.reason.map(|r| self.mask(r)),
            ..c
        };
        let mut state = self.state.lock().await;
        let refused = c.outcome == "refused";
        self.capture.recorder().record_async(&c).await?;
        state.connections += 1;
        state.refused += u64::from(refused);
        Ok(())
    }

    /// Counts one exchange or tunnel recorded as cut.
    pub(crate) async fn count_cut(&self) {
        self.state.lock().await.cut += 1;
    }

    /// Counts a connection over the proxy's bound that is not recorded one by one (in
    /// the totals' `connections` and `refused`).
    pub(crate) async fn refused_unrecorded(&self) {
        let mut s = self.state.lock().await;
        s.unrecorded_refusals += 1;
        s.connections += 1;
        s.refused += 1;
    }

    /// Exchanges and tunnels recorded as cut: still in flight when wrap stopped waiting
    /// for them after the program ended.
    pub async fn cut_exchanges(&self) -> u64 {
        self.state.lock().await.cut
    }

    /// Connections over the proxy's bound that were counted but not recorded one by one.
    pub async fn unrecorded_refusals(&self) -> u64 {
        self.state.lock().await.unrecorded_refusals
    }

    /// The calls each recorded generation asked for, in log order.
    pub async fn steps(&self) -> Vec<Vec<AskedCall>> {
        self.state.lock().await.steps.clone()
    }

    /// The tool calls the recorded responses asked for, each with the result a later
    /// recorded request carried for it, as `tool_call_seen` payloads.
    pub async fn wire_calls(&self) -> Vec<provrun_evidence::ToolCallSeen> {
        self.state.lock().await.wire.events()
    }

    /// What was recorded so far.
    pub async fn totals(&self) -> Totals {
        let s = self.state.lock().await;
        Totals {
            requests: s.steps.len() as u64,
            other_exchanges: s.other_exchanges,
            connections: s.connections,
            refused: s.refused,
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
        }
    }
}

/// The calls a response asks the program to run: its function calls, and the items a
/// Responses body lists with a `call_id` that the parser counts as provider-run (custom
/// tools, local shell calls), which a program such as the Codex CLI runs itself.
fn asked_calls(r: &provrun_model::ModelResponse) -> Vec<AskedCall> {
    let mut calls: Vec<AskedCall> = r
        .tool_calls
        .iter()
        .map(|c| AskedCall {
            call_id: c.id.clone(),
            name: c.name.clone(),
        })
        .collect();
    for p in &r.provider_tool_calls {
        if let Some(id) = p.details.get("call_id").and_then(Value::as_str) {
            calls.push(AskedCall {
                call_id: id.to_owned(),
                name: p
                    .details
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(&p.kind)
                    .to_owned(),
            });
        }
    }
    calls
}

/// The model name recorded for a request in `wire`'s format: the request's `model`,
/// prefixed as provrun names models (`openai:`, `openai-responses:`, `anthropic:`), so
/// that readers of the bundle pick the right parser.
fn model_name(wire: WireApi, request: &[u8]) -> String {
    let model = serde_json::from_slice::<Value>(request)
        .ok()
        .and_then(|v| v.get("model").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    let prefix = match wire {
        WireApi::AnthropicMessages => "anthropic",
        WireApi::OpenAiResponses => "openai-responses",
        _ => "openai",
    };
    format!("{prefix}:{model}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_carry_the_wire_format() {
        assert_eq!(
            model_name(WireApi::OpenAiResponses, br#"{"model":"gpt-5"}"#),
            "openai-responses:gpt-5"
        );
        assert_eq!(
            model_name(WireApi::AnthropicMessages, br#"{"model":"claude-x"}"#),
            "anthropic:claude-x"
        );
        assert_eq!(
            model_name(WireApi::ChatCompletions, b"not json"),
            "openai:unknown"
        );
    }
}
