//! The Responses request body, built from the provider-neutral history: `input` items,
//! tools, settings and `store`.

use serde_json::{Map, Value, json};

use super::API_TAG;
use crate::types::{Message, ModelRequest, ToolChoice};
use crate::wire::strip_extension_keys;

/// Builds the Responses request body for `model`: the history as `input` items
/// (`function_call` and `function_call_output` keyed by `call_id`, reasoning items sent
/// back before the calls they led to), tools, settings, and `store`. Without `store`,
/// `include: ["reasoning.encrypted_content"]` asks for reasoning that can be sent back.
/// `max_tokens` goes as `max_output_tokens` and a reasoning effort as `reasoning.effort`;
/// stop sequences, the seed, the penalties and a thinking budget have no Responses field
/// and are not sent.
pub(crate) fn build_request_body(
    model: &str,
    request: &ModelRequest,
    stream: bool,
    store: bool,
) -> Value {
    let s = &request.settings;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let mut input = Vec::new();
    for m in &request.messages {
        match m {
            Message::System { content } => {
                input.push(json!({"role": "system", "content": content}));
            }
            Message::User { content } => {
                input.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant {
                text,
                tool_calls,
                provider_items,
            } => {
                let items: Vec<&Value> = provider_items
                    .iter()
                    .filter(|p| p.api == API_TAG)
                    .map(|p| &p.item)
                    .collect();
                input.extend(items.iter().map(|i| (*i).clone()));
                // The answer text goes back as the message item it came in, when kept.
                let kept_message = items.iter().any(|i| i["type"] == "message");
                if let Some(t) = text.as_deref().filter(|t| !t.is_empty() && !kept_message) {
                    input.push(json!({"role": "assistant", "content": t}));
                }
                for c in tool_calls {
                    input.push(json!({
                        "type": "function_call", "call_id": c.id, "name": c.name,
                        "arguments": c.arguments,
                    }));
                }
            }
            Message::Tool {
                call_id, content, ..
            } => {
                input.push(
                    json!({"type": "function_call_output", "call_id": call_id, "output": content}),
                );
            }
        }
    }
    body.insert("input".into(), Value::Array(input));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": strip_extension_keys(&t.parameters)})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &s.tool_choice {
            let v = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool { name } => json!({"type": "function", "name": name}),
            };
            body.insert("tool_choice".into(), v);
        }
        if let Some(p) = s.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(p));
        }
    }
    if let Some(v) = s.max_tokens {
        body.insert("max_output_tokens".into(), json!(v));
    }
    if let Some(v) = s.temperature {
        body.insert("temperature".into(), json!(v));
    }
    if let Some(v) = s.top_p {
        body.insert("top_p".into(), json!(v));
    }
    if let Some(effort) = &s.reasoning_effort {
        body.insert("reasoning".into(), json!({"effort": effort}));
    }
    body.insert("store".into(), json!(store));
    if !store {
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    crate::wire::merge_extra(&mut body, &s.extra);
    Value::Object(body)
}
