//! The crate's one error type: why MCP servers could not be used, naming the server.

use provrun_sandbox::SandboxError;
use provrun_tools::McpServerSpec;

/// Why MCP servers could not be used; every variant names the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The declaration is not usable, or the server did not start, initialise or list its
    /// tools in time.
    #[error("MCP server `{server}`: {message}")]
    Server {
        /// The declared server name.
        server: String,
        /// What happened, with the server's stderr or exit status where known.
        message: String,
    },
    /// A listed tool's input schema is not a valid object schema.
    #[error("MCP server `{server}`: tool `{tool}` lists an invalid input schema: {message}")]
    InvalidSchema {
        /// The declared server name.
        server: String,
        /// The tool as the server names it.
        tool: String,
        /// What is wrong with the schema, and where.
        message: String,
    },
    /// The sandbox refused to start a stdio server (e.g. a confinement layer is missing
    /// and `allow_degraded_sandbox` is not set).
    #[error("MCP server `{server}` cannot be started: {source}")]
    Sandbox {
        /// The declared server name.
        server: String,
        /// Why the sandbox refused.
        #[source]
        source: SandboxError,
    },
}

/// A [`McpError::Server`] for `spec`.
pub(crate) fn server_err(spec: &McpServerSpec, message: impl Into<String>) -> McpError {
    McpError::Server {
        server: spec.name.clone(),
        message: message.into(),
    }
}
