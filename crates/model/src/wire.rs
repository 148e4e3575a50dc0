//! The OpenAI chat-completions wire format: building request bodies and parsing response
//! bodies (JSON or SSE) leniently, the same way for live, offline and recorded responses.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Map, Value, json};

use crate::error::ModelError;
use crate::types::{
    FinishReason, Message, ModelRequest, ModelResponse, ProviderItem, ProviderToolCall,
    RawExchange, StreamDelta, ToolCall, ToolChoice, Usage,
};

/// Media type of JSON bodies.
pub const JSON_MEDIA_TYPE: &str = "application/json";
/// Media type of SSE bodies.
pub const SSE_MEDIA_TYPE: &str = "text/event-stream";

/// Builds the chat-completions request body for `model`. `stream` adds `"stream": true`
/// and `stream_options.include_usage`. Tool schemas lose their `x-*` keywords.
pub fn build_request_body(model: &str, request: &ModelRequest, stream: bool) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message_to_wire).collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    let s = &request.settings;
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": strip_extension_keys(&t.parameters),
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &s.tool_choice {
            let v = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool { name } => {
                    json!({"type": "function", "function": {"name": name}})
                }
            };
            body.insert("tool_choice".into(), v);
        }
        if let Some(p) = s.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(p));
        }
    }
    if let Some(v) = s.max_tokens {
        body.insert("max_tokens".into(), json!(v));
    }
    if let Some(v) = s.temperature {
        body.insert("temperature".into(), json!(v));
    }
    if let Some(v) = s.top_p {
        body.insert("top_p".into(), json!(v));
    }
    if let Some(v) = s.seed {
        body.insert("seed".into(), json!(v));
    }
    if !s.stop.is_empty() {
        body.insert("stop".into(), json!(s.stop));
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (k, v) in &s.extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(body)
}

fn message_to_wire(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            text, tool_calls, ..
        } => {
            let mut o = Map::new();
            o.insert("role".into(), json!("assistant"));
            o.insert(
                "content".into(),
                match text {
                    Some(t) => json!(t),
                    None if tool_calls.is_empty() => json!(""),
                    None => Value::Null,
                },
            );
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
                o.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(o)
        }
        Message::Tool {
            call_id, content, ..
        } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
    }
}

/// Keywords whose value maps names (not keywords) to subschemas.
const NAME_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is data, not schema.
const DATA_KEYS: &[&str] = &["enum", "const", "default", "examples", "required"];

/// Returns a copy of a JSON Schema without `x-*` extension keywords, at every level of
/// subschema. Property names that start with `x-` are kept: only keywords are removed.
pub fn strip_extension_keys(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if k.starts_with("x-") {
                    continue;
                }
                let v = if NAME_MAPS.contains(&k.as_str()) {
                    match v {
                        Value::Object(names) => Value::Object(
                            names
                                .iter()
                                .map(|(n, s)| (n.clone(), strip_extension_keys(s)))
                                .collect(),
                        ),
                        other => other.clone(),
                    }
                } else if DATA_KEYS.contains(&k.as_str()) {
                    v.clone()
                } else {
                    strip_extension_keys(v)
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(strip_extension_keys).collect()),
        other => other.clone(),
    }
}

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

