//! [`Backend`]: runs an agent in its sandbox, step by step, and leaves a finished bundle.

mod build;
mod dispatch;
mod finish;
mod resume;
mod start;
mod turn;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use provrun_evidence::Recorder;
use provrun_model::{Model, ToolCall, ToolDefinition};
use provrun_tools::{RunContext, Tool, ToolOutput, ToolRegistry};

use crate::capability::{EvidenceModel, ToolEvidence};
use crate::control::RunControl;
use crate::error::AgentError;
use crate::hooks::ToolHooks;
use crate::output::OutputSchema;
use crate::recorded::Replaying;
use crate::remote::{RecordedMcp, Remote};
use crate::skills::Skill;
use crate::spec::{AgentSpec, Decision, RunResult, RunSpec};

/// What `run_started.builder` and the statement name as the thing that ran the agent.
pub const BUILDER: &str = concat!("provrun/", env!("CARGO_PKG_VERSION"));

/// How long a cancelled run waits for a sync tool to return before it records the call
/// as cancelled (a command the tool runs is killed at once; see `Run::call_tool`).
pub const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A tool result longer than this is cut (with a note saying so) before the model and
/// the evidence see it.
pub const MAX_TOOL_RESULT_BYTES: usize = 1024 * 1024;

/// Runs agents: finds their tools, builds their model, and drives the loop.
///
/// ```no_run
/// # async fn demo() -> Result<(), provrun_agent::AgentError> {
/// use provrun_agent::{AgentSpec, Backend, RunControl, RunSpec};
/// let agent = AgentSpec::load("examples/hello/agent.toml")?;
/// let run = RunSpec::new("Summarise the inputs.", "/tmp/bundle").input("examples/hello/input");
/// let result = Backend::new().execute(&RunControl::new(), &agent, &run).await?;
/// println!("{}", result.output());
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Backend {
    model: Option<Arc<dyn Model>>,
    registry: Option<ToolRegistry>,
    hooks: ToolHooks,
    /// Set by [`crate::replay`]: the recorded decisions that stand in for hooks, and where
    /// a recorded cancellation ends the run.
    replaying: Option<Arc<Replaying>>,
    recorded_mcp: Option<RecordedMcp>,
    #[cfg(feature = "otel")]
    otlp: Option<provrun_otel::OtlpConfig>,
    /// How new bundles store their blobs (the pack unless chosen otherwise).
    blob_layout: provrun_evidence::BlobLayout,
    /// What new bundles name as their builder ([`BUILDER`] unless chosen otherwise).
    builder: Option<String>,
    /// Shared by every run of this backend (and its clones): one permit per model
    /// request in flight.
    model_limit: Option<Arc<tokio::sync::Semaphore>>,
    /// Script models read so far, by path, shared by every run of this backend (and its
    /// clones): a batch of runs of one script reads and parses it once, and again only if
    /// the file changes.
    scripts: Arc<std::sync::Mutex<HashMap<std::path::PathBuf, build::ScriptEntry>>>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("model", &self.model.as_ref().map(|m| m.name().to_string()))
            .field("registry", &self.registry.as_ref().map(ToolRegistry::len))
            .field("hooks", &self.hooks)
            .field("replaying", &self.replaying.is_some())
            .field("otlp", &self.otlp_asked())
            .finish()
    }
}

/// Run an agent with a default [`Backend`] (linked tools, the spec's model).
///
/// # Errors
///
/// As [`Backend::execute`].
pub async fn execute(
    control: &RunControl,
    agent: &AgentSpec,
    run: &RunSpec,
) -> Result<RunResult, AgentError> {
    Backend::new().execute(control, agent, run).await
}

/// A turn whose calls are not all done: they wait for decisions. `completed` and
/// `decisions` are keyed by the calls' run-unique ids ([`call_uid`](crate::state::call_uid)).
#[derive(Debug, Clone, Default)]
struct PendingTurn {
    calls: Vec<ToolCall>,
    completed: HashMap<String, ToolOutput>,
    decisions: HashMap<String, Decision>,
}

/// Everything the loop needs that does not change during a run.
struct Prepared {
    tools: BTreeMap<String, Tool>,
    /// The tools' definitions as the model is offered them. The run's one request takes
    /// them when the loop begins (`Run::steps`), so that a run keeps one copy, not two:
    /// one `Prepared` serves one run.
    definitions: std::sync::Mutex<Vec<ToolDefinition>>,
    instructions: String,
    skills: Vec<Skill>,
    model: Arc<dyn Model>,
    output_schema: Option<OutputSchema>,
    remote: Remote,
}

impl Prepared {
    /// The tools' definitions (see [`Prepared::definitions`]'s field).
    fn definitions(&self) -> std::sync::MutexGuard<'_, Vec<ToolDefinition>> {
        self.definitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One run in progress.
struct Run<'a> {
    backend: &'a Backend,
    control: &'a RunControl,
    agent: &'a AgentSpec,
    prepared: &'a Prepared,
    recorder: Recorder,
    evidence: ToolEvidence,
    model: EvidenceModel,
    ctx: RunContext,
}
