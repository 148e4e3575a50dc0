//! [`AnthropicModel`]: Anthropic's Messages API (`POST {base}/v1/messages`), natively.
//!
//! A small typed client on reqwest and eventsource-stream (see [`crate::native`]): the
//! request body is built here from the provider-neutral history, and responses (JSON or
//! SSE) are read leniently into the same [`ModelResponse`] as every other backend.
//! `thinking` and `redacted_thinking` blocks are kept as [`ProviderItem`]s and sent back
//! unchanged on the next turn, as the API requires.

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
#[cfg(feature = "http")]
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::Model;
use crate::error::ModelError;
#[cfg(feature = "http")]
use crate::native::Endpoint;
use crate::native::{self, LiveEvents};
use crate::openai::{
    ApiKey, DEFAULT_MAX_RESPONSE_BYTES, RetryPolicy, Timeouts, base_and_key, env_value,
};
use crate::types::{
    FinishReason, Message, ModelRequest, ModelResponse, ProviderItem, ProviderToolCall,
    StreamDelta, ToolCall, ToolChoice, Usage,
};
use crate::wire::{
    BodyProblem, Parsed, error_info_from_value, is_sse, number, snippet, strip_extension_keys,
};

/// The public Anthropic API, used when no base URL is given.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent unless configured otherwise.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The `max_tokens` sent when the request's settings give none (the API requires one).
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 8192;
/// The [`ProviderItem::api`] of Anthropic's items.
pub const API_TAG: &str = "anthropic";

/// Where and how [`AnthropicModel`] connects.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The model name sent in requests (e.g. `claude-sonnet-4-5`).
    pub model: String,
    /// The API base, without `/v1/messages` (e.g. `https://api.anthropic.com`).
    pub base_url: String,
    /// The key sent as `x-api-key`; never recorded, logged or shown.
    pub api_key: Option<ApiKey>,
    /// The `anthropic-version` header.
    pub version: String,
    /// `max_tokens` when the request's settings give none.
    pub default_max_tokens: u32,
    /// Extra request headers (e.g. `anthropic-beta`). Their values are treated as secrets.
    pub headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries (429, 5xx including 529 `overloaded_error`, connection failures).
    pub retry: RetryPolicy,
    /// The largest response body read from one attempt, in bytes.
    pub max_response_bytes: usize,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("AnthropicConfig")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("version", &self.version)
            .field("default_max_tokens", &self.default_max_tokens)
            .field("headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl AnthropicConfig {
    /// A configuration with default version, timeouts and retries.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<ApiKey>,
    ) -> Self {
        AnthropicConfig {
            model: model.into(),
            base_url: base_url.into(),
            api_key,
            version: ANTHROPIC_VERSION.into(),
            default_max_tokens: ANTHROPIC_DEFAULT_MAX_TOKENS,
            headers: Vec::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// A configuration from `ANTHROPIC_BASE_URL` (default [`ANTHROPIC_DEFAULT_BASE_URL`])
    /// and `ANTHROPIC_API_KEY`, required for the default base URL.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::from_values(
            model,
            env_value("ANTHROPIC_BASE_URL"),
            env_value("ANTHROPIC_API_KEY"),
        )
    }

    /// [`AnthropicConfig::from_env`] with the two values given.
    pub fn from_values(
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        let (base_url, api_key) = base_and_key(
            base_url,
            api_key,
            ANTHROPIC_DEFAULT_BASE_URL,
            "ANTHROPIC_API_KEY",
            "Anthropic",
        )?;
        Ok(Self::new(model, base_url, api_key))
    }
}

/// A model served by Anthropic's Messages API.
#[cfg(feature = "http")]
pub struct AnthropicModel {
    name: String,
    config: AnthropicConfig,
    endpoint: Endpoint,
}

