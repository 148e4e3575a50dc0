//! One tool: its name, description, schema, metadata, and how to call it.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::str::FromStr;
use std::sync::Arc;

use crate::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::args::ToolArgs;
use crate::context::RunContext;
use crate::error::ToolError;
use crate::output::ToolOutput;

/// A JSON object: the arguments a tool receives once parsed.
pub type JsonMap = serde_json::Map<String, Value>;

/// The schema key that says a tool may change state.
pub const X_DESTRUCTIVE_KEY: &str = "x-destructive";
/// The schema key that carries the tool's [`ToolCategory`].
pub const X_CATEGORY_KEY: &str = "x-category";
/// The schema key that carries a destructive tool's confirmation prompt.
pub const X_CONFIRM_KEY: &str = "x-confirm";
/// The schema key that carries a short display label for the tool.
pub const X_SUMMARY_KEY: &str = "x-summary";

/// Where a tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// Runs now, in this process.
    #[default]
    InProcess,
    /// The caller runs it: the run pauses with the call deferred and resumes with its result.
    ClientRoundTrip,
    /// Runs in an MCP server; its calls are imported into the evidence.
    RemoteMcp,
}

impl ToolMode {
    /// Every mode, in the order documented.
    pub const ALL: [ToolMode; 3] = [
        ToolMode::InProcess,
        ToolMode::ClientRoundTrip,
        ToolMode::RemoteMcp,
    ];

    /// The mode's name as manifests and JSON spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::InProcess => "in_process",
            ToolMode::ClientRoundTrip => "client_round_trip",
            ToolMode::RemoteMcp => "remote_mcp",
        }
    }
}

impl fmt::Display for ToolMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolMode {
    type Err = ToolError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ToolMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ToolError::InvalidMode {
                mode: s.to_string(),
            })
    }
}

/// A coarse, advisory grouping of tools, stamped into the schema as `x-category`.
///
/// It lets a display group tools and a policy reason about classes of capability; it
/// gates nothing by itself (that is the `destructive` flag's job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCategory {
    /// Reads state without changing it.
    Read,
    /// Creates or changes files or other state.
    Write,
    /// Runs programs.
    Execute,
    /// Talks to the network.
    Network,
    /// Looks things up.
    Search,
    /// Anything else.
    #[default]
    Other,
}

impl ToolCategory {
    /// The category's name as schemas and manifests spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCategory::Read => "read",
            ToolCategory::Write => "write",
            ToolCategory::Execute => "execute",
            ToolCategory::Network => "network",
            ToolCategory::Search => "search",
            ToolCategory::Other => "other",
        }
    }
}

impl fmt::Display for ToolCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// One tool: what the model is told about it, and how to call it.
///
/// Cheap to clone (shared inside). Build one with `#[tool]`, with [`Tool::builder`], or
/// from a tools-folder manifest.
#[derive(Clone)]
pub struct Tool {
    inner: Arc<ToolInner>,
}

struct ToolInner {
    name: String,
    description: String,
    schema: Value,
    mode: ToolMode,
    destructive: bool,
    category: ToolCategory,
    confirm: Option<String>,
    summary: Option<String>,
    takes_context: bool,
    runs_program: bool,
    handler: Handler,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.inner.name)
            .field("mode", &self.inner.mode)
            .field("destructive", &self.inner.destructive)
            .field("category", &self.inner.category)
            .field("takes_context", &self.inner.takes_context)
            .field("is_async", &self.is_async())
            .finish_non_exhaustive()
    }
}

/// Whether `name` is a name that OpenAI-compatible providers accept: 1 to 64 of
/// ASCII letters, digits, `_` and `-` (OpenAI's function names refuse anything else,
/// a `.` among them).
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

impl Tool {
    /// Start building a tool by hand, for tools that are not Rust fns under `#[tool]`.
    pub fn builder(name: impl Into<String>, description: impl Into<String>) -> ToolBuilder {
        ToolBuilder {
            name: name.into(),
            description: description.into(),
            schema: None,
            mode: ToolMode::InProcess,
            destructive: false,
            category: ToolCategory::Other,
            confirm: None,
            summary: None,
            takes_context: false,
            runs_program: false,
            handler: None,
        }
    }

    /// The name the model and agent specs use.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// What the model is told the tool does.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The argument schema (JSON Schema, root `type: object`) with the `x-*` keys at its root.
    pub fn schema(&self) -> &Value {
        &self.inner.schema
    }

    /// The schema without any `x-*` key at its root, for providers that reject unknown keys.
    pub fn provider_schema(&self) -> Value {
        let mut schema = self.inner.schema.clone();
        if let Value::Object(map) = &mut schema {
            map.retain(|k, _| !k.starts_with("x-"));
        }
        schema
    }