/// Parses a successful response body, JSON or SSE. Stream deltas go to `on_delta`.
pub(crate) fn parse_body(
    body: &[u8],
    media_type: Option<&str>,
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<Parsed, BodyProblem> {
    if is_sse(media_type, body) {
        parse_sse(body, on_delta)
    } else {
        parse_json_completion(body)
    }
}

/// Parses any recorded response: the status (when given and not 2xx) maps to the typed
/// error a live request would have given; otherwise the body is parsed leniently.
///
/// This is how [`crate::ReplayModel`] and the offline models read responses back, and how
/// recorded evidence can be re-read by other crates.
pub fn parse_response(raw: RawExchange) -> Result<ModelResponse, ModelError> {
    parse_response_streamed(raw, &mut |_| {})
}

/// [`parse_response`], reporting stream deltas as they are parsed.
pub(crate) fn parse_response_streamed(
    raw: RawExchange,
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<ModelResponse, ModelError> {
    if let Some(status) = raw.status
        && !(200..300).contains(&status)
    {
        let body = raw.response_body.clone();
        return Err(http_status_error(status, &body, None, raw));
    }
    match parse_body(
        &raw.response_body,
        raw.response_media_type.as_deref(),
        on_delta,
    ) {
        Ok(p) => Ok(p.into_response(raw)),
        Err(p) => Err(p.into_error(raw)),
    }
}

fn parse_json_completion(body: &[u8]) -> Result<Parsed, BodyProblem> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        BodyProblem::Malformed(format!(
            "body is not JSON ({e}): {}",
            snippet(&String::from_utf8_lossy(body))
        ))
    })?;
    let obj = v
        .as_object()
        .ok_or_else(|| BodyProblem::Malformed("body is not a JSON object".into()))?;
    if let Some(err) = obj.get("error").filter(|e| !e.is_null()) {
        let info = error_info_from_value(err);
        return Err(BodyProblem::Provider {
            code: info.code,
            status: info.status,
            message: info.message,
        });
    }
    let choices = obj
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(|| BodyProblem::Malformed("no `choices` array in the completion".into()))?;
    let choice = choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        .or_else(|| choices.first())
        .ok_or_else(|| BodyProblem::Malformed("`choices` is empty".into()))?;
    let message = choice.get("message").cloned().unwrap_or(Value::Null);
    let mut p = Parsed {
        text: message.get("content").and_then(content_text),
        reasoning: reasoning_text(&message),
        usage: obj.get("usage").and_then(parse_usage),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(FinishReason::from),
        model: obj.get("model").and_then(Value::as_str).map(str::to_owned),
        id: obj.get("id").and_then(Value::as_str).map(str::to_owned),
        ..Parsed::default()
    };
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (i, c) in calls.iter().enumerate() {
            let f = c.get("function").cloned().unwrap_or(Value::Null);
            p.tool_calls.push(ToolCall {
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("call_{i}")),
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                arguments: f.get("arguments").map(arguments_text).unwrap_or_default(),
            });
        }
    }
    if let Some(tools) = message.get("executed_tools").and_then(Value::as_array) {
        p.provider_tool_calls = tools.iter().map(provider_tool_call).collect();
    }
    Ok(p)
}

/// Text of a `content` value: a string, or an array of parts whose `text` is joined.
fn content_text(v: &Value) -> Option<String> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<String>(),
        _ => return None,
    };
    (!s.is_empty()).then_some(s)
}