#[cfg(feature = "http")]
impl fmt::Debug for AnthropicModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicModel")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "http")]
impl AnthropicModel {
    /// A model for `config`. Fails on a base URL that is not http(s), an empty model
    /// name, or a key or header that cannot be sent in an HTTP header.
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim_end_matches('/').to_owned();
        if config.model.trim().is_empty() {
            return Err(ModelError::Config("the model name is empty".into()));
        }
        let http = native::http_client(&base, &config.timeouts)?;
        let mut headers = HeaderMap::new();
        let mut secrets = Vec::new();
        if let Some(key) = &config.api_key {
            native::header(&mut headers, "x-api-key", key.expose(), true)?;
            secrets.push(key.expose().to_owned());
        }
        native::header(&mut headers, "anthropic-version", &config.version, false)?;
        for (name, value) in &config.headers {
            native::header(&mut headers, name, value, true)?;
            secrets.push(value.clone());
        }
        secrets.retain(|s| s.len() >= 4);
        let endpoint = Endpoint {
            url: format!("{base}/v1/messages"),
            headers,
            secrets,
            timeouts: config.timeouts,
            retry: config.retry,
            max_body: config.max_response_bytes,
            http,
            parse: parse_body,
        };
        Ok(AnthropicModel {
            name: format!("anthropic:{}", config.model),
            config,
            endpoint,
        })
    }

    /// A model named `model` configured from the environment
    /// ([`AnthropicConfig::from_env`]).
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::new(AnthropicConfig::from_env(model)?)
    }

    /// The configuration.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    fn body(&self, request: &ModelRequest, stream: bool) -> Bytes {
        let body = build_request_body(
            &self.config.model,
            request,
            stream,
            self.config.default_max_tokens,
        );
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }
}

#[async_trait]
#[cfg(feature = "http")]
impl Model for AnthropicModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let span = tracing::info_span!("model_request", model = %self.config.model, stream = false);
        let body = self.body(request, false);
        self.endpoint.run(body, None).instrument(span).await
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let span = tracing::info_span!("model_request", model = %self.config.model, stream = true);
        let body = self.body(request, true);
        let live: Box<dyn LiveEvents> = Box::new(StreamState::default());
        self.endpoint
            .run(body, Some((live, on_delta)))
            .instrument(span)
            .await
    }
}

const EPHEMERAL: fn() -> Value = || json!({"type": "ephemeral"});

/// Builds the Messages request body for `model`: system prompt, messages (tool results
/// as `tool_result` blocks in a user turn, thinking blocks sent back first in their
/// assistant turn), tools as `input_schema`, and the settings. With
/// [`crate::ModelSettings::prompt_caching`], the system prompt and the last tool carry
/// `cache_control`.
pub fn build_request_body(
    model: &str,
    request: &ModelRequest,
    stream: bool,
    default_max_tokens: u32,
) -> Value {
    let s = &request.settings;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        let text = system.join("\n\n");
        let v = if s.prompt_caching {
            json!([{"type": "text", "text": text, "cache_control": EPHEMERAL()}])
        } else {
            json!(text)
        };
        body.insert("system".into(), v);
    }
    body.insert(
        "messages".into(),
        Value::Array(messages_to_wire(&request.messages)),
    );
    body.insert(
        "max_tokens".into(),
        json!(s.max_tokens.unwrap_or(default_max_tokens)),
    );
    if !request.tools.is_empty() {
        let n = request.tools.len();
        let tools: Vec<Value> = request
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut o = Map::new();
                o.insert("name".into(), json!(t.name));
                if !t.description.is_empty() {
                    o.insert("description".into(), json!(t.description));
                }
                o.insert("input_schema".into(), strip_extension_keys(&t.parameters));
                if s.prompt_caching && i + 1 == n {
                    o.insert("cache_control".into(), EPHEMERAL());
                }
                Value::Object(o)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let mut choice = match &s.tool_choice {
            Some(ToolChoice::Auto) => Some(json!({"type": "auto"})),
            Some(ToolChoice::None) => Some(json!({"type": "none"})),
            Some(ToolChoice::Required) => Some(json!({"type": "any"})),
            Some(ToolChoice::Tool { name }) => Some(json!({"type": "tool", "name": name})),
            None => None,
        };
        if s.parallel_tool_calls == Some(false) {
            let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
            if c["type"] != "none" {
                c["disable_parallel_tool_use"] = json!(true);
            }
        }
        if let Some(c) = choice {
            body.insert("tool_choice".into(), c);
        }
    }
    if let Some(v) = s.temperature {
        body.insert("temperature".into(), json!(v));
    }
    if let Some(v) = s.top_p {
        body.insert("top_p".into(), json!(v));
    }
    if !s.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(s.stop));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    for (k, v) in &s.extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(body)
}

/// Tool arguments as a JSON object for `tool_use.input` (the API refuses anything else;
/// arguments that are not an object, from another provider's history, go as `{}`).
fn input_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            tracing::warn!("tool call arguments are not a JSON object; sent as {{}}");
            json!({})
        }
    }
}

