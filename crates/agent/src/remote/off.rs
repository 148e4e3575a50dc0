//! MCP in a build without the `mcp` feature: no client, so an agent that names MCP servers
//! (or a replay of a run that used them) is refused with the feature to turn on.

use std::time::Duration;

use provrun_tools::{ToolOutput, ToolRegistry};
use serde_json::Value;

use crate::error::AgentError;
use crate::spec::AgentSpec;

use super::recorded::RecordedMcp;

/// A run's MCP servers: none, in this build.
pub(crate) struct Remote;

const NOT_BUILT: &str = "this build of provrun-agent has no MCP client: enable its `mcp` \
                         feature (on by default; the provrun facade's `mcp` feature)";

impl Remote {
    pub(crate) fn none() -> Self {
        Remote
    }

    pub(crate) async fn start(
        agent: &AgentSpec,
        _registry: &ToolRegistry,
        recorded: Option<&RecordedMcp>,
        _roots: (
            Vec<provrun_sandbox::roots::HostRoot>,
            Option<std::path::PathBuf>,
        ),
    ) -> Result<Self, AgentError> {
        let replays_mcp = recorded.is_some_and(|r| !r.description.is_null());
        if !agent.mcp.is_empty() || replays_mcp {
            return Err(AgentError::Mcp(NOT_BUILT.to_owned()));
        }
        Ok(Remote)
    }

    pub(crate) fn describe(&self, _digest: impl Fn(&Value) -> String) -> Value {
        Value::Null
    }

    pub(crate) async fn call(
        &self,
        name: &str,
        _run_call_id: &str,
        _call_id: &str,
        _arguments: &str,
        _limit: Duration,
    ) -> (ToolOutput, Value) {
        (
            ToolOutput::fail(format!("no MCP server offers tool `{name}`: {NOT_BUILT}")),
            serde_json::json!({"error": NOT_BUILT}),
        )
    }

    pub(crate) fn trail_feeds(&self) -> Vec<(String, provrun_sandbox::TrailFeed)> {
        Vec::new()
    }

    pub(crate) async fn shutdown(&self) {}
}
