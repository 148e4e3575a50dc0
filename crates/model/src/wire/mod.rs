//! The OpenAI chat-completions wire format: building request bodies and parsing response
//! bodies (JSON or SSE) leniently, the same way for live, offline and recorded responses.
//!
//! `request` builds request bodies, and `render` the same bytes incrementally (appending
//! each request's new messages to the previous body's); `response` renders the response
//! bodies no server sent (offline models', hand-written models'); `completion` parses a
//! JSON completion, `sse` a
//! streamed one (accumulating deltas); `event_stream` is the one SSE parser of the crate,
//! which every streaming backend and recorded-body reader uses; `errors` reads provider error bodies and maps
//! HTTP statuses to typed errors; `parse` holds the entry points that pick between them.
//! This module holds what they all share.

mod completion;
mod errors;
mod event_stream;
mod extra;
mod parse;
mod render;
#[cfg(test)]
mod render_tests;
mod request;
mod response;
mod sse;

use serde_json::Value;

use crate::error::ModelError;
use crate::types::{
    FinishReason, ModelResponse, ProviderItem, ProviderToolCall, RawExchange, ToolCall, Usage,
};

#[cfg(feature = "http")]
pub(crate) use errors::http_status_error;
pub(crate) use errors::{error_info, error_info_from_value};
pub use event_stream::{SseEvent, SseParser, parse_event_stream};
pub(crate) use extra::merge_extra;
#[cfg(feature = "http")]
pub(crate) use parse::parse_body;
pub use parse::parse_response;
pub(crate) use parse::parse_response_streamed;
pub(crate) use render::RequestRenderer;
pub use request::{build_request_body, strip_extension_keys};
pub(crate) use response::{Answer, render_json, render_sse};
#[cfg(feature = "http")]
pub(crate) use sse::ChatEvents;

/// Media type of JSON bodies.
pub const JSON_MEDIA_TYPE: &str = "application/json";
/// Media type of SSE bodies.
pub const SSE_MEDIA_TYPE: &str = "text/event-stream";

/// What the parser found wrong with a body.
#[derive(Debug)]
pub(crate) enum BodyProblem {
    Malformed(String),
    Provider {
        code: Option<String>,
        status: Option<u16>,
        message: String,
    },
    Incomplete(String),
}

impl BodyProblem {
    pub(crate) fn into_error(self, exchange: RawExchange) -> ModelError {
        let exchange = Box::new(exchange);
        match self {
            BodyProblem::Malformed(message) => ModelError::MalformedResponse { message, exchange },
            BodyProblem::Provider {
                code,
                status,
                message,
            } => ModelError::ProviderError {
                code,
                status,
                message,
                exchange,
            },
            BodyProblem::Incomplete(message) => ModelError::StreamIncomplete { message, exchange },
        }
    }
}

/// The content of a response, before the raw bytes are attached.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub provider_items: Vec<ProviderItem>,
    pub provider_tool_calls: Vec<ProviderToolCall>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<FinishReason>,
    pub model: Option<String>,
    pub id: Option<String>,
}

impl Parsed {
    pub(crate) fn into_response(self, raw: RawExchange) -> ModelResponse {
        ModelResponse {
            text: self.text,
            reasoning: self.reasoning,
            tool_calls: self.tool_calls,
            provider_items: self.provider_items,
            provider_tool_calls: self.provider_tool_calls,
            usage_reported: self.usage.is_some(),
            usage: self.usage.unwrap_or_default(),
            finish_reason: self.finish_reason,
            model: self.model,
            id: self.id,
            raw,
        }
    }
}

/// Whether a body is SSE, by media type, else by its first bytes.
pub(crate) fn is_sse(media_type: Option<&str>, body: &[u8]) -> bool {
    if let Some(mt) = media_type {
        let mt = mt.to_ascii_lowercase();
        if mt.contains("event-stream") {
            return true;
        }
        if mt.contains("json") {
            return false;
        }
    }
    let start = String::from_utf8_lossy(&body[..body.len().min(64)]);
    let start = start.trim_start();
    start.starts_with("data:") || start.starts_with("event:") || start.starts_with(':')
}

pub(crate) fn number(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f.round() as u64))
}

