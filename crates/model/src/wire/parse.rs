//! The entry points that read a response body: JSON or SSE, by its media type or its
//! first bytes, and a recorded exchange whose status says it failed.

use super::completion::parse_json_completion;
use super::errors::http_status_error;
use super::sse::parse_sse;
use super::{BodyProblem, Parsed, is_sse};
use crate::error::ModelError;
use crate::types::{ModelResponse, RawExchange, StreamDelta};

/// Parses a successful response body, JSON or SSE. Stream deltas go to `on_delta`.
pub(crate) fn parse_body(
    body: &[u8],
    media_type: Option<&str>,
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<Parsed, BodyProblem> {
    if is_sse(media_type, body) {
        parse_sse(body, on_delta)
    } else {
        parse_json_completion(body)
    }
}

/// Parses any recorded response: the status (when given and not 2xx) maps to the typed
/// error a live request would have given; otherwise the body is parsed leniently.
///
/// This is how [`crate::ReplayModel`] and the offline models read responses back, and how
/// recorded evidence can be re-read by other crates.
///
/// # Errors
///
/// As [`WireApi::parse_response`](crate::WireApi::parse_response): the typed error of a
/// non-2xx status, or of a body that does not parse, reports an error or ends early.
pub fn parse_response(raw: RawExchange) -> Result<ModelResponse, ModelError> {
    parse_response_streamed(raw, &mut |_| {})
}

/// [`parse_response`], reporting stream deltas as they are parsed.
pub(crate) fn parse_response_streamed(
    raw: RawExchange,
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<ModelResponse, ModelError> {
    if let Some(status) = raw.status
        && !(200..300).contains(&status)
    {
        let body = raw.response_body.clone();
        return Err(http_status_error(status, &body, None, raw));
    }
    match parse_body(
        &raw.response_body,
        raw.response_media_type.as_deref(),
        on_delta,
    ) {
        Ok(p) => Ok(p.into_response(raw)),
        Err(p) => Err(p.into_error(raw)),
    }
}