fn reasoning_text(v: &Value) -> Option<String> {
    ["reasoning", "reasoning_content"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_str))
        .find(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Arguments as text: a string as is, an object (some servers send one) serialised,
/// null as empty.
fn arguments_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn provider_tool_call(v: &Value) -> ProviderToolCall {
    let text = |k: &str| {
        v.get(k).filter(|x| !x.is_null()).map(|x| match x {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    ProviderToolCall {
        kind: text("type")
            .or_else(|| text("name"))
            .unwrap_or_else(|| "unknown".into()),
        arguments: text("arguments"),
        output: text("output"),
        details: v.clone(),
    }
}

pub(crate) fn number(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f.round() as u64))
}

fn parse_usage(v: &Value) -> Option<Usage> {
    let o = v.as_object()?;
    let input = number(o.get("prompt_tokens")).or_else(|| number(o.get("input_tokens")));
    let output = number(o.get("completion_tokens")).or_else(|| number(o.get("output_tokens")));
    if input.is_none() && output.is_none() {
        return None;
    }
    let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
    Some(Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: number(o.get("total_tokens")).unwrap_or(input.saturating_add(output)),
        cached_input_tokens: number(
            o.get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        ),
        cache_creation_input_tokens: None,
        reasoning_tokens: number(
            o.get("completion_tokens_details")
                .and_then(|d| d.get("reasoning_tokens")),
        ),
    })
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

/// Parses an SSE body with `eventsource-stream` (the parser async-openai uses on the wire).
fn parse_sse(body: &[u8], on_delta: &mut dyn FnMut(StreamDelta)) -> Result<Parsed, BodyProblem> {
    let input = futures_util::stream::iter([Ok::<_, Infallible>(Bytes::copy_from_slice(body))]);
    // The input stream is always ready, so the collection completes on its first poll.
    let events = input
        .eventsource()
        .collect::<Vec<_>>()
        .now_or_never()
        .ok_or_else(|| BodyProblem::Malformed("SSE parser did not finish".into()))?;
    let mut acc = StreamAccumulator::default();
    let mut saw_done = false;
    for event in events {
        let event = event.map_err(|e| BodyProblem::Malformed(format!("bad SSE framing: {e}")))?;
        if event.data == "[DONE]" {
            saw_done = true;
            break;
        }
        if event.event == "keepalive" || event.data.trim().is_empty() && event.event != "error" {
            continue;
        }
        if event.event == "error" {
            let info = match serde_json::from_str::<Value>(&event.data) {
                Ok(v) => error_info_from_value(v.get("error").unwrap_or(&v)),
                Err(_) => ErrorInfo::text(&event.data),
            };
            return Err(BodyProblem::Provider {
                code: info.code,
                status: info.status,
                message: info.message,
            });
        }
        let chunk: Value = serde_json::from_str(&event.data).map_err(|e| {
            BodyProblem::Malformed(format!(
                "stream event is not JSON ({e}): {}",
                snippet(&event.data)
            ))
        })?;
        acc.push(&chunk, on_delta)?;
    }
    acc.finish(saw_done)
}

#[derive(Debug, Default)]
struct PartialCall {
    key: Option<u64>,
    id: String,
    name: String,
    arguments: String,
}

/// Reassembles streamed chunks into one response, reporting deltas.
#[derive(Debug, Default)]
pub(crate) struct StreamAccumulator {
    text: String,
    reasoning: String,
    calls: Vec<PartialCall>,
    provider: Vec<(Option<u64>, ProviderToolCall)>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    model: Option<String>,
    id: Option<String>,
}

impl StreamAccumulator {
    /// Adds one chunk. A chunk holding an `error` object is a provider error.
    pub(crate) fn push(
        &mut self,
        chunk: &Value,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let info = error_info_from_value(err);
            return Err(BodyProblem::Provider {
                code: info.code,
                status: info.status,
                message: info.message,
            });
        }
        if self.model.is_none() {
            self.model = chunk
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        if self.id.is_none() {
            self.id = chunk.get("id").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(u) = chunk.get("usage").and_then(parse_usage) {
            self.usage = Some(u);
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(());
        };
        for choice in choices {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(FinishReason::from(r));
            }
            let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
                continue;
            };
            if let Some(t) = delta.get("content").and_then(content_text) {
                self.text.push_str(&t);
                on_delta(StreamDelta::Text(t));
            }
            if let Some(r) = reasoning_text(delta) {
                self.reasoning.push_str(&r);
                on_delta(StreamDelta::Reasoning(r));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for c in calls {
                    self.push_call(c, on_delta);
                }
            }
            if let Some(tools) = delta.get("executed_tools").and_then(Value::as_array) {
                for t in tools {
                    let key = t.get("index").and_then(Value::as_u64);
                    let call = provider_tool_call(t);
                    match self
                        .provider
                        .iter_mut()
                        .find(|(k, _)| key.is_some() && *k == key)
                    {
                        Some(slot) => slot.1 = call,
                        None => self.provider.push((key, call)),
                    }
                }
            }
        }
        Ok(())
    }

    fn push_call(&mut self, c: &Value, on_delta: &mut dyn FnMut(StreamDelta)) {
        let key = c.get("index").and_then(Value::as_u64);
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let pos = match (key, id) {
            (Some(k), _) => self.calls.iter().position(|p| p.key == Some(k)),
            (None, Some(id)) => self.calls.iter().position(|p| p.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let pos = pos.unwrap_or_else(|| {
            self.calls.push(PartialCall {
                key,
                ..PartialCall::default()
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[pos];
        let mut new_id = None;
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.to_owned();
            new_id = Some(call.id.clone());
        }
        let f = c.get("function");
        let mut new_name = None;
        if let Some(name) = f
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            && call.name.is_empty()
        {
            call.name = name.to_owned();
            new_name = Some(call.name.clone());
        }
        let fragment = f
            .and_then(|f| f.get("arguments"))
            .map(arguments_text)
            .unwrap_or_default();
        // Some providers resend the complete arguments in a later chunk; appending them
        // again would corrupt the call, so a repeat of a complete object is dropped.
        let repeat = !call.arguments.is_empty()
            && fragment == call.arguments
            && serde_json::from_str::<Value>(&fragment).is_ok();
        let added = if repeat { String::new() } else { fragment };
        call.arguments.push_str(&added);
        if new_id.is_some() || new_name.is_some() || !added.is_empty() {
            on_delta(StreamDelta::ToolCall {
                index: pos,
                id: new_id,
                name: new_name,
                arguments: added,
            });
        }
    }

    /// Ends the stream. Without `[DONE]`, a finish reason must have been seen.
    pub(crate) fn finish(self, saw_done: bool) -> Result<Parsed, BodyProblem> {
        if !saw_done && self.finish.is_none() {
            return Err(BodyProblem::Incomplete(
                "the stream ended with neither [DONE] nor a finish reason".into(),
            ));
        }
        if !saw_done {
            tracing::warn!("stream ended without [DONE] after a finish reason; accepted");
        }
        Ok(Parsed {
            text: (!self.text.is_empty()).then_some(self.text),
            reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
            tool_calls: self
                .calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: if c.id.is_empty() {
                        format!("call_{i}")
                    } else {
                        c.id
                    },
                    name: c.name,
                    arguments: c.arguments,
                })
                .collect(),
            provider_items: Vec::new(),
            provider_tool_calls: self.provider.into_iter().map(|(_, c)| c).collect(),
            usage: self.usage,
            finish_reason: self.finish,
            model: self.model,
            id: self.id,
        })
    }
}

/// The fields of a provider error object.
#[derive(Debug, Default)]
pub(crate) struct ErrorInfo {
    pub message: String,
    pub code: Option<String>,
    pub param: Option<String>,
    pub kind: Option<String>,
    pub status: Option<u16>,
}

impl ErrorInfo {
    fn text(s: &str) -> Self {
        ErrorInfo {
            message: snippet(s),
            ..ErrorInfo::default()
        }
    }
}

fn scalar_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(crate) fn error_info_from_value(err: &Value) -> ErrorInfo {
    match err {
        Value::String(s) => ErrorInfo::text(s),
        Value::Object(o) => {
            let mut message = scalar_text(o.get("message"))
                .or_else(|| scalar_text(o.get("detail")))
                .unwrap_or_else(|| snippet(&err.to_string()));
            // OpenRouter puts the upstream provider's words in `metadata.raw`.
            if let Some(meta) = o.get("metadata") {
                let raw = scalar_text(meta.get("raw"));
                let provider = scalar_text(meta.get("provider_name"));
                match (provider, raw) {
                    (Some(p), Some(r)) => message = format!("{message} ({p}: {})", snippet(&r)),
                    (None, Some(r)) => message = format!("{message} ({})", snippet(&r)),
                    _ => {}
                }
            }
            ErrorInfo {
                message,
                code: scalar_text(o.get("code")),
                param: scalar_text(o.get("param")),
                kind: scalar_text(o.get("type")),
                status: number(o.get("status_code").or_else(|| o.get("status")))
                    .and_then(|n| u16::try_from(n).ok()),
            }
        }
        other => ErrorInfo::text(&other.to_string()),
    }
}

/// Reads an error body: an OpenAI-style `{"error": {…}}`, `{"error": "…"}`,
/// `{"message"|"detail": …}`, or any non-JSON text.
pub(crate) fn error_info(body: &[u8]) -> ErrorInfo {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => match v.get("error").filter(|e| !e.is_null()) {
            Some(e) => error_info_from_value(e),
            None => error_info_from_value(&v),
        },
        Err(_) => ErrorInfo::text(&String::from_utf8_lossy(body)),
    }
}

/// Maps an error status and its body to a typed error.
pub(crate) fn http_status_error(
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
    exchange: RawExchange,
) -> ModelError {
    let info = error_info(body);
    let exchange = Box::new(exchange);
    match status {
        429 => ModelError::RateLimited {
            status,
            code: info.code.or(info.kind),
            message: info.message,
            retry_after,
            exchange,
        },
        401 | 403 => ModelError::Unauthorized {
            status,
            code: None,
            message: info.message,
            exchange,
        },
        500..=599 => ModelError::ServerError {
            status,
            code: None,
            message: info.message,
            exchange,
        },
        _ => ModelError::BadRequest {
            status,
            code: info.code,
            param: info.param,
            message: info.message,
            exchange,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(body: &str) -> (Result<Parsed, BodyProblem>, Vec<StreamDelta>) {
        let mut deltas = Vec::new();
        let r = parse_body(body.as_bytes(), Some(SSE_MEDIA_TYPE), &mut |d| {
            deltas.push(d)
        });
        (r, deltas)
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