fn messages_to_wire(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // Whether the last wire message is a user turn holding tool results, which a
    // following user text joins (the API wants the results first in that turn).
    let mut open_results = false;
    for m in messages {
        match m {
            Message::System { .. } => {}
            Message::User { content } => {
                let block = json!({"type": "text", "text": content});
                if open_results && let Some(last) = out.last_mut() {
                    push_block(last, block);
                } else {
                    out.push(json!({"role": "user", "content": [block]}));
                }
                open_results = false;
            }
            Message::Assistant {
                text,
                tool_calls,
                provider_items,
            } => {
                let mut content: Vec<Value> = provider_items
                    .iter()
                    .filter(|p| p.api == API_TAG)
                    .map(|p| p.item.clone())
                    .collect();
                if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                    content.push(json!({"type": "text", "text": t}));
                }
                for c in tool_calls {
                    content.push(json!({
                        "type": "tool_use", "id": c.id, "name": c.name,
                        "input": input_object(&c.arguments),
                    }));
                }
                if !content.is_empty() {
                    out.push(json!({"role": "assistant", "content": content}));
                }
                open_results = false;
            }
            Message::Tool {
                call_id,
                content,
                ok,
                ..
            } => {
                let mut block =
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                if !ok {
                    block["is_error"] = json!(true);
                }
                if open_results && let Some(last) = out.last_mut() {
                    push_block(last, block);
                } else {
                    out.push(json!({"role": "user", "content": [block]}));
                }
                open_results = true;
            }
        }
    }
    out
}

fn push_block(message: &mut Value, block: Value) {
    if let Some(a) = message.get_mut("content").and_then(Value::as_array_mut) {
        a.push(block);
    }
}

/// Maps a `stop_reason`: `end_turn` and `stop_sequence` are a stop, `tool_use` tool calls,
/// `max_tokens` the length limit, `refusal` a content filter; anything else (such as
/// `pause_turn`) is kept as sent.
pub fn finish_reason(stop_reason: &str) -> FinishReason {
    match stop_reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Token counts from a `usage` object, merged into `acc` (a stream reports some in
/// `message_start` and the final ones in `message_delta`).
#[derive(Debug, Default, Clone, Copy)]
struct RawUsage {
    input: Option<u64>,
    output: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    thinking: Option<u64>,
}

impl RawUsage {
    fn merge(&mut self, v: &Value) {
        let get = |k: &str| number(v.get(k));
        self.input = get("input_tokens").or(self.input);
        self.output = get("output_tokens").or(self.output);
        self.cache_creation = get("cache_creation_input_tokens").or(self.cache_creation);
        self.cache_read = get("cache_read_input_tokens").or(self.cache_read);
        self.thinking = number(
            v.get("output_tokens_details")
                .and_then(|d| d.get("thinking_tokens")),
        )
        .or(self.thinking);
    }

    /// `input_tokens` counts the whole prompt: Anthropic's uncached input plus the cache
    /// writes and reads (which its `input_tokens` leaves out).
    fn usage(&self) -> Option<Usage> {
        if self.input.is_none() && self.output.is_none() {
            return None;
        }
        let input = self
            .input
            .unwrap_or(0)
            .saturating_add(self.cache_creation.unwrap_or(0))
            .saturating_add(self.cache_read.unwrap_or(0));
        let output = self.output.unwrap_or(0);
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input.saturating_add(output),
            cached_input_tokens: self.cache_read,
            cache_creation_input_tokens: self.cache_creation,
            reasoning_tokens: self.thinking,
        })
    }
}

/// One content block as it is assembled.
#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(Value),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
        streamed: bool,
    },
    Server(Value),
}

