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
    /// The first request that carried it.
    step: u64,
    /// Its text, cut to [`KEPT_BYTES`].
    text: String,
    /// Its whole size.
    size: u64,
    error: Option<bool>,
}

/// What the wire showed of tool calls, step by step.
#[derive(Debug, Default)]
pub(crate) struct WireCalls {
    asked: Vec<Asked>,
    /// By call id, its results in the order the history holds them, each with the request
    /// that first carried it (a request resends the whole history: each is kept once).
    answers: std::collections::HashMap<String, Vec<Answer>>,
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
            // The k-th result for an id in a request's history is that id's k-th result: a
            // history resent with the next request adds nothing, a reused id a new one.
            let mut index: std::collections::HashMap<String, usize> =
                std::collections::HashMap::new();
            for (call_id, text, error) in results_in(wire, &body) {
                let k = index.entry(call_id.clone()).or_insert(0);
                let seen = self.answers.entry(call_id).or_default();
                if *k >= seen.len() {
                    seen.push(Answer {
                        step,
                        text: cut(&text).to_owned(),
                        size: text.len() as u64,
                        error,
                    });
                }
                *k += 1;
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
                    .get(&a.call_id)
                    .and_then(|seen| seen.iter().find(|ans| ans.step > a.step));
                ToolCallSeen {
                    run_call_id: format!("{}.{}", a.step, a.n),
                    call_id: a.call_id.clone(),
                    name: a.name.clone(),
                    arguments: cut(&a.arguments).to_owned(),
                    arguments_size: a.arguments.len() as u64,
                    answered_in: answer.map(|ans| ans.step),
                    result: answer.map(|ans| ans.text.clone()),
                    result_size: answer.map(|ans| ans.size),
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
    fn each_call_is_matched_with_the_first_later_result_and_a_resent_one_is_kept_once() {
        let mut w = WireCalls::default();
        let response = |ids: &[&str]| {
            ModelResponse::tool_calls(
                ids.iter()
                    .map(|id| provrun_model::ToolCall {
                        id: id.to_string(),
                        name: "shell".into(),
                        arguments: "{}".into(),
                    })
                    .collect(),
            )
        };
        let request = |results: &[(&str, &str)]| {
            let messages: Vec<Value> = results
                .iter()
                .map(|(id, text)| json!({"role": "tool", "tool_call_id": id, "content": text}))
                .collect();
            serde_json::to_vec(&json!({ "messages": messages })).unwrap()
        };
        let chat = WireApi::ChatCompletions;
        w.observe(1, chat, &request(&[]), Some(&response(&["call_0"])));
        // The model reuses the id; the history is resent with each request.
        w.observe(
            2,
            chat,
            &request(&[("call_0", "one")]),
            Some(&response(&["call_0"])),
        );
        w.observe(
            3,
            chat,
            &request(&[("call_0", "one"), ("call_0", "two")]),
            Some(&response(&[])),
        );
        w.observe(
            4,
            chat,
            &request(&[("call_0", "one"), ("call_0", "two")]),
            None,
        );
        assert_eq!(w.answers["call_0"].len(), 2);
        let seen = w.events();
        assert_eq!(seen.len(), 2);
        assert_eq!(
            (seen[0].run_call_id.as_str(), seen[0].answered_in),
            ("1.1", Some(2))
        );
        assert_eq!(seen[0].result.as_deref(), Some("one"));
        assert_eq!(
            (seen[1].run_call_id.as_str(), seen[1].answered_in),
            ("2.1", Some(3))
        );
        assert_eq!(seen[1].result.as_deref(), Some("two"));
    }

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
