//! One attempt of a live backend as it was seen on the wire ([`Capture`], filled by
//! [`send_kept`] and [`kept_chunks`]), its
//! classification (the response, or the typed error, and whether a retry is worth it),
//! and the retry loop's bookkeeping ([`Attempts`]). The [`Endpoint`](super::Endpoint)
//! every live backend posts through fills a `Capture` per attempt and hands it to
//! [`Attempts::finish`].

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;

use super::http::{redact, redact_bytes};
use super::retry::{jittered_backoff, jittered_server_wait, retry_after};
use super::{RetryPolicy, Timeouts};
use crate::error::error_chain;
use crate::error::{ModelError, TimeoutKind};
use crate::native::BodyParser;
use crate::types::{Attempt, ModelResponse, RawExchange};
use crate::wire::JSON_MEDIA_TYPE;

/// The log target of the attempts' events: the module they were logged from before the
/// live module gathered them, kept so that `RUST_LOG` filters written for it still work.
const ATTEMPT_LOG: &str = "provrun_model::native::attempt";

/// What one attempt sent and received, filled in while it runs.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    pub request_body: Bytes,
    pub status: Option<u16>,
    pub media_type: Option<String>,
    pub retry_after: Option<Duration>,
    pub body: Vec<u8>,
    pub timeout: Option<(TimeoutKind, Duration)>,
    pub transport: Option<String>,
    pub body_error: Option<String>,
    /// The body passed the size limit (which it was).
    pub too_large: Option<usize>,
}

/// The capture behind `c`, even when a holder panicked.
pub(crate) fn lock(c: &Mutex<Capture>) -> MutexGuard<'_, Capture> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

/// Awaits `sending` (a request on its way) within the first-byte timeout and records in
/// `capture` the response's status, media type and `Retry-After`, or why no response
/// came: the first-byte or connect timeout, or the transport error. The error is `None`
/// for the first-byte timeout, else reqwest's.
pub(crate) async fn send_kept(
    sending: impl Future<Output = reqwest::Result<reqwest::Response>>,
    capture: &Mutex<Capture>,
    timeouts: &Timeouts,
) -> Result<reqwest::Response, Option<reqwest::Error>> {
    let response = match tokio::time::timeout(timeouts.first_byte, sending).await {
        Err(_) => {
            lock(capture).timeout = Some((TimeoutKind::FirstByte, timeouts.first_byte));
            return Err(None);
        }
        Ok(Err(e)) => {
            let mut c = lock(capture);
            if e.is_connect() && e.is_timeout() {
                c.timeout = Some((TimeoutKind::Connect, timeouts.connect));
            } else {
                c.transport = Some(error_chain(&e));
            }
            return Err(Some(e));
        }
        Ok(Ok(r)) => r,
    };
    let mut c = lock(capture);
    c.status = Some(response.status().as_u16());
    c.media_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    c.retry_after = retry_after(response.headers(), SystemTime::now());
    drop(c);
    Ok(response)
}

/// The response body's chunks, each kept in `capture` as it is read: a wait over `idle`
/// for the next chunk, a body over `max_body` (what fits is kept) or a read error ends
/// the stream with an error, recorded in `capture`.
pub(crate) fn kept_chunks<S>(
    body: S,
    capture: Arc<Mutex<Capture>>,
    idle: Duration,
    max_body: usize,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>>
where
    S: futures_util::Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    let state = Some((body, capture));
    futures_util::stream::unfold(state, move |state| async move {
        let (mut stream, capture) = state?;
        match tokio::time::timeout(idle, stream.next()).await {
            Err(_) => {
                lock(&capture).timeout = Some((TimeoutKind::Idle, idle));
                let e = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the body went quiet for longer than the idle timeout",
                );
                Some((Err(e), None))
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
                    let e = std::io::Error::other(format!(
                        "the response body is larger than the limit of {max_body} bytes"
                    ));
                    return Some((Err(e), None));
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
    })
}

/// Maps an error status, its body and `Retry-After` to a typed error.
pub(crate) type StatusError = fn(u16, &[u8], Option<Duration>, RawExchange) -> ModelError;

/// How a backend reads a captured attempt: its error statuses, its successful bodies,
/// and the values redacted from what is kept.
pub(crate) struct Reading<'a> {
    pub status_error: StatusError,
    pub parse: BodyParser,
    pub secrets: &'a [String],
}

