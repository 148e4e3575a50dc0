//! Language models for provrun, behind one `Model` trait.
//!
//! `provrun-model` holds provider-neutral message history types, the [`Model`] trait, an
//! OpenAI-compatible backend ([`OpenAiModel`]), native Anthropic Messages
//! ([`AnthropicModel`]) and OpenAI Responses ([`OpenAiResponsesModel`]) backends, and
//! offline models that need no network
//! ([`TestModel`], [`FunctionModel`], [`ScriptModel`], [`ReplayModel`]). It knows nothing of
//! files, tools' code or evidence: it hands back the exact bytes of every exchange
//! ([`RawExchange`]) and lets the caller record them.
//!
//! Every response — live, offline or recorded — is read by one lenient parser per wire
//! format ([`parse_response`] for Chat Completions, [`WireApi::parse_response`] for any),
//! so a recorded run replays exactly as it was observed. Offline models write the bytes an OpenAI-compatible server
//! would have sent, and report a deterministic usage estimate ([`estimate_usage`]).
//!
//! ```
//! use std::sync::Arc;
//! use futures_util::FutureExt;
//! use provrun_model::{Message, Model, ModelRequest, TestModel, ToolDefinition};
//!
//! let model: Arc<dyn Model> = Arc::new(TestModel::new());
//! let request = ModelRequest {
//!     messages: vec![Message::user("list the inputs")],
//!     tools: vec![ToolDefinition {
//!         name: "list_dir".into(),
//!         description: "List a directory".into(),
//!         parameters: serde_json::json!({
//!             "type": "object",
//!             "properties": {"path": {"type": "string", "default": "/input"}},
//!             "required": ["path"]
//!         }),
//!     }],
//!     ..Default::default()
//! };
//! let response = model.request(&request).now_or_never().expect("offline is immediate")?;
//! assert_eq!(response.tool_calls[0].arguments, r#"{"path":"/input"}"#);
//! assert!(response.raw.response_body.starts_with(b"{"));
//! # Ok::<(), provrun_model::ModelError>(())
//! ```

/// The `#[async_trait]` attribute [`Model`] is written with: `#[provrun_model::async_trait]`
/// on an `impl Model for …` needs no `async-trait` dependency of its own.
pub use async_trait::async_trait;

// The live backends' HTTP clients are behind the `http` feature (on by default); their
// configurations, wire formats and recorded-body parsers are always here, so a bundle
// recorded from any backend replays without an HTTP stack.
#[cfg_attr(not(feature = "http"), allow(unused_imports, dead_code))]
mod anthropic;
mod error;
mod from_spec;
#[cfg_attr(not(feature = "http"), allow(unused_imports, dead_code))]
mod live;
#[cfg_attr(not(feature = "http"), allow(unused_imports, dead_code))]
mod native;
mod offline;
#[cfg_attr(not(feature = "http"), allow(unused_imports, dead_code))]
mod openai;
#[cfg_attr(not(feature = "http"), allow(unused_imports, dead_code))]
mod responses;

mod settings;
mod types;
mod wire;

#[cfg(feature = "http")]
pub use anthropic::AnthropicModel;
pub use anthropic::{
    ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_DEFAULT_MAX_TOKENS, ANTHROPIC_VERSION, AnthropicConfig,
};
pub use error::{ModelError, TimeoutKind, error_chain};
pub use from_spec::model_from_spec;
pub use live::{
    ApiKey, DEFAULT_BASE_URL, DEFAULT_MAX_RESPONSE_BYTES, LiveConfig, RetryPolicy, Timeouts,
};
pub use native::WireApi;
pub use offline::function::FunctionModel;
pub use offline::replay::{RecordedResponse, ReplayModel};
pub use offline::script::{ScriptModel, ScriptStep};
pub use offline::test_model::{TestModel, arguments_for_schema};
pub use offline::{Reply, estimate_usage};
pub use openai::OpenAiConfig;
#[cfg(feature = "http")]
pub use openai::OpenAiModel;
pub use responses::OpenAiResponsesConfig;
#[cfg(feature = "http")]
pub use responses::OpenAiResponsesModel;

pub use types::{
    Attempt, FinishReason, Message, ModelRequest, ModelResponse, ModelSettings, ProviderItem,
    ProviderToolCall, RawExchange, StreamDelta, ToolCall, ToolChoice, ToolDefinition, Usage,
};
pub use wire::{
    JSON_MEDIA_TYPE, SSE_MEDIA_TYPE, SseEvent, SseParser, build_request_body, parse_event_stream,
    parse_response, strip_extension_keys,
};

/// A language model: one request (history, tools, settings) in, one response out.
///
/// Object-safe, so `Arc<dyn Model>` works and middleware can wrap any model.
#[async_trait]
pub trait Model: Send + Sync {
    /// The model's name as configured (`test`, `script:PATH`, `openai:gpt-4o-mini`, …).
    fn name(&self) -> &str;

    /// The base URL the model's requests go to (`https://api.openai.com/v1`, a
    /// compatible server's), for telemetry's `server.address`; `None` for a model that
    /// sends nothing over the network (the offline models, a hand-written one).
    fn base_url(&self) -> Option<&str> {
        None
    }

    /// Sends one request and waits for the whole response.
    ///
    /// # Errors
    ///
    /// A [`ModelError`] naming what failed: the request or its settings refused before
    /// sending, the connection, a timeout, an error status (rate limit, authorization,
    /// server, bad request), or a response that is malformed, reports a provider error or
    /// ends early; for an offline model, its own refusal (a script run out, a replay that
    /// no longer matches). Each error that got as far as the wire carries the exchange's
    /// bytes.
    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;

    /// Sends one request with the streamed API, reporting each delta to `on_delta` as it
    /// arrives, and ends with the same [`ModelResponse`] as [`Model::request`] would give
    /// (its `raw` holds the SSE body verbatim).
    ///
    /// # Errors
    ///
    /// As [`Model::request`].
    ///
    /// By default: [`Model::request`], then its text, reasoning and each tool call
    /// reported as one delta each — a model that cannot stream need not write this.
    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let response = self.request(request).await?;
        if let Some(reasoning) = &response.reasoning {
            on_delta(StreamDelta::Reasoning(reasoning.clone()));
        }
        if let Some(text) = &response.text {
            on_delta(StreamDelta::Text(text.clone()));
        }
        for (index, call) in response.tool_calls.iter().enumerate() {
            on_delta(StreamDelta::ToolCall {
                index,
                id: Some(call.id.clone()),
                name: Some(call.name.clone()),
                arguments: call.arguments.clone(),
            });
        }
        Ok(response)
    }
}

#[async_trait]
impl<M: Model + ?Sized> Model for std::sync::Arc<M> {
    fn name(&self) -> &str {
        (**self).name()
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        (**self).request(request).await
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        (**self).request_stream(request, on_delta).await
    }
}
