//! Structured output: the JSON Schema an agent's final answer (the arguments of its
//! `final_result` call) must follow, compiled once and checked for every answer.
//!
//! Schemas are compiled by `boon` (JSON Schema draft 2020-12 unless the schema names
//! another draft in `$schema`). A schema may only refer to itself: no `$ref` is ever
//! loaded from a file or the network.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use boon::{Compiler, Draft, SchemaIndex, Schemas};
use provrun_tools::{SelfOnlyLoader, json_depth};
use serde_json::Value;

use crate::arguments::arguments_value;

/// The name of the output tool an agent with an `output_schema` answers through.
pub const OUTPUT_TOOL: &str = "final_result";

/// Where the schema lives for the compiler (a name only: nothing is read from it).
const SCHEMA_URL: &str = "urn:provrun:output-schema";

/// How deeply an answer may nest objects and arrays.
pub(crate) const MAX_DEPTH: usize = 32;

/// A compiled output schema.
#[derive(Clone)]
pub struct OutputSchema {
    inner: Arc<(Schemas, SchemaIndex)>,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema").finish_non_exhaustive()
    }
}

/// boon's messages run over several lines (a heading, then one `- at 'PATH': why` line
/// per cause); errors here are one line: the lines joined with `; `, the internal schema
/// address named as "the schema".
fn one_line(text: &str) -> String {
    text.lines()
        .map(|l| l.trim().trim_start_matches("- "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
        .replace(SCHEMA_URL, "the schema")
}

impl OutputSchema {
    /// Compile `schema`; `Err` says why it is not a usable JSON Schema.
    ///
    /// # Errors
    ///
    /// A one-line message when `schema` does not compile as a JSON Schema (2020-12).
    pub fn new(schema: &Value) -> Result<Self, String> {
        let mut compiler = Compiler::new();
        compiler.set_default_draft(Draft::V2020_12);
        compiler.use_loader(Box::new(SelfOnlyLoader::new("an output schema")));
        compiler
            .add_resource(SCHEMA_URL, schema.clone())
            .map_err(|e| one_line(&format!("{e:#}")))?;
        let mut schemas = Schemas::new();
        // A panic in the compiler is a refused schema, not a crash.
        let compiled = catch_unwind(AssertUnwindSafe(|| {
            compiler
                .compile(SCHEMA_URL, &mut schemas)
                .map_err(|e| one_line(&format!("{e:#}")))
        }));
        let index = compiled.unwrap_or_else(|_| Err("the schema compiler failed".into()))?;
        Ok(Self {
            inner: Arc::new((schemas, index)),
        })
    }

    /// Check an answer's arguments text: the parsed object when it follows the schema,
    /// else what the model is told (naming where and why it does not).
    ///
    /// # Errors
    ///
    /// The message for the model when the text is not a JSON object, is nested too deeply,
    /// or does not follow the schema.
    pub fn check(&self, arguments: &str) -> Result<Value, String> {
        let value = arguments_value(arguments);
        if !value.is_object() {
            return Err(format!(
                "invalid arguments for tool `{OUTPUT_TOOL}`: expected a JSON object following the output schema"
            ));
        }
        // Validation recurses once per level (more with a schema that refers to itself):
        // the depth bound keeps the model's answer from exhausting the stack.
        if json_depth(&value) > MAX_DEPTH {
            return Err(format!(
                "invalid arguments for tool `{OUTPUT_TOOL}`: nested deeper than {MAX_DEPTH} levels"
            ));
        }
        let (schemas, index) = &*self.inner;
        // The answer is model output: a panic in the validator is a refused answer.
        let verdict = catch_unwind(AssertUnwindSafe(|| {
            schemas.validate(&value, *index).map_err(|e| e.to_string())
        }))
        .unwrap_or_else(|_| Err("the schema validator failed on this answer".into()));
        match verdict {
            Ok(()) => Ok(value),
            Err(text) => {
                // boon's text: a heading line, then one `- at 'PATH': why` line per cause.
                let causes: Vec<&str> = text
                    .lines()
                    .skip(1)
                    .map(|l| l.trim().trim_start_matches("- "))
                    .filter(|l| !l.is_empty())
                    .collect();
                let why = if causes.is_empty() {
                    text.replace(SCHEMA_URL, "the schema")
                } else {
                    causes.join("; ")
                };
                Err(format!(
                    "invalid arguments for tool `{OUTPUT_TOOL}`: they do not follow the output schema: {why}"
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_that_breaks_the_metaschema_is_refused_in_one_line() {
        // Found by the agent_spec fuzz target: boon's text for this runs over 4 lines.
        let bad = serde_json::json!({
            "type": "object",
            "properties": {"a": {"type": "s ring"}}
        });
        let err = OutputSchema::new(&bad).unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("/properties/a/type"), "{err}");
        assert!(!err.contains(SCHEMA_URL), "{err}");
    }
    use serde_json::json;

    fn schema() -> OutputSchema {
        OutputSchema::new(&json!({
            "type": "object",
            "properties": {"answer": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
            "required": ["answer"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn answers_that_follow_the_schema_pass_and_others_say_why() {
        let s = schema();
        assert_eq!(
            s.check(r#"{"answer": "x", "n": 2}"#).unwrap(),
            json!({"answer": "x", "n": 2})
        );
        let err = s.check(r#"{"n": 2}"#).unwrap_err();
        assert!(err.contains("missing") && err.contains("answer"), "{err}");
        let err = s.check(r#"{"answer": "x", "n": 0}"#).unwrap_err();
        assert!(err.ends_with("at '/n': must be >=1, but got 0"), "{err}");
        let err = s.check(r#"{"answer": "x", "extra": 1}"#).unwrap_err();
        assert!(err.contains("extra"), "{err}");
        let err = s.check("[1]").unwrap_err();
        assert!(err.contains("expected a JSON object"), "{err}");
        let err = s.check("{not json").unwrap_err();
        assert!(err.contains("expected a JSON object"), "{err}");
    }

    #[test]
    fn self_referring_schemas_end_on_any_answer() {
        // A reference cycle is reported, not followed for ever.
        let cyclic = OutputSchema::new(&json!({"type": "object", "$ref": "#"})).unwrap();
        let err = cyclic.check(r#"{"a": 1}"#).unwrap_err();
        assert!(err.contains("cycle"), "{err}");
        // A schema that recurses per level: the answer's depth is bounded before validation.
        let nested = OutputSchema::new(&json!({
            "type": "object",
            "additionalProperties": {"$ref": "#"}
        }))
        .unwrap();
        let answer = |n: usize| format!("{}{{}}{}", "{\"a\":".repeat(n), "}".repeat(n));
        assert!(nested.check(&answer(MAX_DEPTH)).is_ok());
        let err = nested.check(&answer(MAX_DEPTH + 1)).unwrap_err();
        assert!(err.contains("nested deeper than 32 levels"), "{err}");
        // Deeper than JSON parsing allows: not an object at all.
        let err = nested.check(&answer(10_000)).unwrap_err();
        assert!(err.contains("expected a JSON object"), "{err}");
    }

    #[test]
    fn invalid_schemas_and_outside_references_are_refused() {
        let err = OutputSchema::new(&json!({"type": "object", "properties": {"a": {"type": 5}}}))
            .unwrap_err();
        assert!(!err.is_empty());
        let err = OutputSchema::new(&json!({"type": "object", "minProperties": -1})).unwrap_err();
        assert!(!err.is_empty());
        let err = OutputSchema::new(&json!({
            "type": "object",
            "properties": {"a": {"$ref": "file:///etc/passwd"}}
        }))
        .unwrap_err();
        assert!(err.contains("only refer to itself"), "{err}");
        // A reference inside the schema itself is fine.
        let s = OutputSchema::new(&json!({
            "type": "object",
            "$defs": {"word": {"type": "string"}},
            "properties": {"a": {"$ref": "#/$defs/word"}}
        }))
        .unwrap();
        assert!(s.check(r#"{"a": 1}"#).is_err());
        assert!(s.check(r#"{"a": "w"}"#).is_ok());
    }
}
