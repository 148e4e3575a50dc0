//! Message contents in the GenAI conventions' shape (`gen_ai.input.messages`,
//! `gen_ai.output.messages`, `gen_ai.system_instructions`): a list of `{role, parts}`,
//! each part `text`, `reasoning`, `tool_call` or `tool_call_response`. The input is read
//! from the request body as each API writes it (Chat Completions `messages`, Anthropic
//! `system` and `messages` with content blocks, Responses `instructions` and `input`
//! items); the output from the response as the model crate's wire parser reads it.

use provrun_model::{ModelResponse, WireApi};
use serde_json::{Map, Value, json};

/// The system instructions and the messages of a request body of `api`.
pub(crate) fn input_messages(api: WireApi, request: &Value) -> (Option<Value>, Vec<Value>) {
    let mut out = Messages::default();
    match api {
        WireApi::AnthropicMessages => {
            let system = request.get("system").map(text_parts);
            for m in array(request, "messages") {
                let role = str_of(m, "role").unwrap_or("user");
                for part in anthropic_parts(m.get("content")) {
                    let role = if part["type"] == "tool_call_response" {
                        "tool"
                    } else {
                        role
                    };
                    out.push(role, part);
                }
            }
            (system.filter(|s| !s.is_empty()).map(Value::Array), out.0)
        }
        WireApi::OpenAiResponses => {
            let system = str_of(request, "instructions").map(|t| vec![text(t)]);
            match request.get("input") {
                Some(Value::String(t)) => out.push("user", text(t)),
                Some(Value::Array(items)) => items.iter().for_each(|i| responses_item(&mut out, i)),
                _ => {}
            }
            (system.map(Value::Array), out.0)
        }
        _ => {
            let mut system = Vec::new();
            for m in array(request, "messages") {
                let role = str_of(m, "role").unwrap_or("user");
                if role == "system" || role == "developer" {
                    system.extend(m.get("content").map(text_parts).unwrap_or_default());
                    continue;
                }
                chat_message(&mut out, role, m);
            }
            (
                Some(system).filter(|s| !s.is_empty()).map(Value::Array),
                out.0,
            )
        }
    }
}

/// The model's turn as an output message: reasoning, text and tool calls, with the
/// finish reason in the conventions' words.
pub(crate) fn output_messages(response: &ModelResponse) -> Vec<Value> {
    let mut parts = Vec::new();
    if let Some(r) = response.reasoning.as_deref().filter(|r| !r.is_empty()) {
        parts.push(json!({"type": "reasoning", "content": r}));
    }
    if let Some(t) = response.text.as_deref().filter(|t| !t.is_empty()) {
        parts.push(text(t));
    }
    for call in &response.tool_calls {
        parts.push(tool_call(&call.id, &call.name, arguments(&call.arguments)));
    }
    if parts.is_empty() {
        return Vec::new();
    }
    let reason = response
        .finish_reason
        .as_ref()
        .map_or("stop", |r| finish_reason(r.as_str()));
    vec![json!({"role": "assistant", "parts": parts, "finish_reason": reason})]
}

/// A provider's finish reason as the conventions name it (`stop`, `length`,
/// `content_filter`, `tool_call`, `error`); others as they are.
pub(crate) fn finish_reason(reason: &str) -> &str {
    match reason {
        "stop" | "end_turn" | "stop_sequence" | "completed" => "stop",
        "length" | "max_tokens" | "max_output_tokens" | "incomplete" => "length",
        "tool_calls" | "tool_use" | "function_call" => "tool_call",
        "content_filter" | "refusal" => "content_filter",
        other => other,
    }
}

/// Messages built part by part: consecutive parts of one role make one message.
#[derive(Default)]
struct Messages(Vec<Value>);

impl Messages {
    fn push(&mut self, role: &str, part: Value) {
        if let Some(last) = self.0.last_mut()
            && last["role"] == role
            && let Some(parts) = last["parts"].as_array_mut()
        {
            parts.push(part);
            return;
        }
        self.0.push(json!({"role": role, "parts": [part]}));
    }
}

fn array<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn text(t: &str) -> Value {
    json!({"type": "text", "content": t})
}

fn tool_call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments})
}

fn tool_response(id: &str, response: Value) -> Value {
    json!({"type": "tool_call_response", "id": id, "response": response})
}

