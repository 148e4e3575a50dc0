//! The AG-UI request a run starts from ([`RunInput`], the protocol's `RunAgentInput`),
//! read with the protocol's field names and checked before anything runs: what a server
//! takes from it is the last user message, the client's tools, its tool results and its
//! resume entries. The events a run answers with are built in `events.rs`.

use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;

/// The `RunAgentInput` of AG-UI 1.0, as far as a provrun server reads it. Unknown members
/// (`state`, `context`, `forwardedProps`, `parentRunId`, `protocolVersion`) are accepted
/// and not used.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunInput {
    /// The conversation this run belongs to.
    pub thread_id: String,
    /// The client's id for this run.
    pub run_id: String,
    /// The conversation as the client holds it.
    pub messages: Vec<InputMessage>,
    /// Tools the client runs (frontend tools).
    #[serde(default)]
    pub tools: Vec<InputTool>,
    /// Answers to the interrupts the thread's last run ended with.
    #[serde(default)]
    pub resume: Vec<ResumeEntry>,
}

/// One message of the input. Only the members a server uses are read.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InputMessage {
    /// `user`, `assistant`, `tool`, `system`, `developer`, `reasoning` or `activity`.
    pub role: String,
    /// Text, or content parts (of which the `text` parts are read).
    #[serde(default)]
    pub content: Value,
    /// On a `tool` message: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// On a `tool` message: the tool failed, and why.
    #[serde(default)]
    pub error: Option<String>,
}

impl InputMessage {
    /// The message's text: a string content, or its `text` parts joined by newlines.
    pub(crate) fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
}

/// A tool the client offers (AG-UI `Tool`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct InputTool {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments; absent means none.
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// An answer to one interrupt (AG-UI `ResumeEntry`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeEntry {
    /// The interrupt answered.
    pub interrupt_id: String,
    /// `resolved` or `cancelled`.
    pub status: ResumeStatus,
    /// The answer; `{"approved": false}` denies.
    #[serde(default)]
    pub payload: Option<Value>,
}

/// Whether an interrupt was answered or abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResumeStatus {
    /// Answered: approve, unless the payload says `"approved": false`.
    Resolved,
    /// Abandoned: the call is denied.
    Cancelled,
}

impl ResumeEntry {
    /// Whether this answer approves the call: `resolved`, without `"approved": false`.
    pub(crate) fn approves(&self) -> bool {
        self.status == ResumeStatus::Resolved
            && !matches!(&self.payload, Some(p) if p.get("approved") == Some(&Value::Bool(false)))
    }

    /// What a denied call's model is told: the payload's `reason`, or a plain default.
    pub(crate) fn denial(&self) -> String {
        self.payload
            .as_ref()
            .and_then(|p| p.get("reason"))
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| match self.status {
                ResumeStatus::Cancelled => "the person cancelled this call".to_string(),
                ResumeStatus::Resolved => "the person did not approve this call".to_string(),
            })
    }
}

/// What a request body may hold at most.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InputLimits {
    /// Messages in one input.
    pub max_messages: usize,
    /// Tools in one input.
    pub max_tools: usize,
}

/// Parse and check a request body: JSON of the right shape (400 `bad_json`, `bad_input`),
/// within the limits (413 `too_many_messages`, `too_many_tools`), a safe thread id (400
/// `bad_id`).
pub(crate) fn parse(body: &[u8], limits: InputLimits) -> Result<RunInput, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("bad_json", format!("the body is not JSON: {e}")))?;
    // The counts are checked on the raw value, before the messages are read into types.
    let count = |key: &str| value.get(key).and_then(Value::as_array).map_or(0, Vec::len);
    if count("messages") > limits.max_messages {
        return Err(ApiError::too_large(
            "too_many_messages",
            format!(
                "the input holds {} messages; this server takes at most {}",
                count("messages"),
                limits.max_messages
            ),
        ));
    }
    if count("tools") > limits.max_tools {
        return Err(ApiError::too_large(
            "too_many_tools",
            format!(
                "the input offers {} tools; this server takes at most {}",
                count("tools"),
                limits.max_tools
            ),
        ));
    }
    let input: RunInput = serde_json::from_value(value).map_err(|e| {
        ApiError::bad_request(
            "bad_input",
            format!("the body is not an AG-UI RunAgentInput: {e}"),
        )
    })?;
    if provrun_store::check_id(&input.thread_id).is_err() {
        return Err(ApiError::bad_request(
            "bad_id",
            "threadId must be 1 to 128 of A-Z a-z 0-9 . _ - (not starting with . or -)",
        ));
    }
    for tool in &input.tools {
        check_tool(tool)?;
    }
    Ok(input)
}

/// A client tool needs a name a model API takes and, when given, an object schema.
fn check_tool(tool: &InputTool) -> Result<(), ApiError> {
    let name_ok = !tool.name.is_empty()
        && tool.name.len() <= 64
        && tool
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !name_ok {
        return Err(ApiError::bad_request(
            "bad_tool",
            "a tool's name must be 1 to 64 of A-Z a-z 0-9 _ -",
        ));
    }
    match &tool.parameters {
        None | Some(Value::Null) => Ok(()),
        Some(p) if p.get("type").and_then(Value::as_str) == Some("object") => Ok(()),
        Some(_) => Err(ApiError::bad_request(
            "bad_tool",
            format!(
                "tool `{}`: parameters must be a JSON Schema of type object",
                tool.name
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: InputLimits = InputLimits {
        max_messages: 3,
        max_tools: 2,
    };

    #[test]
    fn a_minimal_input_parses_and_reads_text_parts() {
        let body = br#"{"threadId":"t1","runId":"r1","messages":[
            {"id":"m1","role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]}]}"#;
        let input = parse(body, LIMITS).unwrap();
        assert_eq!(input.messages[0].text(), "a\nb");
        assert!(input.tools.is_empty() && input.resume.is_empty());
    }

    #[test]
    fn bad_bodies_get_their_own_codes() {
        let code = |body: &[u8]| parse(body, LIMITS).unwrap_err().code;
        assert_eq!(code(b"{not json"), "bad_json");
        assert_eq!(code(br#"{"threadId":"t"}"#), "bad_input");
        assert_eq!(
            code(br#"{"threadId":"../x","runId":"r","messages":[]}"#),
            "bad_id"
        );
        assert_eq!(
            code(br#"{"threadId":"t","runId":"r","messages":[1,2,3,4]}"#),
            "too_many_messages"
        );
        assert_eq!(
            code(br#"{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"a b","description":""}]}"#),
            "bad_tool"
        );
    }

    #[test]
    fn resume_entries_approve_unless_told_otherwise() {
        let entry = |json: &str| serde_json::from_str::<ResumeEntry>(json).unwrap();
        assert!(entry(r#"{"interruptId":"i","status":"resolved"}"#).approves());
        let no = entry(
            r#"{"interruptId":"i","status":"resolved","payload":{"approved":false,"reason":"no"}}"#,
        );
        assert!(!no.approves());
        assert_eq!(no.denial(), "no");
        assert!(!entry(r#"{"interruptId":"i","status":"cancelled"}"#).approves());
    }
}
