//! A structural check of the input schemas MCP servers list: enough to refuse, at start-up,
//! a schema a provider would reject or a model could not follow, without a full JSON Schema
//! engine in the tree.

use serde_json::{Map, Value};

/// JSON Schema's primitive type names.
const TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Keywords whose value is one subschema.
const ONE: [&str; 8] = [
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
];
/// Keywords whose value is an array of subschemas.
const MANY: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value is an object of named subschemas.
const NAMED: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Nesting deeper than this is refused (a hostile server could send a very deep schema).
const MAX_DEPTH: usize = 64;

/// Check a tool's input schema: an object schema (`type: "object"`) whose keywords have the
/// shapes JSON Schema gives them, all the way down. `Err` says where and what, in one line.
pub fn check_input_schema(schema: &Value) -> Result<(), String> {
    let Some(root) = schema.as_object() else {
        return Err("the schema is not a JSON object".into());
    };
    match root.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(format!(
                "the root `type` must be \"object\" (a tool takes named arguments), not {other}"
            ));
        }
        None => return Err("the root has no `type: \"object\"`".into()),
    }
    check(root, "#", 0)
}

fn check(schema: &Map<String, Value>, at: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{at}: nested more than {MAX_DEPTH} levels deep"));
    }
    if let Some(t) = schema.get("type") {
        let names: Vec<&Value> = match t {
            Value::Array(items) if !items.is_empty() => items.iter().collect(),
            Value::String(_) => vec![t],
            other => {
                return Err(format!(
                    "{at}/type: expected a type name or a non-empty array of them, got {other}"
                ));
            }
        };
        for n in names {
            match n.as_str() {
                Some(name) if TYPES.contains(&name) => {}
                _ => {
                    return Err(format!(
                        "{at}/type: {n} is not a JSON Schema type (expected one of {})",
                        TYPES.join(", ")
                    ));
                }
            }
        }
    }
    if let Some(required) = schema.get("required") {
        let ok = required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string));
        if !ok {
            return Err(format!(
                "{at}/required: expected an array of property names"
            ));
        }
    }
    if let Some(e) = schema.get("enum")
        && !e.is_array()
    {
        return Err(format!("{at}/enum: expected an array"));
    }
    for key in ONE {
        if let Some(sub) = schema.get(key) {
            sub_schema(sub, &format!("{at}/{key}"), depth)?;
        }
    }
    for key in MANY {
        if let Some(list) = schema.get(key) {
            let Some(items) = list.as_array() else {
                return Err(format!("{at}/{key}: expected an array of schemas"));
            };
            for (i, sub) in items.iter().enumerate() {
                sub_schema(sub, &format!("{at}/{key}/{i}"), depth)?;
            }
        }
    }
    for key in NAMED {
        if let Some(map) = schema.get(key) {
            let Some(entries) = map.as_object() else {
                return Err(format!("{at}/{key}: expected an object of schemas"));
            };
            for (name, sub) in entries {
                sub_schema(sub, &format!("{at}/{key}/{name}"), depth)?;
            }
        }
    }
    Ok(())
}

/// A subschema: an object schema, or `true` / `false`.
fn sub_schema(value: &Value, at: &str, depth: usize) -> Result<(), String> {
    match value {
        Value::Bool(_) => Ok(()),
        Value::Object(map) => check(map, at, depth + 1),
        other => Err(format!(
            "{at}: expected a schema (an object or a boolean), got {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ordinary_schemas_pass() {
        for s in [
            json!({"type": "object"}),
            json!({"type": "object", "properties": {
                "q": {"type": "string", "description": "what"},
                "n": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                "any": true,
                "pick": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/x"}]},
            }, "required": ["q"], "additionalProperties": false, "$defs": {"x": {"type": "number"}}}),
        ] {
            check_input_schema(&s).unwrap();
        }
    }

    #[test]
    fn broken_schemas_say_where() {
        for (s, want) in [
            (json!("nope"), "not a JSON object"),
            (json!({"properties": {}}), "no `type"),
            (json!({"type": "string"}), "root `type`"),
            (
                json!({"type": "object", "properties": {"x": {"type": "strnig"}}}),
                "#/properties/x/type",
            ),
            (
                json!({"type": "object", "properties": {"x": 3}}),
                "#/properties/x: expected a schema",
            ),
            (json!({"type": "object", "required": "x"}), "#/required"),
            (json!({"type": "object", "properties": []}), "#/properties"),
            (json!({"type": "object", "anyOf": {}}), "#/anyOf"),
            (
                json!({"type": "object", "type2": 1, "type": []}),
                "root `type`",
            ),
        ] {
            let err = check_input_schema(&s).unwrap_err();
            assert!(err.contains(want), "{s}: {err}");
        }
    }

    #[test]
    fn very_deep_schemas_are_refused_not_overflowed() {
        let mut s = json!({"type": "string"});
        for _ in 0..200 {
            s = json!({"type": "array", "items": s});
        }
        let root = json!({"type": "object", "properties": {"deep": s}});
        assert!(
            check_input_schema(&root)
                .unwrap_err()
                .contains("levels deep")
        );
    }
}
