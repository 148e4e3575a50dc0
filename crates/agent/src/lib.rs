//! Runs a provrun agent in its sandbox and leaves a complete, verifiable bundle.
//!
//! `provrun-agent` wires the model, the tools, the sandbox and the evidence recorder into
//! one call, [`Backend::execute`] (or the free fn [`execute`]): it stages the inputs, runs
//! the model/tool loop, records every model request and tool call, writes
//! `/output/response.txt`, and finishes the bundle. The same evidence capability is
//! available as middleware ([`middleware::EvidenceModel`], [`middleware::ToolEvidence`])
//! for code with its own loop.
//!
//! ```no_run
//! # async fn demo() -> Result<(), provrun_agent::AgentError> {
//! use provrun_agent::{AgentSpec, RunControl, RunSpec, execute};
//! let agent = AgentSpec::from_toml_str(r#"
//! name = "hello"
//! model = "test"
//! tools = ["list_dir", "read_file"]
//! "#, None)?;
//! let run = RunSpec::new("What is in /input?", "/tmp/hello-bundle").input("notes.txt");
//! let result = execute(&RunControl::new(), &agent, &run).await?;
//! println!("{:?}: {}", result.status(), result.output());
//! # Ok(()) }
//! ```
//!
//! Runs pause when a call needs approval (`approve = "destructive" | "all"`) or is a
//! client round trip: [`Backend::resume`] continues the same bundle later, in any process,
//! from the bundle alone. [`replay`] re-executes a bundle with its recorded model
//! responses and reports the first difference.
//!
//! The root holds the runtime. Besides it: [`read`] reads a bundle back (the spec it
//! ran, its recorded responses, the calls a paused run waits on), [`middleware`] is the
//! evidence capability for other loops, and [`consts`] holds the runtime's fixed names
//! and limits.

// The modules form a line with no import cycle, each using only those before it; a new
// item goes in the lowest module its users share. In order: `error`; `arguments` (a
// call's arguments as evidence reads them); `state` (the loop's state, run-unique call
// ids); `output` (the output tool's name and schema); `skills`; `spec`; `capability` (the
// evidence middleware); `control` (with the steering and permit-wait state it holds);
// `steer`; `hooks`; `remote` (MCP servers: the recorded answers, then the live client or
// its stub); `limit`; `recorded` (reading a bundle back: its log, the recorded responses,
// a paused run's state, the order calls ran in, what a replay takes from the recording);
// `backend`; `replay` (drives the backend). The public `consts`, `middleware` and `read`
// only re-export items of the others, and nothing in the crate uses them.
mod arguments;
mod backend;
mod capability;
pub mod consts;
mod control;
mod error;
mod hooks;
mod limit;
pub mod middleware;
mod output;
pub mod read;
mod recorded;
mod remote;
mod replay;
mod skills;
mod spec;
mod state;
mod steer;

/// The `#[async_trait]` attribute the hook traits (and the model crate's `Model`) are
/// written with, so an implementation needs no `async-trait` dependency of its own.
pub use async_trait::async_trait;
pub use backend::{Backend, execute};
pub use control::{Permit, RunControl, RunEvent};
pub use error::AgentError;
pub use hooks::{
    AfterToolHook, BeforeToolHook, HookDecision, ToolCallInfo, ToolHooks, WaitForPermit,
};
pub use output::OutputSchema;
pub use provrun_evidence::{BlobLayout, Durability, RunStatus};
pub use replay::{ReplayReport, replay};
pub use skills::{Skill, default_skill_folders, load_skills, parse_skill};
pub use spec::{
    AgentSpec, ApprovePolicy, Continuation, Decision, DeferReason, DeferredCall, ModelRef,
    ResumeSpec, RunOutcome, RunResult, RunSpec, RunUsage, SettingsSpec, ToolChoiceMode,
    ToolChoiceSpec,
};
/// The token [`RunControl`] cancels through ([`RunControl::with_cancellation`],
/// [`RunControl::cancellation_token`]), so a caller needs no `tokio-util` dependency of
/// its own to name it.
pub use tokio_util::sync::CancellationToken;

// The names that moved into `consts`, `middleware` and `read` stay at the root, hidden
// from the docs, for existing users who import them from here; new code uses the module
// paths.
#[doc(hidden)]
pub use consts::{BUILDER, MAX_TOOL_RESULT_BYTES, OUTPUT_TOOL, USE_SKILL_TOOL};
#[doc(hidden)]
pub use middleware::{
    CallFlags, DecidedBy, EvidenceModel, OUTPUT_ACCEPTED, TRACE_FORMAT, ToolEvidence,
    arguments_value,
};
#[doc(hidden)]
pub use read::{RecordedMcp, recorded_agent, recorded_responses, replay_model, waiting_calls};
