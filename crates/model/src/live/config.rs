//! [`LiveConfig`]: the settings every live backend's configuration embeds (model, base
//! URL, key, headers, timeouts, retries, body limit), its constructors, and the `Debug`
//! each configuration prints through it.

use std::fmt;

use super::settings::{ApiKey, DEFAULT_MAX_RESPONSE_BYTES, Provider, RetryPolicy, Timeouts};
use crate::error::ModelError;

/// What every live backend is configured with. [`OpenAiConfig`](crate::OpenAiConfig),
/// [`AnthropicConfig`](crate::AnthropicConfig) and
/// [`OpenAiResponsesConfig`](crate::OpenAiResponsesConfig) each embed one as their `live`
/// field and dereference to it, so `config.timeouts` or `config.retry = …` reads and
/// sets it in any of them.
#[derive(Clone)]
pub struct LiveConfig {
    /// The model name sent in requests (e.g. `gpt-4o-mini`, `claude-sonnet-4-5`).
    pub model: String,
    /// The API base, up to and without the backend's path (e.g. `https://api.openai.com/v1`
    /// before `/chat/completions`, `http://localhost:11434/v1`, an Azure/Foundry
    /// `…/openai/v1`, `https://api.anthropic.com` before `/v1/messages`).
    pub base_url: String,
    /// The key (`Authorization: Bearer …` for OpenAI, `x-api-key` for Anthropic); never
    /// recorded, logged or shown. For OpenAI-compatible servers `None` sends an empty
    /// bearer token, which local servers such as Ollama or vLLM accept.
    pub api_key: Option<ApiKey>,
    /// Extra request headers (e.g. Azure's `api-key`, `anthropic-beta`). Their values are
    /// treated as secrets.
    pub headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries (429 except `insufficient_quota`, 5xx including Anthropic's 529
    /// `overloaded_error`, connection failures).
    pub retry: RetryPolicy,
    /// The largest response body read from one attempt, in bytes; a longer one ends the
    /// attempt as a malformed response, so a runaway server cannot exhaust memory.
    /// Default [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_response_bytes: usize,
}

impl fmt::Debug for LiveConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.debug(f, "LiveConfig", &[])
    }
}

impl LiveConfig {
    /// Settings with default timeouts, retries and body limit, and no extra headers.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<ApiKey>,
    ) -> Self {
        LiveConfig {
            model: model.into(),
            base_url: base_url.into(),
            api_key,
            headers: Vec::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Settings for `provider` from its two environment variables.
    pub(crate) fn from_env(
        provider: &Provider,
        model: impl Into<String>,
    ) -> Result<Self, ModelError> {
        let (base_url, api_key) = provider.env_values();
        Self::from_values(provider, model, base_url, api_key)
    }

    /// Settings for `provider` from a base URL (its public API when `None`) and a key,
    /// which the public API requires.
    pub(crate) fn from_values(
        provider: &Provider,
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        let (base_url, api_key) = provider.base_and_key(base_url, api_key)?;
        Ok(Self::new(model, base_url, api_key))
    }

    /// A configuration's `Debug`, as the struct `name`: the model, the base URL and the
    /// key (which never shows), the backend's `own` fields, then the header names (their
    /// values are secrets), the timeouts, the retries and the body limit.
    pub(crate) fn debug(
        &self,
        f: &mut fmt::Formatter<'_>,
        name: &str,
        own: &[(&str, &dyn fmt::Debug)],
    ) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        let mut d = f.debug_struct(name);
        d.field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key);
        for (field, value) in own {
            d.field(field, value);
        }
        d.field("headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

/// `Deref` and `DerefMut` from a provider's configuration to the [`LiveConfig`] it embeds
/// as `live`, so the shared fields read and set as they did when each configuration
/// held them itself.
macro_rules! embeds_live_config {
    ($config:ty) => {
        impl std::ops::Deref for $config {
            type Target = $crate::live::LiveConfig;
            fn deref(&self) -> &Self::Target {
                &self.live
            }
        }
        impl std::ops::DerefMut for $config {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.live
            }
        }
    };
}
pub(crate) use embeds_live_config;
