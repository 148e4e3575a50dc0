//! The run request: [`RunSpec`] (one run of an agent) and [`ResumeSpec`] (how a paused
//! run is continued).

use std::path::PathBuf;

use provrun_evidence::Durability;
use provrun_model::{Message, ToolDefinition};
use serde::{Deserialize, Serialize};

/// The run a new run continues (a conversation's next turn): the earlier bundle's run id
/// and the SHA-256 of its `statement.json`, recorded in the new bundle's `run_started`
/// (`details.continues`) so the chain of a conversation can be checked bundle by bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continuation {
    /// The earlier run's id (its bundle's).
    pub run_id: String,
    /// Hex SHA-256 of the earlier bundle's `statement.json` bytes.
    pub statement_sha256: String,
}

/// One run of an agent: its prompt, inputs, and where the bundle goes.
///
/// Built with [`RunSpec::new`] and the chainable setters; the fields stay readable.
/// New fields may be added (hence `#[non_exhaustive]`), each with a default and a setter.
///
/// ```
/// use provrun_agent::{Durability, RunSpec};
/// let run = RunSpec::new("Summarise the inputs.", "/tmp/bundle")
///     .input("notes.txt")
///     .input("data")
///     .host_dir("/tmp/share")
///     .durability(Durability::Flush)
///     .run_id("nightly-0001");
/// assert_eq!(run.inputs.len(), 2);
/// assert_eq!(run.run_id.as_deref(), Some("nightly-0001"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunSpec {
    /// The user's prompt.
    pub prompt: String,
    /// Host files and folders to stage into `/input` (a file as `/input/<name>`, a
    /// folder's contents at `/input`'s root).
    pub inputs: Vec<PathBuf>,
    /// The bundle folder to create; it must not exist or be empty.
    pub bundle: PathBuf,
    /// A host folder the host tools may use; without one they are refused.
    pub host_dir: Option<PathBuf>,
    /// When evidence reaches stable storage.
    pub durability: Durability,
    /// The run's id; one is generated when absent.
    pub run_id: Option<String>,
    /// The conversation so far, sent before the prompt (after the agent's instructions):
    /// a later turn of a conversation starts from the earlier run's messages. It holds no
    /// system message (the agent's instructions open every run). Recorded in
    /// `run_started` (`details.history`), so the run replays from its bundle alone.
    pub history: Vec<Message>,
    /// The earlier run this one continues, when it is a later turn of a conversation.
    pub continues: Option<Continuation>,
    /// Tools the caller runs (client round trips) offered to the model besides the
    /// agent's: a call to one pauses the run, and [`crate::Backend::resume`] continues it
    /// with the caller's result. Recorded in `run_started` (`details.client_tools`), so a
    /// resume or a replay offers them again.
    pub client_tools: Vec<ToolDefinition>,
    /// The conversation thread the run is a turn of, as the caller names it (`provrun
    /// serve`'s AG-UI `threadId`). Recorded in `run_started` (`details.thread`); telemetry
    /// shows it as `gen_ai.conversation.id`.
    pub thread: Option<String>,
}

impl RunSpec {
    /// A run with this prompt writing its bundle to `bundle`, with no inputs, no host
    /// folder, a generated run id, and evidence flushed per event (fsynced at the end:
    /// [`Durability::AtEnd`]).
    pub fn new(prompt: impl Into<String>, bundle: impl Into<PathBuf>) -> Self {
        Self {
            prompt: prompt.into(),
            inputs: Vec::new(),
            bundle: bundle.into(),
            host_dir: None,
            durability: Durability::AtEnd,
            run_id: None,
            history: Vec::new(),
            continues: None,
            client_tools: Vec::new(),
            thread: None,
        }
    }

    /// Name the conversation thread this run is a turn of (see [`RunSpec::thread`]).
    pub fn thread(mut self, id: impl Into<String>) -> Self {
        self.thread = Some(id.into());
        self
    }

    /// Start from this conversation (see [`RunSpec::history`]), replacing any set before.
    pub fn history(mut self, messages: Vec<Message>) -> Self {
        self.history = messages;
        self
    }

    /// Record that this run continues `earlier` (see [`RunSpec::continues`]).
    pub fn continues(mut self, earlier: Continuation) -> Self {
        self.continues = Some(earlier);
        self
    }

    /// Offer the model a tool the caller runs (see [`RunSpec::client_tools`]), after
    /// those added before.
    pub fn client_tool(mut self, tool: ToolDefinition) -> Self {
        self.client_tools.push(tool);
        self
    }

    /// Set the user's prompt (replacing the one given to [`RunSpec::new`]).
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }

    /// Add an input to stage, after those already added.
    pub fn input(mut self, path: impl Into<PathBuf>) -> Self {
        self.inputs.push(path.into());
        self
    }

    /// Set the inputs to stage, replacing those already added.
    pub fn inputs<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.inputs = paths.into_iter().map(Into::into).collect();
        self
    }

    /// Set the bundle folder to create (replacing the one given to [`RunSpec::new`]).
    pub fn bundle(mut self, path: impl Into<PathBuf>) -> Self {
        self.bundle = path.into();
        self
    }

    /// Grant the host tools this host folder (without one they are refused).
    pub fn host_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.host_dir = Some(path.into());
        self
    }

    /// Choose when evidence reaches stable storage.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Give the run this id (without one, an id is generated).
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }
}

/// How a paused run is continued, beside the decisions (see
/// [`crate::Backend::resume_with`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResumeSpec {
    /// The host folder to grant again: needed when the run was granted one, refused
    /// when it was not.
    pub host_dir: Option<PathBuf>,
}

impl ResumeSpec {
    /// No options: for a run without a host folder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Grant this host folder again.
    pub fn host_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.host_dir = Some(path.into());
        self
    }
}
