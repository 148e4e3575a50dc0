//! Building chat-completions request bodies.

use serde_json::{Map, Value, json};

use crate::types::{Message, ModelRequest, ToolChoice};

/// Builds the chat-completions request body for `model`. `stream` adds `"stream": true`
/// and `stream_options.include_usage`. Tool schemas lose their `x-*` keywords. The
/// settings keep their names (`max_tokens`, `stop`, `seed`, the penalties,
/// `reasoning_effort`); a thinking budget has no field here and is not sent.
pub fn build_request_body(model: &str, request: &ModelRequest, stream: bool) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message_to_wire).collect();
    Value::Object(request_map(model, request, stream, Value::Array(messages)))
}

/// The request body as a map, with `messages` as its `messages` member: what
/// [`build_request_body`] builds, and (with a placeholder there) the frame the
/// incremental renderer fills in with the messages' bytes.
pub(crate) fn request_map(
    model: &str,
    request: &ModelRequest,
    stream: bool,
    messages: Value,
) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), messages);
    let s = &request.settings;
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": strip_extension_keys(&t.parameters),
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &s.tool_choice {
            let v = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool { name } => {
                    json!({"type": "function", "function": {"name": name}})
                }
            };
            body.insert("tool_choice".into(), v);
        }
        if let Some(p) = s.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(p));
        }
    }
    if let Some(v) = s.max_tokens {
        body.insert("max_tokens".into(), json!(v));
    }
    if let Some(v) = s.temperature {
        body.insert("temperature".into(), json!(v));
    }
    if let Some(v) = s.top_p {
        body.insert("top_p".into(), json!(v));
    }
    if let Some(v) = s.seed {
        body.insert("seed".into(), json!(v));
    }
    if !s.stop.is_empty() {
        body.insert("stop".into(), json!(s.stop));
    }
    if let Some(v) = s.presence_penalty {
        body.insert("presence_penalty".into(), json!(v));
    }
    if let Some(v) = s.frequency_penalty {
        body.insert("frequency_penalty".into(), json!(v));
    }
    if let Some(v) = &s.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(v));
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    crate::wire::merge_extra(&mut body, &s.extra);
    body
}

/// One message as a chat-completions `messages` element.
pub(crate) fn message_to_wire(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            text, tool_calls, ..
        } => {
            let mut o = Map::new();
            o.insert("role".into(), json!("assistant"));
            o.insert(
                "content".into(),
                match text {
                    Some(t) => json!(t),
                    None if tool_calls.is_empty() => json!(""),
                    None => Value::Null,
                },
            );
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
                o.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(o)
        }
        Message::Tool {
            call_id, content, ..
        } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
    }
}

/// Keywords whose value maps names (not keywords) to subschemas.
const NAME_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is data, not schema.
const DATA_KEYS: &[&str] = &["enum", "const", "default", "examples", "required"];

/// Returns a copy of a JSON Schema without `x-*` extension keywords, at every level of
/// subschema. Property names that start with `x-` are kept: only keywords are removed.
pub fn strip_extension_keys(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if k.starts_with("x-") {
                    continue;
                }
                let v = if NAME_MAPS.contains(&k.as_str()) {
                    match v {
                        Value::Object(names) => Value::Object(
                            names
                                .iter()
                                .map(|(n, s)| (n.clone(), strip_extension_keys(s)))
                                .collect(),
                        ),
                        other => other.clone(),
                    }
                } else if DATA_KEYS.contains(&k.as_str()) {
                    v.clone()
                } else {
                    strip_extension_keys(v)
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(strip_extension_keys).collect()),
        other => other.clone(),
    }
}
