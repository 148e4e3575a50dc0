//! The HTTP side shared by the native backends (Anthropic Messages, OpenAI Responses): one
//! POST per attempt on reqwest, every byte of the response kept as it is read (SSE
//! verbatim), first-byte and idle timeouts, a body size limit, and a retry loop around
//! whole attempts. The final response is always parsed from the kept bytes, exactly as a
//! replay parses them; a live stream only drives the deltas.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::{FutureExt, StreamExt};
#[cfg(feature = "http")]
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::error::{ModelError, TimeoutKind};
use crate::openai::{RetryPolicy, Timeouts};
use crate::types::{Attempt, RawExchange, StreamDelta};
use crate::wire::{BodyProblem, JSON_MEDIA_TYPE, Parsed, error_info};
use crate::{anthropic, responses};

/// The wire format of a model API, for building and reading its bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireApi {
    /// OpenAI-compatible Chat Completions (`openai:`, and the offline models).
    ChatCompletions,
    /// Anthropic Messages (`anthropic:`).
    AnthropicMessages,
    /// OpenAI Responses (`openai-responses:`).
    OpenAiResponses,
}

impl WireApi {
    /// The API a model name (`anthropic:…`, `openai-responses:…`, anything else) speaks.
    pub fn of_model(name: &str) -> WireApi {
        match name.split_once(':').map(|(p, _)| p) {
            Some("anthropic") => WireApi::AnthropicMessages,
            Some("openai-responses") => WireApi::OpenAiResponses,
            _ => WireApi::ChatCompletions,
        }
    }

    /// The API a recorded response body was written in, by its shape: a Messages object
    /// or stream, a Responses object or stream, else Chat Completions.
    pub fn of_response_body(body: &[u8]) -> WireApi {
        let head = &body[..body.len().min(4096)];
        let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
        // Responses first: its output items are typed `message` too.
        if has(b"response.created")
            || has(b"\"object\":\"response\"")
            || has(b"\"object\": \"response\"")
        {
            WireApi::OpenAiResponses
        } else if has(b"message_start")
            || has(b"\"type\":\"message\"")
            || has(b"\"type\": \"message\"")
        {
            WireApi::AnthropicMessages
        } else {
            WireApi::ChatCompletions
        }
    }

    /// The request body a backend speaking this API sends for `request`, with default
    /// configuration (Anthropic's default `max_tokens`, Responses without `store`): what
    /// [`crate::ReplayModel`] compares a recorded request with.
    pub fn request_body(self, model: &str, request: &crate::ModelRequest, stream: bool) -> Bytes {
        let body = match self {
            WireApi::ChatCompletions => crate::wire::build_request_body(model, request, stream),
            WireApi::AnthropicMessages => anthropic::build_request_body(
                model,
                request,
                stream,
                anthropic::ANTHROPIC_DEFAULT_MAX_TOKENS,
            ),
            WireApi::OpenAiResponses => {
                responses::build_request_body(model, request, stream, false)
            }
        };
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }

    /// Parses a recorded exchange of this API: a non-2xx status maps to the typed error a
    /// live request gave, and the body is read by the same parser as a live response.
    pub fn parse_response(self, raw: RawExchange) -> Result<crate::ModelResponse, ModelError> {
        self.parse_response_streamed(raw, &mut |_| {})
    }

    pub(crate) fn parse_response_streamed(
        self,
        raw: RawExchange,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<crate::ModelResponse, ModelError> {
        match self {
            WireApi::ChatCompletions => crate::wire::parse_response_streamed(raw, on_delta),
            WireApi::AnthropicMessages => parse_recorded(anthropic::parse_body, raw, on_delta),
            WireApi::OpenAiResponses => parse_recorded(responses::parse_body, raw, on_delta),
        }
    }

    /// The [`crate::ProviderItem::api`] tag of this API's items (`None` for Chat
    /// Completions, which has none).
    pub fn item_tag(self) -> Option<&'static str> {
        match self {
            WireApi::ChatCompletions => None,
            WireApi::AnthropicMessages => Some(anthropic::API_TAG),
            WireApi::OpenAiResponses => Some(responses::API_TAG),
        }
    }
}

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

/// Where and how a native backend posts.
#[cfg(feature = "http")]
pub(crate) struct Endpoint {
    pub url: String,
    /// Every header sent, the key's included.
    pub headers: HeaderMap,
    /// Values that must never be kept or shown (keys).
    pub secrets: Vec<String>,
    pub timeouts: Timeouts,
    pub retry: RetryPolicy,
    pub max_body: usize,
    pub http: reqwest::Client,
    pub parse: BodyParser,
}

