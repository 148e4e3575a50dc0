//! [`OpenAiModel`]: the chat-completions client on async-openai, with our own retry loop
//! around whole attempts, secrets redacted from what is kept, and each attempt's failure
//! classified (status, timeout, transport, body).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use super::capture::CaptureService;
use super::{ApiKey, OpenAiConfig};
use crate::Model;
use crate::error::ModelError;
use crate::native::{Attempts, Capture, Reading, lock};
use crate::types::{ModelRequest, ModelResponse, StreamDelta};
use crate::wire::{StreamAccumulator, build_request_body, http_status_error, parse_body};

/// A model served by an OpenAI-compatible chat-completions API.
pub struct OpenAiModel {
    name: String,
    config: OpenAiConfig,
    /// The header values and key redacted from what is kept (those of 4 bytes or more).
    secrets: Vec<String>,
    http: reqwest::Client,
    client_config: OpenAIConfig,
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn header_safe(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b) || b == b'\t')
}

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
        let http = crate::native::http_client(&base, &config.timeouts)?;
        let mut secrets: Vec<String> = config.headers.iter().map(|(_, v)| v.clone()).collect();
        secrets.extend(config.api_key.as_ref().map(|k| k.expose().to_owned()));
        secrets.retain(|v| v.len() >= 4);
        Ok(OpenAiModel {
            name: format!("openai:{}", config.model),
            config,
            secrets,
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
        let reading = Reading {
            status_error: http_status_error,
            parse: parse_body,
            secrets: &self.secrets,
        };
        let mut attempts = Attempts::new(self.config.retry);
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
            let done = attempts.finish(t0.elapsed(), cap, outcome, &reading).await;
            if let Some(result) = done {
                return result;
            }
        }
    }
}

/// Reads a stream through async-openai, reporting deltas; the final response is parsed
/// from the captured bytes afterwards, exactly as a recording would be.
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

#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
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
