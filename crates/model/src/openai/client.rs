//! [`OpenAiModel`]: the chat-completions client. async-openai's configuration says where
//! the request goes and with which headers (the bearer key, custom headers); the request
//! bytes, the retries and every byte kept go through the one path every live backend
//! shares ([`crate::live`]).

use std::fmt;

use async_openai::config::{Config, OpenAIConfig};
use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::{AUTHORIZATION, HeaderName};

use super::OpenAiConfig;
use crate::Model;
use crate::error::ModelError;
use crate::live::{ApiKey, Endpoint};
use crate::types::{ModelRequest, ModelResponse, StreamDelta};
use crate::wire::{ChatEvents, build_request_body, http_status_error, parse_body};

/// A model served by an OpenAI-compatible chat-completions API.
pub struct OpenAiModel {
    name: String,
    config: OpenAiConfig,
    endpoint: Endpoint,
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
    /// A model for `config`.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] on a base URL that is not http(s), an empty model name, or a
    /// key or header that cannot be sent in an HTTP header.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "the base URL must start with http:// or https://, not {base:?}"
            )));
        }
        let key = config.api_key.as_ref().map_or("", ApiKey::expose);
        // async-openai builds the Authorization header with `unwrap`, so check first.
        if !header_safe(key) {
            return Err(ModelError::Config(
                "the API key holds characters that cannot go in an HTTP header".into(),
            ));
        }
        let mut client_config = OpenAIConfig::new().with_api_base(base).with_api_key(key);
        for (name, value) in &config.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ModelError::Config(format!("invalid header name {name:?}")))?;
            client_config = client_config
                .with_header(header, value.as_str())
                .map_err(|_| ModelError::Config(format!("invalid value for header {name:?}")))?;
        }
        let mut headers = client_config.headers();
        // The key and the configured values are secrets: never shown in a debug print.
        for (name, value) in headers.iter_mut() {
            let configured = config
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name.as_str()));
            if *name == AUTHORIZATION || configured {
                value.set_sensitive(true);
            }
        }
        let url = client_config.url("/chat/completions");
        let endpoint = Endpoint::new(&config.live, url, headers, parse_body)?
            .with_status_error(http_status_error);
        Ok(OpenAiModel {
            name: format!("openai:{}", config.model),
            config,
            endpoint,
        })
    }

    /// A model named `model` configured from the environment ([`OpenAiConfig::from_env`]).
    ///
    /// # Errors
    ///
    /// As [`OpenAiConfig::from_env`] and [`OpenAiModel::new`].
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::new(OpenAiConfig::from_env(model)?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn body(&self, request: &ModelRequest, stream: bool) -> Bytes {
        let body = build_request_body(&self.config.model, request, stream);
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }
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
        let body = self.body(request, false);
        self.endpoint.request(&self.config.model, body).await
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let body = self.body(request, true);
        let events = Box::new(ChatEvents::default());
        self.endpoint
            .request_stream(&self.config.model, body, events, on_delta)
            .await
    }
}
