//! Claude Code's session: `~/.claude/projects/<cwd-slug>/<session>.jsonl`, one object per
//! line. Conversation lines have a `type` (`user`, `assistant`, …), a `sessionId`, a
//! `timestamp` and a `message` in the Messages API's shape: an `assistant` message's
//! `tool_use` blocks (`id`, `name`, `input`) are the calls, and a later `user` message's
//! `tool_result` blocks (`tool_use_id`, `content`, `is_error`) their results. Other lines
//! (queue operations, attachments, summaries) are left alone.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::{LoggedCall, millis_between};

/// Whether the lines are a Claude Code session: some `user` or `assistant` line with a
/// `message` object and a `sessionId`, and no rollout `session_meta`.
pub fn looks_like(_path: &Path, lines: &[Value]) -> bool {
    lines.iter().any(|l| {
        matches!(l["type"].as_str(), Some("user" | "assistant"))
            && l["message"].is_object()
            && l["sessionId"].is_string()
    }) && !lines.iter().any(|l| l["type"] == "session_meta")
}

/// The tool calls of a session, in the order they were asked for, each with its result.
pub fn calls(lines: &[Value]) -> Vec<LoggedCall> {
    let mut calls: Vec<(LoggedCall, Option<String>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for line in lines {
        let ts = line["timestamp"].as_str().map(str::to_owned);
        let Some(blocks) = line["message"]["content"].as_array() else {
            continue;
        };
        match line["type"].as_str() {
            Some("assistant") => {
                for b in blocks.iter().filter(|b| b["type"] == "tool_use") {
                    let Some(id) = b["id"].as_str() else { continue };
                    if index.contains_key(id) {
                        continue;
                    }
                    index.insert(id.to_owned(), calls.len());
                    calls.push((
                        LoggedCall {
                            call_id: id.to_owned(),
                            name: b["name"].as_str().unwrap_or("").to_owned(),
                            arguments: b["input"].clone(),
                            result: Value::Null,
                            ok: false,
                            duration_ms: 0,
                        },
                        ts.clone(),
                    ));
                }
            }
            Some("user") => {
                for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                    let Some(&i) = b["tool_use_id"].as_str().and_then(|id| index.get(id)) else {
                        continue;
                    };
                    let (call, asked_at) = &mut calls[i];
                    call.result = content(&b["content"]);
                    call.ok = !b["is_error"].as_bool().unwrap_or(false);
                    call.duration_ms = millis_between(asked_at.as_deref(), ts.as_deref());
                }
            }
            _ => {}
        }
    }
    calls.into_iter().map(|(c, _)| c).collect()
}

/// A `tool_result`'s content as the model was given it: text as it is, a list of text
/// blocks as their text joined, anything else as JSON. A result with no content is the
/// empty text.
fn content(c: &Value) -> Value {
    match c {
        Value::String(_) => c.clone(),
        Value::Null => Value::String(String::new()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect();
            if texts.len() == blocks.len() {
                Value::String(texts.join("\n"))
            } else {
                c.clone()
            }
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_session_is_recognised_and_its_calls_paired_with_their_results() {
        let lines = vec![
            json!({"type": "queue-operation", "operation": "enqueue", "sessionId": "s"}),
            json!({"type": "user", "sessionId": "s", "timestamp": "2026-12-05T09:17:43.000Z",
                   "message": {"role": "user", "content": "uppercase the notes"}}),
            json!({"type": "assistant", "sessionId": "s", "timestamp": "2026-12-05T09:17:43.266Z",
                   "message": {"role": "assistant", "content": [
                       {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/input/notes.txt"}}]}}),
            json!({"type": "user", "sessionId": "s", "timestamp": "2026-12-05T09:17:43.319Z",
                   "message": {"role": "user", "content": [
                       {"tool_use_id": "toolu_1", "type": "tool_result", "content": "1\thello"}]}}),
            json!({"type": "assistant", "sessionId": "s", "timestamp": "2026-12-05T09:17:44.000Z",
                   "message": {"role": "assistant", "content": [
                       {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "false"}}]}}),
            json!({"type": "user", "sessionId": "s", "timestamp": "2026-12-05T09:17:44.100Z",
                   "message": {"role": "user", "content": [
                       {"tool_use_id": "toolu_2", "type": "tool_result", "is_error": true,
                        "content": [{"type": "text", "text": "Exit code 1"}]}]}}),
        ];
        assert!(looks_like(Path::new("x.jsonl"), &lines));
        assert!(!looks_like(Path::new("x.jsonl"), &lines[..1]));
        let calls = calls(&lines);
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].name.as_str(), calls[0].call_id.as_str()),
            ("Read", "toolu_1")
        );
        assert_eq!(calls[0].arguments, json!({"file_path": "/input/notes.txt"}));
        assert_eq!(calls[0].result, json!("1\thello"));
        assert!(calls[0].ok);
        assert_eq!(calls[0].duration_ms, 53);
        assert_eq!(calls[1].result, json!("Exit code 1"));
        assert!(!calls[1].ok);
    }
}
