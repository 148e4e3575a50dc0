//! [`OpenAiModel`]: any OpenAI-compatible chat-completions server, through async-openai.
//!
//! The request goes through async-openai's `*_byot` calls with our own lenient JSON types,
//! and through our own HTTP service (async-openai's `middleware` feature), which keeps the
//! exact request and response bytes of every attempt (SSE verbatim) and applies the
//! first-byte and idle timeouts. Retries are our own loop around whole attempts rather than
//! async-openai's `OpenAIRetryLayer`, because that layer has no total time bound, reads only
//! whole-second `Retry-After` values, swallows 429 bodies it cannot parse (such as
//! OpenRouter's integer error codes) and would hide the attempts from evidence.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

#[cfg(feature = "http")]
use async_openai::Client;
#[cfg(feature = "http")]
use async_openai::config::OpenAIConfig;
#[cfg(feature = "http")]
use async_openai::error::OpenAIError;
#[cfg(feature = "http")]
use async_openai::middleware::HttpRequestFactory;
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use crate::Model;
use crate::error::{ModelError, TimeoutKind};
use crate::types::{Attempt, ModelRequest, ModelResponse, RawExchange, StreamDelta};
use crate::wire::{
    JSON_MEDIA_TYPE, StreamAccumulator, build_request_body, http_status_error, parse_body,
};

/// The public OpenAI API, used when no base URL is given.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The value of the environment variable `name`, or `None` when it is unset or blank.
pub(crate) fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The base URL a configuration uses (`default` when none is given) and its key. A
/// missing key is refused for the provider's public `default` URL only, naming the
/// variable `key_var` that should hold it.
pub(crate) fn base_and_key(
    base_url: Option<String>,
    api_key: Option<String>,
    default: &str,
    key_var: &str,
    provider: &str,
) -> Result<(String, Option<ApiKey>), ModelError> {
    let base_url = base_url.unwrap_or_else(|| default.to_owned());
    if api_key.is_none() && base_url.trim_end_matches('/') == default {
        return Err(ModelError::Config(format!(
            "{key_var} is not set (needed for the public {provider} API)"
        )));
    }
    Ok((base_url, api_key.map(ApiKey::new)))
}

/// An API key. Its `Debug` output never shows it, and nothing in this crate logs it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// The timeouts of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// To open the TCP (and TLS) connection. Default 10 s.
    pub connect: Duration,
    /// From sending the request to the response headers. Default 120 s.
    pub first_byte: Duration,
    /// The longest quiet gap while reading the body or stream. Default 60 s.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
        }
    }
}

/// When to try again after HTTP 429, 5xx, or a connection that failed before any response.
///
/// The wait is the server's `Retry-After` (or `retry-after-ms`) when given, plus a random
/// part of up to a quarter of it (at most 10 s), else `initial_backoff` doubled per retry
/// up to `max_backoff` with a random part of up to half taken off: many runs refused
/// together do not retry in lockstep. No retry starts if its wait would
/// end after `max_elapsed` from the first attempt, so a server that stays down costs a
/// bounded time. Timeouts other than connect timeouts are not retried (the request may have
/// been processed), nor is anything after a stream has started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt. Default 3.
    pub max_retries: u32,
    /// The first backoff. Default 500 ms.
    pub initial_backoff: Duration,
    /// The longest backoff. Default 8 s.
    pub max_backoff: Duration,
    /// The time budget for all waits and attempts together. Default 60 s.
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_elapsed: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }
}

/// Where and how [`OpenAiModel`] connects.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The model name sent in requests (e.g. `gpt-4o-mini`).
    pub model: String,
    /// The API base, up to and without `/chat/completions` (e.g. `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`, an Azure/Foundry `…/openai/v1`).
    pub base_url: String,
    /// The key sent as `Authorization: Bearer …`; `None` sends an empty bearer token, which
    /// local servers such as Ollama or vLLM accept.
    pub api_key: Option<ApiKey>,
    /// Extra request headers (e.g. Azure's `api-key`). Their values are treated as secrets.
    pub headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries.
    pub retry: RetryPolicy,
    /// The largest response body read from one attempt, in bytes; a longer one ends the
    /// attempt as a malformed response, so a runaway server cannot exhaust memory.
    /// Default [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_response_bytes: usize,
}

