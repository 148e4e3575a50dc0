//! A tool call's arguments text as evidence and the output check read it. A leaf module:
//! it uses nothing else in the crate, so the output schema, the evidence middleware and
//! the loop can all share it.

use serde_json::Value;

/// The arguments as evidence keeps them: the parsed JSON when the text parses, else the
/// text itself as a JSON string.
pub fn arguments_value(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Arguments as the text a tool is called with: a JSON string stays its text, anything
/// else is its JSON.
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
