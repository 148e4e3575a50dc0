//! The one error type of the agent crate.

use std::path::PathBuf;

/// Why a run could not start, or could not be resumed or replayed.
///
/// A run that *started* and then went wrong (the model failed, max steps reached) is not
/// an error: it returns a `RunResult` with status `failed` and a bundle that verifies.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent spec file could not be read.
    #[error("cannot read agent spec `{}`: {source}", path.display())]
    ReadSpec {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The agent spec is not valid.
    #[error("invalid {origin}: {message}")]
    InvalidSpec {
        /// The file (or "agent spec").
        origin: String,
        /// What is wrong, with line and column where known.
        message: String,
    },
    /// A tool the agent names is not registered, or cannot run in this process.
    #[error("{0}")]
    Tool(#[from] provrun_tools::ToolError),
    /// A tool the agent names cannot be used by it.
    #[error("tool `{name}` cannot be used: {reason}")]
    UnusableTool {
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
    /// The model could not be set up.
    #[error("model `{model}`: {message}")]
    Model {
        /// The spec's model string.
        model: String,
        /// What is wrong.
        message: String,
    },
    /// An input to stage does not exist or cannot be staged.
    #[error("input `{}`: {message}", path.display())]
    Input {
        /// The input as given.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A skill folder or `SKILL.md` is invalid.
    #[error("skill `{}`: {message}", path.display())]
    Skill {
        /// The skill folder or file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The sandbox refused to open.
    #[error("sandbox: {0}")]
    Sandbox(#[from] provrun_sandbox::SandboxError),
    /// Writing or reading evidence failed.
    #[error("evidence: {0}")]
    Evidence(#[from] provrun_evidence::EvidenceError),
    /// A bundle cannot be resumed or replayed.
    #[error("bundle `{}`: {message}", path.display())]
    Bundle {
        /// The bundle.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An MCP server of the agent cannot be used for a reason the agent finds itself: a
    /// reference no tools folder declares, a listed tool that cannot be offered, or a
    /// build without the MCP client (the `mcp` feature). Failures of the MCP client itself
    /// are `AgentError::McpServer` (with the `mcp` feature).
    #[error("{0}")]
    Mcp(String),
    /// An MCP server of the agent could not be started, reached, initialised or listed, or
    /// lists a tool with an invalid input schema: the MCP client's error, kept as the
    /// source. (A variant of its own so that `Mcp(String)` keeps its shape.)
    #[cfg(feature = "mcp")]
    #[error("{0}")]
    McpServer(#[from] provrun_mcp::McpError),
    /// `resume` was given decisions that do not match the calls the run waits on.
    #[error("{0}")]
    Decisions(String),
}

impl From<provrun_capture::CaptureError> for AgentError {
    fn from(e: provrun_capture::CaptureError) -> Self {
        match e {
            provrun_capture::CaptureError::Evidence(e) => AgentError::Evidence(e),
            provrun_capture::CaptureError::Sandbox(e) => AgentError::Sandbox(e),
            other => AgentError::Bundle {
                path: PathBuf::new(),
                message: other.to_string(),
            },
        }
    }
}
