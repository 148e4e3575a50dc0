//! Offline models: no network, deterministic, and producing the same wire bytes an
//! OpenAI-compatible server would, so their responses record and parse like real ones.
//!
//! Usage estimate (the same for every offline model): `input_tokens` is the request body's
//! length in bytes divided by 4, rounded up; `output_tokens` is the length in bytes of the
//! answer text plus every tool call's name and arguments, divided by 4, rounded up.

use bytes::Bytes;

use crate::error::ModelError;
use crate::types::{
    Attempt, ModelRequest, ModelResponse, RawExchange, StreamDelta, ToolCall, Usage,
};
use crate::wire::{
    Answer, JSON_MEDIA_TYPE, RequestRenderer, SSE_MEDIA_TYPE, parse_response_streamed, render_json,
    render_sse,
};

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

impl Reply {
    /// The reply as the wire renderers take it.
    fn answer(&self) -> Answer<'_> {
        Answer {
            text: self.text.as_deref(),
            reasoning: self.reasoning.as_deref(),
            tool_calls: &self.tool_calls,
        }
    }
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
    renderer: &RequestRenderer,
    request: &ModelRequest,
    reply: &Reply,
    on_delta: Option<&(dyn Fn(StreamDelta) + Send + Sync)>,
) -> Result<ModelResponse, ModelError> {
    let stream = on_delta.is_some();
    let request_body = renderer.render(model, request, stream);
    let usage = estimate_usage(&request_body, reply);
    let (response_body, media_type) = if stream {
        (render_sse(model, &reply.answer(), &usage), SSE_MEDIA_TYPE)
    } else {
        (render_json(model, &reply.answer(), &usage), JSON_MEDIA_TYPE)
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