/// A reqwest client with the connect timeout, and no proxy for loopback servers.
#[cfg(feature = "http")]
pub(crate) fn http_client(base: &str, timeouts: &Timeouts) -> Result<reqwest::Client, ModelError> {
    let url = reqwest::Url::parse(base)
        .map_err(|e| ModelError::Config(format!("the base URL {base:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ModelError::Config(format!(
            "the base URL must start with http:// or https://, not {base:?}"
        )));
    }
    let mut builder = reqwest::Client::builder().connect_timeout(timeouts.connect);
    if matches!(
        url.host_str(),
        Some("localhost" | "127.0.0.1" | "[::1]" | "::1")
    ) {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| ModelError::Config(format!("cannot build the HTTP client: {e}")))
}

/// A header for `name: value`, refusing values that cannot be sent (the value is secret,
/// so it is never shown).
#[cfg(feature = "http")]
pub(crate) fn header(
    headers: &mut HeaderMap,
    name: &str,
    value: &str,
    sensitive: bool,
) -> Result<(), ModelError> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ModelError::Config(format!("invalid header name {name:?}")))?;
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        ModelError::Config(format!(
            "the value for header {name:?} holds characters that cannot go in an HTTP header"
        ))
    })?;
    v.set_sensitive(sensitive);
    headers.insert(n, v);
    Ok(())
}

#[cfg(feature = "http")]
#[derive(Debug, Default)]
struct Capture {
    status: Option<u16>,
    media_type: Option<String>,
    retry_after: Option<Duration>,
    body: Vec<u8>,
    timeout: Option<(TimeoutKind, Duration)>,
    transport: Option<String>,
    body_error: Option<String>,
    too_large: Option<usize>,
}

#[cfg(feature = "http")]
fn lock(c: &Mutex<Capture>) -> MutexGuard<'_, Capture> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(feature = "http")]
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// The wait a response asks for: `retry-after-ms`, `retry-after` in seconds, or
/// `retry-after` as an HTTP date (a date in the past is no wait).
#[cfg(feature = "http")]
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return (ms.is_finite() && (0.0..1e12).contains(&ms))
            .then(|| Duration::from_secs_f64(ms / 1000.0));
    }
    let value = get("retry-after")?;
    if let Ok(s) = value.parse::<f64>() {
        return (s.is_finite() && (0.0..1e9).contains(&s)).then(|| Duration::from_secs_f64(s));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The backoff before retry `retry` (0-based): exponential up to `max_backoff`, then a
/// random part of it taken off (between none and half), so that many clients that failed
/// together do not all come back together.
#[cfg(feature = "http")]
pub(crate) fn jittered_backoff(policy: &RetryPolicy, retry: u32) -> Duration {
    let full = policy
        .initial_backoff
        .saturating_mul(2u32.saturating_pow(retry))
        .min(policy.max_backoff);
    full.mul_f64(1.0 - fastrand::f64() * 0.5)
}

#[cfg(feature = "http")]
/// The wait before retrying when the server said how long to wait: that long, plus a
/// random part of up to a quarter of it (at most 10 s more), never less. Hundreds of runs
/// of one batch told the same `Retry-After` then come back spread out, not in lockstep.
pub(crate) fn jittered_server_wait(wait: Duration) -> Duration {
    wait + wait
        .mul_f64(fastrand::f64() * 0.25)
        .min(Duration::from_secs(10))
}

#[cfg(feature = "http")]
fn redact(secrets: &[String], text: &str) -> String {
    let mut t = text.to_owned();
    for s in secrets {
        t = t.replace(s.as_str(), "[REDACTED]");
    }
    t
}

#[cfg(feature = "http")]
fn redact_bytes(secrets: &[String], bytes: Bytes) -> Bytes {
    let hit = secrets
        .iter()
        .any(|s| bytes.windows(s.len()).any(|w| w == s.as_bytes()));
    if !hit {
        return bytes;
    }
    tracing::warn!("the response echoed a secret; it is redacted in the kept bytes");
    let mut out = bytes.to_vec();
    for s in secrets {
        let needle = s.as_bytes();
        let mut next = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            if out[i..].starts_with(needle) {
                next.extend_from_slice(b"[REDACTED]");
                i += needle.len();
            } else {
                next.push(out[i]);
                i += 1;
            }
        }
        out = next;
    }
    Bytes::from(out)
}

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
    let input = futures_util::stream::iter([Ok::<_, Infallible>(Bytes::copy_from_slice(body))]);
    // The input stream is always ready, so the collection completes on its first poll.
    let events = input
        .eventsource()
        .collect::<Vec<_>>()
        .now_or_never()
        .ok_or_else(|| BodyProblem::Malformed("SSE parser did not finish".into()))?;
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        let e = e.map_err(|e| BodyProblem::Malformed(format!("bad SSE framing: {e}")))?;
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

