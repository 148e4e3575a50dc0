//! [`WireApi`]: the wire format a model name or a recorded body speaks, and that
//! format's request body and response parser, for replaying any recording.

use bytes::Bytes;

use super::parse_recorded;
use crate::error::ModelError;
use crate::types::{RawExchange, StreamDelta};
use crate::{anthropic, responses};

/// The wire format of a model API, for building and reading its bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireApi {
    /// OpenAI-compatible Chat Completions (`openai:`, and the offline models).
    ChatCompletions,
    /// Anthropic Messages (`anthropic:`).
    AnthropicMessages,
    /// OpenAI Responses (`openai-responses:`).
    OpenAiResponses,
}

impl WireApi {
    /// The API a model name (`anthropic:…`, `openai-responses:…`, anything else) speaks.
    pub fn of_model(name: &str) -> WireApi {
        match name.split_once(':').map(|(p, _)| p) {
            Some("anthropic") => WireApi::AnthropicMessages,
            Some("openai-responses") => WireApi::OpenAiResponses,
            _ => WireApi::ChatCompletions,
        }
    }

    /// The API a recorded response body was written in, by its shape: a Messages object
    /// or stream, a Responses object or stream, else Chat Completions.
    pub fn of_response_body(body: &[u8]) -> WireApi {
        let head = &body[..body.len().min(4096)];
        let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
        // Responses first: its output items are typed `message` too.
        if has(b"response.created")
            || has(b"\"object\":\"response\"")
            || has(b"\"object\": \"response\"")
        {
            WireApi::OpenAiResponses
        } else if has(b"message_start")
            || has(b"\"type\":\"message\"")
            || has(b"\"type\": \"message\"")
        {
            WireApi::AnthropicMessages
        } else {
            WireApi::ChatCompletions
        }
    }

    /// The request body a backend speaking this API sends for `request`, with default
    /// configuration (Anthropic's default `max_tokens`, Responses without `store`): what
    /// [`crate::ReplayModel`] compares a recorded request with.
    pub fn request_body(self, model: &str, request: &crate::ModelRequest, stream: bool) -> Bytes {
        let body = self.body_value(model, request, stream);
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }

    /// [`WireApi::request_body`] as a JSON value.
    pub(crate) fn body_value(
        self,
        model: &str,
        request: &crate::ModelRequest,
        stream: bool,
    ) -> serde_json::Value {
        match self {
            WireApi::ChatCompletions => crate::wire::build_request_body(model, request, stream),
            WireApi::AnthropicMessages => anthropic::build_request_body(
                model,
                request,
                stream,
                anthropic::ANTHROPIC_DEFAULT_MAX_TOKENS,
            ),
            WireApi::OpenAiResponses => {
                responses::build_request_body(model, request, stream, false)
            }
        }
    }

    /// Parses a recorded exchange of this API: a non-2xx status maps to the typed error a
    /// live request gave, and the body is read by the same parser as a live response.
    ///
    /// # Errors
    ///
    /// The typed error of a non-2xx status (as a live request would give), or
    /// [`ModelError::MalformedResponse`], [`ModelError::ProviderError`] or
    /// [`ModelError::StreamIncomplete`] for a body that does not parse, reports a provider
    /// error, or ends early.
    pub fn parse_response(self, raw: RawExchange) -> Result<crate::ModelResponse, ModelError> {
        self.parse_response_streamed(raw, &mut |_| {})
    }

    pub(crate) fn parse_response_streamed(
        self,
        raw: RawExchange,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<crate::ModelResponse, ModelError> {
        match self {
            WireApi::ChatCompletions => crate::wire::parse_response_streamed(raw, on_delta),
            WireApi::AnthropicMessages => parse_recorded(anthropic::parse_body, raw, on_delta),
            WireApi::OpenAiResponses => parse_recorded(responses::parse_body, raw, on_delta),
        }
    }

    /// The [`crate::ProviderItem::api`] tag of this API's items (`None` for Chat
    /// Completions, which has none).
    pub fn item_tag(self) -> Option<&'static str> {
        match self {
            WireApi::ChatCompletions => None,
            WireApi::AnthropicMessages => Some(anthropic::API_TAG),
            WireApi::OpenAiResponses => Some(responses::API_TAG),
        }
    }
}
