//! One call of a server's tool: the model's arguments checked as a JSON object, the call
//! made within its time limit, and its answer turned into what the model sees and the
//! `mcp` evidence of its `tool_called` event.

use std::time::Duration;

use provrun_tools::ToolOutput;
use rmcp::model::{CallToolRequestParams, JsonObject};
use serde_json::{Value, json};

use crate::McpServers;

/// What one finished call gives back.
#[derive(Debug, Clone)]
pub struct McpCall {
    /// What the model sees.
    pub output: ToolOutput,
    /// The `mcp` object of the call's `tool_called` event: `server` (what was started or
    /// reached: observed), `tool` (the server's name for it), and `claims` (what the
    /// server said about the call and itself, `confidence: "parsed"`).
    pub evidence: Value,
}

impl McpServers {
    /// Call the tool exposed as `name` with the model's `arguments` text (a JSON object,
    /// or nothing), waiting at most `timeout`. `None` when no server offers `name`.
    ///
    /// The result the model sees is the text of the content blocks (other blocks as their
    /// JSON; the structured content when there are no blocks); `ok` is false when the
    /// server set `isError` or the call failed (no answer in time, the server gone, a
    /// protocol error) — then the text says which.
    pub async fn call(&self, name: &str, arguments: &str, timeout: Duration) -> Option<McpCall> {
        let (index, tool) = self.tools.get(name)?;
        let server = &self.servers[*index];
        let mut evidence = json!({
            "server": server.endpoint,
            "tool": tool.remote_name,
        });
        let args = match parse_arguments(arguments) {
            Ok(a) => a,
            Err(message) => {
                evidence["error"] = Value::String(message.clone());
                return Some(McpCall {
                    output: ToolOutput::fail(format!(
                        "invalid arguments for tool `{name}`: {message}"
                    )),
                    evidence,
                });
            }
        };
        let mut params = CallToolRequestParams::new(tool.remote_name.clone());
        params.arguments = Some(args);
        let answer = tokio::time::timeout(timeout, server.peer.call_tool(params)).await;
        let output = match answer {
            Ok(Ok(result)) => {
                let result = serde_json::to_value(&result).unwrap_or(Value::Null);
                let is_error = result.get("isError").and_then(Value::as_bool);
                let text = result_text(&result);
                evidence["claims"] = json!({
                    "confidence": "parsed",
                    "implementation": server.implementation,
                    "annotations": tool.annotations,
                    "is_error": is_error,
                    "content": result.get("content").cloned().unwrap_or(Value::Null),
                    "structured_content": result.get("structuredContent").cloned(),
                });
                if is_error == Some(true) {
                    ToolOutput::fail(text)
                } else {
                    ToolOutput::succeed(text)
                }
            }
            Ok(Err(e)) => {
                server.settle().await;
                let message = format!(
                    "MCP server `{}` failed the call: {e}{}",
                    server.spec.name,
                    server.child_state()
                );
                evidence["error"] = Value::String(message.clone());
                ToolOutput::fail(message)
            }
            Err(_) => {
                let message = format!(
                    "MCP server `{}` gave no answer within {} s (it may hang, or send \
                     messages that are not JSON-RPC){}",
                    server.spec.name,
                    timeout.as_secs_f64(),
                    server.child_state()
                );
                evidence["error"] = Value::String(message.clone());
                ToolOutput::fail(message)
            }
        };
        tracing::info!(tool = name, server = %server.spec.name, ok = output.ok, "MCP tool called");
        Some(McpCall { output, evidence })
    }
}

/// The model's argument text as a JSON object (nothing → `{}`).
fn parse_arguments(text: &str) -> Result<JsonObject, String> {
    if text.trim().is_empty() {
        return Ok(JsonObject::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "expected a JSON object, got {}",
            match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "null",
            }
        )),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

/// What the model sees of a `tools/call` result (as JSON): text blocks as their text,
/// other blocks as compact JSON, one per line; the structured content when there are no
/// blocks.
fn result_text(result: &Value) -> String {
    let blocks = result["content"].as_array().cloned().unwrap_or_default();
    if blocks.is_empty() {
        return match result.get("structuredContent") {
            Some(v) if !v.is_null() => v.to_string(),
            _ => String::new(),
        };
    }
    blocks
        .iter()
        .map(|b| match (b["type"].as_str(), b["text"].as_str()) {
            (Some("text"), Some(t)) => t.to_string(),
            _ => b.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_an_object() {
        assert!(parse_arguments("").unwrap().is_empty());
        assert_eq!(parse_arguments("{\"a\":1}").unwrap()["a"], 1);
        assert!(parse_arguments("[1]").unwrap_err().contains("an array"));
        assert!(parse_arguments("{").unwrap_err().contains("not valid JSON"));
    }

    #[test]
    fn result_text_joins_blocks_and_falls_back_to_structured_content() {
        let r = json!({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "AA", "mimeType": "image/png"}]});
        let t = result_text(&r);
        assert!(t.starts_with("a\n{"), "{t}");
        assert!(t.contains("image/png"), "{t}");
        assert_eq!(
            result_text(&json!({"content": [], "structuredContent": {"n": 1}})),
            "{\"n\":1}"
        );
        assert_eq!(result_text(&json!({})), "");
    }
}
