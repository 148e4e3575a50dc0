//! Provider-neutral request and response types: message history, tool definitions,
//! settings, usage, and the raw bytes of an exchange kept for evidence.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// One entry of a conversation's history, independent of any provider's wire format.
///
/// Serialised with a `role` tag: `{"role":"user","content":"hi"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions for the model.
    System {
        /// The instruction text.
        content: String,
    },
    /// A message from the user.
    User {
        /// The user's text.
        content: String,
    },
    /// What the model answered: text, tool calls, or both.
    Assistant {
        /// The answer text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The tools the model asked to call, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// Provider items of this turn that must go back to the same provider unchanged
        /// (Anthropic `thinking` / `redacted_thinking` blocks, OpenAI Responses `reasoning`
        /// items). Other providers ignore them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        provider_items: Vec<ProviderItem>,
    },
    /// The result of one tool call, sent back to the model.
    Tool {
        /// The id of the [`ToolCall`] this answers.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The result (or error) text the model sees.
        content: String,
        /// Whether the tool succeeded.
        ok: bool,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// An assistant message holding text only.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Message::Assistant {
            text: Some(text.into()),
            tool_calls: Vec::new(),
            provider_items: Vec::new(),
        }
    }

    /// A tool result answering the call `call_id`.
    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
        ok: bool,
    ) -> Self {
        Message::Tool {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
            ok,
        }
    }
}

/// An item of a model's turn that only its own API understands, kept verbatim so it can be
/// sent back on the next request (the APIs require thinking blocks and reasoning items to
/// come back unchanged, signatures and encrypted content included).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderItem {
    /// The API it belongs to: `anthropic` or `openai-responses`.
    pub api: String,
    /// The item as the API sent it (for a streamed response, as reassembled).
    pub item: Value,
}

/// A function tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id, echoed back in the [`Message::Tool`] result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model sent them (normally a JSON object, but not checked).
    pub arguments: String,
}

/// A tool offered to the model: `{name, description, parameters}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of the arguments object.
    pub parameters: Value,
}

/// Which tool the model may or must call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the provider's default).
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool {
        /// The tool's name.
        name: String,
    },
}

/// Settings for one request. `None` leaves the provider's default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelSettings {
    /// Upper bound on generated tokens (sent as `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Sampling seed, where the provider supports one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Stop sequences.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Penalise tokens that have appeared at all (-2.0 to 2.0; Chat Completions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// Penalise tokens by how often they have appeared (-2.0 to 2.0; Chat Completions
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// How hard a reasoning model thinks (`minimal`, `low`, `medium`, `high`, …): Chat
    /// Completions' `reasoning_effort`, Responses' `reasoning.effort`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Anthropic extended thinking with this budget of tokens:
    /// `thinking: {"type": "enabled", "budget_tokens": N}` (at least 1024, and less than
    /// `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Ask the provider to cache the stable prefix of the prompt (the system prompt and the
    /// tools): Anthropic gets `cache_control` breakpoints on both. Providers that cache
    /// on their own (OpenAI) ignore it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub prompt_caching: bool,
    /// Which tool the model may or must call (sent only when tools are offered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may ask for several tool calls at once (sent only when tools are
    /// offered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Extra top-level fields of the request body, for provider-specific options. They never
    /// replace a field this crate sets itself: an object merges into the object of the
    /// same name key by key (`reasoning: {"summary": "auto"}` beside `reasoning_effort`),
    /// and a value that would replace one is left out (with a warning);
    /// [`crate::WireApi::check_settings`] refuses such a collision before anything is sent.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, Value>,
}

/// One model request: the history, the tools offered, and settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools offered to the model.
    #[serde(default)]
    pub tools: Vec<ToolDefinition>,
    /// Request settings.
    #[serde(default)]
    pub settings: ModelSettings,
}

/// Token counts of one response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Total as reported (or input + output when not reported).
    pub total_tokens: u64,
    /// Prompt tokens served from the provider's cache, when reported (among
    /// `input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Prompt tokens written to the provider's cache, when reported (Anthropic's
    /// `cache_creation_input_tokens`; among `input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Reasoning tokens among the output tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// Adds another response's counts to these.
    pub fn add(&mut self, other: &Usage) {
        fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            }
        }
        // Counts come from the server: absurd ones saturate rather than overflow.
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cached_input_tokens = add_opt(self.cached_input_tokens, other.cached_input_tokens);
        self.cache_creation_input_tokens = add_opt(
            self.cache_creation_input_tokens,
            other.cache_creation_input_tokens,
        );
        self.reasoning_tokens = add_opt(self.reasoning_tokens, other.reasoning_tokens);
    }
}

/// Why the model stopped. Unknown values (such as `eos`) are kept as text.
///
/// Serialised as the provider's string (`"stop"`, `"tool_calls"`, …).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// A natural end of the answer (`stop`).
    Stop,
    /// The token limit was hit (`length`).
    Length,
    /// The model asked for tool calls (`tool_calls`).
    ToolCalls,
    /// Content was filtered (`content_filter`).
    ContentFilter,
    /// The legacy single function call (`function_call`).
    FunctionCall,
    /// Any other value, as sent.
    Other(String),
}

impl FinishReason {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::FunctionCall => "function_call",
            FinishReason::Other(s) => s,
        }
    }
}

