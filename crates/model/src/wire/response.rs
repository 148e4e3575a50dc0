//! Rendering chat-completions response bodies that no server sent: an offline model's
//! answers (JSON or SSE), and a hand-written model's response as the exchange recorded
//! for it ([`ModelResponse::rendered_exchange`]).

use bytes::Bytes;
use serde_json::{Value, json};

use super::JSON_MEDIA_TYPE;
use crate::types::{ModelResponse, RawExchange, ToolCall, Usage};

/// What a rendered response says: text, reasoning and tool calls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answer<'a> {
    /// The answer text, if any.
    pub text: Option<&'a str>,
    /// Reasoning text, sent as `reasoning_content`, if any.
    pub reasoning: Option<&'a str>,
    /// Tool calls, in order.
    pub tool_calls: &'a [ToolCall],
}

fn usage_json(u: &Usage) -> Value {
    json!({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
           "total_tokens": u.total_tokens})
}

fn finish_reason(answer: &Answer<'_>) -> &'static str {
    if answer.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn wire_calls(answer: &Answer<'_>) -> Vec<Value> {
    answer
        .tool_calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect()
}

const RESPONSE_ID: &str = "chatcmpl-offline";

/// A `chat.completion` JSON body for `answer`.
pub(crate) fn render_json(model: &str, answer: &Answer<'_>, usage: &Usage) -> Bytes {
    let mut message = json!({"role": "assistant", "content": answer.text});
    if let Some(r) = answer.reasoning {
        message["reasoning_content"] = Value::String(r.to_owned());
    }
    if !answer.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(wire_calls(answer));
    }
    let body = json!({
        "id": RESPONSE_ID, "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(answer)}],
        "usage": usage_json(usage),
    });
    Bytes::from(serde_json::to_vec_pretty(&body).unwrap_or_default())
}

/// An SSE body for `answer`, shaped like OpenAI's: a role chunk, the text, one chunk per
/// tool call, a finish chunk, a usage chunk with no choices, then `[DONE]`.
pub(crate) fn render_sse(model: &str, answer: &Answer<'_>, usage: &Usage) -> Bytes {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": RESPONSE_ID, "object": "chat.completion.chunk", "created": 0,
               "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(r) = answer.reasoning {
        chunks.push(chunk(json!({"reasoning_content": r}), Value::Null));
    }
    if let Some(t) = answer.text {
        chunks.push(chunk(json!({"content": t}), Value::Null));
    }
    for (i, c) in wire_calls(answer).into_iter().enumerate() {
        let mut c = c;
        c["index"] = json!(i);
        chunks.push(chunk(json!({"tool_calls": [c]}), Value::Null));
    }
    chunks.push(chunk(json!({}), json!(finish_reason(answer))));
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

/// Offline rendering of a response that no server sent.
impl ModelResponse {
    /// The exchange to record for a response that has no wire bytes (a hand-written
    /// model's): its parsed content rendered as the Chat Completions JSON body an
    /// OpenAI-compatible server would have sent (text, tool calls, usage), which
    /// [`crate::parse_response`] reads back to the same text and calls, so a replay
    /// gives the run the same answers. Reasoning and provider items are not rendered.
    pub fn rendered_exchange(&self, model: &str) -> RawExchange {
        let answer = Answer {
            text: self.text.as_deref(),
            tool_calls: &self.tool_calls,
            reasoning: None,
        };
        let body = render_json(model, &answer, &self.usage);
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
