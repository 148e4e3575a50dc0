//! Offline models: no network, deterministic, and producing the same wire bytes an
//! OpenAI-compatible server would, so their responses record and parse like real ones.
//!
//! Usage estimate (the same for every offline model): `input_tokens` is the request body's
//! length in bytes divided by 4, rounded up; `output_tokens` is the length in bytes of the
//! answer text plus every tool call's name and arguments, divided by 4, rounded up.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::error::ModelError;
use crate::types::{
    Attempt, ModelRequest, ModelResponse, RawExchange, StreamDelta, ToolCall, Usage,
};
use crate::wire::{JSON_MEDIA_TYPE, SSE_MEDIA_TYPE, build_request_body, parse_response_streamed};

pub(crate) mod function;
pub(crate) mod replay;
pub(crate) mod script;
pub(crate) mod test_model;

/// What an offline model answers to one request: text, tool calls, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// The answer text, if any.
    pub text: Option<String>,
    /// Tool calls to request, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Reasoning text, sent as `reasoning_content` (as DeepSeek and vLLM send it), if any.
    pub reasoning: Option<String>,
}

impl Reply {
    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Reply {
            text: Some(text.into()),
            tool_calls: Vec::new(),
            reasoning: None,
        }
    }

    /// A response asking for these tool calls.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Reply {
            text: None,
            tool_calls: calls,
            reasoning: None,
        }
    }
}

/// The deterministic usage estimate of the offline models (see the module docs).
pub fn estimate_usage(request_body: &[u8], reply: &Reply) -> Usage {
    let out_bytes = reply.text.as_deref().map_or(0, str::len)
        + reply.reasoning.as_deref().map_or(0, str::len)
        + reply
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>();
    let input = request_body.len().div_ceil(4) as u64;
    let output = out_bytes.div_ceil(4) as u64;
    Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
        cached_input_tokens: None,
        cache_creation_input_tokens: None,
        reasoning_tokens: None,
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
           "total_tokens": u.total_tokens})
}

fn finish_reason(reply: &Reply) -> &'static str {
    if reply.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn wire_calls(reply: &Reply) -> Vec<Value> {
    reply
        .tool_calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect()
}

const RESPONSE_ID: &str = "chatcmpl-offline";

/// A `chat.completion` JSON body for `reply`.
pub(crate) fn render_json(model: &str, reply: &Reply, usage: &Usage) -> Bytes {
    let mut message = json!({"role": "assistant", "content": reply.text});
    if let Some(r) = &reply.reasoning {
        message["reasoning_content"] = Value::String(r.clone());
    }
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(wire_calls(reply));
    }
    let body = json!({
        "id": RESPONSE_ID, "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply)}],
        "usage": usage_json(usage),
    });
    Bytes::from(serde_json::to_vec_pretty(&body).unwrap_or_default())
}

/// An SSE body for `reply`, shaped like OpenAI's: a role chunk, the text, one chunk per
/// tool call, a finish chunk, a usage chunk with no choices, then `[DONE]`.
pub(crate) fn render_sse(model: &str, reply: &Reply, usage: &Usage) -> Bytes {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": RESPONSE_ID, "object": "chat.completion.chunk", "created": 0,
               "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(r) = &reply.reasoning {
        chunks.push(chunk(json!({"reasoning_content": r}), Value::Null));
    }
    if let Some(t) = &reply.text {
        chunks.push(chunk(json!({"content": t}), Value::Null));
    }
    for (i, c) in wire_calls(reply).into_iter().enumerate() {
        let mut c = c;
        c["index"] = json!(i);
        chunks.push(chunk(json!({"tool_calls": [c]}), Value::Null));
    }
    chunks.push(chunk(json!({}), json!(finish_reason(reply))));
    chunks.push(
        json!({"id": RESPONSE_ID, "object": "chat.completion.chunk", "created": 0,
                       "model": model, "choices": [], "usage": usage_json(usage)}),
    );
    let mut out = String::new();
    for c in chunks {
        out.push_str("data: ");
        out.push_str(&c.to_string());
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    Bytes::from(out)
}

/// The request bytes an offline model "sends" for `request`.
pub(crate) fn offline_request_body(model: &str, request: &ModelRequest, stream: bool) -> Bytes {
    let body = build_request_body(model, request, stream);
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// An exchange holding only the request (for errors raised before any response).
pub(crate) fn request_only(request_body: Bytes) -> RawExchange {
    RawExchange {
        request_body,
        request_media_type: JSON_MEDIA_TYPE.into(),
        ..RawExchange::default()
    }
}

/// Answers `request` with `reply` the way a server would: renders the wire bytes, then
/// parses them back with the same parser used for live responses.
pub(crate) fn respond(
    model: &str,
    request: &ModelRequest,
    reply: &Reply,
    on_delta: Option<&(dyn Fn(StreamDelta) + Send + Sync)>,
) -> Result<ModelResponse, ModelError> {
    let stream = on_delta.is_some();
    let request_body = offline_request_body(model, request, stream);
    let usage = estimate_usage(&request_body, reply);
    let (response_body, media_type) = if stream {
        (render_sse(model, reply, &usage), SSE_MEDIA_TYPE)
    } else {
        (render_json(model, reply, &usage), JSON_MEDIA_TYPE)
    };
    let raw = RawExchange {
        request_body,
        request_media_type: JSON_MEDIA_TYPE.into(),
        response_body: response_body.clone(),
        response_media_type: Some(media_type.into()),
        status: Some(200),
        attempts: vec![Attempt {
            status: Some(200),
            response_body,
            response_media_type: Some(media_type.into()),
            ..Attempt::default()
        }],
    };
    parse_response_streamed(raw, &mut |d| {
        if let Some(f) = on_delta {
            f(d)
        }
    })
}

/// Offline rendering of a response that no server sent.
impl ModelResponse {
    /// The exchange to record for a response that has no wire bytes (a hand-written
    /// model's): its parsed content rendered as the Chat Completions JSON body an
    /// OpenAI-compatible server would have sent (text, tool calls, usage), which
    /// [`crate::parse_response`] reads back to the same text and calls, so a replay
    /// gives the run the same answers. Reasoning and provider items are not rendered.
    pub fn rendered_exchange(&self, model: &str) -> RawExchange {
        let reply = Reply {
            text: self.text.clone(),
            tool_calls: self.tool_calls.clone(),
            reasoning: None,
        };
        let body = render_json(model, &reply, &self.usage);
        RawExchange {
            request_body: self.raw.request_body.clone(),
            request_media_type: if self.raw.request_media_type.is_empty() {
                JSON_MEDIA_TYPE.to_owned()
            } else {
                self.raw.request_media_type.clone()
            },
            response_body: body,
            response_media_type: Some(JSON_MEDIA_TYPE.to_owned()),
            status: Some(200),
            attempts: Vec::new(),
        }
    }
}