pub(crate) fn snippet(s: &str) -> String {
    let s = s.trim();
    if s.is_empty() {
        return "(empty body)".into();
    }
    let mut out: String = s.chars().take(300).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// A stream event's data as JSON; an `error` event whose data is not JSON is the
/// provider's message as it stands.
pub(crate) fn event_json(event: &str, data: &str) -> Result<Value, BodyProblem> {
    match serde_json::from_str(data) {
        Ok(v) => Ok(v),
        Err(_) if event == "error" => Err(BodyProblem::Provider {
            code: None,
            status: None,
            message: snippet(data),
        }),
        Err(e) => Err(BodyProblem::Malformed(format!(
            "stream event is not JSON ({e}): {}",
            snippet(data)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StreamDelta;
    use serde_json::json;

    fn collect(body: &str) -> (Result<Parsed, BodyProblem>, Vec<StreamDelta>) {
        let mut deltas = Vec::new();
        let r = parse_body(body.as_bytes(), Some(SSE_MEDIA_TYPE), &mut |d| {
            deltas.push(d)
        });
        (r, deltas)
    }

    #[test]
    fn a_long_stream_is_read_whole_across_the_parsers_pieces() {
        // Many events, the first padded so that a two-byte character straddles the end
        // of the parser's first 8 KiB piece: the text comes back whole.
        let event = |text: &str| {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
            format!("data: {chunk}\n\n")
        };
        let head = event("").find("\"\"").unwrap() + 1;
        let first = format!("{}é", "a".repeat(8191 - head));
        let mut body = event(&first);
        assert_eq!(&body.as_bytes()[8191..8193], "é".as_bytes());
        let mut want = first;
        for i in 0..600 {
            let piece = format!("{i:04}é-{}", "z".repeat(40));
            want.push_str(&piece);
            body.push_str(&event(&piece));
        }
        body.push_str("data: [DONE]\n\n");
        let (parsed, deltas) = collect(&body);
        assert_eq!(parsed.unwrap().text.as_deref(), Some(want.as_str()));
        assert_eq!(deltas.len(), 601);
    }

    #[test]
    fn absurd_usage_counts_saturate_instead_of_overflowing() {
        // Found by the response_parser fuzz target: token counts near u64::MAX made the
        // derived total overflow (a panic in debug builds, a wrapped total in release).
        let body = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":18446744073709551615,"completion_tokens":1e300}}"#;
        let p = parse_body(body.as_bytes(), Some(JSON_MEDIA_TYPE), &mut |_| {}).unwrap();
        let usage = p.usage.unwrap();
        assert_eq!(usage.total_tokens, u64::MAX);
        let mut sum = usage;
        sum.add(&usage);
        assert_eq!((sum.input_tokens, sum.total_tokens), (u64::MAX, u64::MAX));
    }

    #[test]
    fn strips_extension_keywords_at_every_level_but_keeps_names() {
        let schema = json!({
            "type": "object", "x-a": 1,
            "properties": {"x-name": {"type": "string", "x-b": 2},
                           "list": {"type": "array", "items": {"x-c": 3, "type": "integer"}}},
            "$defs": {"D": {"x-d": 4, "anyOf": [{"x-e": 5, "type": "null"}]}},
            "default": {"x-data": "kept"},
            "required": ["x-name"]
        });
        assert_eq!(
            strip_extension_keys(&schema),
            json!({
                "type": "object",
                "properties": {"x-name": {"type": "string"},
                               "list": {"type": "array", "items": {"type": "integer"}}},
                "$defs": {"D": {"anyOf": [{"type": "null"}]}},
                "default": {"x-data": "kept"},
                "required": ["x-name"]
            })
        );
    }

    #[test]
    fn tool_calls_without_index_and_repeated_full_arguments() {
        let body = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n"
        );
        let (r, deltas) = collect(body);
        let p = r.unwrap();
        let calls: Vec<_> = p
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, vec![("a", "f", "{\"x\":1}"), ("b", "g", "{}")]);
        assert_eq!(
            deltas.len(),
            3,
            "the repeated arguments add no delta: {deltas:?}"
        );
    }

    #[test]
    fn error_event_without_json_and_empty_stream() {
        let (r, _) = collect("event: error\ndata: upstream exploded\n\n");
        assert!(
            matches!(r, Err(BodyProblem::Provider { ref message, .. }) if message == "upstream exploded"),
            "{r:?}"
        );
        let (r, _) = collect("");
        assert!(matches!(r, Err(BodyProblem::Incomplete(_))), "{r:?}");
        let (r, _) = collect(": keepalive comment\n\ndata: [DONE]\n\n");
        let p = r.unwrap();
        assert!(p.text.is_none() && p.tool_calls.is_empty() && p.usage.is_none());
    }

    #[test]
    fn error_bodies_of_every_shape() {
        let i = error_info(br#"{"error":{"message":"m","code":429,"param":"p","type":"t"}}"#);
        assert_eq!(
            (i.message.as_str(), i.code.as_deref(), i.param.as_deref()),
            ("m", Some("429"), Some("p"))
        );
        assert_eq!(error_info(br#"{"error":"plain"}"#).message, "plain");
        assert_eq!(
            error_info(br#"{"detail":"Not Found"}"#).message,
            "Not Found"
        );
        assert_eq!(error_info(b"  Bad Gateway \n").message, "Bad Gateway");
        assert_eq!(error_info(b"").message, "(empty body)");
        let long = "x".repeat(1000);
        assert!(error_info(long.as_bytes()).message.chars().count() <= 301);
    }
}
