//! Tools that run in MCP servers: the client side of the Model Context Protocol for
//! provrun, on the official Rust SDK (`rmcp`).
//!
//! [`McpServers::connect`] starts or reaches each declared server ([`McpServerSpec`]): a
//! stdio server is started for the run as a confined child (the `run_command` layers of
//! `provrun-sandbox`, in its own private, empty `/input`, `/output` and `/scratch`: it sees
//! none of the run's files and gets no environment but what its declaration names); a
//! Streamable HTTP server is reached at its URL, with an optional bearer token read from an
//! environment variable. A stdio server sees only the host paths its declaration grants
//! (`read_only`), has the network only with `network = true`, and runs under its own
//! limits (`McpServerSpec::limits`); what an installed server is missing (the interpreter
//! of a script's `#!` line, its `node_modules`, the network for `npx`) is named in the
//! start-up error. Each server's tools are listed, checked ([`check_input_schema`])
//! and named `PREFIX_tool` ([`exposed_name`]), ready to be offered to a model next to
//! built-in tools. [`McpServers::call`] runs one call with a time limit and gives back what
//! the model sees plus the evidence to record: who answered (observed) and what the server
//! claimed (structured content, `isError`, annotations — confidence `parsed`).
//!
//! Nothing a server sends can panic the caller: a server that crashes, hangs, sends lines
//! that are not JSON-RPC or lists a tool with a broken schema gives a start-up
//! [`McpError`] or a failed [`ToolOutput`](provrun_tools::ToolOutput) that says what
//! happened.

mod call;
mod connect;
mod error;
mod http;
mod installed;
mod schema;
mod server;
mod spawn;
mod tap;
mod tools;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use provrun_tools::McpServerSpec;
use serde_json::{Value, json};

pub use call::McpCall;
pub use connect::ConnectOptions;
pub use error::McpError;
pub use schema::check_input_schema;
pub use tools::{McpTool, NAME_SEPARATOR, exposed_name};

use connect::connect_one;
use error::server_err;
use server::Server;

/// How long the client waits for a server to close politely before it is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The MCP servers of one run, connected, with their tools listed.
pub struct McpServers {
    servers: Vec<Server>,
    tools: BTreeMap<String, (usize, McpTool)>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|s| &s.spec.name)
                    .collect::<Vec<_>>(),
            )
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl McpServers {
    /// No servers (a run without `[[mcp]]`).
    pub fn none() -> Self {
        Self {
            servers: Vec::new(),
            tools: BTreeMap::new(),
        }
    }

    /// Start or reach every server, initialise it and list its tools, each within its
    /// `timeout_s`. On any error the servers already started are stopped and the error
    /// says which server failed and why.
    pub async fn connect(
        specs: &[McpServerSpec],
        options: &ConnectOptions,
    ) -> Result<Self, McpError> {
        let mut out = Self::none();
        let mut names = BTreeSet::new();
        for spec in specs {
            if !names.insert(spec.name.clone()) {
                out.shutdown().await;
                return Err(server_err(spec, "is declared twice"));
            }
            match connect_one(spec, options).await {
                Ok((server, listed)) => {
                    let index = out.servers.len();
                    out.servers.push(server);
                    if let Err(e) = out.add_tools(index, listed) {
                        out.shutdown().await;
                        return Err(e);
                    }
                }
                Err(e) => {
                    out.shutdown().await;
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Every tool of every server, by exposed name.
    pub fn tools(&self) -> impl Iterator<Item = &McpTool> {
        self.tools.values().map(|(_, t)| t)
    }

    /// Whether no server is connected.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The servers and their tools as `run_started.details.mcp` records them: per server
    /// its name, transport, command or URL (with, for stdio, its `read_only` paths,
    /// `network` and `limits`), what it said it is (`implementation`, parsed), its tools
    /// with their full schemas and the SHA-256 of each schema's canonical JSON
    /// (`schema_sha256`, as in `run_started.tools`), the lines that were not JSON it
    /// printed before it was ready (`stdout_before_ready`), and the tools it listed that
    /// are not offered, with why (`left_out`).
    pub fn describe(&self, digest: impl Fn(&Value) -> String) -> Value {
        let servers: Vec<Value> = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let tools: Vec<Value> = self
                    .tools
                    .values()
                    .filter(|(idx, _)| *idx == i)
                    .map(|(_, t)| {
                        let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
                        v["schema_sha256"] = Value::String(digest(&t.schema));
                        v
                    })
                    .collect();
                let mut server = json!({
                    "name": s.spec.name,
                    "endpoint": s.endpoint,
                    "implementation": s.implementation,
                    "tools": tools,
                });
                if !s.banner.is_empty() {
                    server["stdout_before_ready"] = json!(s.banner);
                }
                if !s.left_out.is_empty() {
                    server["left_out"] = Value::Array(s.left_out.clone());
                }
                server
            })
            .collect();
        Value::Array(servers)
    }

    /// Close every connection and kill every stdio server's process tree. Idempotent;
    /// dropping the value kills the children too.
    pub async fn shutdown(&self) {
        for server in &self.servers {
            if let Some(service) = server.service.lock().await.take() {
                let _ = tokio::time::timeout(SHUTDOWN_GRACE, service.cancel()).await;
            }
            if let Some(child) = &server.child
                && let Ok(mut child) = child.lock()
            {
                child.kill();
            }
        }
    }
}
