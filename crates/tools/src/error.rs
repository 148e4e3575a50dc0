//! The one error type of the tools crate.

use std::path::PathBuf;

/// What went wrong while registering, finding or dispatching a tool.
///
/// A problem with the *arguments* a model sent is not an error: it becomes a failed
/// [`ToolOutput`](crate::ToolOutput) that the model sees. These errors are for the program
/// driving the tools: a misuse of the API, a bad manifest, an unknown name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// `get` or `call` named a tool that is not registered. The message explains the
    /// linker pitfall, the usual cause for a `#[tool]` in a crate of its own.
    #[error(
        "unknown tool `{name}`; registered tools: {known}. If `{name}` is a `#[tool]` in a \
         crate of its own, the linker dropped that crate because nothing in this binary names \
         it: add `use my_tools as _;` (with your crate's name) to the binary's main.rs, and to \
         each integration-test file under tests/ that needs the tools (each is a crate of its \
         own); or add the tool by hand with `ToolRegistry::add`"
    )]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The registered names, comma separated (or `none`).
        known: String,
    },
    /// `register` was given a tool whose name is already taken.
    #[error("a tool named `{name}` is already registered")]
    DuplicateTool {
        /// The name that clashed.
        name: String,
    },
    /// A tool name that providers would reject.
    #[error("`{name}` is not a valid tool name: use 1 to 64 ASCII letters, digits, `_` or `-`")]
    InvalidName {
        /// The rejected name.
        name: String,
    },
    /// A tool's argument schema is not an object schema.
    #[error("tool `{tool}` has an invalid argument schema: {message}")]
    InvalidSchema {
        /// The tool's name.
        tool: String,
        /// What is wrong with it.
        message: String,
    },
    /// The synchronous `call` was used on an async tool.
    #[error("tool `{tool}` is async: call it with `acall` (the sync `call` would not await it)")]
    AsyncToolInSyncCall {
        /// The tool's name.
        tool: String,
    },
    /// A tool that declares a `RunContext` was called without one.
    #[error("tool `{tool}` takes a run context, and none was given")]
    ContextRequired {
        /// The tool's name.
        tool: String,
    },
    /// The tool cannot run in this process (a client round trip, a remote tool, or a
    /// command tool before the confinement for it exists).
    #[error("tool `{tool}` cannot run here: {reason}")]
    NotRunnable {
        /// The tool's name.
        tool: String,
        /// Why, in a sentence.
        reason: String,
    },
    /// A tools folder or manifest could not be read.
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A manifest is not valid TOML of the manifest's shape.
    #[error("invalid tools manifest `{}`: {message}", path.display())]
    InvalidManifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, with the line where the parser knows it.
        message: String,
    },
    /// A manifest declares no tools.
    #[error("tools manifest `{}` declares no tools: add at least one `[[tools]]` table", path.display())]
    EmptyManifest {
        /// The manifest file.
        path: PathBuf,
    },
    /// A mode outside the three that exist.
    #[error(
        "unknown tool mode `{mode}`; the allowed modes are: in_process, client_round_trip, remote_mcp"
    )]
    InvalidMode {
        /// The mode as written.
        mode: String,
    },
}
