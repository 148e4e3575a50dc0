//! Support code for what `#[tool]` expands to. Not a public API: it may change at any time.

use std::sync::Arc;

use crate::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use inventory;
pub use schemars;
pub use serde;
pub use serde_json;

use crate::context::RunContext;
use crate::error::ToolError;
use crate::output::{IntoToolOutput, ToolOutput};
pub use crate::tool::JsonMap;
use crate::tool::{Handler, Tool, ToolCategory, ToolMode};

/// One `#[tool]` registration, collected at link time.
pub struct LinkedTool {
    build: fn() -> Tool,
}

impl LinkedTool {
    /// A registration whose tool `build` returns.
    pub const fn new(build: fn() -> Tool) -> Self {
        Self { build }
    }

    pub(crate) fn build(&self) -> Tool {
        (self.build)()
    }
}

inventory::collect!(LinkedTool);

/// Everything `#[tool]` knows about one tool.
pub struct ToolParts {
    /// The tool's name.
    pub name: &'static str,
    /// Its description.
    pub description: &'static str,
    /// The argument schema, before stamping.
    pub schema: Value,
    /// Where it runs.
    pub mode: ToolMode,
    /// Whether it may change state.
    pub destructive: bool,
    /// Its category.
    pub category: ToolCategory,
    /// Confirmation prompt.
    pub confirm: Option<&'static str>,
    /// Display label.
    pub summary: Option<&'static str>,
    /// Whether it takes a `RunContext`.
    pub takes_context: bool,
    /// Its body.
    pub handler: Handler,
}

/// Build a tool from what the macro generated. Panics only on a bug in the macro itself
/// (the macro already checked the name, and schemars always yields an object schema).
pub fn build_tool(parts: ToolParts) -> Tool {
    let mut builder = Tool::builder(parts.name, parts.description)
        .schema(parts.schema)
        .mode(parts.mode)
        .destructive(parts.destructive)
        .category(parts.category)
        .handler(parts.takes_context, parts.handler);
    if let Some(c) = parts.confirm {
        builder = builder.confirm(c);
    }
    if let Some(s) = parts.summary {
        builder = builder.summary(s);
    }
    match builder.build() {
        Ok(tool) => tool,
        Err(e) => panic!("#[tool] generated an invalid tool (a provrun bug): {e}"),
    }
}

/// The JSON Schema of a generated argument struct.
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    schemars::SchemaGenerator::default()
        .into_root_schema_for::<T>()
        .to_value()
}

/// A type that can be a tool argument: parsed from JSON, described by a JSON Schema.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool argument",
    label = "this type is not `Deserialize + JsonSchema`",
    note = "a tool argument is parsed from the model's JSON and described to it by a schema: \
            derive `serde::Deserialize` and `schemars::JsonSchema` on it"
)]
pub trait ToolArg: DeserializeOwned + schemars::JsonSchema {}
impl<T: DeserializeOwned + schemars::JsonSchema> ToolArg for T {}

/// Compile-time check that a parameter type can be a tool argument.
pub const fn assert_tool_arg<T: ToolArg>() {}

/// Parse the arguments object into the generated struct, or the failed output that names
/// the problem (with the path to the offending field).
///
/// # Errors
///
/// A failed [`ToolOutput`] naming the tool (and the field, when known) when `args` does not
/// deserialize into `T`.
pub fn parse_args<T: DeserializeOwned>(tool: &str, args: JsonMap) -> Result<T, ToolOutput> {
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            ToolOutput::fail(format!("invalid arguments for tool `{tool}`: {inner}"))
        } else {
            ToolOutput::fail(format!(
                "invalid arguments for tool `{tool}`: `{path}`: {inner}"
            ))
        }
    })
}

/// Convert a tool fn's return value.
pub fn into_tool_output<T: IntoToolOutput>(value: T) -> ToolOutput {
    value.into_tool_output()
}

/// A future that is already done.
pub fn ready(out: ToolOutput) -> BoxFuture<'static, ToolOutput> {
    Box::pin(std::future::ready(out))
}

/// Box a tool's future.
pub fn boxed<F>(future: F) -> BoxFuture<'static, ToolOutput>
where
    F: std::future::Future<Output = ToolOutput> + Send + 'static,
{
    Box::pin(future)
}

/// Wrap a generated sync body.
pub fn sync_handler<F>(f: F) -> Handler
where
    F: for<'a> Fn(Option<&'a RunContext>, JsonMap) -> Result<ToolOutput, ToolError>
        + Send
        + Sync
        + 'static,
{
    Handler::Sync(Arc::new(f))
}

/// Wrap a generated async body.
pub fn async_handler<F>(f: F) -> Handler
where
    F: Fn(Option<RunContext>, JsonMap) -> Result<BoxFuture<'static, ToolOutput>, ToolError>
        + Send
        + Sync
        + 'static,
{
    Handler::Async(Arc::new(f))
}
