//! The Codex CLI's rollout: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, one
//! `{"timestamp", "type", "payload"}` object per line. The first line is the
//! `session_meta`; the tool calls are `response_item` lines whose payload is a
//! `function_call` (`name`, `arguments` as a JSON string, `call_id`), a
//! `custom_tool_call` (`name`, `input`, `call_id`) or a `local_shell_call` (`action`,
//! `call_id`), each answered by a `function_call_output` or `custom_tool_call_output`
//! (`call_id`, `output`: text, or a list of content items) with the same `call_id`.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::LoggedCall;
use super::lines::{self, Line, RawArguments, RawCall, Read};
use super::millis_between;

/// Whether the lines are a rollout: a `session_meta` line among the first few, and
/// every object shaped `{"type", "payload"}`.
pub fn looks_like(lines: &[Value]) -> bool {
    let texts: Vec<String> = lines.iter().map(Value::to_string).collect();
    let mut d = Detect::default();
    for t in &texts {
        d.line(&lines::read(t.as_bytes()));
    }
    d.matches()
}

/// The tool calls of a rollout, in the order they were asked for, each with its output.
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

/// Whether a log is a rollout, judged one JSON line at a time (lines that are not JSON
/// are not judged).
#[derive(Debug)]
pub(crate) struct Detect {
    seen: usize,
    meta: bool,
    shaped: bool,
}

impl Default for Detect {
    fn default() -> Self {
        Detect {
            seen: 0,
            meta: false,
            shaped: true,
        }
    }
}

impl Detect {
    pub(crate) fn line(&mut self, read: &Read<'_>) {
        let l = match read {
            Read::Object(l) => Some(l),
            Read::Other => None,
            Read::Unreadable | Read::TooDeep => return,
        };
        let kind = l.and_then(|l| lines::string(l.kind));
        if self.seen < 4
            && kind.as_deref() == Some("session_meta")
            && lines::object(l.and_then(|l| l.payload))
        {
            self.meta = true;
        }
        self.shaped &= kind.is_some() && lines::present(l.and_then(|l| l.payload));
        self.seen += 1;
    }

    pub(crate) fn matches(&self) -> bool {
        self.meta && self.shaped
    }
}

/// A `response_item`'s payload, raw.
#[derive(Debug, Default, Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    call_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    action: Option<&'a RawValue>,
    #[serde(borrow, default)]
    output: Option<&'a RawValue>,
}

/// `raw` owned, `null` when absent.
fn owned(raw: Option<&RawValue>) -> Box<RawValue> {
    raw.map_or_else(
        || RawValue::from_string("null".to_owned()).expect("null is JSON"),
        RawValue::to_owned,
    )
}

/// The calls of a rollout, collected one line at a time: at most `room` of them, the
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
        if lines::string(line.kind).as_deref() != Some("response_item") {
            return;
        }
        let Some(p) = lines::shaped::<Item<'_>>(line.payload) else {
            return;
        };
        let Some(call_id) = lines::string(p.call_id) else {
            return;
        };
        let ts = lines::string(line.timestamp).map(|t| t.into_owned());
        match lines::string(p.kind).as_deref().unwrap_or("") {
            kind @ ("function_call" | "custom_tool_call" | "local_shell_call") => {
                if self.index.contains_key(call_id.as_ref()) {
                    return;
                }
                if self.calls.len() >= self.room {
                    self.left_out += 1;
                    return;
                }
                let name = |n: Option<&RawValue>| lines::string(n).unwrap_or_default().into_owned();
                let (name, arguments) = match kind {
                    "function_call" => (
                        name(p.name),
                        match lines::string(p.arguments) {
                            Some(text) => RawArguments::JsonText(text.into_owned()),
                            None => RawArguments::Value(owned(p.arguments)),
                        },
                    ),
                    "custom_tool_call" => (name(p.name), RawArguments::Value(owned(p.input))),
                    _ => (
                        "local_shell".to_owned(),
                        RawArguments::Value(owned(p.action)),
                    ),
                };
                self.index
                    .insert(call_id.clone().into_owned(), self.calls.len());
                self.calls.push(RawCall {
                    call_id: call_id.into_owned(),
                    name,
                    arguments,
                    result: None,
                    read_result: |v, _| output(v),
                    is_error: None,
                    asked_at: ts,
                    duration_ms: 0,
                });
            }
            "function_call_output" | "custom_tool_call_output" => {
                let Some(&i) = self.index.get(call_id.as_ref()) else {
                    return;
                };
                let call = &mut self.calls[i];
                call.result = Some(owned(p.output));
                call.duration_ms = millis_between(call.asked_at.as_deref(), ts.as_deref());
            }
            _ => {}
        }
    }
}