/// The default [`OpenAiConfig::max_response_bytes`]: 32 MiB, far above any real chat
/// completion.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OpenAiConfig")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl OpenAiConfig {
    /// A configuration with default timeouts and retries.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<ApiKey>,
    ) -> Self {
        OpenAiConfig {
            model: model.into(),
            base_url: base_url.into(),
            api_key,
            headers: Vec::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// A configuration from `OPENAI_BASE_URL` (default [`DEFAULT_BASE_URL`]) and
    /// `OPENAI_API_KEY`. The key is required for the default base URL only.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::from_values(
            model,
            env_value("OPENAI_BASE_URL"),
            env_value("OPENAI_API_KEY"),
        )
    }

    /// [`OpenAiConfig::from_env`] with the two values given.
    pub fn from_values(
        model: impl Into<String>,
        base_url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, ModelError> {
        let (base_url, api_key) = base_and_key(
            base_url,
            api_key,
            DEFAULT_BASE_URL,
            "OPENAI_API_KEY",
            "OpenAI",
        )?;
        Ok(Self::new(model, base_url, api_key))
    }
}

/// A model served by an OpenAI-compatible chat-completions API.
#[cfg(feature = "http")]
pub struct OpenAiModel {
    name: String,
    config: OpenAiConfig,
    http: reqwest::Client,
    client_config: OpenAIConfig,
}

#[cfg(feature = "http")]
impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "http")]
fn header_safe(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b) || b == b'\t')
}