fn block_type(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

/// A content block from a response (or a `content_block_start`), or a typed problem.
fn read_block(v: &Value) -> Result<Block, BodyProblem> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match block_type(v) {
        "text" => Ok(Block::Text(text("text"))),
        "thinking" => Ok(Block::Thinking {
            thinking: text("thinking"),
            signature: text("signature"),
        }),
        "redacted_thinking" => Ok(Block::Redacted(v.clone())),
        "tool_use" => {
            let input = v.get("input").cloned().unwrap_or_else(|| json!({}));
            if !input.is_object() {
                return Err(BodyProblem::Malformed(format!(
                    "tool_use {} has an input that is not a JSON object: {}",
                    text("id"),
                    snippet(&input.to_string())
                )));
            }
            let id = text("id");
            if id.is_empty() {
                return Err(BodyProblem::Malformed("a tool_use block has no id".into()));
            }
            Ok(Block::ToolUse {
                id,
                name: text("name"),
                start_input: input,
                json: String::new(),
                streamed: false,
            })
        }
        // Tools Anthropic runs itself (web search, code execution) and their results.
        t if t == "server_tool_use" || t.ends_with("_tool_result") => Ok(Block::Server(v.clone())),
        "" => Err(BodyProblem::Malformed(format!(
            "a content block has no type: {}",
            snippet(&v.to_string())
        ))),
        other => Err(BodyProblem::Malformed(format!(
            "unknown content block type {other:?}"
        ))),
    }
}

/// The blocks of one message, assembled into a [`Parsed`].
fn assemble(blocks: Vec<Block>) -> Result<Parsed, BodyProblem> {
    let mut p = Parsed::default();
    let mut text = String::new();
    let mut reasoning = String::new();
    for b in blocks {
        match b {
            Block::Text(t) => text.push_str(&t),
            Block::Thinking {
                thinking,
                signature,
            } => {
                reasoning.push_str(&thinking);
                p.provider_items.push(ProviderItem {
                    api: API_TAG.into(),
                    item: json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                });
            }
            Block::Redacted(v) => p.provider_items.push(ProviderItem {
                api: API_TAG.into(),
                item: v,
            }),
            Block::ToolUse {
                id,
                name,
                start_input,
                json,
                streamed,
            } => {
                let arguments = if streamed && !json.trim().is_empty() {
                    match serde_json::from_str::<Value>(&json) {
                        Ok(Value::Object(_)) => json,
                        _ => {
                            return Err(BodyProblem::Malformed(format!(
                                "tool_use {id}: the streamed input is not a JSON object: {}",
                                snippet(&json)
                            )));
                        }
                    }
                } else {
                    start_input.to_string()
                };
                p.tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments,
                });
            }
            Block::Server(v) => {
                let kind = v
                    .get("name")
                    .or_else(|| v.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("server_tool")
                    .to_owned();
                let arguments = v.get("input").map(|i| i.to_string());
                let output = v.get("content").map(|c| c.to_string());
                p.provider_tool_calls.push(ProviderToolCall {
                    kind,
                    arguments,
                    output,
                    details: v,
                });
            }
        }
    }
    p.text = (!text.is_empty()).then_some(text);
    p.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    Ok(p)
}

fn provider_problem(err: &Value) -> BodyProblem {
    let info = error_info_from_value(err);
    BodyProblem::Provider {
        code: info.code.or(info.kind),
        status: info.status,
        message: info.message,
    }
}

/// Parses a successful Messages body, JSON or SSE. Stream deltas go to `on_delta`.
pub(crate) fn parse_body(
    body: &[u8],
    media_type: Option<&str>,
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<Parsed, BodyProblem> {
    if is_sse(media_type, body) {
        let mut state = StreamState::default();
        for (event, data) in native::sse_events(body)? {
            state.event(&event, &data, on_delta)?;
        }
        state.finish()
    } else {
        parse_json(body)
    }
}

fn parse_json(body: &[u8]) -> Result<Parsed, BodyProblem> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        BodyProblem::Malformed(format!(
            "body is not JSON ({e}): {}",
            snippet(&String::from_utf8_lossy(body))
        ))
    })?;
    if !v.is_object() {
        return Err(BodyProblem::Malformed("body is not a JSON object".into()));
    }
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(provider_problem(err));
    }
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| BodyProblem::Malformed("no `content` array in the message".into()))?;
    let blocks = content
        .iter()
        .map(read_block)
        .collect::<Result<Vec<_>, _>>()?;
    let mut p = assemble(blocks)?;
    let mut usage = RawUsage::default();
    if let Some(u) = v.get("usage") {
        usage.merge(u);
    }
    p.usage = usage.usage();
    p.finish_reason = v
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(finish_reason);
    p.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
    p.id = v.get("id").and_then(Value::as_str).map(str::to_owned);
    Ok(p)
}

