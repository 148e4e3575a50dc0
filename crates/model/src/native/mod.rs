//! The HTTP side shared by the native backends (Anthropic Messages, OpenAI Responses): one
//! POST per attempt on reqwest, every byte of the response kept as it is read (SSE
//! verbatim), first-byte and idle timeouts, a body size limit, and a retry loop around
//! whole attempts. The final response is always parsed from the kept bytes, exactly as a
//! replay parses them; a live stream only drives the deltas.
//!
//! The code: `wire_api` (which wire format a model or a recorded body speaks), `body`
//! (reading bodies: parsers, SSE events, status errors, recorded exchanges), and behind
//! the `http` feature `http` (the client, headers, redaction), `retry` (waits between
//! attempts), `attempt` (what one attempt saw, its classification and the retry loop's
//! bookkeeping, shared with the OpenAI-compatible client) and `endpoint` (one backend's
//! attempts on the wire).

#[cfg(feature = "http")]
mod attempt;
mod body;
#[cfg(feature = "http")]
mod endpoint;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "http")]
mod retry;
mod wire_api;

#[cfg(feature = "http")]
pub(crate) use attempt::{Attempts, Capture, Reading, kept_chunks, lock, send_kept};
pub(crate) use body::{
    BodyParser, Live, LiveEvents, parse_recorded, parse_sse_or_json, status_error,
};
#[cfg(feature = "http")]
pub(crate) use endpoint::Endpoint;
#[cfg(feature = "http")]
pub(crate) use http::http_client;
pub use wire_api::WireApi;
