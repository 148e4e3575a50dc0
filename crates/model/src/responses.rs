//! [`OpenAiResponsesModel`]: OpenAI's Responses API (`POST {base}/responses`), natively.
//!
//! The same small client as the Anthropic backend ([`crate::native`]). `reasoning` and
//! `message` output items are kept whole as [`ProviderItem`]s and sent back in their order,
//! before the calls of their turn, so each reasoning item is followed by the item that
//! followed it (the API refuses one without it); without
//! server-side state (`store: false`, the default) the request asks for
//! `reasoning.encrypted_content` so they carry their context. A streamed response is read
//! for deltas, and its final `response.completed` event (which repeats the whole response)
//! is parsed like a non-streamed body.

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
    ApiKey, DEFAULT_BASE_URL, DEFAULT_MAX_RESPONSE_BYTES, RetryPolicy, Timeouts, base_and_key,
    env_value,
};
use crate::types::{
    FinishReason, Message, ModelRequest, ModelResponse, ProviderItem, ProviderToolCall,
    StreamDelta, ToolCall, ToolChoice, Usage,
};
use crate::wire::{
    BodyProblem, Parsed, error_info_from_value, is_sse, number, snippet, strip_extension_keys,
};

/// The [`ProviderItem::api`] of Responses items.
pub const API_TAG: &str = "openai-responses";

/// Where and how [`OpenAiResponsesModel`] connects.
#[derive(Clone)]
pub struct OpenAiResponsesConfig {
    /// The model name sent in requests (e.g. `gpt-5-mini`).
    pub model: String,
    /// The API base, without `/responses` (e.g. `https://api.openai.com/v1`).
    pub base_url: String,
    /// The key sent as `Authorization: Bearer …`; never recorded, logged or shown.
    pub api_key: Option<ApiKey>,
    /// Whether the server keeps the responses (`store`). Default `false`: every request
    /// carries the whole history, reasoning items with their `encrypted_content`
    /// included, so the evidence holds everything the model saw.
    pub store: bool,
    /// Extra request headers. Their values are treated as secrets.
    pub headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries (429 except `insufficient_quota`, 5xx, connection failures).
    pub retry: RetryPolicy,
    /// The largest response body read from one attempt, in bytes.
    pub max_response_bytes: usize,
}

impl fmt::Debug for OpenAiResponsesConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OpenAiResponsesConfig")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("store", &self.store)
            .field("headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl OpenAiResponsesConfig {
    /// A configuration with `store: false` and default timeouts and retries.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<ApiKey>,
    ) -> Self {
        OpenAiResponsesConfig {
            model: model.into(),
            base_url: base_url.into(),
            api_key,
            store: false,
            headers: Vec::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// A configuration from `OPENAI_BASE_URL` (default [`DEFAULT_BASE_URL`]) and
    /// `OPENAI_API_KEY`, required for the default base URL.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::from_values(
            model,
            env_value("OPENAI_BASE_URL"),
            env_value("OPENAI_API_KEY"),
        )
    }

    /// [`OpenAiResponsesConfig::from_env`] with the two values given.
    pub fn from_values(
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        let (base_url, api_key) = base_and_key(
            base_url,
            api_key,
            DEFAULT_BASE_URL,
            "OPENAI_API_KEY",
            "OpenAI",
        )?;
        Ok(Self::new(model, base_url, api_key))
    }
}

/// A model served by OpenAI's Responses API.
#[cfg(feature = "http")]
pub struct OpenAiResponsesModel {
    name: String,
    config: OpenAiResponsesConfig,
    endpoint: Endpoint,
}

