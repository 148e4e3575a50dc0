//! [`OpenAiResponsesConfig`]: where and how an [`super::OpenAiResponsesModel`] connects,
//! set by hand or from the environment.

use std::fmt;

use crate::error::ModelError;
use crate::openai::{ApiKey, DEFAULT_MAX_RESPONSE_BYTES, OPENAI, RetryPolicy, Settings, Timeouts};

/// Where and how [`OpenAiResponsesModel`](super::OpenAiResponsesModel) connects.
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
        self.settings()
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

    /// A configuration from `OPENAI_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`](crate::openai::DEFAULT_BASE_URL)) and
    /// `OPENAI_API_KEY`, required for the default base URL.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        let (base_url, api_key) = OPENAI.env_values();
        Self::from_values(model, base_url, api_key)
    }

    /// [`OpenAiResponsesConfig::from_env`] with the two values given.
    pub fn from_values(
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        let (base_url, api_key) = OPENAI.base_and_key(base_url, api_key)?;
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
