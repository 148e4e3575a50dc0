//! The arguments a tool call arrives with: nothing, a JSON string, or a JSON value.

use serde_json::Value;

use crate::output::ToolOutput;

/// A JSON object: the arguments a tool receives once parsed.
pub type JsonMap = serde_json::Map<String, Value>;

/// A tool call's arguments as they arrive, before parsing.
///
/// Models send arguments as JSON text (which may be empty, or invalid); programs pass
/// JSON values. Both are accepted; only a JSON object (or nothing, meaning `{}`) is a valid
/// argument set.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ToolArgs {
    /// No arguments: the same as `{}`.
    #[default]
    None,
    /// JSON text, exactly as a model sent it.
    Text(String),
    /// An already-parsed JSON value.
    Value(Value),
}

impl From<()> for ToolArgs {
    fn from((): ()) -> Self {
        ToolArgs::None
    }
}

impl From<&str> for ToolArgs {
    fn from(text: &str) -> Self {
        ToolArgs::Text(text.to_string())
    }
}

impl From<String> for ToolArgs {
    fn from(text: String) -> Self {
        ToolArgs::Text(text)
    }
}

impl From<Value> for ToolArgs {
    fn from(value: Value) -> Self {
        ToolArgs::Value(value)
    }
}

impl From<JsonMap> for ToolArgs {
    fn from(map: JsonMap) -> Self {
        ToolArgs::Value(Value::Object(map))
    }
}

impl<T: Into<ToolArgs>> From<Option<T>> for ToolArgs {
    fn from(value: Option<T>) -> Self {
        value.map_or(ToolArgs::None, Into::into)
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl ToolArgs {
    /// The arguments as a JSON object, or the failed output that tells the model why not.
    ///
    /// Empty or blank text and JSON `null` mean no arguments. A JSON string value is taken
    /// as argument text (some callers pass the model's text wrapped in a value).
    ///
    /// # Errors
    ///
    /// A failed [`ToolOutput`] when the text is not valid JSON, or the value is neither an
    /// object nor `null`.
    pub fn into_object(self, tool: &str) -> Result<JsonMap, ToolOutput> {
        let value = match self {
            ToolArgs::None => return Ok(JsonMap::new()),
            ToolArgs::Text(text) | ToolArgs::Value(Value::String(text)) => {
                if text.trim().is_empty() {
                    return Ok(JsonMap::new());
                }
                match serde_json::from_str::<Value>(&text) {
                    Ok(v) => v,
                    Err(e) => {
                        return Err(ToolOutput::fail(format!(
                            "invalid arguments for tool `{tool}`: not valid JSON ({e}); \
                             send the arguments as one JSON object"
                        )));
                    }
                }
            }
            ToolArgs::Value(v) => v,
        };
        match value {
            Value::Object(map) => Ok(map),
            Value::Null => Ok(JsonMap::new()),
            other => Err(ToolOutput::fail(format!(
                "invalid arguments for tool `{tool}`: expected a JSON object, got {}",
                kind_of(&other)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn none_empty_and_null_mean_no_arguments() {
        for args in [
            ToolArgs::None,
            ToolArgs::from(""),
            ToolArgs::from("  \n"),
            ToolArgs::from(Value::Null),
            ToolArgs::from("null"),
            ToolArgs::from(None::<String>),
        ] {
            assert_eq!(args.into_object("t"), Ok(JsonMap::new()));
        }
    }

    #[test]
    fn text_and_values_parse_to_the_same_object() {
        let text = ToolArgs::from(r#"{"a": 1}"#).into_object("t").unwrap();
        let value = ToolArgs::from(json!({"a": 1})).into_object("t").unwrap();
        let wrapped = ToolArgs::from(json!(r#"{"a": 1}"#))
            .into_object("t")
            .unwrap();
        assert_eq!(text, value);
        assert_eq!(text, wrapped);
    }

    #[test]
    fn invalid_json_is_a_failed_output_naming_the_tool() {
        let out = ToolArgs::from("{\"a\": ")
            .into_object("read_file")
            .unwrap_err();
        assert!(!out.ok);
        assert!(out.content.contains("read_file"), "{}", out.content);
        assert!(out.content.contains("not valid JSON"), "{}", out.content);
    }

    #[test]
    fn non_objects_are_refused_by_kind() {
        for (args, kind) in [
            (ToolArgs::from("[1,2]"), "an array"),
            (ToolArgs::from(json!(3)), "a number"),
            (ToolArgs::from("true"), "a boolean"),
            (ToolArgs::from("\"x\""), "a string"),
        ] {
            let out = args.into_object("t").unwrap_err();
            assert!(out.content.ends_with(kind), "{}", out.content);
        }
    }
}
