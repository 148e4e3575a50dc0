//! [`OpenAiConfig`]: where and how an [`super::OpenAiModel`] connects, set by hand or
//! from the environment.

use std::fmt;

use super::{ApiKey, DEFAULT_MAX_RESPONSE_BYTES, OPENAI, RetryPolicy, Settings, Timeouts};
use crate::error::ModelError;

/// Where and how [`OpenAiModel`](super::OpenAiModel) connects.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The model name sent in requests (e.g. `gpt-4o-mini`).
    pub model: String,
    /// The API base, up to and without `/chat/completions` (e.g. `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`, an Azure/Foundry `…/openai/v1`).
    pub base_url: String,
    /// The key sent as `Authorization: Bearer …`; `None` sends an empty bearer token, which
    /// local servers such as Ollama or vLLM accept.
    pub api_key: Option<ApiKey>,
    /// Extra request headers (e.g. Azure's `api-key`). Their values are treated as secrets.
    pub headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries.
    pub retry: RetryPolicy,
    /// The largest response body read from one attempt, in bytes; a longer one ends the
    /// attempt as a malformed response, so a runaway server cannot exhaust memory.
    /// Default [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_response_bytes: usize,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.settings().debug(f, "OpenAiConfig", &[])
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
            model: model.into(),
            base_url: base_url.into(),
            api_key,
            headers: Vec::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// A configuration from `OPENAI_BASE_URL` (default [`DEFAULT_BASE_URL`](super::DEFAULT_BASE_URL)) and
    /// `OPENAI_API_KEY`. The key is required for the default base URL only.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        let (base_url, api_key) = OPENAI.env_values();
        Self::from_values(model, base_url, api_key)
    }

    /// [`OpenAiConfig::from_env`] with the two values given.
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