/// An output as the model was given it, and whether the program called the call a
/// success: text as it is, content items as their text joined (other items kept as
/// JSON), an object with `content`/`success` read as such.
pub(crate) fn output(o: &Value) -> (Value, bool) {
    match o {
        Value::String(s) => (Value::String(s.clone()), true),
        Value::Array(items) => {
            let texts: Vec<&str> = items.iter().filter_map(|i| i["text"].as_str()).collect();
            if texts.len() == items.len() {
                (Value::String(texts.join("\n")), true)
            } else {
                (o.clone(), true)
            }
        }
        Value::Object(m) => {
            let ok = m.get("success").and_then(Value::as_bool).unwrap_or(true);
            match m.get("content") {
                Some(c) => (output(c).0, ok),
                None => (o.clone(), ok),
            }
        }
        Value::Null => (Value::Null, false),
        other => (other.clone(), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout() -> Vec<Value> {
        vec![
            json!({"timestamp": "2026-12-05T09:17:27.300Z", "type": "session_meta", "payload": {"id": "s"}}),
            json!({"timestamp": "2026-12-05T09:17:27.447Z", "type": "response_item",
                   "payload": {"type": "function_call", "name": "exec_command",
                               "arguments": "{\"cmd\": \"cat /input/notes.txt\"}", "call_id": "call_1"}}),
            json!({"timestamp": "2026-12-05T09:17:27.460Z", "type": "event_msg", "payload": {"type": "exec_command_begin"}}),
            json!({"timestamp": "2026-12-05T09:17:27.511Z", "type": "response_item",
                   "payload": {"type": "function_call_output", "call_id": "call_1", "output": "Process exited with code 0\n"}}),
            json!({"timestamp": "2026-12-05T09:17:28.000Z", "type": "response_item",
                   "payload": {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "call_2"}}),
            json!({"timestamp": "2026-12-05T09:17:28.100Z", "type": "response_item",
                   "payload": {"type": "custom_tool_call_output", "call_id": "call_2",
                               "output": [{"type": "input_text", "text": "Done"}]}}),
            json!({"timestamp": "2026-12-05T09:17:29.000Z", "type": "response_item",
                   "payload": {"type": "function_call", "name": "exec_command", "arguments": "not json", "call_id": "call_3"}}),
            json!({"type": "response_item", "payload": {"type": "function_call_output", "call_id": "unknown", "output": "x"}}),
        ]
    }

    #[test]
    fn a_rollout_is_recognised_and_its_calls_paired_with_their_outputs() {
        let lines = rollout();
        assert!(looks_like(&lines));
        assert!(!looks_like(&lines[1..]), "no session_meta");
        let calls = calls(&lines);
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].name, "exec_command");
        assert_eq!(calls[0].arguments, json!({"cmd": "cat /input/notes.txt"}));
        assert_eq!(calls[0].result, json!("Process exited with code 0\n"));
        assert!(calls[0].ok);
        assert_eq!(calls[0].duration_ms, 64);
        assert_eq!(calls[1].name, "apply_patch");
        assert_eq!(calls[1].arguments, json!("*** Begin Patch"));
        assert_eq!(calls[1].result, json!("Done"));
        assert_eq!(calls[2].arguments, json!("not json"));
        assert_eq!(calls[2].result, Value::Null);
        assert!(!calls[2].ok);
    }
}