#[cfg(feature = "http")]
impl fmt::Debug for OpenAiResponsesModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiResponsesModel")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "http")]
impl OpenAiResponsesModel {
    /// A model for `config`. Fails on a base URL that is not http(s), an empty model
    /// name, or a key or header that cannot be sent in an HTTP header.
    pub fn new(config: OpenAiResponsesConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim_end_matches('/').to_owned();
        if config.model.trim().is_empty() {
            return Err(ModelError::Config("the model name is empty".into()));
        }
        let http = native::http_client(&base, &config.timeouts)?;
        let mut headers = HeaderMap::new();
        let mut secrets = Vec::new();
        if let Some(key) = &config.api_key {
            native::header(
                &mut headers,
                "authorization",
                &format!("Bearer {}", key.expose()),
                true,
            )?;
            secrets.push(key.expose().to_owned());
        }
        for (name, value) in &config.headers {
            native::header(&mut headers, name, value, true)?;
            secrets.push(value.clone());
        }
        secrets.retain(|s| s.len() >= 4);
        let endpoint = Endpoint {
            url: format!("{base}/responses"),
            headers,
            secrets,
            timeouts: config.timeouts,
            retry: config.retry,
            max_body: config.max_response_bytes,
            http,
            parse: parse_body,
        };
        Ok(OpenAiResponsesModel {
            name: format!("openai-responses:{}", config.model),
            config,
            endpoint,
        })
    }

    /// A model named `model` configured from the environment
    /// ([`OpenAiResponsesConfig::from_env`]).
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::new(OpenAiResponsesConfig::from_env(model)?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiResponsesConfig {
        &self.config
    }

    fn body(&self, request: &ModelRequest, stream: bool) -> Bytes {
        let body = build_request_body(&self.config.model, request, stream, self.config.store);
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }
}

#[async_trait]
#[cfg(feature = "http")]
impl Model for OpenAiResponsesModel {
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

/// Builds the Responses request body for `model`: the history as `input` items
/// (`function_call` and `function_call_output` keyed by `call_id`, reasoning items sent
/// back before the calls they led to), tools, settings, and `store`. Without `store`,
/// `include: ["reasoning.encrypted_content"]` asks for reasoning that can be sent back.
/// Stop sequences and the seed have no Responses field and are not sent.
pub fn build_request_body(model: &str, request: &ModelRequest, stream: bool, store: bool) -> Value {
    let s = &request.settings;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let mut input = Vec::new();
    for m in &request.messages {
        match m {
            Message::System { content } => {
                input.push(json!({"role": "system", "content": content}));
            }
            Message::User { content } => {
                input.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant {
                text,
                tool_calls,
                provider_items,
            } => {
                let items: Vec<&Value> = provider_items
                    .iter()
                    .filter(|p| p.api == API_TAG)
                    .map(|p| &p.item)
                    .collect();
                input.extend(items.iter().map(|i| (*i).clone()));
                // The answer text goes back as the message item it came in, when kept.
                let kept_message = items.iter().any(|i| i["type"] == "message");
                if let Some(t) = text.as_deref().filter(|t| !t.is_empty() && !kept_message) {
                    input.push(json!({"role": "assistant", "content": t}));
                }
                for c in tool_calls {
                    input.push(json!({
                        "type": "function_call", "call_id": c.id, "name": c.name,
                        "arguments": c.arguments,
                    }));
                }
            }
            Message::Tool {
                call_id, content, ..
            } => {
                input.push(
                    json!({"type": "function_call_output", "call_id": call_id, "output": content}),
                );
            }
        }
    }
    body.insert("input".into(), Value::Array(input));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": strip_extension_keys(&t.parameters)})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &s.tool_choice {
            let v = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool { name } => json!({"type": "function", "name": name}),
            };
            body.insert("tool_choice".into(), v);
        }
        if let Some(p) = s.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(p));
        }
    }
    if let Some(v) = s.max_tokens {
        body.insert("max_output_tokens".into(), json!(v));
    }
    if let Some(v) = s.temperature {
        body.insert("temperature".into(), json!(v));
    }
    if let Some(v) = s.top_p {
        body.insert("top_p".into(), json!(v));
    }
    body.insert("store".into(), json!(store));
    if !store {
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    for (k, v) in &s.extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(body)
}

