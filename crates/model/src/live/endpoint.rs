//! [`Endpoint`]: where and how a live backend posts, one attempt at a time (every byte
//! of the response kept, first-byte and idle timeouts, the body bounded, live events fed
//! for deltas), in a retry loop, each attempt's failure classified.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use tracing::Instrument;

use super::attempt::{Attempts, Capture, Reading, StatusError, kept_chunks, lock, send_kept};
use super::http::{header, http_client};
use super::{LiveConfig, RetryPolicy, Timeouts};
use crate::error::ModelError;
use crate::native::{BodyParser, Live, LiveEvents, MAX_EVENT_BYTES, status_error};
use crate::types::StreamDelta;
use crate::wire::{JSON_MEDIA_TYPE, SseParser};

/// Where and how a live backend posts.
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
    /// How an error status is read: the native APIs' mapping unless set otherwise.
    pub status_error: StatusError,
}

impl Endpoint {
    /// The endpoint of a native API at `path` under the base URL: the key sent as
    /// `key_header` (its value `key_prefix` and the key), then the `fixed` headers, then
    /// the configured ones. Fails as [`Endpoint::new`] does, or on a key or header that
    /// cannot be sent in an HTTP header.
    pub(crate) fn native(
        s: &LiveConfig,
        path: &str,
        (key_header, key_prefix): (&str, &str),
        fixed: &[(&str, &str)],
        parse: BodyParser,
    ) -> Result<Self, ModelError> {
        check_model(s)?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &s.api_key {
            let value = format!("{key_prefix}{}", key.expose());
            header(&mut headers, key_header, &value, true)?;
        }
        for (name, value) in fixed {
            header(&mut headers, name, value, false)?;
        }
        for (name, value) in &s.headers {
            header(&mut headers, name, value, true)?;
        }
        let url = format!("{}{path}", s.base_url.trim_end_matches('/'));
        Self::new(s, url, headers, parse)
    }

    /// The endpoint at `url` sending `headers` (the key's included; they are sent as
    /// they are): the configured key and header values are redacted from what is kept.
    /// Fails on an empty model name or a base URL that is not http(s).
    pub(crate) fn new(
        s: &LiveConfig,
        url: String,
        headers: HeaderMap,
        parse: BodyParser,
    ) -> Result<Self, ModelError> {
        check_model(s)?;
        let http = http_client(s.base_url.trim_end_matches('/'), &s.timeouts)?;
        let mut secrets: Vec<String> = s.api_key.iter().map(|k| k.expose().to_owned()).collect();
        secrets.extend(s.headers.iter().map(|(_, v)| v.clone()));
        secrets.retain(|v| v.len() >= 4);
        Ok(Endpoint {
            url,
            headers,
            secrets,
            timeouts: s.timeouts,
            retry: s.retry,
            max_body: s.max_response_bytes,
            http,
            parse,
            status_error,
        })
    }

    /// This endpoint with `status_error` reading its error statuses.
    pub(crate) fn with_status_error(self, status_error: StatusError) -> Self {
        Endpoint {
            status_error,
            ..self
        }
    }

    /// A whole response to `body`, for `model`'s span.
    pub(crate) async fn request(
        &self,
        model: &str,
        body: Bytes,
    ) -> Result<crate::ModelResponse, ModelError> {
        let span = tracing::info_span!("model_request", model = %model, stream = false);
        self.run(body, None).instrument(span).await
    }

    /// A streamed response to `body`, its SSE events read by `events` for the deltas.
    pub(crate) async fn request_stream(
        &self,
        model: &str,
        body: Bytes,
        events: Box<dyn LiveEvents>,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<crate::ModelResponse, ModelError> {
        let span = tracing::info_span!("model_request", model = %model, stream = true);
        self.run(body, Some((events, on_delta)))
            .instrument(span)
            .await
    }

    /// Sends `body` with retries; with `live`, the SSE events drive `on_delta` as they come.
    async fn run(
        &self,
        body: Bytes,
        mut live: Option<Live<'_>>,
    ) -> Result<crate::ModelResponse, ModelError> {
        let mut attempts = Attempts::new(self.retry);
        loop {
            let t0 = Instant::now();
            let cap = self.attempt(&body, live.as_mut()).await;
            let done = attempts.finish(t0.elapsed(), cap, &self.reading()).await;
            if let Some(result) = done {
                return result;
            }
        }
    }

    async fn attempt(&self, body: &Bytes, live: Option<&mut Live<'_>>) -> Capture {
        let capture = Arc::new(Mutex::new(Capture {
            request_body: body.clone(),
            ..Capture::default()
        }));
        let Some(response) = self.send(body, live.is_some(), &capture).await else {
            return std::mem::take(&mut *lock(&capture));
        };
        let status = response.status();
        let chunks = kept_chunks(
            response.bytes_stream(),
            capture.clone(),
            self.timeouts.idle,
            self.max_body,
        );
        match live {
            Some((events, on_delta)) if status.is_success() => {
                feed_live(chunks, events.as_mut(), *on_delta).await;
            }
            _ => {
                let mut chunks = Box::pin(chunks);
                while chunks.next().await.is_some() {}
            }
        }
        std::mem::take(&mut *lock(&capture))
    }

    /// Posts `body` (asking for SSE when `stream`) and records the response's status,
    /// media type and `Retry-After` in `capture`. `None` when no response came: the
    /// first-byte or connect timeout, or the transport error, is recorded instead.
    async fn send(
        &self,
        body: &Bytes,
        stream: bool,
        capture: &Mutex<Capture>,
    ) -> Option<reqwest::Response> {
        let mut request = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, JSON_MEDIA_TYPE)
            .body(body.clone());
        if stream {
            request = request.header(reqwest::header::ACCEPT, crate::SSE_MEDIA_TYPE);
        }
        send_kept(request.send(), capture, &self.timeouts)
            .await
            .ok()
    }

    /// How this endpoint reads a captured attempt.
    fn reading(&self) -> Reading<'_> {
        Reading {
            status_error: self.status_error,
            parse: self.parse,
            secrets: &self.secrets,
        }
    }
}

/// Reads `chunks` to their end, feeding their SSE events to `events` (and so the deltas to
/// `on_delta`) until one is refused, a chunk fails, or the event being read grows over
/// `MAX_EVENT_BYTES`. The rest is still read and kept; the final parse reports it.
async fn feed_live(
    chunks: impl futures_util::Stream<Item = std::io::Result<Bytes>>,
    events: &mut dyn LiveEvents,
    on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
) {
    let mut chunks = std::pin::pin!(chunks);
    let mut parser = SseParser::new();
    let mut healthy = true;
    while let Some(chunk) = chunks.next().await {
        let Ok(chunk) = chunk else {
            healthy = false;
            continue;
        };
        if !healthy {
            continue;
        }
        for event in parser.push(&chunk) {
            if healthy {
                healthy = events
                    .push(&event.event, &event.data, &mut |d| on_delta(d))
                    .is_ok();
            }
        }
        // The parser never buffers a runaway event.
        healthy &= parser.buffered() <= MAX_EVENT_BYTES;
    }
}

/// Refuses an empty model name.
fn check_model(s: &LiveConfig) -> Result<(), ModelError> {
    if s.model.trim().is_empty() {
        return Err(ModelError::Config("the model name is empty".into()));
    }
    Ok(())
}
