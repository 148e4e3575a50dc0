//! The parts every live backend is configured with: an [`ApiKey`] that never shows, the
//! [`Timeouts`], the [`RetryPolicy`] and the default limit of a response body; and a
//! provider's environment variables and public base URL.

use std::fmt;
use std::time::Duration;

use crate::error::ModelError;

/// The value of the environment variable `name`, or `None` when it is unset or blank.
fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Where a provider's public API is, and which environment variables configure it.
pub(crate) struct Provider {
    /// Its name in messages ("OpenAI").
    pub name: &'static str,
    /// Its public API, used when no base URL is given.
    pub default_base_url: &'static str,
    /// The variable that holds the base URL.
    pub base_var: &'static str,
    /// The variable that holds the key.
    pub key_var: &'static str,
}

/// The public OpenAI API, used when no base URL is given.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// OpenAI's public API, shared by the chat-completions and Responses backends.
pub(crate) const OPENAI: Provider = Provider {
    name: "OpenAI",
    default_base_url: DEFAULT_BASE_URL,
    base_var: "OPENAI_BASE_URL",
    key_var: "OPENAI_API_KEY",
};

impl Provider {
    /// The base URL and key from the environment, each `None` when unset or blank.
    pub(crate) fn env_values(&self) -> (Option<String>, Option<String>) {
        (env_value(self.base_var), env_value(self.key_var))
    }

    /// The base URL a configuration uses (the public one when none is given) and its
    /// key. A missing key is refused for the public URL only, naming the variable that
    /// should hold it.
    pub(crate) fn base_and_key(
        &self,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<(String, Option<ApiKey>), ModelError> {
        let base_url = base_url.unwrap_or_else(|| self.default_base_url.to_owned());
        if api_key.is_none() && base_url.trim_end_matches('/') == self.default_base_url {
            return Err(ModelError::Config(format!(
                "{} is not set (needed for the public {} API)",
                self.key_var, self.name
            )));
        }
        Ok((base_url, api_key.map(ApiKey::new)))
    }
}

/// An API key. Its `Debug` output never shows it, and nothing in this crate logs it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// The timeouts of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// To open the TCP (and TLS) connection. Default 10 s.
    pub connect: Duration,
    /// From sending the request to the response headers. Default 120 s.
    pub first_byte: Duration,
    /// The longest quiet gap while reading the body or stream. Default 60 s.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
        }
    }
}

/// When to try again after HTTP 429, 5xx, or a connection that failed before any response.
///
/// The wait is the server's `Retry-After` (or `retry-after-ms`) when given, plus a random
/// part of up to a quarter of it (at most 10 s), else `initial_backoff` doubled per retry
/// up to `max_backoff` with a random part of up to half taken off: many runs refused
/// together do not retry in lockstep. No retry starts if its wait would
/// end after `max_elapsed` from the first attempt, so a server that stays down costs a
/// bounded time. Timeouts other than connect timeouts are not retried (the request may have
/// been processed), nor is anything after a stream has started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt. Default 3.
    pub max_retries: u32,
    /// The first backoff. Default 500 ms.
    pub initial_backoff: Duration,
    /// The longest backoff. Default 8 s.
    pub max_backoff: Duration,
    /// The time budget for all waits and attempts together. Default 60 s.
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_elapsed: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }
}

/// The default [`LiveConfig::max_response_bytes`](super::LiveConfig::max_response_bytes):
/// 32 MiB, far above any real chat completion.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
