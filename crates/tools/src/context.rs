//! What a tool gets from the run: [`RunContext`] over [`RunDeps`].

use std::fmt;
use std::sync::Arc;

#[cfg(feature = "evidence")]
use provrun_evidence::Declarer;
use provrun_sandbox::Sandbox;

/// The run as a tool sees it.
#[derive(Clone)]
pub struct RunInfo {
    /// The run's id, as written in its evidence.
    pub run_id: String,
    /// Where the tool may add `declared` events; `None` when no evidence is kept (tests,
    /// ad-hoc calls). It can append nothing else and never rewrite the chain.
    ///
    /// Needs the `evidence` feature (the agent crate turns it on).
    #[cfg(feature = "evidence")]
    pub declarer: Option<Declarer>,
}

impl fmt::Debug for RunInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RunInfo");
        d.field("run_id", &self.run_id);
        #[cfg(feature = "evidence")]
        d.field("declarer", &self.declarer.is_some());
        d.finish()
    }
}

/// What a tool that declares a context receives: the sandbox and the run.
#[derive(Clone)]
pub struct RunDeps {
    /// The agent's file sandbox over `/input`, `/output` and `/scratch`.
    pub sandbox: Sandbox,
    /// The run, whose declarer takes the tool's own `declared` evidence.
    pub run: RunInfo,
}

/// The context handed to a tool fn whose first parameter is `ctx: &RunContext`.
///
/// Cheap to clone (shared inside). The runtime builds one per run; tests can build one
/// with [`RunContext::new`].
#[derive(Clone)]
pub struct RunContext {
    deps: Arc<RunDeps>,
}

impl fmt::Debug for RunContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunContext")
            .field("run", &self.deps.run)
            .finish_non_exhaustive()
    }
}

impl RunContext {
    /// A context over these dependencies.
    pub fn new(deps: RunDeps) -> Self {
        Self {
            deps: Arc::new(deps),
        }
    }

    /// The dependencies: sandbox and run.
    pub fn deps(&self) -> &RunDeps {
        &self.deps
    }

    /// The agent's file sandbox.
    pub fn sandbox(&self) -> &Sandbox {
        &self.deps.sandbox
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.deps.run.run_id
    }

    /// Where the tool may add `declared` events, if evidence is kept for this run.
    ///
    /// Needs the `evidence` feature (the agent crate turns it on).
    #[cfg(feature = "evidence")]
    pub fn declarer(&self) -> Option<&Declarer> {
        self.deps.run.declarer.as_ref()
    }
}