fn parse_usage(v: &Value) -> Option<Usage> {
    let input = number(v.get("input_tokens"));
    let output = number(v.get("output_tokens"));
    if input.is_none() && output.is_none() {
        return None;
    }
    let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
    Some(Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: number(v.get("total_tokens")).unwrap_or(input.saturating_add(output)),
        cached_input_tokens: number(
            v.get("input_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        ),
        cache_creation_input_tokens: None,
        reasoning_tokens: number(
            v.get("output_tokens_details")
                .and_then(|d| d.get("reasoning_tokens")),
        ),
    })
}

fn provider_problem(err: &Value) -> BodyProblem {
    let info = error_info_from_value(err);
    BodyProblem::Provider {
        code: info.code.or(info.kind),
        status: info.status,
        message: info.message,
    }
}

fn texts(parts: Option<&Value>, kinds: &[&str]) -> String {
    parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| kinds.contains(&p.get("type").and_then(Value::as_str).unwrap_or("")))
        .filter_map(|p| {
            p.get("text")
                .or_else(|| p.get("refusal"))
                .and_then(Value::as_str)
        })
        .collect()
}

/// An output item as it goes back in `input`: `status` is output-only.
fn without_status(item: &Value) -> Value {
    let mut kept = item.clone();
    if let Some(o) = kept.as_object_mut() {
        o.remove("status");
    }
    kept
}

/// Reads a whole response object (a non-streamed body, or `response.completed`'s).
fn parse_response_object(v: &Value) -> Result<Parsed, BodyProblem> {
    if !v.is_object() {
        return Err(BodyProblem::Malformed(
            "the response is not a JSON object".into(),
        ));
    }
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(provider_problem(err));
    }
    let output = v
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| BodyProblem::Malformed("no `output` array in the response".into()))?;
    let mut p = Parsed::default();
    let (mut text, mut reasoning, mut refused) = (String::new(), String::new(), false);
    for item in output {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        match kind {
            "message" => {
                text.push_str(&texts(item.get("content"), &["output_text", "refusal"]));
                refused |= item
                    .get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|c| c.iter().any(|p| p["type"] == "refusal"));
                // Kept whole (its id included) beside the reasoning, so a reasoning item
                // goes back followed by the very item that followed it.
                p.provider_items.push(ProviderItem {
                    api: API_TAG.into(),
                    item: without_status(item),
                });
            }
            "function_call" => {
                let id = field("call_id");
                if id.is_empty() {
                    return Err(BodyProblem::Malformed(
                        "a function_call item has no call_id".into(),
                    ));
                }
                let arguments = match item.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    None | Some(Value::Null) => String::new(),
                    Some(other) => other.to_string(),
                };
                p.tool_calls.push(ToolCall {
                    id,
                    name: field("name"),
                    arguments,
                });
            }
            "reasoning" => {
                reasoning.push_str(&texts(item.get("summary"), &["summary_text"]));
                reasoning.push_str(&texts(item.get("content"), &["reasoning_text"]));
                p.provider_items.push(ProviderItem {
                    api: API_TAG.into(),
                    item: without_status(item),
                });
            }
            // Tools the server ran itself: web search, file search, code interpreter, …
            k if k.ends_with("_call") => p.provider_tool_calls.push(ProviderToolCall {
                kind: k.trim_end_matches("_call").to_owned(),
                arguments: item
                    .get("action")
                    .or_else(|| item.get("arguments"))
                    .map(|a| a.to_string()),
                output: item
                    .get("results")
                    .or_else(|| item.get("output"))
                    .filter(|o| !o.is_null())
                    .map(|o| o.to_string()),
                details: item.clone(),
            }),
            "" => {
                return Err(BodyProblem::Malformed(format!(
                    "an output item has no type: {}",
                    snippet(&item.to_string())
                )));
            }
            other => {
                return Err(BodyProblem::Malformed(format!(
                    "unknown output item type {other:?}"
                )));
            }
        }
    }
    p.text = (!text.is_empty()).then_some(text);
    p.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    p.usage = v.get("usage").and_then(parse_usage);
    let status = v
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("completed");
    p.finish_reason = Some(match status {
        "completed" if !p.tool_calls.is_empty() => FinishReason::ToolCalls,
        "completed" if refused => FinishReason::ContentFilter,
        "completed" => FinishReason::Stop,
        "incomplete" => match v
            .get("incomplete_details")
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
        {
            Some("max_output_tokens") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
            None => FinishReason::Other("incomplete".into()),
        },
        other => FinishReason::Other(other.to_owned()),
    });
    p.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
    p.id = v.get("id").and_then(Value::as_str).map(str::to_owned);
    Ok(p)
}

