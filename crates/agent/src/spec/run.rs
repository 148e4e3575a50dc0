//! The run request: [`RunSpec`] (one run of an agent) and [`ResumeSpec`] (how a paused
//! run is continued).

use std::path::PathBuf;

use provrun_evidence::Durability;

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
        }
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
