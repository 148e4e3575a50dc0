//! [`AnthropicModel`]: Anthropic's Messages API (`POST {base}/v1/messages`), natively.
//!
//! A small typed client on the shared live path (see [`crate::live`]): the
//! request body is built here from the provider-neutral history, and responses (JSON or
//! SSE) are read leniently into the same [`ModelResponse`](crate::ModelResponse) as
//! every other backend. `thinking` and `redacted_thinking` blocks are kept as
//! [`ProviderItem`](crate::ProviderItem)s and sent back unchanged on the next turn, as
//! the API requires.
//!
//! The code: `config`, `client` (the live client, behind the `http` feature), `request`
//! (the request body), `response` (blocks, usage, a whole body) and `stream` (SSE events).

/// The public Anthropic API, used when no base URL is given.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent unless configured otherwise.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The `max_tokens` sent when the request's settings give none (the API requires one).
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 8192;
/// The [`ProviderItem::api`](crate::ProviderItem::api) of Anthropic's items.
pub(crate) const API_TAG: &str = "anthropic";

#[cfg(feature = "http")]
mod client;
mod config;
mod request;
mod response;
mod stream;
#[cfg(test)]
mod tests;

#[cfg(feature = "http")]
pub use client::AnthropicModel;
pub use config::AnthropicConfig;
pub(crate) use request::build_request_body;
pub(crate) use response::finish_reason;
pub(crate) use stream::StreamState;
pub(crate) use stream::parse_body;