#[cfg(feature = "http")]
impl Endpoint {
    /// Sends `body` with retries; with `live`, the SSE events drive `on_delta` as they come.
    pub(crate) async fn run(
        &self,
        body: Bytes,
        mut live: Option<Live<'_>>,
    ) -> Result<crate::ModelResponse, ModelError> {
        let policy = self.retry;
        let started = Instant::now();
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut retries = 0u32;
        loop {
            let t0 = Instant::now();
            let cap = self.attempt(&body, live.as_mut()).await;
            let duration = t0.elapsed();
            let server_wait = cap.retry_after;
            let (result, retryable) = self.classify(&body, cap);
            let mut attempt = Attempt {
                duration,
                ..Attempt::default()
            };
            let exchange = match &result {
                Ok(r) => Some(&r.raw),
                Err(e) => e.exchange(),
            };
            if let Some(x) = exchange {
                attempt.status = x.status;
                attempt.response_body = x.response_body.clone();
                attempt.response_media_type = x.response_media_type.clone();
            }
            if let Err(e) = &result {
                attempt.error = Some(e.to_string());
                attempt.retry_after = server_wait;
            }
            tracing::debug!(
                status = ?attempt.status,
                duration_ms = duration.as_millis() as u64,
                error = attempt.error.as_deref().unwrap_or(""),
                "model attempt finished"
            );
            attempts.push(attempt);
            match result {
                Ok(mut response) => {
                    response.raw.attempts = attempts;
                    return Ok(response);
                }
                Err(mut err) => {
                    if retryable && retries < policy.max_retries {
                        let wait = server_wait.map_or_else(
                            || jittered_backoff(&policy, retries),
                            jittered_server_wait,
                        );
                        if started.elapsed() + wait <= policy.max_elapsed {
                            retries += 1;
                            tracing::warn!(
                                retry = retries,
                                wait_ms = wait.as_millis() as u64,
                                "model request failed ({err}); retrying"
                            );
                            tokio::time::sleep(wait).await;
                            continue;
                        }
                        tracing::warn!("retry budget exhausted after {} attempts", attempts.len());
                    }
                    if let Some(x) = err.exchange_mut() {
                        x.attempts = attempts;
                    }
                    return Err(err);
                }
            }
        }
    }

