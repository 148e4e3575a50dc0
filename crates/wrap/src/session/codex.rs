//! The Codex CLI's rollout: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, one
//! `{"timestamp", "type", "payload"}` object per line. The first line is the
//! `session_meta`; the tool calls are `response_item` lines whose payload is a
//! `function_call` (`name`, `arguments` as a JSON string, `call_id`), a
//! `custom_tool_call` (`name`, `input`, `call_id`) or a `local_shell_call` (`action`,
//! `call_id`), each answered by a `function_call_output` or `custom_tool_call_output`
//! (`call_id`, `output`: text, or a list of content items) with the same `call_id`.

use std::collections::HashMap;

use serde_json::Value;

use super::{LoggedCall, arguments_of, millis_between};

/// Whether the lines are a rollout: a `session_meta` line among the first few, and
/// every object shaped `{"type", "payload"}`.
pub fn looks_like(lines: &[Value]) -> bool {
    let meta = lines
        .iter()
        .take(4)
        .any(|l| l["type"] == "session_meta" && l["payload"].is_object());
    meta && lines
        .iter()
        .all(|l| l["type"].is_string() && !l["payload"].is_null())
}

/// The tool calls of a rollout, in the order they were asked for, each with its output.
pub fn calls(lines: &[Value]) -> Vec<LoggedCall> {
    let mut calls: Vec<(LoggedCall, Option<String>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for line in lines.iter().filter(|l| l["type"] == "response_item") {
        let p = &line["payload"];
        let ts = line["timestamp"].as_str().map(str::to_owned);
        let Some(call_id) = p["call_id"].as_str() else {
            continue;
        };
        match p["type"].as_str().unwrap_or("") {
            kind @ ("function_call" | "custom_tool_call" | "local_shell_call") => {
                let (name, arguments) = match kind {
                    "function_call" => (
                        p["name"].as_str().unwrap_or("").to_owned(),
                        p["arguments"]
                            .as_str()
                            .map_or_else(|| p["arguments"].clone(), arguments_of),
                    ),
                    "custom_tool_call" => (
                        p["name"].as_str().unwrap_or("").to_owned(),
                        p["input"].clone(),
                    ),
                    _ => ("local_shell".to_owned(), p["action"].clone()),
                };
                if index.contains_key(call_id) {
                    continue;
                }
                index.insert(call_id.to_owned(), calls.len());
                calls.push((
                    LoggedCall {
                        call_id: call_id.to_owned(),
                        name,
                        arguments,
                        result: Value::Null,
                        ok: false,
                        duration_ms: 0,
                    },
                    ts,
                ));
            }
            "function_call_output" | "custom_tool_call_output" => {
                let Some(&i) = index.get(call_id) else {
                    continue;
                };
                let (call, asked_at) = &mut calls[i];
                let (result, ok) = output(&p["output"]);
                call.result = result;
                call.ok = ok;
                call.duration_ms = millis_between(asked_at.as_deref(), ts.as_deref());
            }
            _ => {}
        }
    }
    calls.into_iter().map(|(c, _)| c).collect()
}

/// An output as the model was given it, and whether the program called the call a
/// success: text as it is, content items as their text joined (other items kept as
/// JSON), an object with `content`/`success` read as such.
fn output(o: &Value) -> (Value, bool) {
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
