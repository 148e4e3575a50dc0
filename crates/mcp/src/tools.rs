//! A server's listed tools as provrun offers them: checked ([`check_input_schema`]),
//! named `PREFIX_tool` ([`exposed_name`]), with what the approval policy and the evidence
//! need; and the tools a run recorded, rebuilt for a replay.

use provrun_tools::{McpServerSpec, is_valid_tool_name};
use serde::Serialize;
use serde_json::Value;

/// What joins a server's prefix and its tool's name: `notes` + `find` → `notes_find`.
/// OpenAI-compatible providers accept only `[A-Za-z0-9_-]{1,64}` as function names, so a
/// dot is not an option.
pub const NAME_SEPARATOR: &str = "_";

/// One tool an MCP server offers, as provrun exposes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpTool {
    /// The name the model and evidence use (`PREFIX_tool`).
    pub name: String,
    /// The declared name of the server that runs it.
    pub server: String,
    /// The tool's name on the server.
    pub remote_name: String,
    /// What the model is told the tool does.
    pub description: String,
    /// The input schema, as listed.
    pub schema: Value,
    /// The server's annotations for the tool (hints, not facts), as listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Whether calls count as destructive for the approval policy.
    pub destructive: bool,
    /// The tool's `execution` object as listed (e.g. `{"taskSupport": "optional"}`);
    /// seen for stdio servers only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<Value>,
}

impl McpTool {
    /// Rebuild the tools a run recorded (`run_started.details.mcp`, see
    /// [`McpServers::describe`](crate::McpServers::describe)), for replaying without the servers.
    pub fn recorded(description: &Value) -> Vec<McpTool> {
        let mut out = Vec::new();
        for server in description.as_array().into_iter().flatten() {
            let server_name = server["name"].as_str().unwrap_or_default();
            for t in server["tools"].as_array().into_iter().flatten() {
                let (Some(name), Some(remote)) = (t["name"].as_str(), t["remote_name"].as_str())
                else {
                    continue;
                };
                out.push(McpTool {
                    name: name.to_string(),
                    server: server_name.to_string(),
                    remote_name: remote.to_string(),
                    description: t["description"].as_str().unwrap_or_default().to_string(),
                    schema: t["schema"].clone(),
                    annotations: t.get("annotations").filter(|a| !a.is_null()).cloned(),
                    destructive: t["destructive"] == true,
                    execution: t.get("execution").filter(|e| !e.is_null()).cloned(),
                });
            }
        }
        // The order a live connection lists them in: by exposed name.
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

/// The name a server's tool gets: `PREFIX_tool` (or the tool's own name with an empty
/// prefix), with any character a provider would refuse replaced by `_`; `None` when the
/// result is longer than 64 characters.
pub fn exposed_name(prefix: &str, remote: &str) -> Option<String> {
    let clean: String = remote
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = if prefix.is_empty() {
        clean
    } else {
        format!("{prefix}{NAME_SEPARATOR}{clean}")
    };
    is_valid_tool_name(&name).then_some(name)
}

/// A listed tool as provrun offers it under `name`: its annotations kept, whether it is
/// destructive, and a description (its own, else its title, else one made up).
pub(crate) fn offered_tool(
    spec: &McpServerSpec,
    tool: &rmcp::model::Tool,
    name: String,
    remote: String,
    schema: Value,
    execution: Option<Value>,
) -> McpTool {
    let annotations = tool
        .annotations
        .as_ref()
        .and_then(|a| serde_json::to_value(a).ok());
    // MCP's defaults: a tool is destructive unless it says it only reads, or says it is
    // not destructive. The declaration can only make it more careful.
    let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
    let not_destructive = tool.annotations.as_ref().and_then(|a| a.destructive_hint) == Some(false);
    let destructive = spec.destructive || !(read_only || not_destructive);
    let description = tool
        .description
        .as_deref()
        .map(str::to_string)
        .filter(|d| !d.trim().is_empty())
        .or_else(|| tool.title.clone())
        .unwrap_or_else(|| format!("Tool `{remote}` of MCP server `{}`.", spec.name));
    McpTool {
        name,
        server: spec.name.clone(),
        remote_name: remote,
        description,
        schema,
        annotations,
        destructive,
        execution,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_prefixed_cleaned_and_bounded() {
        assert_eq!(exposed_name("notes", "find").as_deref(), Some("notes_find"));
        assert_eq!(exposed_name("", "find").as_deref(), Some("find"));
        assert_eq!(
            exposed_name("fs", "read.file/v2").as_deref(),
            Some("fs_read_file_v2")
        );
        assert_eq!(exposed_name("p", &"x".repeat(63)), None);
        assert_eq!(exposed_name("", ""), None);
    }

    #[test]
    fn recorded_descriptions_rebuild_the_tools() {
        let d = json!([{"name": "notes", "tools": [
            {"name": "notes_find", "remote_name": "find", "description": "d", "schema": {"type": "object"}, "destructive": false},
            {"bad": true}
        ]}]);
        let tools = McpTool::recorded(&d);
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].server, "notes");
        assert_eq!(tools[0].remote_name, "find");
        assert!(McpTool::recorded(&json!("garbage")).is_empty());
    }
}
