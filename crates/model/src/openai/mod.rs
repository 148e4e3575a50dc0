//! [`OpenAiModel`]: any OpenAI-compatible chat-completions server.
//!
//! async-openai's configuration builds where the request goes and its headers; the body
//! is our own lenient JSON ([`crate::build_request_body`]), and it is sent through the
//! path every live backend shares ([`crate::live`]), which keeps the exact request and
//! response bytes of every attempt (SSE verbatim), applies the first-byte and idle
//! timeouts and retries whole attempts. Retries are that loop rather than async-openai's
//! `OpenAIRetryLayer`, because that layer has no total time bound, reads only
//! whole-second `Retry-After` values, swallows 429 bodies it cannot parse (such as
//! OpenRouter's integer error codes) and would hide the attempts from evidence.
//!
//! The code: `config`, and `client` (the model, behind the `http` feature).

#[cfg(feature = "http")]
mod client;
mod config;

#[cfg(feature = "http")]
pub use client::OpenAiModel;
pub use config::OpenAiConfig;