    /// Where the tool runs.
    pub fn mode(&self) -> ToolMode {
        self.inner.mode
    }

    /// Whether calling it may change state.
    pub fn is_destructive(&self) -> bool {
        self.inner.destructive
    }

    /// Its advisory category.
    pub fn category(&self) -> ToolCategory {
        self.inner.category
    }

    /// Whether this is one of the built-in tools that only read the sandbox within its size
    /// limits (`read_file`, `list_dir`, as linked, not a replacement of the same name).
    /// A runtime may call such a tool with [`Tool::call`] right on its async task, as it
    /// does its own small evidence writes, instead of handing it to the blocking pool: the
    /// hand-off would cost more than the call.
    pub fn is_bounded_builtin_read(&self) -> bool {
        crate::builtin::is_bounded_read(self)
    }

    /// Whether calls of this tool only read, so that a runtime may let them overlap with
    /// each other: category `read`, not destructive, and not a tool that reaches the host
    /// folder (`list_host_files`). Every other tool, a manifest or MCP tool not marked
    /// `read` included, may conflict with other calls and runs alone, in the model's order.
    pub fn is_read_only(&self) -> bool {
        self.inner.category == ToolCategory::Read
            && !self.inner.destructive
            && !crate::builtin::reaches_host(self)
    }

    /// Whether `self` and `other` are the same tool (clones of one registration).
    pub fn same_as(&self, other: &Tool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The confirmation prompt for a destructive tool, if one was given.
    pub fn confirm(&self) -> Option<&str> {
        self.inner.confirm.as_deref()
    }

    /// A short display label, if one was given.
    pub fn summary(&self) -> Option<&str> {
        self.inner.summary.as_deref()
    }

    /// The confirmation prompt for one call, its `{argument}` names filled in from the
    /// call's arguments (see [`crate::fill_template`]); `None` when the tool has none.
    pub fn confirm_for(&self, arguments: &str) -> Option<String> {
        self.confirm()
            .map(|t| crate::template::fill_template(t, arguments))
    }

    /// The display label of one call, its `{argument}` names filled in from the call's
    /// arguments (`Read {path}` → `Read /input/notes.txt`); `None` when the tool has none.
    pub fn summary_for(&self, arguments: &str) -> Option<String> {
        self.summary()
            .map(|t| crate::template::fill_template(t, arguments))
    }

    /// Whether a call runs a program under the sandbox's OS confinement (the built-in
    /// `run_command`, a manifest's `command` tool): its evidence then records the
    /// confinement, and `provrun verify` requires that record.
    pub fn runs_program(&self) -> bool {
        self.inner.runs_program || crate::builtin::is_run_command(self)
    }

    /// Whether the tool takes a [`RunContext`].
    pub fn takes_context(&self) -> bool {
        self.inner.takes_context
    }

    /// Whether the tool's body is async (then only [`Tool::acall`] runs it).
    pub fn is_async(&self) -> bool {
        matches!(self.inner.handler, Handler::Async(_))
    }

    /// Whether this process can run the tool at all.
    pub fn is_runnable(&self) -> bool {
        !matches!(self.inner.handler, Handler::Unavailable(_))
    }

    /// The tool as a model sees it: name, description and the schema without `x-*` keys.
    ///
    /// Needs the `model` feature (the agent crate turns it on).
    #[cfg(feature = "model")]
    pub fn definition(&self) -> provrun_model::ToolDefinition {
        provrun_model::ToolDefinition {
            name: self.inner.name.clone(),
            description: self.inner.description.clone(),
            parameters: self.provider_schema(),
        }
    }

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

/// Builds a [`Tool`] by hand; see [`Tool::builder`].
#[must_use]
pub struct ToolBuilder {
    name: String,
    description: String,
    schema: Option<Value>,
    mode: ToolMode,
    destructive: bool,
    category: ToolCategory,
    confirm: Option<String>,
    summary: Option<String>,
    takes_context: bool,
    runs_program: bool,
    handler: Option<Handler>,
}

impl ToolBuilder {
    /// Marks a tool whose calls run a program under the sandbox's confinement and return
    /// its [`ToolOutput::confinement`](crate::ToolOutput::confinement) (see
    /// [`Tool::runs_program`]).
    pub fn runs_program(mut self, runs: bool) -> Self {
        self.runs_program = runs;
        self
    }

    /// The argument schema; its root must be `type: object`. Defaults to an object with no
    /// properties.
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Where the tool runs (default [`ToolMode::InProcess`]).
    pub fn mode(mut self, mode: ToolMode) -> Self {
        self.mode = mode;
        self
    }

    /// Mark it as one that may change state.
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.destructive = destructive;
        self
    }

    /// Its advisory category.
    pub fn category(mut self, category: ToolCategory) -> Self {
        self.category = category;
        self
    }

    /// A confirmation prompt for a destructive tool.
    pub fn confirm(mut self, prompt: impl Into<String>) -> Self {
        self.confirm = Some(prompt.into());
        self
    }

    /// A short display label.
    pub fn summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = Some(summary.into());
        self
    }

