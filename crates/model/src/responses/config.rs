//! [`OpenAiResponsesConfig`]: where and how an [`super::OpenAiResponsesModel`] connects,
//! set by hand or from the environment.

use std::fmt;

use crate::error::ModelError;
use crate::live::{ApiKey, LiveConfig, OPENAI, embeds_live_config};

/// Where and how [`OpenAiResponsesModel`](super::OpenAiResponsesModel) connects: the
/// [`LiveConfig`] every live backend has (the base URL without `/responses`), and whether
/// the server keeps responses. It dereferences to its `live` settings.
#[derive(Clone)]
pub struct OpenAiResponsesConfig {
    /// The settings every live backend has.
    pub live: LiveConfig,
    /// Whether the server keeps the responses (`store`). Default `false`: every request
    /// carries the whole history, reasoning items with their `encrypted_content`
    /// included, so the evidence holds everything the model saw.
    pub store: bool,
}

embeds_live_config!(OpenAiResponsesConfig);

impl fmt::Debug for OpenAiResponsesConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.live
            .debug(f, "OpenAiResponsesConfig", &[("store", &self.store)])
    }
}

impl OpenAiResponsesConfig {
    /// A configuration with `store: false` and default timeouts and retries.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<ApiKey>,
    ) -> Self {
        Self::with(LiveConfig::new(model, base_url, api_key))
    }

    /// A configuration from `OPENAI_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`](crate::DEFAULT_BASE_URL)) and
    /// `OPENAI_API_KEY`, required for the default base URL.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the base URL is the public API's and no key is set.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        LiveConfig::from_env(&OPENAI, model).map(Self::with)
    }

    /// [`OpenAiResponsesConfig::from_env`] with the two values given.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the base URL is the public API's and no key is given.
    pub fn from_values(
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        LiveConfig::from_values(&OPENAI, model, base_url, api_key).map(Self::with)
    }

    /// `live` with `store: false`.
    fn with(live: LiveConfig) -> Self {
        OpenAiResponsesConfig { live, store: false }
    }
}
