//! Tools that provrun agents call: the `#[tool]` attribute, [`ToolRegistry`], [`ToolOutput`]
//! and the built-in sandbox tools.
//!
//! A tool is a plain Rust fn, sync or async, marked `#[tool]`: its name comes from the fn,
//! its description from the doc comment's first paragraph, and its argument JSON Schema
//! from the parameter types (schemars). The attribute registers it at link time, so
//! [`ToolRegistry::linked`] finds every tool in the binary.
//!
//! ```
//! use provrun_tools::{tool, ToolRegistry};
//!
//! /// Add two numbers.
//! #[tool(category = "other")]
//! fn add(
//!     /// The first number.
//!     a: i64,
//!     /// The second number.
//!     b: i64,
//! ) -> i64 {
//!     a + b
//! }
//!
//! let registry = ToolRegistry::linked();
//! let out = registry.call("add", r#"{"a": 2, "b": 3}"#, None).unwrap();
//! assert_eq!(out.content, "5");
//! // Bad arguments are a failed output the model can read, not an error:
//! let out = registry.call("add", r#"{"a": "two"}"#, None).unwrap();
//! assert!(!out.ok);
//! ```
//!
//! # The linker pitfall
//!
//! Registration happens only if the tool's crate is linked into the binary. A crate of
//! tools that the binary depends on (in `Cargo.toml`) but never names in code is left out:
//! rustc does not even load a dependency nothing refers to, so it never reaches the
//! linker, and its tools silently go missing from [`ToolRegistry::linked`]. The fix is one
//! line in the binary:
//!
//! ```ignore
//! use my_tools_crate as _; // keep the crate, and with it its #[tool] registrations
//! ```
//!
//! Each integration-test file (`tests/*.rs`) is a crate of its own, so each one that needs
//! the tools needs the line too. When a spec names a tool that is missing,
//! [`ToolError::UnknownTool`]'s message says all this and shows the line.
//! (`tests/tests/linker_pitfall.rs` and `linker_fix.rs` in the repository show both
//! sides.) Tools can also be added explicitly, which needs no linker help at all:
//! `registry.add(AddTool)` (every `#[tool] fn add` also defines a unit struct `AddTool`).
//!
//! # Arguments and failures
//!
//! A call's arguments may be nothing, a JSON string, or a JSON object ([`ToolArgs`]).
//! Invalid JSON, a wrong type, a missing required field and an unknown field each give a
//! failed [`ToolOutput`] whose message names the problem; so does a tool that panics. An
//! `Err` from [`Tool::call`] / [`Tool::acall`] means misuse by the program (an async tool
//! called synchronously, a missing context, a tool that cannot run here).

extern crate self as provrun_tools;

mod args;
mod builtin;
mod context;
mod error;
mod manifest;
mod mcp;
mod output;
mod registry;
mod schema_guard;
mod template;
mod tool;

#[doc(hidden)]
pub mod __private;

/// A boxed, sendable future: what an async tool's handler returns (the same type as
/// `futures_util::future::BoxFuture`).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

pub use args::ToolArgs;
pub use builtin::{BUILTIN_TOOLS, SANDBOX_TOOL_SET, SANDBOX_TOOLS};
pub use context::{RunContext, RunDeps, RunInfo};
pub use error::ToolError;
pub use mcp::{
    DEFAULT_MCP_CPU_S, DEFAULT_MCP_MEMORY_BYTES, DEFAULT_MCP_PROCESSES,
    DEFAULT_MCP_STARTUP_TIMEOUT_S, DEFAULT_MCP_TMP_BYTES, McpLimits, McpServerSpec,
    McpTransportKind,
};
pub use output::{IntoToolOutput, Json, ToolOutput};
pub use provrun_macros::tool;
pub use registry::ToolRegistry;
#[cfg(feature = "schema")]
pub use schema_guard::SelfOnlyLoader;
pub use schema_guard::json_depth;
pub use template::{TEMPLATE_VALUE_CHARS, fill_template, fill_template_json};
pub use tool::{
    AsyncHandler, JsonMap, SyncHandler, Tool, ToolBuilder, ToolCategory, ToolMode, X_CATEGORY_KEY,
    X_CONFIRM_KEY, X_DESTRUCTIVE_KEY, X_SUMMARY_KEY, is_valid_tool_name,
};