    /// The body, as a sync fn of the parsed arguments. `takes_context` says whether the
    /// tool needs a [`RunContext`] (calls without one are refused).
    pub fn sync_handler<F>(mut self, takes_context: bool, f: F) -> Self
    where
        F: for<'a> Fn(Option<&'a RunContext>, JsonMap) -> ToolOutput + Send + Sync + 'static,
    {
        self.takes_context = takes_context;
        self.handler = Some(Handler::Sync(Arc::new(move |ctx, args| Ok(f(ctx, args)))));
        self
    }

    /// The body, as an async fn of the parsed arguments.
    pub fn async_handler<F, Fut>(mut self, takes_context: bool, f: F) -> Self
    where
        F: Fn(Option<RunContext>, JsonMap) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ToolOutput> + Send + 'static,
    {
        self.takes_context = takes_context;
        self.handler = Some(Handler::Async(Arc::new(move |ctx, args| {
            Ok(Box::pin(f(ctx, args)) as BoxFuture<'static, ToolOutput>)
        })));
        self
    }

    pub(crate) fn handler(mut self, takes_context: bool, handler: Handler) -> Self {
        self.takes_context = takes_context;
        self.handler = Some(handler);
        self
    }

    /// Finish: checks the name and that the schema's root is an object, then stamps the
    /// `x-*` keys into it.
    pub fn build(self) -> Result<Tool, ToolError> {
        if !is_valid_tool_name(&self.name) {
            return Err(ToolError::InvalidName { name: self.name });
        }
        let schema = self
            .schema
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        let schema = stamp_schema(
            schema,
            self.destructive,
            self.category,
            self.confirm.as_deref(),
            self.summary.as_deref(),
        )
        .map_err(|message| ToolError::InvalidSchema {
            tool: self.name.clone(),
            message,
        })?;
        let handler = self.handler.unwrap_or_else(|| {
            Handler::Unavailable(match self.mode {
                ToolMode::InProcess => "it has no body".to_string(),
                ToolMode::ClientRoundTrip => {
                    "it is a client round-trip tool: the caller runs it".to_string()
                }
                ToolMode::RemoteMcp => "it runs in an MCP server".to_string(),
            })
        });
        Ok(Tool {
            inner: Arc::new(ToolInner {
                name: self.name,
                description: self.description,
                schema,
                mode: self.mode,
                destructive: self.destructive,
                category: self.category,
                confirm: self.confirm,
                summary: self.summary,
                takes_context: self.takes_context,
                runs_program: self.runs_program,
                handler,
            }),
        })
    }
}

/// Check a schema's root is an object schema and stamp the metadata into it as `x-*` keys.
///
/// Also drops schemars' `title` (the generated argument struct's name, meaningless to a
/// model) and makes sure `properties` is present, which some providers require.
pub(crate) fn stamp_schema(
    schema: Value,
    destructive: bool,
    category: ToolCategory,
    confirm: Option<&str>,
    summary: Option<&str>,
) -> Result<Value, String> {
    let Value::Object(mut map) = schema else {
        return Err("the argument schema must be a JSON object".to_string());
    };
    match map.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(format!(
                "the argument schema's root must have `type: \"object\"`, not {other}"
            ));
        }
        None => {
            return Err("the argument schema's root must have `type: \"object\"`".to_string());
        }
    }
    if map.get("properties").is_some_and(|p| !p.is_object()) {
        return Err("the argument schema's `properties` must be an object".to_string());
    }
    map.remove("title");
    map.entry("properties")
        .or_insert_with(|| Value::Object(JsonMap::new()));
    map.insert(X_DESTRUCTIVE_KEY.to_string(), Value::Bool(destructive));
    map.insert(
        X_CATEGORY_KEY.to_string(),
        Value::String(category.as_str().to_string()),
    );
    if let Some(c) = confirm {
        map.insert(X_CONFIRM_KEY.to_string(), Value::String(c.to_string()));
    }
    if let Some(s) = summary {
        map.insert(X_SUMMARY_KEY.to_string(), Value::String(s.to_string()));
    }
    Ok(Value::Object(map))
}
