//! The MCP servers of one run ([`McpServers`]): connected in declaration order (each
//! started or reached by [`crate::connect`]), described for `run_started`, and shut down.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use provrun_tools::McpServerSpec;
use serde_json::{Value, json};

use crate::connect::connect_one;
use crate::error::server_err;
use crate::server::Server;
use crate::session::ConnectOptions;
use crate::tools::{NAME_SEPARATOR, exposed_name, offered_tool};
use crate::{McpError, McpTool, check_input_schema};

/// How long the client waits for a server to close politely before it is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The MCP servers of one run, connected, with their tools listed.
pub struct McpServers {
    /// The servers, in declaration order.
    pub(crate) servers: Vec<Server>,
    /// Every offered tool by exposed name, with the index of its server.
    pub(crate) tools: BTreeMap<String, (usize, McpTool)>,
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
    ///
    /// # Errors
    ///
    /// [`McpError::Server`] for a server declared twice, or one that does not start, initialise
    /// or list its tools in time; [`McpError::Sandbox`] when the sandbox refuses to start a
    /// stdio server; [`McpError::InvalidSchema`] when a listed tool's input schema is invalid.
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

    /// The process trail of each stdio server that has one, by server name: a handle
    /// that takes the processes that ended and shows those still running (see
    /// [`provrun_sandbox::TrailFeed`]), for the runtime to record before the run ends.
    pub fn trail_feeds(&self) -> Vec<(String, provrun_sandbox::TrailFeed)> {
        self.servers
            .iter()
            .filter_map(|s| {
                let child = s.child.as_ref()?.lock().ok()?;
                Some((s.spec.name.clone(), child.trail_feed()?))
            })
            .collect()
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

impl McpServers {
    /// Check the tools server `index` listed and add those it offers to the model, named
    /// `PREFIX_tool`: a tool the declaration's `tools` leaves out or that only runs as an
    /// MCP task is not offered; a broken schema, a name too long or taken, or a name in
    /// `tools` the server does not list is an error.
    pub(crate) fn add_tools(
        &mut self,
        index: usize,
        listed: Vec<rmcp::model::Tool>,
    ) -> Result<(), McpError> {
        let spec = self.servers[index].spec.clone();
        let wanted: Option<BTreeSet<&str>> = spec
            .tools
            .as_ref()
            .map(|t| t.iter().map(String::as_str).collect());
        let mut seen = BTreeSet::new();
        for tool in listed {
            let remote = tool.name.to_string();
            seen.insert(remote.clone());
            if wanted
                .as_ref()
                .is_some_and(|w| !w.contains(remote.as_str()))
            {
                continue;
            }
            let execution = self.servers[index]
                .seen
                .as_ref()
                .and_then(|s| s.lock().ok())
                .and_then(|s| s.execution.get(&remote).cloned());
            if execution
                .as_ref()
                .and_then(|e| e.get("taskSupport"))
                .and_then(Value::as_str)
                == Some("required")
            {
                // provrun does not run MCP tasks; every call would fail with
                // "requires task augmentation", so the model is not offered the tool.
                tracing::warn!(server = %spec.name, tool = %remote, "MCP tool left out: it requires tasks");
                self.servers[index].left_out.push(json!({
                    "tool": remote,
                    "reason": "it declares `execution.taskSupport: \"required\"` (it can \
                               only be called as an MCP task, which provrun does not run)",
                    "execution": execution,
                }));
                continue;
            }
            let schema = Value::Object((*tool.input_schema).clone());
            check_input_schema(&schema).map_err(|message| McpError::InvalidSchema {
                server: spec.name.clone(),
                tool: remote.clone(),
                message,
            })?;
            let name = self.name_for(&spec, &remote)?;
            let tool = offered_tool(&spec, &tool, name.clone(), remote, schema, execution);
            self.tools.insert(name, (index, tool));
        }
        if let Some(wanted) = wanted {
            let missing: Vec<&str> = wanted.into_iter().filter(|w| !seen.contains(*w)).collect();
            if !missing.is_empty() {
                return Err(server_err(
                    &spec,
                    format!(
                        "`tools` names {} that the server does not list; it lists: {}",
                        missing.join(", "),
                        seen.into_iter().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The name `remote` of server `spec` is offered under: `PREFIX_tool`, valid for a
    /// model and not taken by another server's tool.
    fn name_for(&self, spec: &McpServerSpec, remote: &str) -> Result<String, McpError> {
        let name = exposed_name(spec.tool_prefix(), remote).ok_or_else(|| {
            server_err(
                spec,
                format!(
                    "tool `{remote}` cannot be named for a model: `{}{NAME_SEPARATOR}{remote}` \
                     is longer than 64 characters (choose a shorter `prefix`)",
                    spec.tool_prefix()
                ),
            )
        })?;
        if let Some((other, _)) = self.tools.get(&name) {
            return Err(server_err(
                spec,
                format!(
                    "tool `{remote}` would be named `{name}`, which MCP server `{}` already \
                     uses (give one of them a different `prefix`)",
                    self.servers[*other].spec.name
                ),
            ));
        }
        Ok(name)
    }
}
