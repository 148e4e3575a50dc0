//! A bound on concurrent model requests shared by many runs ([`crate::Backend::with_model_limit`]).

use std::sync::Arc;

use async_trait::async_trait;
use provrun_model::{Model, ModelError, ModelRequest, ModelResponse, StreamDelta};
use tokio::sync::Semaphore;

/// A model whose requests each hold one permit of a shared semaphore while they are sent,
/// so that many runs together keep at most the semaphore's permits in flight.
pub(crate) struct LimitedModel {
    pub(crate) inner: Arc<dyn Model>,
    pub(crate) permits: Arc<Semaphore>,
}

impl LimitedModel {
    async fn permit(&self) -> Result<tokio::sync::SemaphorePermit<'_>, ModelError> {
        // The semaphore is never closed by us; a closed one would be a caller's choice to
        // stop all requests, which a failed request reports.
        self.permits
            .acquire()
            .await
            .map_err(|_| ModelError::Config("the model request limit was closed".into()))
    }
}

#[async_trait]
impl Model for LimitedModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn base_url(&self) -> Option<&str> {
        self.inner.base_url()
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let _permit = self.permit().await?;
        self.inner.request(request).await
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let _permit = self.permit().await?;
        self.inner.request_stream(request, on_delta).await
    }
}
