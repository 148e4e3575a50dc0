//! [`OpenAiModel`]: any OpenAI-compatible chat-completions server, through async-openai.
//!
//! The request goes through async-openai's `*_byot` calls with our own lenient JSON types,
//! and through our own HTTP service (async-openai's `middleware` feature), which keeps the
//! exact request and response bytes of every attempt (SSE verbatim) and applies the
//! first-byte and idle timeouts. Retries are our own loop around whole attempts rather than
//! async-openai's `OpenAIRetryLayer`, because that layer has no total time bound, reads only
//! whole-second `Retry-After` values, swallows 429 bodies it cannot parse (such as
//! OpenRouter's integer error codes) and would hide the attempts from evidence.
//!
//! The code: `settings` (what every live backend is configured with: key, timeouts,
//! retries), `config`, `client` (the model, behind the `http` feature) and `capture`
//! (the HTTP service that keeps each attempt's bytes, likewise).

#[cfg(feature = "http")]
mod capture;
#[cfg(feature = "http")]
mod client;
mod config;
mod settings;

#[cfg(feature = "http")]
pub use client::OpenAiModel;
pub use config::OpenAiConfig;
pub use settings::{ApiKey, DEFAULT_BASE_URL, DEFAULT_MAX_RESPONSE_BYTES, RetryPolicy, Timeouts};
pub(crate) use settings::{OPENAI, Provider, Settings};
