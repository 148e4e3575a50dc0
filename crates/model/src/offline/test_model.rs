//! [`TestModel`]: calls every offered tool once with schema-generated arguments, then
//! answers with a JSON summary of the results.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{Reply, respond};
use crate::Model;
use crate::error::ModelError;
use crate::types::{Message, ModelRequest, ModelResponse, StreamDelta, ToolCall};
use crate::wire::RequestRenderer;

/// A deterministic offline model for tests and the CLI's default run.
///
/// Its behaviour depends on the history only, so one instance can serve many runs:
/// - when the history holds no tool results after the last user message and tools are
///   offered, it calls every offered tool once, all in one response, with ids
///   `test_call_0`, `test_call_1`, … and arguments generated from each tool's schema
///   ([`arguments_for_schema`]);
/// - otherwise it answers with a short JSON text, `{"tool_results":[{"name":…,"ok":…}…]}`,
///   listing the tool results after the last user message in order.
#[derive(Clone, Debug, Default)]
pub struct TestModel {
    renderer: RequestRenderer,
}

impl TestModel {
    /// A new test model.
    pub fn new() -> Self {
        TestModel::default()
    }

    /// What this model answers to `request`.
    pub fn reply_for(request: &ModelRequest) -> Reply {
        let start = request
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }))
            .map_or(0, |i| i + 1);
        let results: Vec<Value> = request.messages[start..]
            .iter()
            .filter_map(|m| match m {
                Message::Tool { name, ok, .. } => Some(json!({"name": name, "ok": ok})),
                _ => None,
            })
            .collect();
        if results.is_empty() && !request.tools.is_empty() {
            let calls = request
                .tools
                .iter()
                .enumerate()
                .map(|(i, t)| ToolCall {
                    id: format!("test_call_{i}"),
                    name: t.name.clone(),
                    arguments: arguments_for_schema(&t.parameters).to_string(),
                })
                .collect();
            Reply::tool_calls(calls)
        } else {
            Reply::text(json!({ "tool_results": results }).to_string())
        }
    }
}

#[async_trait]
impl Model for TestModel {
    fn name(&self) -> &str {
        "test"
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        respond(
            self.name(),
            &self.renderer,
            request,
            &Self::reply_for(request),
            None,
        )
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        respond(
            self.name(),
            &self.renderer,
            request,
            &Self::reply_for(request),
            Some(on_delta),
        )
    }
}

/// Generates a value that fits `schema`, for [`TestModel`]'s tool calls.
///
/// For each (sub)schema, in order: `default`, else the first of `examples`, else `const`,
/// else the first `enum` value, else a minimal value of its type (`""` or `minLength`
/// letters for strings, `minimum` or 0 for numbers, `false`, `null`, `minItems` items for
/// arrays, and for objects the required properties only). `$ref`s into `$defs` /
/// `definitions`, `anyOf`/`oneOf` (first non-null branch) and `allOf` (merged) are followed.
pub fn arguments_for_schema(schema: &Value) -> Value {
    let v = generate(schema, schema, 0);
    if v.is_object() { v } else { json!({}) }
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn is_null_schema(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("null")
}

fn generate(schema: &Value, root: &Value, depth: usize) -> Value {
    if depth > 16 {
        return Value::Null;
    }
    let Some(o) = schema.as_object() else {
        return Value::Null;
    };
    if let Some(target) = o
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve(root, r))
    {
        return generate(target, root, depth + 1);
    }
    if let Some(v) = given_value(o) {
        return v;
    }
    if let Some(v) = combined(o, root, depth) {
        return v;
    }
    minimal_value(o, root, depth)
}

/// The value a schema names itself: its `default`, else the first of its `examples`, else
/// its `const`, else the first `enum` value.
fn given_value(o: &Map<String, Value>) -> Option<Value> {
    if let Some(d) = o.get("default") {
        return Some(d.clone());
    }
    if let Some(e) = o
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        return Some(e.clone());
    }
    if let Some(c) = o.get("const") {
        return Some(c.clone());
    }
    o.get("enum")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .cloned()
}

/// A value for a combined schema: the first non-null branch of `anyOf` / `oneOf` (else the
/// first branch), or the objects of `allOf`'s parts merged (the first other value when
/// none is an object). `None` when the schema combines nothing.
fn combined(o: &Map<String, Value>, root: &Value, depth: usize) -> Option<Value> {
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = o.get(key).and_then(Value::as_array) {
            let branch = branches
                .iter()
                .find(|b| !is_null_schema(b))
                .or(branches.first());
            if let Some(b) = branch {
                return Some(generate(b, root, depth + 1));
            }
        }
    }
    let parts = o.get("allOf").and_then(Value::as_array)?;
    let mut merged = Map::new();
    let mut other = Value::Null;
    for p in parts {
        match generate(p, root, depth + 1) {
            Value::Object(m) => merged.extend(m),
            v if other.is_null() => other = v,
            _ => {}
        }
    }
    Some(if merged.is_empty() && !other.is_null() {
        other
    } else {
        Value::Object(merged)
    })
}

/// The type a schema asks for: its `type` (the first non-null one of a list), else
/// `object` when it has `properties`.
fn schema_type(o: &Map<String, Value>) -> Option<&str> {
    match o.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .or(Some("null")),
        _ if o.contains_key("properties") => Some("object"),
        _ => None,
    }
}

/// A minimal value of the schema's type: the required properties of an object,
/// `minItems` items, `minLength` letters, the least number allowed, `false` or `null`.
fn minimal_value(o: &Map<String, Value>, root: &Value, depth: usize) -> Value {
    match schema_type(o) {
        Some("object") => {
            let props = o.get("properties").and_then(Value::as_object);
            let mut out = Map::new();
            for name in o
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let sub = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                out.insert(name.to_owned(), generate(sub, root, depth + 1));
            }
            Value::Object(out)
        }
        Some("array") => {
            let n = o
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(16) as usize;
            let items = o.get("items").unwrap_or(&Value::Null);
            Value::Array((0..n).map(|_| generate(items, root, depth + 1)).collect())
        }
        Some("string") => {
            let n = o
                .get("minLength")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(256) as usize;
            json!("a".repeat(n))
        }
        Some("integer") => least_integer(o),
        Some("number") => least_number(o),
        Some("boolean") => json!(false),
        _ => Value::Null,
    }
}

/// The least integer an integer schema allows (`minimum`, above `exclusiveMinimum`, a
/// negative `maximum`), else 0.
fn least_integer(o: &Map<String, Value>) -> Value {
    let num = |k: &str| o.get(k).and_then(Value::as_f64);
    let v = if let Some(m) = num("minimum") {
        m.ceil()
    } else if let Some(m) = num("exclusiveMinimum") {
        m.floor() + 1.0
    } else if let Some(m) = num("maximum").filter(|m| *m < 0.0) {
        m.floor()
    } else {
        0.0
    };
    json!(v as i64)
}

/// A number a number schema allows (`minimum`, `exclusiveMinimum` + 1, a negative
/// `maximum`), else 0; written as an integer when whole.
fn least_number(o: &Map<String, Value>) -> Value {
    let num = |k: &str| o.get(k).and_then(Value::as_f64);
    let v = num("minimum")
        .or_else(|| num("exclusiveMinimum").map(|m| m + 1.0))
        .or_else(|| num("maximum").filter(|m| *m < 0.0))
        .unwrap_or(0.0);
    if v.fract() == 0.0 {
        json!(v as i64)
    } else {
        json!(v)
    }
}
