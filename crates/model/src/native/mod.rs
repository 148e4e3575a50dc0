//! The wire formats the native backends (Anthropic Messages, OpenAI Responses) are read
//! with, beside Chat Completions: `wire_api` (which wire format a model or a recorded body
//! speaks) and `body` (reading bodies: parsers, SSE events, status errors, recorded
//! exchanges). Their requests go through the shared path in [`crate::live`].

mod body;
mod wire_api;

pub(crate) use body::{
    BodyParser, Live, LiveEvents, MAX_EVENT_BYTES, parse_recorded, parse_sse_or_json, status_error,
};
pub use wire_api::WireApi;
