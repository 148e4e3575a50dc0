//! The two recording steps every loop shares, native or not: one model exchange as a
//! `model_called` event, one tool call as a `tool_called` event.
//!
//! The agent crate's `EvidenceModel` and `ToolEvidence` write through these functions, and
//! so does [`crate::Capture`]; a loop with its own bookkeeping can call them on a
//! [`Recorder`] directly.

use std::borrow::Cow;

use provrun_evidence::{BlobRef, Confidence, ModelCalled, Recorder, ToolCalled};
use serde_json::Value;

use crate::error::CaptureError;

/// The media type of JSON bodies (and of parsed bodies, which are stored as JSON).
pub const JSON_MEDIA_TYPE: &str = "application/json";

/// One side (request or response) of a model exchange.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<'a> {
    /// The exact bytes that went over the wire (SSE verbatim when streamed), with their
    /// media type. Only raw bodies let an exchange be recorded as `observed`.
    Raw {
        /// The bytes.
        bytes: Cow<'a, [u8]>,
        /// Their media type, e.g. `application/json` or `text/event-stream`.
        media_type: Cow<'a, str>,
    },
    /// What the caller's framework parsed the exchange into: stored as JSON, and the
    /// exchange is recorded with confidence `parsed` (the bytes were not seen).
    Parsed(Cow<'a, Value>),
}

impl<'a> Body<'a> {
    /// Raw wire bytes of the given media type.
    pub fn raw(bytes: impl Into<Cow<'a, [u8]>>, media_type: impl Into<Cow<'a, str>>) -> Self {
        Body::Raw {
            bytes: bytes.into(),
            media_type: media_type.into(),
        }
    }

    /// A parsed request or response, as JSON.
    pub fn parsed(value: Value) -> Self {
        Body::Parsed(Cow::Owned(value))
    }

    /// A parsed request or response, borrowed.
    pub fn parsed_ref(value: &'a Value) -> Self {
        Body::Parsed(Cow::Borrowed(value))
    }

    /// Whether this is a parsed body (not wire bytes).
    pub fn is_parsed(&self) -> bool {
        matches!(self, Body::Parsed(_))
    }
}

/// One model request and its response (or error), as a loop saw it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelExchange<'a> {
    /// The model's identifier, e.g. `openai:gpt-4o-mini`.
    pub model: String,
    /// Whether the streamed API was used.
    pub stream: bool,
    /// The request, when there is one to record.
    pub request: Option<Body<'a>>,
    /// The response, when there is one to record.
    pub response: Option<Body<'a>>,
    /// Token usage as the provider reported it (`null` when unknown).
    pub usage: Value,
    /// Why the model stopped, when known.
    pub finish_reason: Option<String>,
    /// Wall time of the request, in milliseconds.
    pub duration_ms: u64,
    /// The error, when the request failed.
    pub error: Option<String>,
    /// One object per HTTP attempt when the request was retried (see the evidence
    /// format's `attempts`); empty otherwise.
    pub attempts: Vec<Value>,
    /// The response body was rendered from a model's parsed answer (a model with no wire
    /// bytes), not received: recorded as `model_called.response_rendered`.
    pub response_rendered: bool,
    /// The HTTP facts of an exchange a recording proxy saw (method, path, status, headers
    /// without credentials): recorded as `model_called.http`.
    pub http: Option<Value>,
    /// The tool calls the response asked for (`call_id`, `name`), for a recorder that
    /// does not run them itself: recorded as `model_called.tool_calls`.
    pub tool_calls: Vec<Value>,
}

impl ModelExchange<'_> {
    /// The confidence the exchange is recorded with: `parsed` when either side is a
    /// parsed body, else `observed`.
    pub fn confidence(&self) -> Confidence {
        let parsed = [&self.request, &self.response]
            .into_iter()
            .flatten()
            .any(Body::is_parsed);
        if parsed {
            Confidence::Parsed
        } else {
            Confidence::Observed
        }
    }
}

async fn body_blob(recorder: &Recorder, body: &Body<'_>) -> Result<Option<BlobRef>, CaptureError> {
    let (bytes, media_type): (Cow<'_, [u8]>, &str) = match body {
        Body::Raw { bytes, media_type } => (Cow::Borrowed(bytes.as_ref()), media_type.as_ref()),
        Body::Parsed(value) => {
            let text = provrun_evidence::to_canonical_string(value.as_ref())?;
            (Cow::Owned(text.into_bytes()), JSON_MEDIA_TYPE)
        }
    };
    if bytes.is_empty() {
        return Ok(None);
    }
    // Synced with the `model_called` line that names it (one sync, not three).
    Ok(Some(
        recorder.put_blob_for_next_event(&bytes, media_type).await?,
    ))
}

/// Write one `model_called` event for `exchange`: its bodies as blobs, with the
/// confidence [`ModelExchange::confidence`] gives. Returns the event's seq once it is as
/// durable as the recorder's policy promises.
///
/// # Errors
///
/// [`CaptureError::Evidence`] when a parsed body cannot be made canonical JSON, or a body
/// blob or the event cannot be written.
pub async fn record_model_exchange(
    recorder: &Recorder,
    exchange: &ModelExchange<'_>,
) -> Result<u64, CaptureError> {
    let request = match &exchange.request {
        Some(b) => body_blob(recorder, b).await?,
        None => None,
    };
    let response = match &exchange.response {
        Some(b) => body_blob(recorder, b).await?,
        None => None,
    };
    let payload = ModelCalled {
        model: exchange.model.clone(),
        stream: exchange.stream,
        request,
        response,
        usage: exchange.usage.clone(),
        finish_reason: exchange.finish_reason.clone(),
        duration_ms: exchange.duration_ms,
        error: exchange.error.clone(),
        attempts: exchange.attempts.clone(),
        response_rendered: exchange.response_rendered,
        http: exchange.http.clone(),
        tool_calls: exchange.tool_calls.clone(),
    };
    let seq = match exchange.confidence() {
        Confidence::Observed => recorder.record_async(&payload).await?,
        _ => recorder.record_parsed_async(&payload).await?,
    };
    Ok(seq)
}

/// Write one `tool_called` event. `call.arguments`, `call.result` and `call.mcp` are given
/// inline; whichever is too large to inline is moved to a blob here (the `*_blob`
/// members). With `parsed`, the event is recorded with confidence `parsed` (the call was
/// read from another party's account, not seen); a `provider_run` call is always parsed.
///
/// # Errors
///
/// [`CaptureError::Evidence`] when a value cannot be inlined or moved to a blob, or the event
/// cannot be written.
pub async fn record_tool_call(
    recorder: &Recorder,
    mut call: ToolCalled,
    parsed: bool,
) -> Result<u64, CaptureError> {
    let (arguments, arguments_blob) = recorder.tool_value(std::mem::take(&mut call.arguments))?;
    call.arguments = arguments;
    call.arguments_blob = arguments_blob;
    let (result, result_blob) = recorder.tool_value(std::mem::take(&mut call.result))?;
    call.result = result;
    call.result_blob = result_blob;
    if let Some(mcp) = call.mcp.take() {
        let (inline, blob) = recorder.tool_value(mcp)?;
        call.mcp = Some(inline);
        call.mcp_blob = blob;
    }
    let seq = if parsed && !call.provider_run {
        recorder.record_parsed_async(&call).await?
    } else {
        recorder.record_async(&call).await?
    };
    Ok(seq)
}
