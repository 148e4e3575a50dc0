//! [`AnthropicConfig`]: where and how an [`super::AnthropicModel`] connects, set by hand
//! or from the environment.

use std::fmt;

use super::{ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_DEFAULT_MAX_TOKENS, ANTHROPIC_VERSION};
use crate::error::ModelError;
use crate::openai::{
    ApiKey, DEFAULT_MAX_RESPONSE_BYTES, Provider, RetryPolicy, Settings, Timeouts,
};

/// Anthropic's public API and its environment variables.
const ANTHROPIC: Provider = Provider {
    name: "Anthropic",
    default_base_url: ANTHROPIC_DEFAULT_BASE_URL,
    base_var: "ANTHROPIC_BASE_URL",
    key_var: "ANTHROPIC_API_KEY",
};

/// Where and how [`AnthropicModel`](super::AnthropicModel) connects.
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
        self.settings().debug(
            f,
            "AnthropicConfig",
            &[
                ("version", &self.version),
                ("default_max_tokens", &self.default_max_tokens),
            ],
        )
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
        let (base_url, api_key) = ANTHROPIC.env_values();
        Self::from_values(model, base_url, api_key)
    }

    /// [`AnthropicConfig::from_env`] with the two values given.
    pub fn from_values(
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        let (base_url, api_key) = ANTHROPIC.base_and_key(base_url, api_key)?;
        Ok(Self::new(model, base_url, api_key))
    }

    /// The settings every live backend shares, borrowed.
    pub(crate) fn settings(&self) -> Settings<'_> {
        Settings {
            model: &self.model,
            base_url: &self.base_url,
            api_key: self.api_key.as_ref(),
            headers: &self.headers,
            timeouts: self.timeouts,
            retry: self.retry,
            max_response_bytes: self.max_response_bytes,
        }
    }
}
