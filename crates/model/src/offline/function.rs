//! [`FunctionModel`]: a closure decides each response.

use std::fmt;

use async_trait::async_trait;

use super::{Reply, respond};
use crate::Model;
use crate::error::ModelError;
use crate::types::{ModelRequest, ModelResponse, StreamDelta};
use crate::wire::RequestRenderer;

type ReplyFn = dyn Fn(&ModelRequest) -> Result<Reply, ModelError> + Send + Sync;

/// An offline model whose answers come from a function of the request (history + tools).
///
/// ```
/// use futures_util::FutureExt;
/// use provrun_model::{FunctionModel, Message, Model, ModelRequest, Reply};
///
/// let model = FunctionModel::new("echo", |req: &ModelRequest| {
///     Ok(Reply::text(format!("{} messages", req.messages.len())))
/// });
/// let req = ModelRequest { messages: vec![Message::user("hi")], ..Default::default() };
/// // Offline models answer at once, so the future is ready on its first poll.
/// let resp = model.request(&req).now_or_never().expect("ready")?;
/// assert_eq!(resp.text.as_deref(), Some("1 messages"));
/// # Ok::<(), provrun_model::ModelError>(())
/// ```
pub struct FunctionModel {
    name: String,
    f: Box<ReplyFn>,
    renderer: RequestRenderer,
}

impl FunctionModel {
    /// A model named `name` answering with `f`.
    pub fn new<F>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&ModelRequest) -> Result<Reply, ModelError> + Send + Sync + 'static,
    {
        FunctionModel {
            name: name.into(),
            f: Box::new(f),
            renderer: RequestRenderer::default(),
        }
    }
}

impl fmt::Debug for FunctionModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionModel")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Model for FunctionModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let reply = (self.f)(request)?;
        respond(&self.name, &self.renderer, request, &reply, None)
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let reply = (self.f)(request)?;
        respond(&self.name, &self.renderer, request, &reply, Some(on_delta))
    }
}
