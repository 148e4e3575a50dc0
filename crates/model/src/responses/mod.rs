//! [`OpenAiResponsesModel`]: OpenAI's Responses API (`POST {base}/responses`), natively.
//!
//! The same small client as the Anthropic backend ([`crate::live`]). `reasoning` and
//! `message` output items are kept whole as [`ProviderItem`](crate::ProviderItem)s and
//! sent back in their order, before the calls of their turn, so each reasoning item is
//! followed by the item that followed it (the API refuses one without it); without
//! server-side state (`store: false`, the default) the request asks for
//! `reasoning.encrypted_content` so they carry their context. A streamed response is read
//! for deltas, and its final `response.completed` event (which repeats the whole response)
//! is parsed like a non-streamed body.
//!
//! The code: `config`, `client` (the live client, behind the `http` feature), `request`
//! (the request body), `response` (a response object, a whole body) and `stream` (SSE
//! events).

#[cfg(feature = "http")]
mod client;
mod config;
mod request;
mod response;
mod stream;
#[cfg(test)]
mod tests;

#[cfg(feature = "http")]
pub use client::OpenAiResponsesModel;
pub use config::OpenAiResponsesConfig;
pub(crate) use request::build_request_body;
pub(crate) use stream::StreamState;
pub(crate) use stream::parse_body;

/// The [`ProviderItem::api`](crate::ProviderItem::api) of Responses items.
pub(crate) const API_TAG: &str = "openai-responses";