/// The state of a Messages stream: the blocks by index, usage, stop reason, and whether
/// `message_stop` arrived.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    blocks: Vec<(u64, Block)>,
    /// The position among tool calls of each tool_use block, by block index.
    call_index: Vec<(u64, usize)>,
    usage: RawUsage,
    stop_reason: Option<String>,
    model: Option<String>,
    id: Option<String>,
    started: bool,
    stopped: bool,
}

impl LiveEvents for StreamState {
    fn push(
        &mut self,
        event: &str,
        data: &str,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        self.event(event, data, on_delta)
    }
}

impl StreamState {
    fn block_mut(&mut self, index: u64) -> Result<&mut Block, BodyProblem> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
            .ok_or_else(|| {
                BodyProblem::Malformed(format!("a delta for content block {index}, never started"))
            })
    }

    /// Reads one SSE event.
    pub(crate) fn event(
        &mut self,
        event: &str,
        data: &str,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        if data.trim().is_empty() && event != "error" {
            return Ok(());
        }
        if self.stopped {
            // Nothing may follow message_stop; a proxy's trailing comment is ignored.
            return Ok(());
        }
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(_) if event == "error" => {
                return Err(BodyProblem::Provider {
                    code: None,
                    status: None,
                    message: snippet(data),
                });
            }
            Err(e) => {
                return Err(BodyProblem::Malformed(format!(
                    "stream event is not JSON ({e}): {}",
                    snippet(data)
                )));
            }
        };
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event)
            .to_owned();
        let index = || number(v.get("index"));
        match kind.as_str() {
            "ping" => {}
            "error" => return Err(provider_problem(v.get("error").unwrap_or(&v))),
            "message_start" => {
                let m = v.get("message").cloned().unwrap_or(Value::Null);
                self.model = m.get("model").and_then(Value::as_str).map(str::to_owned);
                self.id = m.get("id").and_then(Value::as_str).map(str::to_owned);
                if let Some(u) = m.get("usage") {
                    self.usage.merge(u);
                }
                self.started = true;
            }
            "content_block_start" => {
                let index = index().ok_or_else(|| {
                    BodyProblem::Malformed("content_block_start without an index".into())
                })?;
                if self.blocks.iter().any(|(i, _)| *i == index) {
                    return Err(BodyProblem::Malformed(format!(
                        "content block {index} started twice"
                    )));
                }
                let block = read_block(v.get("content_block").unwrap_or(&Value::Null))?;
                match &block {
                    Block::Text(t) if !t.is_empty() => on_delta(StreamDelta::Text(t.clone())),
                    Block::ToolUse { id, name, .. } => {
                        let pos = self.call_index.len();
                        self.call_index.push((index, pos));
                        on_delta(StreamDelta::ToolCall {
                            index: pos,
                            id: Some(id.clone()),
                            name: Some(name.clone()),
                            arguments: String::new(),
                        });
                    }
                    _ => {}
                }
                self.blocks.push((index, block));
            }
            "content_block_delta" => {
                let index = index().ok_or_else(|| {
                    BodyProblem::Malformed("content_block_delta without an index".into())
                })?;
                let delta = v.get("delta").cloned().unwrap_or(Value::Null);
                let field = |k: &str| {
                    delta
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                let pos = self
                    .call_index
                    .iter()
                    .find(|(i, _)| *i == index)
                    .map(|(_, p)| *p);
                let block = self.block_mut(index)?;
                match (block_type(&delta), block) {
                    ("text_delta", Block::Text(t)) => {
                        let piece = field("text");
                        t.push_str(&piece);
                        if !piece.is_empty() {
                            on_delta(StreamDelta::Text(piece));
                        }
                    }
                    ("thinking_delta", Block::Thinking { thinking, .. }) => {
                        let piece = field("thinking");
                        thinking.push_str(&piece);
                        if !piece.is_empty() {
                            on_delta(StreamDelta::Reasoning(piece));
                        }
                    }
                    ("signature_delta", Block::Thinking { signature, .. }) => {
                        signature.push_str(&field("signature"));
                    }
                    ("input_json_delta", Block::ToolUse { json, streamed, .. }) => {
                        let piece = field("partial_json");
                        json.push_str(&piece);
                        *streamed = true;
                        if !piece.is_empty() {
                            on_delta(StreamDelta::ToolCall {
                                index: pos.unwrap_or(0),
                                id: None,
                                name: None,
                                arguments: piece,
                            });
                        }
                    }
                    ("input_json_delta", Block::Server(s)) => {
                        // A server tool's input is kept as its text.
                        let piece = field("partial_json");
                        let mut text = s
                            .get("_input_json")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned();
                        text.push_str(&piece);
                        s["_input_json"] = json!(text);
                    }
                    // Citations and other annotations are kept in the raw bytes only.
                    ("citations_delta", _) => {}
                    (t, b) => {
                        return Err(BodyProblem::Malformed(format!(
                            "a {t:?} delta for content block {index}, which is {}",
                            match b {
                                Block::Text(_) => "text",
                                Block::Thinking { .. } => "thinking",
                                Block::Redacted(_) => "redacted_thinking",
                                Block::ToolUse { .. } => "tool_use",
                                Block::Server(_) => "a server tool block",
                            }
                        )));
                    }
                }
            }
            "content_block_stop" => {
                let index = index().ok_or_else(|| {
                    BodyProblem::Malformed("content_block_stop without an index".into())
                })?;
                self.block_mut(index)?;
            }
            "message_delta" => {
                if let Some(r) = v
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(r.to_owned());
                }
                if let Some(u) = v.get("usage") {
                    self.usage.merge(u);
                }
            }
            "message_stop" => self.stopped = true,
            // The API may add event types; they carry nothing this backend uses.
            other => tracing::debug!(event = other, "unknown Messages stream event ignored"),
        }
        Ok(())
    }

    /// Ends the stream: it must have reached `message_stop`.
    pub(crate) fn finish(self) -> Result<Parsed, BodyProblem> {
        if !self.stopped {
            return Err(BodyProblem::Incomplete(if self.started {
                "the stream ended before message_stop".into()
            } else {
                "the stream ended before message_start".into()
            }));
        }
        let mut blocks = self.blocks;
        blocks.sort_by_key(|(i, _)| *i);
        let mut p = assemble(blocks.into_iter().map(|(_, b)| b).collect())?;
        p.usage = self.usage.usage();
        p.finish_reason = self.stop_reason.as_deref().map(finish_reason);
        p.model = self.model;
        p.id = self.id;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(events: &[&str]) -> String {
        events
            .iter()
            .map(|e| {
                let v: Value = serde_json::from_str(e).unwrap();
                format!("event: {}\ndata: {e}\n\n", v["type"].as_str().unwrap())
            })
            .collect()
    }

    #[test]
    fn history_goes_out_as_messages_blocks_with_results_merged_by_id() {
        let mut request = ModelRequest {
            messages: vec![
                Message::system("be brief"),
                Message::user("hi"),
                Message::Assistant {
                    text: Some("calling".into()),
                    tool_calls: vec![
                        ToolCall {
                            id: "t1".into(),
                            name: "f".into(),
                            arguments: r#"{"a":1}"#.into(),
                        },
                        ToolCall {
                            id: "t2".into(),
                            name: "g".into(),
                            arguments: "".into(),
                        },
                    ],
                    provider_items: vec![
                        ProviderItem {
                            api: API_TAG.into(),
                            item: json!({"type": "thinking", "thinking": "hm", "signature": "sig"}),
                        },
                        ProviderItem {
                            api: "openai-responses".into(),
                            item: json!({"type": "reasoning"}),
                        },
                    ],
                },
                Message::tool_result("t1", "f", "one", true),
                Message::tool_result("t2", "g", "boom", false),
                Message::user("and?"),
            ],
            tools: vec![crate::ToolDefinition {
                name: "f".into(),
                description: "".into(),
                parameters: json!({"type": "object", "x-internal": 1}),
            }],
            ..Default::default()
        };
        request.settings.prompt_caching = true;
        request.settings.parallel_tool_calls = Some(false);
        let body = build_request_body("claude", &request, true, 100);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(
            body["tools"],
            json!([{"name": "f", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
        assert_eq!(
            (body["max_tokens"].clone(), body["stream"].clone()),
            (json!(100), json!(true))
        );
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(
            m[1]["content"],
            json!([
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                {"type": "tool_use", "id": "t2", "name": "g", "input": {}},
            ])
        );
        assert_eq!(
            m[2]["content"],
            json!([
                {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": true},
                {"type": "text", "text": "and?"},
            ])
        );
    }

    #[test]
    fn redacted_thinking_and_server_tools_are_kept_and_thinking_goes_back_first() {
        let body =
            br#"{"type":"message","id":"m","model":"c","stop_reason":"pause_turn","content":[
            {"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},
            {"type":"server_tool_use","id":"srv","name":"web_search","input":{"query":"q"}},
            {"type":"web_search_tool_result","tool_use_id":"srv","content":[]},
            {"type":"text","text":"so far"}],
            "usage":{"input_tokens":3,"output_tokens":4}}"#;
        let p = parse_body(body, Some("application/json"), &mut |_| {}).unwrap();
        assert_eq!(
            p.finish_reason.as_ref().map(FinishReason::as_str),
            Some("pause_turn")
        );
        assert_eq!(
            p.provider_items,
            vec![ProviderItem {
                api: API_TAG.into(),
                item: json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}),
            }]
        );
        let kinds: Vec<&str> = p
            .provider_tool_calls
            .iter()
            .map(|c| c.kind.as_str())
            .collect();
        assert_eq!(kinds, ["web_search", "web_search_tool_result"]);
        let request = ModelRequest {
            messages: vec![
                Message::user("q"),
                Message::Assistant {
                    text: p.text,
                    tool_calls: vec![],
                    provider_items: p.provider_items,
                },
            ],
            ..Default::default()
        };
        let sent = build_request_body("c", &request, false, 10);
        assert_eq!(
            sent["messages"][1]["content"],
            json!([{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                   {"type": "text", "text": "so far"}])
        );
    }

    #[test]
    fn stop_reasons_map_and_unknown_ones_are_kept() {
        assert_eq!(finish_reason("end_turn"), FinishReason::Stop);
        assert_eq!(finish_reason("stop_sequence"), FinishReason::Stop);
        assert_eq!(finish_reason("tool_use"), FinishReason::ToolCalls);
        assert_eq!(finish_reason("max_tokens"), FinishReason::Length);
        assert_eq!(finish_reason("refusal"), FinishReason::ContentFilter);
        assert_eq!(finish_reason("pause_turn").as_str(), "pause_turn");
        assert_eq!(finish_reason("brand_new").as_str(), "brand_new");
    }

    #[test]
    fn hostile_streams_are_typed_problems() {
        let start = r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1,"output_tokens":0}}}"#;
        let stop = r#"{"type":"message_stop"}"#;
        let cases: Vec<(String, &str)> = vec![
            (
                sse(&[
                    start,
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"hologram"}}"#,
                    stop,
                ]),
                "unknown content block type",
            ),
            (
                sse(&[
                    start,
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":[1]}}"#,
                    stop,
                ]),
                "not a JSON object",
            ),
            (
                sse(&[
                    start,
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"[1,2]"}}"#,
                    stop,
                ]),
                "not a JSON object",
            ),
            (
                sse(&[
                    start,
                    r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
                    stop,
                ]),
                "never started",
            ),
            (
                sse(&[
                    start,
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
                    stop,
                ]),
                "which is text",
            ),
            (
                "event: message_start\ndata: {not json\n\n".to_string(),
                "not JSON",
            ),
            (
                format!(
                    "event: message_start\ndata: {}\n\n",
                    "x".repeat(10 * 1024 * 1024)
                ),
                "larger than the limit",
            ),
        ];
        for (body, expected) in cases {
            let r = parse_body(body.as_bytes(), Some("text/event-stream"), &mut |_| {});
            match r {
                Err(BodyProblem::Malformed(m)) => assert!(m.contains(expected), "{m} / {expected}"),
                other => panic!("{expected}: {other:?}"),
            }
        }
        let body = sse(&[
            start,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ]);
        match parse_body(body.as_bytes(), Some("text/event-stream"), &mut |_| {}) {
            Err(BodyProblem::Provider { code, message, .. }) => {
                assert_eq!(
                    (code.as_deref(), message.as_str()),
                    (Some("overloaded_error"), "Overloaded")
                )
            }
            other => panic!("{other:?}"),
        }
        match parse_body(sse(&[start]).as_bytes(), None, &mut |_| {}) {
            Err(BodyProblem::Incomplete(m)) => assert!(m.contains("message_stop"), "{m}"),
            other => panic!("{other:?}"),
        }
        for bad in [
            &b"{"[..],
            b"[]",
            br#"{"type":"message"}"#,
            br#"{"content":[{"type":"tool_use","id":"t","input":"s"}]}"#,
        ] {
            assert!(matches!(
                parse_body(bad, Some("application/json"), &mut |_| {}),
                Err(BodyProblem::Malformed(_))
            ));
        }
    }
}