impl From<&str> for FinishReason {
    fn from(s: &str) -> Self {
        match s {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            "function_call" => FinishReason::FunctionCall,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FinishReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(FinishReason::from(s.as_str()))
    }
}

/// A tool the provider ran itself (for example Groq's `executed_tools` web search). The
/// runtime records it but does not run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderToolCall {
    /// The provider's kind of tool (`type`, e.g. `search`), or `name` when no type is given.
    pub kind: String,
    /// The arguments as sent by the provider, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// The tool's output as sent by the provider, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The whole object the provider sent.
    pub details: Value,
}

/// One HTTP attempt of a request (the first try and each retry).
///
/// Serialises as a summary for evidence — `status`, `error`, `duration_ms`,
/// `retry_after_ms`, `response_size`, `response_media_type` — without the body bytes, which
/// belong in a blob.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Attempt {
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// What went wrong, when it did (a transport error, a timeout, an error status).
    pub error: Option<String>,
    /// How long the attempt took.
    #[serde(rename = "duration_ms", serialize_with = "ser_millis")]
    pub duration: Duration,
    /// The wait the server asked for (`Retry-After`), when given.
    #[serde(rename = "retry_after_ms", serialize_with = "ser_opt_millis")]
    pub retry_after: Option<Duration>,
    /// The response body bytes received in this attempt.
    #[serde(rename = "response_size", serialize_with = "ser_len")]
    pub response_body: Bytes,
    /// The response media type (`Content-Type`), when given.
    pub response_media_type: Option<String>,
}

fn ser_millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

fn ser_opt_millis<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&(d.as_millis() as u64)),
        None => s.serialize_none(),
    }
}

fn ser_len<S: Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(b.len() as u64)
}

/// The exact bytes of one model exchange, kept so evidence can record them.
///
/// Offline models fill this with the bytes an OpenAI-compatible server would have seen
/// and sent, so every recorded response parses back the same way.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawExchange {
    /// The request body exactly as sent.
    pub request_body: Bytes,
    /// The request media type (`application/json`).
    pub request_media_type: String,
    /// The response body exactly as received (SSE verbatim when streamed); the last
    /// attempt's body when there were retries.
    pub response_body: Bytes,
    /// The response media type, when known.
    pub response_media_type: Option<String>,
    /// The HTTP status of the last attempt, when a response arrived.
    pub status: Option<u16>,
    /// Every attempt, in order. Offline models report one.
    pub attempts: Vec<Attempt>,
}

/// One model response, parsed leniently from the provider's bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelResponse {
    /// The answer text, if any.
    pub text: Option<String>,
    /// Reasoning text the provider exposed (`reasoning` / `reasoning_content`), if any.
    pub reasoning: Option<String>,
    /// Function tool calls to run, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Items to send back unchanged with this turn (thinking blocks, reasoning items).
    pub provider_items: Vec<ProviderItem>,
    /// Tools the provider already ran itself.
    pub provider_tool_calls: Vec<ProviderToolCall>,
    /// Token counts. All zero when the provider reported none (see `usage_reported`).
    pub usage: Usage,
    /// Whether the response carried usage. Offline models report a deterministic estimate.
    pub usage_reported: bool,
    /// Why the model stopped, when the provider said so.
    pub finish_reason: Option<FinishReason>,
    /// The model name the provider reported.
    pub model: Option<String>,
    /// The response id the provider reported.
    pub id: Option<String>,
    /// The exact bytes sent and received.
    pub raw: RawExchange,
}

impl ModelResponse {
    /// A response with this answer text, for a hand-written [`crate::Model`]: no usage,
    /// no wire bytes (see [`ModelResponse::rendered_exchange`] for how it is recorded).
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_parts(Some(text.into()), Vec::new())
    }

    /// A response asking for these tool calls, for a hand-written [`crate::Model`].
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Self::from_parts(None, calls)
    }

    /// A response with answer text and/or tool calls; the finish reason follows from
    /// them (`tool_calls` when there are calls, else `stop`).
    pub fn from_parts(text: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        let finish_reason = if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        ModelResponse {
            text,
            reasoning: None,
            tool_calls,
            provider_items: Vec::new(),
            provider_tool_calls: Vec::new(),
            usage: Usage::default(),
            usage_reported: false,
            finish_reason: Some(finish_reason),
            model: None,
            id: None,
            raw: RawExchange::default(),
        }
    }

    /// The same response with these token counts (marked as reported).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self.usage_reported = true;
        self
    }

    /// The same response with this reasoning text.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// The same response with the exact bytes sent and received.
    pub fn with_raw(mut self, raw: RawExchange) -> Self {
        self.raw = raw;
        self
    }

    /// Whether the response carries the bytes a server sent (`raw.response_body`).
    pub fn has_wire_bytes(&self) -> bool {
        !self.raw.response_body.is_empty()
    }

    /// The assistant message this response adds to the history.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            text: self.text.clone(),
            tool_calls: self.tool_calls.clone(),
            provider_items: self.provider_items.clone(),
        }
    }
}

/// A piece of a streamed response, reported as it arrives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamDelta {
    /// More answer text.
    Text(String),
    /// More reasoning text.
    Reasoning(String),
    /// More of the tool call at `index` (0-based, in order of the final `tool_calls`).
    ToolCall {
        /// Which tool call this belongs to.
        index: usize,
        /// The call id, when it first becomes known.
        id: Option<String>,
        /// The tool name, when it first becomes known.
        name: Option<String>,
        /// The piece of the arguments text added (may be empty).
        arguments: String,
    },
}
