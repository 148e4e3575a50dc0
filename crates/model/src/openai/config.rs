//! [`OpenAiConfig`]: where and how an [`super::OpenAiModel`] connects, set by hand or
//! from the environment.

use std::fmt;

use crate::error::ModelError;
use crate::live::{ApiKey, LiveConfig, OPENAI, embeds_live_config};

/// Where and how [`OpenAiModel`](super::OpenAiModel) connects: the [`LiveConfig`] every
/// live backend has, and nothing more. It dereferences to it, so `config.timeouts` or
/// `config.retry = …` reads and sets the shared settings.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The settings every live backend has. The base URL goes up to and without
    /// `/chat/completions`; a `None` key sends an empty bearer token.
    pub live: LiveConfig,
}

embeds_live_config!(OpenAiConfig);

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.live.debug(f, "OpenAiConfig", &[])
    }
}

impl OpenAiConfig {
    /// A configuration with default timeouts and retries.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<ApiKey>,
    ) -> Self {
        OpenAiConfig {
            live: LiveConfig::new(model, base_url, api_key),
        }
    }

    /// A configuration from `OPENAI_BASE_URL` (default [`DEFAULT_BASE_URL`](crate::DEFAULT_BASE_URL)) and
    /// `OPENAI_API_KEY`. The key is required for the default base URL only.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the base URL is the public API's and no key is set.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        LiveConfig::from_env(&OPENAI, model).map(|live| OpenAiConfig { live })
    }

    /// [`OpenAiConfig::from_env`] with the two values given.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the base URL is the public API's and no key is given.
    pub fn from_values(
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        LiveConfig::from_values(&OPENAI, model, base_url, api_key).map(|live| OpenAiConfig { live })
    }
}
