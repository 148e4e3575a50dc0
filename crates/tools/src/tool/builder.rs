//! [`ToolBuilder`]: a tool built by hand, its name and schema checked and the metadata
//! stamped into the schema as `x-*` keys.

use std::sync::Arc;

use serde_json::Value;

use super::{
    Handler, JsonMap, Tool, ToolCategory, ToolInner, ToolMode, X_CATEGORY_KEY, X_CONFIRM_KEY,
    X_DESTRUCTIVE_KEY, X_SUMMARY_KEY, is_valid_tool_name,
};
use crate::BoxFuture;
use crate::context::RunContext;
use crate::error::ToolError;
use crate::output::ToolOutput;

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
    ///
    /// # Errors
    ///
    /// [`ToolError::InvalidName`] when the name is not a valid tool name;
    /// [`ToolError::InvalidSchema`] when the schema's root is not an object schema.
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
