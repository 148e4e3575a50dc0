//! Guards for JSON Schemas that come from outside (an agent's output schema, the input
//! schemas an MCP server lists): a nesting measure any input survives, and a `boon`
//! loader that loads nothing, so a schema may refer only to itself.

use serde_json::Value;

/// The nesting depth of a JSON value: a scalar is 0, `{"a": [1]}` is 2. Iterative, so a
/// hostile value of any depth is measured without recursion.
pub fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Object(m) => stack.extend(m.values().map(|c| (c, d + 1))),
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// A `boon` URL loader that refuses every `$ref` and `$schema` leaving the schema itself
/// (boon knows the standard metaschemas without loading them); without one, boon would
/// read `file://` URLs. `what` names the schema in the refusal: "an output schema".
#[cfg(feature = "schema")]
#[derive(Debug, Clone, Copy)]
pub struct SelfOnlyLoader {
    what: &'static str,
}

#[cfg(feature = "schema")]
impl SelfOnlyLoader {
    /// A loader whose refusals say that `what` (e.g. "an input schema") may only refer to
    /// itself.
    pub fn new(what: &'static str) -> Self {
        Self { what }
    }
}

#[cfg(feature = "schema")]
impl boon::UrlLoader for SelfOnlyLoader {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(format!(
            "`{url}` is not loaded: {} may only refer to itself",
            self.what
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_counts_levels_of_objects_and_arrays() {
        assert_eq!(json_depth(&json!(1)), 0);
        assert_eq!(json_depth(&json!({"a": [1]})), 2);
        assert_eq!(json_depth(&json!([{}, [[{"x": {"y": 1}}]]])), 5);
    }

    #[test]
    fn a_very_deep_value_is_measured_without_recursion() {
        let mut v = json!(0);
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        assert_eq!(json_depth(&v), 100_000);
        // Drop it without recursing either.
        while let Value::Array(mut a) = v {
            v = a.pop().unwrap_or(Value::Null);
        }
    }

    #[cfg(feature = "schema")]
    #[test]
    fn the_loader_loads_nothing_and_names_the_schema() {
        use boon::UrlLoader as _;
        let err = SelfOnlyLoader::new("an output schema")
            .load("file:///etc/passwd")
            .unwrap_err()
            .to_string();
        assert!(err.contains("file:///etc/passwd"), "{err}");
        assert!(
            err.contains("an output schema may only refer to itself"),
            "{err}"
        );
    }
}
