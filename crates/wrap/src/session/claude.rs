//! Claude Code's session: `~/.claude/projects/<cwd-slug>/<session>.jsonl`, one object per
//! line. Conversation lines have a `type` (`user`, `assistant`, …), a `sessionId`, a
//! `timestamp` and a `message` in the Messages API's shape: an `assistant` message's
//! `tool_use` blocks (`id`, `name`, `input`) are the calls, and a later `user` message's
//! `tool_result` blocks (`tool_use_id`, `content`, `is_error`) their results. Other lines
//! (queue operations, attachments, summaries) are left alone.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::LoggedCall;
use super::lines::{self, Line, RawArguments, RawCall, Read};
use super::millis_between;

/// Whether the lines are a Claude Code session: some `user` or `assistant` line with a
/// `message` object and a `sessionId`, and no rollout `session_meta`.
pub fn looks_like(_path: &Path, lines: &[Value]) -> bool {
    let texts: Vec<String> = lines.iter().map(Value::to_string).collect();
    let mut d = Detect::default();
    for t in &texts {
        d.line(&lines::read(t.as_bytes()));
    }
    d.matches()
}

/// The tool calls of a session, in the order they were asked for, each with its result.
pub fn calls(lines: &[Value]) -> Vec<LoggedCall> {
    let texts: Vec<String> = lines.iter().map(Value::to_string).collect();
    let mut c = Collector::new(usize::MAX);
    for t in &texts {
        if let Read::Object(l) = lines::read(t.as_bytes()) {
            c.line(&l);
        }
    }
    c.calls.into_iter().map(|r| r.into_logged().0).collect()
}

/// Whether a log is a Claude Code session, judged one JSON line at a time.
#[derive(Debug, Default)]
pub(crate) struct Detect {
    conversation: bool,
    rollout: bool,
}

impl Detect {
    pub(crate) fn line(&mut self, read: &Read<'_>) {
        let Read::Object(l) = read else { return };
        let kind = lines::string(l.kind);
        if matches!(kind.as_deref(), Some("user" | "assistant"))
            && lines::object(l.message)
            && lines::string(l.session_id).is_some()
        {
            self.conversation = true;
        }
        self.rollout |= kind.as_deref() == Some("session_meta");
    }

    pub(crate) fn matches(&self) -> bool {
        self.conversation && !self.rollout
    }
}

/// A `message`, raw.
#[derive(Debug, Default, Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// A content block, raw.
#[derive(Debug, Default, Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_use_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    is_error: Option<&'a RawValue>,
}

/// `raw` owned, `null` when absent.
fn owned(raw: Option<&RawValue>) -> Box<RawValue> {
    raw.map_or_else(
        || RawValue::from_string("null".to_owned()).expect("null is JSON"),
        RawValue::to_owned,
    )
}

/// The calls of a session, collected one line at a time: at most `room` of them, the
/// rest counted in `left_out`.
#[derive(Debug)]
pub(crate) struct Collector {
    pub(crate) calls: Vec<RawCall>,
    index: HashMap<String, usize>,
    room: usize,
    pub(crate) left_out: u64,
}

impl Collector {
    pub(crate) fn new(room: usize) -> Self {
        Collector {
            calls: Vec::new(),
            index: HashMap::new(),
            room,
            left_out: 0,
        }
    }

    pub(crate) fn line(&mut self, line: &Line<'_>) {
        let kind = lines::string(line.kind);
        let assistant = match kind.as_deref() {
            Some("assistant") => true,
            Some("user") => false,
            _ => return,
        };
        let Some(message) = lines::shaped::<Message<'_>>(line.message) else {
            return;
        };
        let ts = lines::string(line.timestamp).map(|t| t.into_owned());
        lines::each_element(message.content, |raw| {
            let Some(b) = lines::shaped::<Block<'_>>(Some(raw)) else {
                return;
            };
            let block = lines::string(b.kind);
            if assistant && block.as_deref() == Some("tool_use") {
                let Some(id) = lines::string(b.id) else {
                    return;
                };
                if self.index.contains_key(id.as_ref()) {
                    return;
                }
                if self.calls.len() >= self.room {
                    self.left_out += 1;
                    return;
                }
                self.index.insert(id.clone().into_owned(), self.calls.len());
                self.calls.push(RawCall {
                    call_id: id.into_owned(),
                    name: lines::string(b.name).unwrap_or_default().into_owned(),
                    arguments: RawArguments::Value(owned(b.input)),
                    result: None,
                    read_result: |v, is_error| (content(v), !is_error.unwrap_or(false)),
                    is_error: None,
                    asked_at: ts.clone(),
                    duration_ms: 0,
                });
            } else if !assistant && block.as_deref() == Some("tool_result") {
                let Some(&i) =
                    lines::string(b.tool_use_id).and_then(|id| self.index.get(id.as_ref()))
                else {
                    return;
                };
                let call = &mut self.calls[i];
                call.result = Some(owned(b.content));
                call.is_error = Some(b.is_error.is_some_and(|e| e.get() == "true"));
                call.duration_ms = millis_between(call.asked_at.as_deref(), ts.as_deref());
            }
        });
    }
}

/// A `tool_result`'s content as the model was given it: text as it is, a list of text
/// blocks as their text joined, anything else as JSON. A result with no content is the
/// empty text.
pub(crate) fn content(c: &Value) -> Value {
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