/// Parses a successful Responses body, JSON or SSE. Stream deltas go to `on_delta`.
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
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            BodyProblem::Malformed(format!(
                "body is not JSON ({e}): {}",
                snippet(&String::from_utf8_lossy(body))
            ))
        })?;
        parse_response_object(&v)
    }
}

/// The state of a Responses stream: which output items are function calls (for delta
/// indices), and the final response once it arrives.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    /// The tool-call position of each function_call item, by output index.
    calls: Vec<(u64, usize)>,
    final_response: Option<Value>,
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
    /// Reads one SSE event.
    pub(crate) fn event(
        &mut self,
        event: &str,
        data: &str,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        if data.trim().is_empty() && event != "error" || self.final_response.is_some() {
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
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(event);
        let delta = || {
            v.get("delta")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        match kind {
            "error" => return Err(provider_problem(v.get("error").unwrap_or(&v))),
            "response.failed" => {
                let err = v
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .filter(|e| !e.is_null())
                    .unwrap_or(&v);
                return Err(provider_problem(err));
            }
            "response.output_item.added" => {
                let item = v.get("item").cloned().unwrap_or(Value::Null);
                if item["type"] == "function_call" {
                    let index = number(v.get("output_index")).ok_or_else(|| {
                        BodyProblem::Malformed("output_item.added without an output_index".into())
                    })?;
                    let pos = self.calls.len();
                    self.calls.push((index, pos));
                    on_delta(StreamDelta::ToolCall {
                        index: pos,
                        id: item["call_id"].as_str().map(str::to_owned),
                        name: item["name"].as_str().map(str::to_owned),
                        arguments: String::new(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                let index = number(v.get("output_index"));
                let pos = self
                    .calls
                    .iter()
                    .find(|(i, _)| Some(*i) == index)
                    .map(|(_, p)| *p)
                    .ok_or_else(|| {
                        BodyProblem::Malformed(
                            "function call arguments for an output item that is not a function call"
                                .into(),
                        )
                    })?;
                let piece = delta();
                if !piece.is_empty() {
                    on_delta(StreamDelta::ToolCall {
                        index: pos,
                        id: None,
                        name: None,
                        arguments: piece,
                    });
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let piece = delta();
                if !piece.is_empty() {
                    on_delta(StreamDelta::Text(piece));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let piece = delta();
                if !piece.is_empty() {
                    on_delta(StreamDelta::Reasoning(piece));
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = v
                    .get("response")
                    .cloned()
                    .ok_or_else(|| BodyProblem::Malformed(format!("{kind} without a response")))?;
                // Checked now, so a live stream stops reporting on a bad final event.
                parse_response_object(&response)?;
                self.final_response = Some(response);
            }
            // Created, in progress, part and item boundaries, `.done` repeats: the final
            // response holds all of it.
            _ => {}
        }
        Ok(())
    }

    /// Ends the stream: it must have reached `response.completed` (or
    /// `response.incomplete`), whose response is the result.
    pub(crate) fn finish(self) -> Result<Parsed, BodyProblem> {
        match self.final_response {
            Some(r) => parse_response_object(&r),
            None => Err(BodyProblem::Incomplete(
                "the stream ended before response.completed".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_goes_out_as_input_items_keyed_by_call_id() {
        let request = ModelRequest {
            messages: vec![
                Message::system("sys"),
                Message::user("hi"),
                Message::Assistant {
                    text: None,
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "f".into(),
                        arguments: "{\"a\":1}".into(),
                    }],
                    provider_items: vec![
                        ProviderItem {
                            api: API_TAG.into(),
                            item: json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "E", "summary": []}),
                        },
                        ProviderItem {
                            api: "anthropic".into(),
                            item: json!({"type": "thinking"}),
                        },
                    ],
                },
                Message::tool_result("call_1", "f", "2", true),
            ],
            ..Default::default()
        };
        let body = build_request_body("gpt", &request, false, false);
        assert_eq!(
            body["input"],
            json!([
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"type": "reasoning", "id": "rs_1", "encrypted_content": "E", "summary": []},
                {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "2"},
            ])
        );
        assert_eq!(body["store"], json!(false));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        let stored = build_request_body("gpt", &request, true, true);
        assert!(stored.get("include").is_none() && stored["stream"] == json!(true));
    }

    #[test]
    fn an_answer_goes_back_as_its_message_item_after_its_reasoning() {
        let body = br#"{"status":"completed","output":[
            {"type":"reasoning","id":"rs_1","encrypted_content":"E","summary":[],"status":"completed"},
            {"type":"message","id":"msg_1","role":"assistant","status":"completed",
             "content":[{"type":"output_text","text":"hi","annotations":[]}]}]}"#;
        let p = parse_body(body, Some("application/json"), &mut |_| {}).unwrap();
        assert_eq!(p.text.as_deref(), Some("hi"));
        let turn = Message::Assistant {
            text: p.text,
            tool_calls: vec![],
            provider_items: p.provider_items,
        };
        let request = ModelRequest {
            messages: vec![Message::user("q"), turn, Message::user("more")],
            ..Default::default()
        };
        let body = build_request_body("gpt", &request, false, false);
        let kinds: Vec<&str> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap())
            .collect();
        assert_eq!(kinds, ["user", "reasoning", "message", "user"]);
        assert_eq!(body["input"][2]["id"], "msg_1");
        assert!(body["input"][1].get("status").is_none());
    }

    #[test]
    fn hostile_bodies_are_typed_problems() {
        for (body, expected) in [
            (&b"{nope"[..], "not JSON"),
            (b"[]", "not a JSON object"),
            (
                br#"{"output":[{"type":"hologram"}]}"#,
                "unknown output item type",
            ),
            (
                br#"{"output":[{"type":"function_call","name":"f"}]}"#,
                "no call_id",
            ),
            (br#"{"status":"completed"}"#, "no `output`"),
        ] {
            match parse_body(body, Some("application/json"), &mut |_| {}) {
                Err(BodyProblem::Malformed(m)) => assert!(m.contains(expected), "{m}"),
                other => panic!("{expected}: {other:?}"),
            }
        }
        let big = format!(
            "event: response.created\ndata: {}\n\n",
            "x".repeat(10 << 20)
        );
        assert!(matches!(
            parse_body(big.as_bytes(), Some("text/event-stream"), &mut |_| {}),
            Err(BodyProblem::Malformed(m)) if m.contains("larger than the limit")
        ));
        let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n";
        assert!(matches!(
            parse_body(failed.as_bytes(), Some("text/event-stream"), &mut |_| {}),
            Err(BodyProblem::Provider { code: Some(c), .. }) if c == "server_error"
        ));
        let error = "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow\"}\n\n";
        assert!(matches!(
            parse_body(error.as_bytes(), Some("text/event-stream"), &mut |_| {}),
            Err(BodyProblem::Provider { code: Some(c), .. }) if c == "rate_limit_exceeded"
        ));
    }
}
