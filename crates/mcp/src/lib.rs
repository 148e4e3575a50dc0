//! Tools that run in MCP servers: the client side of the Model Context Protocol for
//! provrun, on the official Rust SDK (`rmcp`).
//!
//! [`McpServers::connect`] starts or reaches each declared server
//! ([`McpServerSpec`](provrun_tools::McpServerSpec)): a stdio server is started for the run
//! as a confined child (the `run_command` layers of `provrun-sandbox`, in its own private,
//! empty `/input`, `/output` and `/scratch`: it sees none of the run's files and gets no
//! environment but what its declaration names); a Streamable HTTP server is reached at its
//! URL, with an optional bearer token read from an environment variable. A stdio server
//! sees only the host paths its declaration grants (`read_only`), has the network only with
//! `network = true`, and runs under its own limits (`McpServerSpec::limits`); what an
//! installed server is missing (the interpreter of a script's `#!` line, its
//! `node_modules`, the network for `npx`) is named in the start-up error. Each server's
//! tools are listed, checked ([`check_input_schema`]) and named `PREFIX_tool`
//! ([`exposed_name`]), ready to be offered to a model next to built-in tools.
//! [`McpServers::call`] runs one call with a time limit and gives back what the model sees
//! plus the evidence to record: who answered (observed) and what the server claimed
//! (structured content, `isError`, annotations — confidence `parsed`).
//!
//! Nothing a server sends can panic the caller: a server that crashes, hangs, sends lines
//! that are not JSON-RPC or lists a tool with a broken schema gives a start-up
//! [`McpError`] or a failed [`ToolOutput`](provrun_tools::ToolOutput) that says what
//! happened.
//!
//! The modules: `servers` ([`McpServers`]: a run's servers, connected, described and shut
//! down), `connect` (one server started or reached and initialised: `spawn` for a stdio
//! server, with `installed` for what an installed server needs and `tap` on its stdout;
//! `http` for a Streamable HTTP server), `server` (a connected server and how its failing
//! child is described), `tools` (the listed tools checked and named), `schema` (the
//! input-schema check), `call` (one call), `error`.

mod call;
mod connect;
mod error;
mod http;
mod installed;
mod schema;
mod server;
mod servers;
mod session;
mod spawn;
mod tap;
mod tools;

pub use call::McpCall;
pub use error::McpError;
pub use schema::check_input_schema;
pub use servers::McpServers;
pub use session::ConnectOptions;
pub use tools::{McpTool, NAME_SEPARATOR, exposed_name};