/// Tool arguments as JSON when they are, else as the text they are.
fn arguments(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// Content that is a string or a list of typed parts, as text parts (other parts keep
/// their type, their content left out).
fn text_parts(content: &Value) -> Vec<Value> {
    match content {
        Value::String(t) => vec![text(t)],
        Value::Array(parts) => parts.iter().map(generic_part).collect(),
        _ => Vec::new(),
    }
}

fn generic_part(part: &Value) -> Value {
    if let Some(t) = str_of(part, "text") {
        return text(t);
    }
    match str_of(part, "type") {
        Some(kind) => json!({"type": kind}),
        None => text(&part.to_string()),
    }
}

/// Anthropic content: a string, or blocks (`text`, `thinking`, `tool_use`,
/// `tool_result`, images and documents by type).
fn anthropic_parts(content: Option<&Value>) -> Vec<Value> {
    let Some(Value::Array(blocks)) = content else {
        return content.map(text_parts).unwrap_or_default();
    };
    blocks
        .iter()
        .map(|b| match str_of(b, "type") {
            Some("thinking") => {
                json!({"type": "reasoning", "content": str_of(b, "thinking").unwrap_or_default()})
            }
            Some("redacted_thinking") => json!({"type": "reasoning", "content": ""}),
            Some("tool_use") => tool_call(
                str_of(b, "id").unwrap_or_default(),
                str_of(b, "name").unwrap_or_default(),
                b.get("input").cloned().unwrap_or(Value::Null),
            ),
            Some("tool_result") => {
                let result = match b.get("content") {
                    Some(Value::Array(parts)) => Value::String(
                        parts
                            .iter()
                            .filter_map(|p| str_of(p, "text"))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    ),
                    Some(other) => other.clone(),
                    None => Value::Null,
                };
                tool_response(str_of(b, "tool_use_id").unwrap_or_default(), result)
            }
            _ => generic_part(b),
        })
        .collect()
}

/// One Responses `input` item: a message (content a string or `input_text` /
/// `output_text` parts), a function call or its output, or a reasoning item.
fn responses_item(out: &mut Messages, item: &Value) {
    match str_of(item, "type").unwrap_or("message") {
        "message" => {
            let role = str_of(item, "role").unwrap_or("user");
            let role = if role == "developer" { "system" } else { role };
            for part in item.get("content").map(text_parts).unwrap_or_default() {
                out.push(role, part);
            }
        }
        "function_call" => out.push(
            "assistant",
            tool_call(
                str_of(item, "call_id").unwrap_or_default(),
                str_of(item, "name").unwrap_or_default(),
                arguments(str_of(item, "arguments").unwrap_or_default()),
            ),
        ),
        "function_call_output" => out.push(
            "tool",
            tool_response(
                str_of(item, "call_id").unwrap_or_default(),
                item.get("output").cloned().unwrap_or(Value::Null),
            ),
        ),
        "reasoning" => {
            let summary: Vec<&str> = array(item, "summary")
                .filter_map(|s| str_of(s, "text"))
                .collect();
            out.push(
                "assistant",
                json!({"type": "reasoning", "content": summary.join("\n")}),
            );
        }
        other => out.push("user", json!({"type": other})),
    }
}

/// One Chat Completions message: its content, tool calls, or a tool's result.
fn chat_message(out: &mut Messages, role: &str, m: &Value) {
    if role == "tool" {
        let content = m.get("content").cloned().unwrap_or(Value::Null);
        out.push(
            "tool",
            tool_response(str_of(m, "tool_call_id").unwrap_or_default(), content),
        );
        return;
    }
    if let Some(r) = str_of(m, "reasoning_content").filter(|r| !r.is_empty()) {
        out.push(role, json!({"type": "reasoning", "content": r}));
    }
    for part in m.get("content").map(text_parts).unwrap_or_default() {
        out.push(role, part);
    }
    for call in array(m, "tool_calls") {
        let f = call
            .get("function")
            .cloned()
            .unwrap_or(Value::Object(Map::new()));
        out.push(
            role,
            tool_call(
                str_of(call, "id").unwrap_or_default(),
                str_of(&f, "name").unwrap_or_default(),
                arguments(str_of(&f, "arguments").unwrap_or_default()),
            ),
        );
    }
}
