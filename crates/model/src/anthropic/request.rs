//! The Messages request body, built from the provider-neutral history: the system
//! prompt, the messages as content blocks, the tools and the settings.

use serde_json::{Map, Value, json};

use super::API_TAG;
use crate::types::{Message, ModelRequest, ToolChoice};
use crate::wire::strip_extension_keys;

const EPHEMERAL: fn() -> Value = || json!({"type": "ephemeral"});

/// Builds the Messages request body for `model`: system prompt, messages (tool results
/// as `tool_result` blocks in a user turn, thinking blocks sent back first in their
/// assistant turn), tools as `input_schema`, and the settings (`stop` as
/// `stop_sequences`, a thinking budget as `thinking: {"type": "enabled", "budget_tokens"}`,
/// `parallel_tool_calls = false` as `tool_choice.disable_parallel_tool_use`; the seed, the
/// penalties and a reasoning effort have no field here and are not sent). With
/// [`crate::ModelSettings::prompt_caching`], the system prompt and the last tool carry
/// `cache_control`.
pub(crate) fn build_request_body(
    model: &str,
    request: &ModelRequest,
    stream: bool,
    default_max_tokens: u32,
) -> Value {
    let s = &request.settings;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        let text = system.join("\n\n");
        let v = if s.prompt_caching {
            json!([{"type": "text", "text": text, "cache_control": EPHEMERAL()}])
        } else {
            json!(text)
        };
        body.insert("system".into(), v);
    }
    body.insert(
        "messages".into(),
        Value::Array(messages_to_wire(&request.messages)),
    );
    body.insert(
        "max_tokens".into(),
        json!(s.max_tokens.unwrap_or(default_max_tokens)),
    );
    if !request.tools.is_empty() {
        let n = request.tools.len();
        let tools: Vec<Value> = request
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut o = Map::new();
                o.insert("name".into(), json!(t.name));
                if !t.description.is_empty() {
                    o.insert("description".into(), json!(t.description));
                }
                o.insert("input_schema".into(), strip_extension_keys(&t.parameters));
                if s.prompt_caching && i + 1 == n {
                    o.insert("cache_control".into(), EPHEMERAL());
                }
                Value::Object(o)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let mut choice = match &s.tool_choice {
            Some(ToolChoice::Auto) => Some(json!({"type": "auto"})),
            Some(ToolChoice::None) => Some(json!({"type": "none"})),
            Some(ToolChoice::Required) => Some(json!({"type": "any"})),
            Some(ToolChoice::Tool { name }) => Some(json!({"type": "tool", "name": name})),
            None => None,
        };
        if s.parallel_tool_calls == Some(false) {
            let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
            if c["type"] != "none" {
                c["disable_parallel_tool_use"] = json!(true);
            }
        }
        if let Some(c) = choice {
            body.insert("tool_choice".into(), c);
        }
    }
    if let Some(v) = s.temperature {
        body.insert("temperature".into(), json!(v));
    }
    if let Some(v) = s.top_p {
        body.insert("top_p".into(), json!(v));
    }
    if !s.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(s.stop));
    }
    if let Some(budget) = s.thinking_budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    crate::wire::merge_extra(&mut body, &s.extra);
    Value::Object(body)
}

/// Tool arguments as a JSON object for `tool_use.input` (the API refuses anything else;
/// arguments that are not an object, from another provider's history, go as `{}`).
fn input_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            tracing::warn!("tool call arguments are not a JSON object; sent as {{}}");
            json!({})
        }
    }
}

fn messages_to_wire(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // Whether the last wire message is a user turn holding tool results, which a
    // following user text joins (the API wants the results first in that turn).
    let mut open_results = false;
    for m in messages {
        match m {
            Message::System { .. } => {}
            Message::User { content } => {
                let block = json!({"type": "text", "text": content});
                if open_results && let Some(last) = out.last_mut() {
                    push_block(last, block);
                } else {
                    out.push(json!({"role": "user", "content": [block]}));
                }
                open_results = false;
            }
            Message::Assistant {
                text,
                tool_calls,
                provider_items,
            } => {
                let mut content: Vec<Value> = provider_items
                    .iter()
                    .filter(|p| p.api == API_TAG)
                    .map(|p| p.item.clone())
                    .collect();
                if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                    content.push(json!({"type": "text", "text": t}));
                }
                for c in tool_calls {
                    content.push(json!({
                        "type": "tool_use", "id": c.id, "name": c.name,
                        "input": input_object(&c.arguments),
                    }));
                }
                if !content.is_empty() {
                    out.push(json!({"role": "assistant", "content": content}));
                }
                open_results = false;
            }
            Message::Tool {
                call_id,
                content,
                ok,
                ..
            } => {
                let mut block =
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                if !ok {
                    block["is_error"] = json!(true);
                }
                if open_results && let Some(last) = out.last_mut() {
                    push_block(last, block);
                } else {
                    out.push(json!({"role": "user", "content": [block]}));
                }
                open_results = true;
            }
        }
    }
    out
}

fn push_block(message: &mut Value, block: Value) {
    if let Some(a) = message.get_mut("content").and_then(Value::as_array_mut) {
        a.push(block);
    }
}
