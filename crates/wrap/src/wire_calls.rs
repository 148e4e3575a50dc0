//! Tool calls seen on the wire: for every wrapped program, whatever it logs, the calls
//! its model asked for (each response's tool calls, as the wire parser reads them) and
//! the results it sent back (each later request's tool results — Chat Completions `tool`
//! messages, Responses `*_output` items, Anthropic `tool_result` blocks — matched by call
//! id). Recorded as `tool_call_seen` events once the program has ended.

use provrun_evidence::ToolCallSeen;
use provrun_model::{ModelResponse, WireApi};
use serde_json::Value;

/// How much of a call's arguments or result text is kept in its event.
const KEPT_BYTES: usize = 4096;

/// One call a response asked for.
#[derive(Debug, Clone)]
struct Asked {
    step: u64,
    n: usize,
    call_id: String,
    name: String,
    arguments: String,
}

/// A result a request carried.
#[derive(Debug, Clone)]
struct Answer {
    step: u64,
    text: String,
    error: Option<bool>,
}

/// What the wire showed of tool calls, step by step.
#[derive(Debug, Default)]
pub(crate) struct WireCalls {
    asked: Vec<Asked>,
    answers: Vec<(String, Answer)>,
}

impl WireCalls {
    /// Takes in model request `step` (from 1): the results its `request` body carries
    /// (in `wire`'s format), and the calls its parsed `response` asks for.
    pub(crate) fn observe(
        &mut self,
        step: u64,
        wire: WireApi,
        request: &[u8],
        response: Option<&ModelResponse>,
    ) {
        if let Ok(body) = serde_json::from_slice::<Value>(request) {
            for (call_id, text, error) in results_in(wire, &body) {
                self.answers.push((call_id, Answer { step, text, error }));
            }
        }
        let Some(r) = response else { return };
        let mut n = 0;
        for c in &r.tool_calls {
            n += 1;
            self.asked.push(Asked {
                step,
                n,
                call_id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            });
        }
        for p in &r.provider_tool_calls {
            if let Some(id) = p.details.get("call_id").and_then(Value::as_str) {
                n += 1;
                let name = p
                    .details
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(&p.kind)
                    .to_owned();
                let arguments = p.arguments.clone().unwrap_or_else(|| {
                    let d = &p.details;
                    let v = d.get("input").or(d.get("action")).unwrap_or(d);
                    match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    }
                });
                self.asked.push(Asked {
                    step,
                    n,
                    call_id: id.to_owned(),
                    name,
                    arguments,
                });
            }
        }
    }

    /// The events: each asked call with the first result a later request carried for it.
    pub(crate) fn events(&self) -> Vec<ToolCallSeen> {
        self.asked
            .iter()
            .map(|a| {
                let answer = self
                    .answers
                    .iter()
                    .find(|(id, ans)| *id == a.call_id && ans.step > a.step)
                    .map(|(_, ans)| ans);
                ToolCallSeen {
                    run_call_id: format!("{}.{}", a.step, a.n),
                    call_id: a.call_id.clone(),
                    name: a.name.clone(),
                    arguments: cut(&a.arguments).to_owned(),
                    arguments_size: a.arguments.len() as u64,
                    answered_in: answer.map(|ans| ans.step),
                    result: answer.map(|ans| cut(&ans.text).to_owned()),
                    result_size: answer.map(|ans| ans.text.len() as u64),
                    result_error: answer.and_then(|ans| ans.error),
                }
            })
            .collect()
    }
}

fn cut(text: &str) -> &str {
    if text.len() <= KEPT_BYTES {
        return text;
    }
    let mut end = KEPT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The text of a result's content: a string as itself, text parts joined, anything else
/// as JSON.
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            if texts.len() == parts.len() {
                texts.join("")
            } else {
                v.to_string()
            }
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Every tool result a request body of `wire` carries: call id, text, and the error mark
/// when the format has one.
fn results_in(wire: WireApi, body: &Value) -> Vec<(String, String, Option<bool>)> {
    let mut out = Vec::new();
    let items = |key: &str| body.get(key).and_then(Value::as_array).cloned();
    match wire {
        WireApi::AnthropicMessages => {
            for m in items("messages").unwrap_or_default() {
                for b in m
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if b.get("type").and_then(Value::as_str) == Some("tool_result")
                        && let Some(id) = b.get("tool_use_id").and_then(Value::as_str)
                    {
                        out.push((
                            id.to_owned(),
                            content_text(b.get("content").unwrap_or(&Value::Null)),
                            b.get("is_error").and_then(Value::as_bool),
                        ));
                    }
                }
            }
        }
        WireApi::OpenAiResponses => {
            for i in items("input").unwrap_or_default() {
                let kind = i.get("type").and_then(Value::as_str).unwrap_or("");
                if kind.ends_with("_output")
                    && let Some(id) = i.get("call_id").and_then(Value::as_str)
                {
                    out.push((
                        id.to_owned(),
                        content_text(i.get("output").unwrap_or(&Value::Null)),
                        None,
                    ));
                }
            }
        }
        _ => {
            for m in items("messages").unwrap_or_default() {
                if m.get("role").and_then(Value::as_str) == Some("tool")
                    && let Some(id) = m.get("tool_call_id").and_then(Value::as_str)
                {
                    out.push((
                        id.to_owned(),
                        content_text(m.get("content").unwrap_or(&Value::Null)),
                        None,
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_are_read_in_each_format() {
        let chat = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c1", "content": "42"}]});
        assert_eq!(
            results_in(WireApi::ChatCompletions, &chat),
            [("c1".to_owned(), "42".to_owned(), None)]
        );
        let responses = json!({"input": [
            {"type": "function_call_output", "call_id": "c2", "output": "ok"},
            {"type": "custom_tool_call_output", "call_id": "c3", "output": [{"type": "input_text", "text": "done"}]}]});
        assert_eq!(
            results_in(WireApi::OpenAiResponses, &responses),
            [
                ("c2".to_owned(), "ok".to_owned(), None),
                ("c3".to_owned(), "done".to_owned(), None)
            ]
        );
        let anthropic = json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "x"}], "is_error": true}]}]});
        assert_eq!(
            results_in(WireApi::AnthropicMessages, &anthropic),
            [("t1".to_owned(), "x".to_owned(), Some(true))]
        );
    }
}