/// Turns one attempt's capture into a response or a typed error, and says whether the
/// error is worth a retry.
fn classify(cap: Capture, how: &Reading<'_>) -> (Result<ModelResponse, ModelError>, bool) {
    let raw = RawExchange {
        request_body: cap.request_body,
        request_media_type: JSON_MEDIA_TYPE.into(),
        response_body: redact_bytes(how.secrets, Bytes::from(cap.body)),
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
        let err = (how.status_error)(status, &body, cap.retry_after, raw);
        let retryable = match &err {
            ModelError::RateLimited { code, .. } => code.as_deref() != Some("insufficient_quota"),
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
    } else if cap.status.is_none() {
        (Err(ModelError::InvalidRequest("no response".into())), false)
    } else if let Some(message) = cap.body_error {
        let err = ModelError::StreamIncomplete {
            message: format!("the connection broke while reading the body: {message}"),
            exchange: Box::new(raw),
        };
        (Err(err), false)
    } else {
        let parsed = (how.parse)(
            &raw.response_body,
            raw.response_media_type.as_deref(),
            &mut |_| {},
        );
        match parsed {
            Ok(p) => (Ok(p.into_response(raw)), false),
            Err(p) => (Err(p.into_error(raw)), false),
        }
    };
    let result = result.map_err(|mut e| {
        for t in e.texts_mut() {
            *t = redact(how.secrets, t);
        }
        e
    });
    (result, retryable)
}

/// One request's attempts so far, and the retry policy that decides whether another comes.
pub(crate) struct Attempts {
    policy: RetryPolicy,
    started: Instant,
    done: Vec<Attempt>,
    retries: u32,
}

impl Attempts {
    /// No attempt yet; the time budget starts now.
    pub(crate) fn new(policy: RetryPolicy) -> Self {
        Attempts {
            policy,
            started: Instant::now(),
            done: Vec::new(),
            retries: 0,
        }
    }

    /// Classifies one attempt that took `duration` and keeps it. Returns the request's
    /// result (every attempt attached to its exchange), or `None` once the wait before
    /// the next attempt is over, when a retry is worth it and fits the policy.
    pub(crate) async fn finish(
        &mut self,
        duration: Duration,
        cap: Capture,
        how: &Reading<'_>,
    ) -> Option<Result<ModelResponse, ModelError>> {
        let server_wait = cap.retry_after;
        let (result, retryable) = classify(cap, how);
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
            target: ATTEMPT_LOG,
            status = ?attempt.status,
            duration_ms = duration.as_millis() as u64,
            error = attempt.error.as_deref().unwrap_or(""),
            "model attempt finished"
        );
        self.done.push(attempt);
        let policy = &self.policy;
        match result {
            Ok(mut response) => {
                response.raw.attempts = std::mem::take(&mut self.done);
                Some(Ok(response))
            }
            Err(mut err) => {
                if retryable && self.retries < policy.max_retries {
                    let wait = server_wait.map_or_else(
                        || jittered_backoff(policy, self.retries),
                        jittered_server_wait,
                    );
                    if self.started.elapsed() + wait <= policy.max_elapsed {
                        self.retries += 1;
                        tracing::warn!(
                            target: ATTEMPT_LOG,
                            retry = self.retries,
                            wait_ms = wait.as_millis() as u64,
                            "model request failed ({err}); retrying"
                        );
                        tokio::time::sleep(wait).await;
                        return None;
                    }
                    let attempts = self.done.len();
                    tracing::warn!(
                        target: ATTEMPT_LOG,
                        "retry budget exhausted after {attempts} attempts"
                    );
                }
                if let Some(x) = err.exchange_mut() {
                    x.attempts = std::mem::take(&mut self.done);
                }
                Some(Err(err))
            }
        }
    }
}
