//! How a tool's body is reached: its handler types, sync or async, over parsed arguments.

use std::sync::Arc;

use crate::BoxFuture;
use crate::args::JsonMap;
use crate::context::RunContext;
use crate::error::ToolError;
use crate::output::ToolOutput;

/// A synchronous handler: parsed arguments in, output out.
pub type SyncHandler =
    dyn for<'a> Fn(Option<&'a RunContext>, JsonMap) -> Result<ToolOutput, ToolError> + Send + Sync;
/// An asynchronous handler: parsed arguments in, a future of the output out.
pub type AsyncHandler = dyn Fn(Option<RunContext>, JsonMap) -> Result<BoxFuture<'static, ToolOutput>, ToolError>
    + Send
    + Sync;

/// How a tool's body is reached.
#[derive(Clone)]
#[doc(hidden)]
pub enum Handler {
    /// A plain function.
    Sync(Arc<SyncHandler>),
    /// An async function.
    Async(Arc<AsyncHandler>),
    /// Declared here but run elsewhere, or not runnable yet; the text says why.
    Unavailable(String),
}
