//! Calling a tool: [`Tool::call`] and [`Tool::acall`] (arguments
//! parsed, context checked, a sync body run off the executor), and a panic in the body,
//! sync or async, turned into a failed output.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use super::Tool;
use super::handler::{Handler, SyncHandler};
use crate::BoxFuture;
use crate::args::JsonMap;
use crate::args::ToolArgs;
use crate::context::RunContext;
use crate::error::ToolError;
use crate::output::ToolOutput;

impl Tool {
    fn check_context(&self, has_ctx: bool) -> Result<(), ToolError> {
        if self.inner.takes_context && !has_ctx {
            return Err(ToolError::ContextRequired {
                tool: self.inner.name.clone(),
            });
        }
        Ok(())
    }

    fn unavailable(&self, reason: &str) -> ToolError {
        ToolError::NotRunnable {
            tool: self.inner.name.clone(),
            reason: reason.to_string(),
        }
    }

    /// Call a synchronous tool now, on this thread.
    ///
    /// `args` may be nothing, a JSON string, or a JSON object. Arguments that do not parse
    /// or do not match the schema give `Ok` with a failed [`ToolOutput`] that says why, and
    /// so does a tool that panics: the model sees the failure, the run goes on. `Err` is for
    /// misuse: an async tool (use [`Tool::acall`]), a missing context, a tool that cannot
    /// run here. A context given to a tool that takes none is ignored.
    ///
    /// # Errors
    ///
    /// [`ToolError::AsyncToolInSyncCall`] for an async tool; [`ToolError::ContextRequired`] when
    /// the tool takes a context and none is given; [`ToolError::NotRunnable`] for a tool that
    /// cannot run in this process.
    pub fn call(
        &self,
        args: impl Into<ToolArgs>,
        ctx: Option<&RunContext>,
    ) -> Result<ToolOutput, ToolError> {
        match &self.inner.handler {
            Handler::Async(_) => Err(ToolError::AsyncToolInSyncCall {
                tool: self.inner.name.clone(),
            }),
            Handler::Unavailable(reason) => Err(self.unavailable(reason)),
            Handler::Sync(f) => {
                self.check_context(ctx.is_some())?;
                let map = match args.into().into_object(&self.inner.name) {
                    Ok(map) => map,
                    Err(out) => return Ok(out),
                };
                run_sync(&self.inner.name, f, ctx, map)
            }
        }
    }

    /// Call any tool, sync or async, and await its output.
    ///
    /// A synchronous tool runs on tokio's blocking pool (when called inside a tokio
    /// runtime), so a slow one never stalls the executor. Errors and failures are as for
    /// [`Tool::call`].
    ///
    /// # Errors
    ///
    /// [`ToolError::ContextRequired`] when the tool takes a context and none is given;
    /// [`ToolError::NotRunnable`] for a tool that cannot run in this process.
    pub async fn acall(
        &self,
        args: impl Into<ToolArgs>,
        ctx: Option<&RunContext>,
    ) -> Result<ToolOutput, ToolError> {
        let args = args.into();
        match &self.inner.handler {
            Handler::Unavailable(reason) => Err(self.unavailable(reason)),
            Handler::Sync(f) => {
                self.check_context(ctx.is_some())?;
                let map = match args.into_object(&self.inner.name) {
                    Ok(map) => map,
                    Err(out) => return Ok(out),
                };
                match tokio::runtime::Handle::try_current() {
                    Ok(handle) => {
                        let f = Arc::clone(f);
                        let ctx = ctx.cloned();
                        let name = self.inner.name.clone();
                        let joined = handle
                            .spawn_blocking(move || run_sync(&name, &f, ctx.as_ref(), map))
                            .await;
                        match joined {
                            Ok(result) => result,
                            Err(e) => Ok(ToolOutput::fail(format!(
                                "tool `{}` did not finish: {e}",
                                self.inner.name
                            ))),
                        }
                    }
                    Err(_) => run_sync(&self.inner.name, f, ctx, map),
                }
            }
            Handler::Async(f) => {
                self.check_context(ctx.is_some())?;
                let map = match args.into_object(&self.inner.name) {
                    Ok(map) => map,
                    Err(out) => return Ok(out),
                };
                let started = std::panic::catch_unwind(AssertUnwindSafe(|| f(ctx.cloned(), map)));
                let future = match started {
                    Ok(result) => result?,
                    Err(panic) => return Ok(panicked(&self.inner.name, &*panic)),
                };
                match (CatchUnwind { future }).await {
                    Ok(out) => Ok(out),
                    Err(panic) => Ok(panicked(&self.inner.name, &*panic)),
                }
            }
        }
    }
}

/// A boxed tool future whose panic, while polled, becomes an `Err` (what
/// `futures_util::FutureExt::catch_unwind` does, without that crate in a tools crate's tree).
struct CatchUnwind {
    future: BoxFuture<'static, ToolOutput>,
}

impl std::future::Future for CatchUnwind {
    type Output = Result<ToolOutput, Box<dyn std::any::Any + Send>>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let future = &mut self.future;
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(out)) => std::task::Poll::Ready(Ok(out)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

fn run_sync(
    name: &str,
    f: &Arc<SyncHandler>,
    ctx: Option<&RunContext>,
    map: JsonMap,
) -> Result<ToolOutput, ToolError> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| f(ctx, map))) {
        Ok(result) => result,
        Err(panic) => Ok(panicked(name, &*panic)),
    }
}

/// The failed output for a tool that panicked, with the panic's message when it has one.
fn panicked(name: &str, panic: &(dyn std::any::Any + Send)) -> ToolOutput {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string());
    tracing::warn!(tool = name, %message, "tool panicked");
    ToolOutput::fail(format!("tool `{name}` panicked: {message}"))
}
