//! One tool: its name, description, schema, metadata, and how to call it.
//!
//! The type and what it tells are here; `metadata` holds its mode, category and the
//! `x-*` schema keys, `builder` the [`ToolBuilder`], `call` how it is called (handlers,
//! panics caught). What a tool is by being one of the built-ins (`runs_program`,
//! `is_read_only`, `is_bounded_builtin_read`) is answered in `builtin.rs`, beside them.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

mod builder;
mod call;
mod handler;
mod metadata;

pub use crate::args::JsonMap;
pub use builder::ToolBuilder;
pub(crate) use handler::Handler;
pub use handler::{AsyncHandler, SyncHandler};
pub use metadata::{
    ToolCategory, ToolMode, X_CATEGORY_KEY, X_CONFIRM_KEY, X_DESTRUCTIVE_KEY, X_SUMMARY_KEY,
};

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

    /// Whether the tool was declared as one that runs a program (a manifest's `command`
    /// tool); the built-in `run_command` is known by identity instead (`builtin.rs`).
    pub(crate) fn declared_runs_program(&self) -> bool {
        self.inner.runs_program
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

    /// Whether the tool takes a [`RunContext`](crate::RunContext).
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
}