#[cfg(feature = "http")]
impl OpenAiModel {
    /// A model for `config`. Fails on a base URL that is not http(s) or a key or header
    /// that cannot be sent in an HTTP header.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "the base URL must start with http:// or https://, not {base:?}"
            )));
        }
        if config.model.trim().is_empty() {
            return Err(ModelError::Config("the model name is empty".into()));
        }
        let key = config.api_key.as_ref().map_or("", ApiKey::expose);
        // async-openai builds the Authorization header with `unwrap`, so check first.
        if !header_safe(key) {
            return Err(ModelError::Config(
                "the API key holds characters that cannot go in an HTTP header".into(),
            ));
        }
        let mut client_config = OpenAIConfig::new()
            .with_api_base(base.clone())
            .with_api_key(key);
        for (name, value) in &config.headers {
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ModelError::Config(format!("invalid header name {name:?}")))?;
            client_config = client_config
                .with_header(header, value.as_str())
                .map_err(|_| ModelError::Config(format!("invalid value for header {name:?}")))?;
        }
        let url = reqwest::Url::parse(&base)
            .map_err(|e| ModelError::Config(format!("the base URL {base:?} is not a URL: {e}")))?;
        let mut builder = reqwest::Client::builder().connect_timeout(config.timeouts.connect);
        // A server on this machine (Ollama, vLLM, a test server) is never reached through
        // a proxy from the environment.
        if matches!(
            url.host_str(),
            Some("localhost" | "127.0.0.1" | "[::1]" | "::1")
        ) {
            builder = builder.no_proxy();
        }
        let http = builder
            .build()
            .map_err(|e| ModelError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(OpenAiModel {
            name: format!("openai:{}", config.model),
            config,
            http,
            client_config,
        })
    }

    /// A model named `model` configured from the environment ([`OpenAiConfig::from_env`]).
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::new(OpenAiConfig::from_env(model)?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn secrets(&self) -> Vec<&str> {
        let mut s: Vec<&str> = self
            .config
            .headers
            .iter()
            .map(|(_, v)| v.as_str())
            .collect();
        s.extend(self.config.api_key.as_ref().map(ApiKey::expose));
        s.retain(|v| v.len() >= 4);
        s
    }

    fn redact(&self, text: &str) -> String {
        let mut t = text.to_owned();
        for s in self.secrets() {
            t = t.replace(s, "[REDACTED]");
        }
        t
    }

    fn redact_bytes(&self, bytes: Bytes) -> Bytes {
        let secrets = self.secrets();
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
            let mut i = 0;
            let mut next = Vec::with_capacity(out.len());
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

    fn client(&self, capture: &Arc<Mutex<Capture>>) -> Client<OpenAIConfig> {
        Client::build(self.http.clone(), self.client_config.clone()).with_http_service(
            CaptureService {
                http: self.http.clone(),
                capture: capture.clone(),
                timeouts: self.config.timeouts,
                max_body: self.config.max_response_bytes,
            },
        )
    }

    async fn run(
        &self,
        request: &ModelRequest,
        on_delta: Option<&(dyn Fn(StreamDelta) + Send + Sync)>,
    ) -> Result<ModelResponse, ModelError> {
        let body = build_request_body(&self.config.model, request, on_delta.is_some());
        let policy = self.config.retry;
        let started = Instant::now();
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut retries = 0u32;
        loop {
            let capture = Arc::new(Mutex::new(Capture::default()));
            let client = self.client(&capture);
            let t0 = Instant::now();
            let outcome = match on_delta {
                Some(sink) => consume_stream(&client, &body, sink).await,
                None => client
                    .chat()
                    .create_byot::<&Value, Value>(&body)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            };
            drop(client);
            let cap = std::mem::take(&mut *lock(&capture));
            let duration = t0.elapsed();
            let server_wait = cap.retry_after;
            let (result, retryable) = self.classify(cap, outcome);
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
            let retry_after = attempt.retry_after;
            attempts.push(attempt);
            match result {
                Ok(mut response) => {
                    response.raw.attempts = attempts;
                    return Ok(response);
                }
                Err(mut err) => {
                    if retryable && retries < policy.max_retries {
                        let wait = retry_after.map_or_else(
                            || crate::native::jittered_backoff(&policy, retries),
                            crate::native::jittered_server_wait,
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

    /// Turns one attempt's capture into a response or a typed error, and says whether the
    /// error is worth a retry.
    fn classify(
        &self,
        cap: Capture,
        outcome: Result<(), String>,
    ) -> (Result<ModelResponse, ModelError>, bool) {
        let raw = RawExchange {
            request_body: cap.request_body,
            request_media_type: JSON_MEDIA_TYPE.into(),
            response_body: self.redact_bytes(Bytes::from(cap.body)),
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
            let err = http_status_error(status, &body, cap.retry_after, raw);
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
        } else if cap.status.is_none() {
            let message = outcome.err().unwrap_or_else(|| "no response".into());
            (Err(ModelError::InvalidRequest(message)), false)
        } else if let Some(message) = cap.body_error {
            let err = ModelError::StreamIncomplete {
                message: format!("the connection broke while reading the body: {message}"),
                exchange: Box::new(raw),
            };
            (Err(err), false)
        } else {
            let parsed = parse_body(
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
                *t = self.redact(t);
            }
            e
        });
        (result, retryable)
    }
}

/// Reads a stream through async-openai, reporting deltas; the final response is parsed
/// from the captured bytes afterwards, exactly as a recording would be.
#[cfg(feature = "http")]
async fn consume_stream(
    client: &Client<OpenAIConfig>,
    body: &Value,
    on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
) -> Result<(), String> {
    let mut stream = client
        .chat()
        .create_stream_byot::<&Value, Value>(body)
        .await
        .map_err(|e| e.to_string())?;
    let mut acc = StreamAccumulator::default();
    while let Some(item) = stream.next().await {
        let chunk = item.map_err(|e| e.to_string())?;
        if acc.push(&chunk, &mut |d| on_delta(d)).is_err() {
            break;
        }
    }
    Ok(())
}

#[cfg(feature = "http")]
#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let span = tracing::info_span!("model_request", model = %self.config.model, stream = false);
        self.run(request, None).instrument(span).await
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let span = tracing::info_span!("model_request", model = %self.config.model, stream = true);
        self.run(request, Some(on_delta)).instrument(span).await
    }
}

/// What one attempt sent and received, filled in by [`CaptureService`].
#[cfg(feature = "http")]
#[derive(Debug, Default)]
struct Capture {
    request_body: Bytes,
    status: Option<u16>,
    media_type: Option<String>,
    retry_after: Option<Duration>,
    body: Vec<u8>,
    timeout: Option<(TimeoutKind, Duration)>,
    transport: Option<String>,
    body_error: Option<String>,
    /// The body passed the size limit (which it was).
    too_large: Option<usize>,
}

#[cfg(feature = "http")]
fn lock(c: &Mutex<Capture>) -> MutexGuard<'_, Capture> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

/// The error text with its causes ("error sending request: … : connection refused").
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

#[cfg(feature = "http")]
/// The wait a response asks for, read as the native backends read it: `retry-after-ms`,
/// `retry-after` in seconds, or `retry-after` as an HTTP date.
fn parse_retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    crate::native::retry_after(headers, std::time::SystemTime::now())
}

#[cfg(feature = "http")]
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The tower service async-openai sends through: it keeps the request bytes, applies the
/// first-byte timeout, and wraps the response body so every byte read is kept and a quiet
/// gap longer than the idle timeout ends the body with an error. An error status is read
/// to the end here and returned as an error, so async-openai never sees (or logs) its body.
#[cfg(feature = "http")]
#[derive(Clone)]
struct CaptureService {
    http: reqwest::Client,
    capture: Arc<Mutex<Capture>>,
    timeouts: Timeouts,
    max_body: usize,
}

#[cfg(feature = "http")]
impl tower_service::Service<HttpRequestFactory> for CaptureService {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = BoxFuture<Result<reqwest::Response, OpenAIError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), OpenAIError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.send(factory).await })
    }
}

