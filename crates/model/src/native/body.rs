//! Reading a native API's bodies: the parser and live-event types the backends provide,
//! a whole body parsed (an SSE body split into events, each bounded), an error status
//! mapped to a typed error, and a recorded exchange parsed as the live request was.

use std::time::Duration;

use crate::error::ModelError;
use crate::types::{RawExchange, StreamDelta};
use crate::wire::{BodyProblem, Parsed, error_info, is_sse, parse_event_stream};

/// Parses a successful body of a native API (JSON or SSE).
pub(crate) type BodyParser =
    fn(&[u8], Option<&str>, &mut dyn FnMut(StreamDelta)) -> Result<Parsed, BodyProblem>;

/// Reads live SSE events for deltas (`event` name, `data`); errors stop the reading of
/// deltas, the final parse reports them.
pub(crate) trait LiveEvents: Send {
    fn push(
        &mut self,
        event: &str,
        data: &str,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem>;
}

/// A live stream's event reader and where its deltas go.
pub(crate) type Live<'a> = (Box<dyn LiveEvents>, &'a (dyn Fn(StreamDelta) + Send + Sync));

/// Maps an error status of a native API to a typed error: the provider's error `type`
/// (Anthropic) or `code` (OpenAI) is kept as the code, beside its message.
pub(crate) fn status_error(
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
    exchange: RawExchange,
) -> ModelError {
    let info = error_info(body);
    let exchange = Box::new(exchange);
    let code = info.code.or(info.kind);
    match status {
        429 => ModelError::RateLimited {
            status,
            code,
            message: info.message,
            retry_after,
            exchange,
        },
        401 | 403 => ModelError::Unauthorized {
            status,
            code,
            message: info.message,
            exchange,
        },
        500..=599 => ModelError::ServerError {
            status,
            code,
            message: info.message,
            exchange,
        },
        _ => ModelError::BadRequest {
            status,
            code,
            param: info.param,
            message: info.message,
            exchange,
        },
    }
}

/// Parses a recorded exchange of a native API: a non-2xx status maps to the typed error
/// a live request gave; otherwise the body is parsed.
pub(crate) fn parse_recorded(
    parse: BodyParser,
    raw: RawExchange,
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<crate::ModelResponse, ModelError> {
    if let Some(status) = raw.status.filter(|s| !(200..300).contains(s)) {
        let body = raw.response_body.clone();
        return Err(status_error(status, &body, None, raw));
    }
    match parse(
        &raw.response_body,
        raw.response_media_type.as_deref(),
        on_delta,
    ) {
        Ok(p) => Ok(p.into_response(raw)),
        Err(p) => Err(p.into_error(raw)),
    }
}

/// Parses a whole successful body of a native API: an SSE body event by event through a
/// fresh `S`, ended by `finish`; any other body as JSON by `json`.
pub(crate) fn parse_sse_or_json<S: LiveEvents + Default>(
    body: &[u8],
    media_type: Option<&str>,
    on_delta: &mut dyn FnMut(StreamDelta),
    finish: fn(S) -> Result<Parsed, BodyProblem>,
    json: fn(&[u8]) -> Result<Parsed, BodyProblem>,
) -> Result<Parsed, BodyProblem> {
    if is_sse(media_type, body) {
        let mut state = S::default();
        for (event, data) in sse_events(body)? {
            state.push(&event, &data, on_delta)?;
        }
        finish(state)
    } else {
        json(body)
    }
}

/// Parses a whole SSE body into `(event, data)` pairs, refusing an event larger than
/// `MAX_EVENT_BYTES`.
pub(crate) fn sse_events(body: &[u8]) -> Result<Vec<(String, String)>, BodyProblem> {
    // A line over the limit is refused before the SSE parser buffers it.
    if let Some(line) = body
        .split(|b| *b == b'\n')
        .find(|l| l.len() > MAX_EVENT_BYTES + 16)
    {
        check_event_size(line.len())?;
    }
    let events = parse_event_stream(body);
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        check_event_size(e.data.len())?;
        out.push((e.event, e.data));
    }
    Ok(out)
}

/// The largest SSE event data accepted (8 MiB): real events are a few kilobytes.
pub(crate) const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

fn check_event_size(len: usize) -> Result<(), BodyProblem> {
    if len > MAX_EVENT_BYTES {
        return Err(BodyProblem::Malformed(format!(
            "an SSE event of {len} bytes is larger than the limit of {MAX_EVENT_BYTES}"
        )));
    }
    Ok(())
}
