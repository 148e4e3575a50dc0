//! [`AnthropicConfig`]: where and how an [`super::AnthropicModel`] connects, set by hand
//! or from the environment.

use std::fmt;

use super::{ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_DEFAULT_MAX_TOKENS, ANTHROPIC_VERSION};
use crate::error::ModelError;
use crate::live::{ApiKey, LiveConfig, Provider, embeds_live_config};

/// Anthropic's public API and its environment variables.
const ANTHROPIC: Provider = Provider {
    name: "Anthropic",
    default_base_url: ANTHROPIC_DEFAULT_BASE_URL,
    base_var: "ANTHROPIC_BASE_URL",
    key_var: "ANTHROPIC_API_KEY",
};

/// Where and how [`AnthropicModel`](super::AnthropicModel) connects: the [`LiveConfig`]
/// every live backend has (the base URL without `/v1/messages`, the key sent as
/// `x-api-key`), the API version and the default `max_tokens`. It dereferences to its
/// `live` settings.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The settings every live backend has.
    pub live: LiveConfig,
    /// The `anthropic-version` header.
    pub version: String,
    /// `max_tokens` when the request's settings give none.
    pub default_max_tokens: u32,
}

embeds_live_config!(AnthropicConfig);

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.live.debug(
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
        Self::with(LiveConfig::new(model, base_url, api_key))
    }

    /// A configuration from `ANTHROPIC_BASE_URL` (default [`ANTHROPIC_DEFAULT_BASE_URL`])
    /// and `ANTHROPIC_API_KEY`, required for the default base URL.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the base URL is the public API's and no key is set.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        LiveConfig::from_env(&ANTHROPIC, model).map(Self::with)
    }

    /// [`AnthropicConfig::from_env`] with the two values given.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the base URL is the public API's and no key is given.
    pub fn from_values(
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        LiveConfig::from_values(&ANTHROPIC, model, base_url, api_key).map(Self::with)
    }

    /// `live` with the default version and `max_tokens`.
    fn with(live: LiveConfig) -> Self {
        AnthropicConfig {
            live,
            version: ANTHROPIC_VERSION.into(),
            default_max_tokens: ANTHROPIC_DEFAULT_MAX_TOKENS,
        }
    }
}