#[cfg(feature = "http")]
fn boxed(e: impl std::error::Error + Send + Sync + 'static) -> OpenAIError {
    OpenAIError::Boxed(Box::new(e))
}

#[cfg(feature = "http")]
impl CaptureService {
    async fn send(self, factory: HttpRequestFactory) -> Result<reqwest::Response, OpenAIError> {
        let request = factory.build().await?;
        let body = request
            .body()
            .and_then(|b| b.as_bytes())
            .map(Bytes::copy_from_slice)
            .unwrap_or_default();
        lock(&self.capture).request_body = body;
        let first_byte = self.timeouts.first_byte;
        let response = match tokio::time::timeout(first_byte, self.http.execute(request)).await {
            Err(_) => {
                lock(&self.capture).timeout = Some((TimeoutKind::FirstByte, first_byte));
                return Err(boxed(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no response headers within the first-byte timeout",
                )));
            }
            Ok(Err(e)) => {
                let mut c = lock(&self.capture);
                if e.is_connect() && e.is_timeout() {
                    c.timeout = Some((TimeoutKind::Connect, self.timeouts.connect));
                } else {
                    c.transport = Some(error_chain(&e));
                }
                return Err(OpenAIError::Reqwest(e));
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        let version = response.version();
        let headers = response.headers().clone();
        {
            let mut c = lock(&self.capture);
            c.status = Some(status.as_u16());
            c.media_type = headers
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            c.retry_after = parse_retry_after(&headers);
        }
        let idle = self.timeouts.idle;
        let max_body = self.max_body;
        let state = Some((response.bytes_stream(), self.capture.clone()));
        let body = futures_util::stream::unfold(state, move |state| async move {
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
        });
        if !status.is_success() {
            // Read the error body here, so async-openai neither parses nor logs it: the
            // caller maps it from the captured bytes.
            let mut body = std::pin::pin!(body);
            while body.next().await.is_some() {}
            return Err(boxed(std::io::Error::other(format!(
                "HTTP status {status}"
            ))));
        }
        let mut builder = http::Response::builder().status(status).version(version);
        if let Some(h) = builder.headers_mut() {
            *h = headers;
        }
        let response = builder
            .body(reqwest::Body::wrap_stream(body))
            .map_err(boxed)?;
        Ok(reqwest::Response::from(response))
    }
}
