//! The MCP side of a run in a build with the MCP client: the agent's servers connected at
//! run start, or a recording standing in for them, and a server's tools as the loop's.

use std::time::Duration;

use provrun_mcp::{ConnectOptions, McpServers, McpTool};
use provrun_tools::{
    McpServerSpec, McpTransportKind, Tool, ToolCategory, ToolMode, ToolOutput, ToolRegistry,
};
use serde_json::Value;

use crate::error::AgentError;
use crate::spec::AgentSpec;

use super::recorded::RecordedMcp;

/// The MCP side of one run.
pub(crate) enum Remote {
    /// Connected servers.
    Live(McpServers),
    /// A recording standing in for the servers.
    Recorded(RecordedMcp),
}

impl Remote {
    /// No servers.
    pub(crate) fn none() -> Self {
        Remote::Live(McpServers::none())
    }

    /// Connect the agent's servers (tools-folder declarations looked up in `registry`), or
    /// stand in with `recorded`.
    pub(crate) async fn start(
        agent: &AgentSpec,
        registry: &ToolRegistry,
        recorded: Option<&RecordedMcp>,
        (forbidden, input): (
            Vec<provrun_sandbox::roots::HostRoot>,
            Option<std::path::PathBuf>,
        ),
    ) -> Result<Self, AgentError> {
        if let Some(recorded) = recorded {
            return Ok(Remote::Recorded(recorded.clone()));
        }
        if agent.mcp.is_empty() {
            return Ok(Remote::none());
        }
        let mut specs: Vec<McpServerSpec> = Vec::with_capacity(agent.mcp.len());
        for spec in &agent.mcp {
            if spec.transport() == McpTransportKind::Reference {
                let declared = registry.mcp_server(&spec.name).ok_or_else(|| {
                    AgentError::Mcp(format!(
                        "MCP server `{}`: the agent names it without `command` or `url`, and \
                         no tools folder declares it",
                        spec.name
                    ))
                })?;
                let mut declared = declared.clone();
                // The agent's own choices of prefix, tools and limits win.
                declared.prefix = spec.prefix.clone().or(declared.prefix);
                declared.tools = spec.tools.clone().or(declared.tools);
                declared.timeout_s = spec.timeout_s.or(declared.timeout_s);
                declared.destructive |= spec.destructive;
                specs.push(declared);
            } else {
                specs.push(spec.clone());
            }
        }
        let options = ConnectOptions {
            base_dir: agent.base_dir.clone(),
            limits: agent.limits.clone(),
            allow_degraded_sandbox: agent.allow_degraded_sandbox,
            forbidden,
            input,
        };
        McpServers::connect(&specs, &options)
            .await
            .map(Remote::Live)
            .map_err(AgentError::McpServer)
    }

    /// The servers' tools.
    pub(crate) fn tools(&self) -> Vec<McpTool> {
        match self {
            Remote::Live(servers) => servers.tools().cloned().collect(),
            Remote::Recorded(r) => McpTool::recorded(&r.description),
        }
    }

    /// `run_started.details.mcp`: the servers and their tools (`null` without servers).
    pub(crate) fn describe(&self, digest: impl Fn(&Value) -> String) -> Value {
        match self {
            Remote::Live(servers) if servers.is_empty() => Value::Null,
            Remote::Live(servers) => servers.describe(digest),
            Remote::Recorded(r) => r.description.clone(),
        }
    }

    /// Run one call (live), or give the recorded answer (replay).
    pub(crate) async fn call(
        &self,
        name: &str,
        run_call_id: &str,
        call_id: &str,
        arguments: &str,
        limit: Duration,
    ) -> (ToolOutput, Value) {
        match self {
            Remote::Live(servers) => match servers.call(name, arguments, limit).await {
                Some(done) => (done.output, done.evidence),
                None => (
                    ToolOutput::fail(format!("no MCP server offers tool `{name}`")),
                    serde_json::json!({"error": "no server offers this tool"}),
                ),
            },
            Remote::Recorded(r) => r.answer(name, run_call_id, call_id),
        }
    }

    /// The stdio servers' process trails, by server name.
    pub(crate) fn trail_feeds(&self) -> Vec<(String, provrun_sandbox::TrailFeed)> {
        match self {
            Remote::Live(servers) => servers.trail_feeds(),
            _ => Vec::new(),
        }
    }

    /// Close the sessions and stop the stdio servers.
    pub(crate) async fn shutdown(&self) {
        if let Remote::Live(servers) = self {
            servers.shutdown().await;
        }
    }
}

/// A server's tool as a [`Tool`] the loop can offer and dispatch (its body is the server).
pub(crate) fn as_tool(tool: &McpTool) -> Result<Tool, AgentError> {
    // A tool the server marks read-only (`readOnlyHint`) and the declaration does not make
    // destructive only reads: its calls may overlap with other reads of the same turn.
    let read_only = !tool.destructive
        && tool
            .annotations
            .as_ref()
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool)
            == Some(true);
    let category = if read_only {
        ToolCategory::Read
    } else {
        ToolCategory::Other
    };
    Tool::builder(tool.name.clone(), tool.description.clone())
        .mode(ToolMode::RemoteMcp)
        .destructive(tool.destructive)
        .category(category)
        .schema(tool.schema.clone())
        .build()
        .map_err(|e| AgentError::Mcp(format!("MCP server `{}`: {e}", tool.server)))
}