    async fn attempt(&self, body: &Bytes, live: Option<&mut Live<'_>>) -> Capture {
        let capture = Arc::new(Mutex::new(Capture::default()));
        let mut request = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, JSON_MEDIA_TYPE)
            .body(body.clone());
        if live.is_some() {
            request = request.header(reqwest::header::ACCEPT, crate::SSE_MEDIA_TYPE);
        }
        let first_byte = self.timeouts.first_byte;
        let response = match tokio::time::timeout(first_byte, request.send()).await {
            Err(_) => {
                lock(&capture).timeout = Some((TimeoutKind::FirstByte, first_byte));
                return std::mem::take(&mut *lock(&capture));
            }
            Ok(Err(e)) => {
                let mut c = lock(&capture);
                if e.is_connect() && e.is_timeout() {
                    c.timeout = Some((TimeoutKind::Connect, self.timeouts.connect));
                } else {
                    c.transport = Some(error_chain(&e));
                }
                return std::mem::take(&mut *c);
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        {
            let mut c = lock(&capture);
            c.status = Some(status.as_u16());
            c.media_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            c.retry_after = retry_after(response.headers(), SystemTime::now());
        }
        let idle = self.timeouts.idle;
        let max_body = self.max_body;
        let state = Some((response.bytes_stream(), capture.clone()));
        let chunks = futures_util::stream::unfold(state, move |state| async move {
            let (mut stream, capture) = state?;
            match tokio::time::timeout(idle, stream.next()).await {
                Err(_) => {
                    lock(&capture).timeout = Some((TimeoutKind::Idle, idle));
                    Some((Err(std::io::Error::other("idle timeout")), None))
                }
                Ok(None) => None,
                Ok(Some(Ok(chunk))) => {
                    let mut c = lock(&capture);
                    if c.body.len() + chunk.len() > max_body {
                        // Keep what fits, then stop reading: memory stays bounded.
                        let room = max_body - c.body.len();
                        c.body.extend_from_slice(&chunk[..room]);
                        c.too_large = Some(max_body);
                        drop(c);
                        return Some((Err(std::io::Error::other("body too large")), None));
                    }
                    c.body.extend_from_slice(&chunk);
                    drop(c);
                    Some((Ok(chunk), Some((stream, capture))))
                }
                Ok(Some(Err(e))) => {
                    lock(&capture).body_error = Some(error_chain(&e));
                    Some((Err(std::io::Error::other(e.to_string())), None))
                }
            }
        });
        match live {
            Some((events, on_delta)) if status.is_success() => {
                // Fused: it is read again after the SSE parser has seen its end.
                let mut chunks = Box::pin(chunks.fuse());
                // Bytes since the last event boundary: an event over the limit ends the
                // live reading (the rest is still read and kept, and the final parse
                // reports it), so the SSE parser never buffers a runaway event.
                let mut pending = 0usize;
                let bounded = chunks.by_ref().take_while(|item| {
                    let within = match item {
                        Ok(chunk) => {
                            let tail = chunk
                                .windows(2)
                                .rposition(|w| w == b"\n\n")
                                .map(|i| chunk.len() - i - 2);
                            pending = match tail {
                                Some(t) => t,
                                None => pending + chunk.len(),
                            };
                            pending <= MAX_EVENT_BYTES
                        }
                        Err(_) => true,
                    };
                    std::future::ready(within)
                });
                let mut stream = bounded.eventsource();
                let mut healthy = true;
                while let Some(event) = stream.next().await {
                    let Ok(event) = event else { break };
                    if healthy {
                        healthy = events
                            .push(&event.event, &event.data, &mut |d| on_delta(d))
                            .is_ok();
                    }
                }
                drop(stream);
                while chunks.next().await.is_some() {}
            }
            _ => {
                let mut chunks = Box::pin(chunks);
                while chunks.next().await.is_some() {}
            }
        }
        std::mem::take(&mut *lock(&capture))
    }

    /// One attempt's capture as a response or a typed error, and whether a retry is worth it.
    fn classify(
        &self,
        request_body: &Bytes,
        cap: Capture,
    ) -> (Result<crate::ModelResponse, ModelError>, bool) {
        let raw = RawExchange {
            request_body: request_body.clone(),
            request_media_type: JSON_MEDIA_TYPE.into(),
            response_body: redact_bytes(&self.secrets, Bytes::from(cap.body)),
            response_media_type: cap.media_type,
            status: cap.status,
            attempts: Vec::new(),
        };
        let (result, retryable) = if let Some((kind, after)) = cap.timeout {
            let err = ModelError::Timeout {
                kind,
                after,
                exchange: Box::new(raw),
            };
            (Err(err), kind == TimeoutKind::Connect)
        } else if let Some(message) = cap.transport {
            let err = ModelError::Connection {
                message,
                exchange: Box::new(raw),
            };
            (Err(err), true)
        } else if let Some(status) = cap.status.filter(|s| !(200..300).contains(s)) {
            let body = raw.response_body.clone();
            let err = status_error(status, &body, cap.retry_after, raw);
            let retryable = match &err {
                ModelError::RateLimited { code, .. } => {
                    code.as_deref() != Some("insufficient_quota")
                }
                ModelError::ServerError { .. } => true,
                _ => false,
            };
            (Err(err), retryable)
        } else if let Some(limit) = cap.too_large {
            let err = ModelError::MalformedResponse {
                message: format!(
                    "the response body is larger than the limit of {limit} bytes (max_response_bytes); reading stopped there"
                ),
                exchange: Box::new(raw),
            };
            (Err(err), false)
        } else if let Some(message) = cap.body_error {
            let err = ModelError::StreamIncomplete {
                message: format!("the connection broke while reading the body: {message}"),
                exchange: Box::new(raw),
            };
            (Err(err), false)
        } else {
            (parse_recorded(self.parse, raw, &mut |_| {}), false)
        };
        let result = result.map_err(|mut e| {
            for t in e.texts_mut() {
                *t = redact(&self.secrets, t);
            }
            e
        });
        (result, retryable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_http_dates() {
        let now = httpdate::parse_http_date("Thu, 03 Dec 2026 17:00:00 GMT").unwrap();
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2.5"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(2500)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Thu, 03 Dec 2026 17:00:07 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Thu, 03 Dec 2026 16:00:00 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after-ms", HeaderValue::from_static("120"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(120)));
    }

    #[test]
    fn server_waits_are_kept_and_spread_by_at_most_a_quarter() {
        let wait = Duration::from_secs(4);
        let waits: Vec<Duration> = (0..200).map(|_| jittered_server_wait(wait)).collect();
        assert!(waits.iter().all(|w| *w >= wait && *w <= wait + wait / 4));
        // Spread out, not one value for everyone.
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(
            distinct.len() > 100,
            "only {} distinct waits",
            distinct.len()
        );
        assert!(jittered_server_wait(Duration::from_secs(3600)) <= Duration::from_secs(3610));
        assert_eq!(jittered_server_wait(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn backoff_is_jittered_within_half_of_the_exponential_step() {
        let policy = RetryPolicy::default();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let d = jittered_backoff(&policy, 2);
            assert!(
                d <= Duration::from_secs(2) && d >= Duration::from_secs(1),
                "{d:?}"
            );
            seen.insert(d);
        }
        assert!(seen.len() > 1, "the waits must differ");
        assert!(jittered_backoff(&policy, 30) <= policy.max_backoff);
    }
}
