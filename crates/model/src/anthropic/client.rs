//! [`AnthropicModel`]: the live client (behind the `http` feature), which sends the
//! request body built in `request.rs` through the native endpoint and reads the answer
//! with `response.rs` and `stream.rs`.

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;

use super::{AnthropicConfig, StreamState, build_request_body, parse_body};
use crate::Model;
use crate::error::ModelError;
use crate::live::Endpoint;
use crate::types::{ModelRequest, ModelResponse, StreamDelta};

/// A model served by Anthropic's Messages API.
pub struct AnthropicModel {
    name: String,
    config: AnthropicConfig,
    endpoint: Endpoint,
}

impl fmt::Debug for AnthropicModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicModel")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AnthropicModel {
    /// A model for `config`.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] on a base URL that is not http(s), an empty model name, or a
    /// key or header that cannot be sent in an HTTP header.
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let endpoint = Endpoint::native(
            &config.live,
            "/v1/messages",
            ("x-api-key", ""),
            &[("anthropic-version", &config.version)],
            parse_body,
        )?;
        Ok(AnthropicModel {
            name: format!("anthropic:{}", config.model),
            config,
            endpoint,
        })
    }

    /// A model named `model` configured from the environment
    /// ([`AnthropicConfig::from_env`]).
    ///
    /// # Errors
    ///
    /// As [`AnthropicConfig::from_env`] and [`AnthropicModel::new`].
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::new(AnthropicConfig::from_env(model)?)
    }

    /// The configuration.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    fn body(&self, request: &ModelRequest, stream: bool) -> Bytes {
        let body = build_request_body(
            &self.config.model,
            request,
            stream,
            self.config.default_max_tokens,
        );
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }
}

#[async_trait]
impl Model for AnthropicModel {
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
        let events = Box::new(StreamState::default());
        self.endpoint
            .request_stream(&self.config.model, body, events, on_delta)
            .await
    }
}
