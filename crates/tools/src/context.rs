//! What a tool gets from the run: [`RunContext`] over [`RunDeps`].

use std::fmt;
use std::sync::Arc;

#[cfg(feature = "evidence")]
use provrun_evidence::Declarer;
use provrun_sandbox::{Sandbox, SandboxError};

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

    /// Runs `op` on the sandbox without blocking the async executor: on tokio's blocking
    /// pool inside a tokio runtime, else right here. What an async `#[tool]` uses for
    /// any sandbox operation (see [`RunContext::read_to_string`] for the common ones).
    ///
    /// # Errors
    ///
    /// Whatever `op` returns; a [`SandboxError::Io`] when the blocking task running it stops
    /// (panics or is cancelled).
    pub async fn with_sandbox<T, F>(&self, op: F) -> Result<T, SandboxError>
    where
        F: FnOnce(&Sandbox) -> Result<T, SandboxError> + Send + 'static,
        T: Send + 'static,
    {
        let sandbox = self.deps.sandbox.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => match handle.spawn_blocking(move || op(&sandbox)).await {
                Ok(result) => result,
                Err(e) => Err(SandboxError::Io {
                    op: "running a sandbox operation",
                    path: String::new(),
                    source: std::io::Error::other(format!("the sandbox operation stopped: {e}")),
                }),
            },
            Err(_) => op(&sandbox),
        }
    }

    /// The text of a sandbox file (`/input/…`, `/output/…`, `/scratch/…`), at most
    /// `Limits::max_read_bytes` of it (a longer file is an error: page through it with
    /// [`Sandbox::read_file`]), without blocking the executor. One line in an async tool:
    /// `let text = ctx.read_to_string("/input/notes.txt").await?;`
    ///
    /// # Errors
    ///
    /// The errors of [`Sandbox::read_file`]; [`SandboxError::Io`] when the file is longer than
    /// one read.
    pub async fn read_to_string(&self, path: &str) -> Result<String, SandboxError> {
        let path = path.to_owned();
        self.with_sandbox(move |sandbox| {
            let page = sandbox.read_file(&path, None, None)?;
            if page.truncated {
                return Err(SandboxError::Io {
                    op: "reading",
                    path: page.path,
                    source: std::io::Error::other(
                        "the file is longer than one read: page through it with Sandbox::read_file",
                    ),
                });
            }
            Ok(page.content)
        })
        .await
    }

    /// Writes a sandbox file (under `/output` or `/scratch`) without blocking the
    /// executor; see [`Sandbox::write_file`].
    ///
    /// # Errors
    ///
    /// The errors of [`Sandbox::write_file`] (a read-only or bad path, a limit or quota, an I/O
    /// failure).
    pub async fn write_file(
        &self,
        path: &str,
        content: impl Into<Vec<u8>>,
    ) -> Result<provrun_sandbox::WriteOutcome, SandboxError> {
        let (path, content) = (path.to_owned(), content.into());
        self.with_sandbox(move |sandbox| sandbox.write_file(&path, content))
            .await
    }

    /// Lists a sandbox folder without blocking the executor; see [`Sandbox::list_dir`].
    ///
    /// # Errors
    ///
    /// The errors of [`Sandbox::list_dir`] (a bad path, not a folder, an I/O failure).
    pub async fn list_dir(&self, path: &str) -> Result<provrun_sandbox::DirListing, SandboxError> {
        let path = path.to_owned();
        self.with_sandbox(move |sandbox| sandbox.list_dir(&path))
            .await
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
