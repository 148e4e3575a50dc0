//! Run LLM agents with provenance.
//!
//! `provrun` is the facade over the provrun crates: the runtime, never the agent, writes a
//! tamper-evident evidence log of every model request and tool call, and hands back a
//! self-contained bundle that anyone can verify offline. Each crate sits behind a feature
//! of the same name, so a user who needs only the sandbox or only the recorder pulls in
//! only that.
//!
//! A program whose agents run commands (`run_command`, command tools, MCP stdio servers)
//! calls `provrun::sandbox::arg0_dispatch()` first thing in `main`, so that it is its own
//! command-confinement helper and needs nothing installed beside it.

#[cfg(feature = "agent")]
pub use provrun_agent as agent;
#[cfg(feature = "capture")]
pub use provrun_capture as capture;
#[cfg(feature = "evidence")]
pub use provrun_evidence as evidence;
#[cfg(feature = "mcp")]
pub use provrun_mcp as mcp;
#[cfg(feature = "model")]
pub use provrun_model as model;
#[cfg(feature = "otel")]
pub use provrun_otel as otel;
#[cfg(feature = "sandbox")]
pub use provrun_sandbox as sandbox;
/// The tools crate (`provrun-tools`), with `#[tool]` that works through this facade:
/// `use provrun::tools::tool;` is the same attribute as `provrun::tool`.
#[cfg(feature = "tools")]
pub mod tools {
    pub use provrun_tools::*;

    /// `#[tool]` for code that depends on this facade only (see `provrun_tools::tool`):
    /// it names `provrun::tools`, never `provrun_tools`, `serde` or `schemars`.
    pub use provrun_macros::facade_tool as tool;
}

/// `#[tool]` for code that depends on this facade only (see `provrun_tools::tool`).
#[cfg(feature = "tools")]
pub use provrun_macros::facade_tool as tool;

/// The `#[async_trait]` attribute that `Model` and the hook traits are written with: put
/// `#[provrun::async_trait]` on an `impl Model for …` or `impl BeforeToolHook for …`.
#[cfg(any(feature = "model", feature = "agent"))]
pub use provrun_model::async_trait;

/// The names most programs need, in one import: `use provrun::prelude::*;`.
pub mod prelude {
    #[cfg(feature = "tools")]
    pub use crate::tool;
    #[cfg(feature = "agent")]
    pub use provrun_agent::{
        AgentSpec, Backend, RunControl, RunOutcome, RunResult, RunSpec, RunStatus,
    };
    #[cfg(feature = "tools")]
    pub use provrun_tools::{
        RunContext, Tool, ToolCategory, ToolError, ToolMode, ToolOutput, ToolRegistry,
    };
}
