//! The check of the input schemas MCP servers list: at start-up, a tool whose schema is
//! not a valid JSON Schema, or not one a tool's named arguments fit, is refused.
//!
//! Validity is `boon`'s (the JSON Schema engine the agent's output schemas use): the
//! schema is compiled, draft 2020-12 unless it names another in `$schema`, which checks
//! it against its draft's metaschema (every keyword of the right shape, every regex
//! valid) and resolves its `$ref`s. What is provrun's own policy is checked here first:
//! the root is an object schema (`type: "object"`), its nesting is bounded, and no `$ref`
//! or `$schema` is ever loaded from the network or a file — a schema may refer only to
//! itself and the standard metaschemas.

use boon::{CompileError, Compiler, Draft, ErrorKind, Schemas, ValidationError};
use provrun_tools::{SelfOnlyLoader, json_depth};
use regex_syntax::ast::ErrorKind as RegexError;
use serde_json::{Map, Value};

/// Where the schema lives for the compiler (a name only: nothing is read from it).
const SCHEMA_URL: &str = "urn:provrun:mcp-input-schema";

/// Nesting of objects and arrays deeper than this is refused: the compiler recurses once
/// per level, and a hostile server could send a very deep schema. (A schema read from a
/// server's JSON is less deep than this already: serde_json reads at most 128 levels of
/// the whole message.)
const MAX_DEPTH: usize = 128;

/// The stack of the thread a schema is compiled on. boon checks a schema against its
/// metaschema recursively, through several of the metaschema's own schemas a level: about
/// 50 KiB a level in a debug build, so a schema [`MAX_DEPTH`] deep needs some 7 MiB,
/// more than a tokio worker's 2 MiB. Only the pages used are ever backed by memory.
const COMPILE_STACK: usize = 16 << 20;

/// How many of the compiler's complaints a message names.
const MAX_CAUSES: usize = 8;

/// Check a tool's input schema: an object schema (`type: "object"`) that is a valid JSON
/// Schema. `Err` says where and what, in one line.
///
/// # Errors
///
/// A one-line message when the schema is not a JSON object, its root `type` is not
/// `"object"`, it nests too deeply, or it is not a valid JSON Schema.
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
    if json_depth(schema) > MAX_DEPTH {
        return Err(format!(
            "#: objects and arrays nested more than {MAX_DEPTH} levels deep"
        ));
    }
    let schema = ecma_only_patterns_unchecked(schema);
    // On a thread of its own, with a stack for the deepest schema allowed; a panic in the
    // compiler ends that thread only, and the schema is refused.
    std::thread::Builder::new()
        .name("provrun-mcp-schema".into())
        .stack_size(COMPILE_STACK)
        .spawn(move || compile(schema))
        .map_err(|e| format!("the schema check could not start: {e}"))?
        .join()
        .unwrap_or_else(|_| Err("the JSON Schema compiler failed on it".into()))
}

/// Compile `schema` with boon; `Err` is why it is not a valid JSON Schema, in one line.
fn compile(schema: Value) -> Result<(), String> {
    let mut compiler = Compiler::new();
    compiler.set_default_draft(Draft::V2020_12);
    compiler.use_loader(Box::new(SelfOnlyLoader::new("an input schema")));
    compiler
        .add_resource(SCHEMA_URL, schema)
        .map_err(|e| message(&e))?;
    let mut schemas = Schemas::new();
    compiler
        .compile(SCHEMA_URL, &mut schemas)
        .map(|_| ())
        .map_err(|e| message(&e))
}

/// A compile error in one line. A schema that breaks its metaschema names each place,
/// as a JSON pointer into the schema (`#/properties/x/type: …`), with what is wrong.
fn message(error: &CompileError) -> String {
    let text = match error {
        CompileError::ValidationError { src, .. } => {
            let mut causes = Vec::new();
            leaves(src, &mut causes);
            let causes: Vec<String> = causes.iter().map(|c| flat(c, " ")).collect();
            let more = causes.len().saturating_sub(MAX_CAUSES);
            let mut shown: Vec<String> = causes.into_iter().take(MAX_CAUSES).collect();
            if more > 0 {
                shown.push(format!("({more} more)"));
            }
            if shown.is_empty() {
                format!("{error:#}")
            } else {
                shown.join("; ")
            }
        }
        other => format!("{other:#}"),
    };
    // The address of the schema is ours, not the server's.
    flat(&text, "; ")
        .replace(&format!("{SCHEMA_URL}#"), "#")
        .replace(SCHEMA_URL, "the schema")
}

/// boon's messages (a regex error's among them) can run over several lines: one line,
/// the lines trimmed and joined with `sep`.
fn flat(text: &str, sep: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(sep)
}

/// The innermost causes of a metaschema failure, each as `#POINTER: why`. Iterative: the
/// tree is as deep as the schema.
fn leaves(error: &ValidationError, out: &mut Vec<String>) {
    let mut stack = vec![error];
    while let Some(e) = stack.pop() {
        if e.causes.is_empty() {
            if !matches!(e.kind, ErrorKind::Group | ErrorKind::Schema { .. }) {
                out.push(format!("#{}: {}", e.instance_location, e.kind));
            }
        } else {
            stack.extend(e.causes.iter().rev());
        }
    }
}

/// Whether the Rust regex engine (boon's) refuses `pattern` only for an ECMAScript
/// feature it lacks: look-around or a backreference. JSON Schema's regexes are
/// ECMAScript's, so such a pattern is valid; it is not checked further.
fn ecma_only(pattern: &str) -> bool {
    match regex_syntax::ast::parse::Parser::new().parse(pattern) {
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            RegexError::UnsupportedLookAround | RegexError::UnsupportedBackreference
        ),
    }
}

/// The schema as boon compiles it: every `pattern` string and `patternProperties` key that
/// [`ecma_only`] accepts is replaced by a pattern boon can compile. Every other value is
/// left as it is (a value that only looks like one of these, inside `const` or
/// `default`, changes nothing the compiler checks).
fn ecma_only_patterns_unchecked(schema: &Value) -> Value {
    let mut copy = schema.clone();
    let mut stack = vec![&mut copy];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(p)) = map.get_mut("pattern")
                    && ecma_only(p)
                {
                    *p = String::new();
                }
                if let Some(Value::Object(named)) = map.get_mut("patternProperties") {
                    rename_ecma_only_keys(named);
                }
                stack.extend(map.values_mut());
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
    copy
}

/// Give each key of a `patternProperties` object that [`ecma_only`] accepts a plain
/// pattern of its own (one no other key has), keeping its subschema.
fn rename_ecma_only_keys(named: &mut Map<String, Value>) {
    let keys: Vec<String> = named.keys().filter(|k| ecma_only(k)).cloned().collect();
    let mut n = 0usize;
    for key in keys {
        let Some(sub) = named.remove(&key) else {
            continue;
        };
        let fresh = loop {
            let candidate = format!("^unchecked-{n}$");
            n += 1;
            if !named.contains_key(&candidate) {
                break candidate;
            }
        };
        named.insert(fresh, sub);
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
            // An older draft named in `$schema` (known without loading it), its refs to
            // `definitions`.
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                   "properties": {"a": {"$ref": "#/definitions/a"}},
                   "definitions": {"a": {"type": "string", "pattern": "^[a-z]+$"}}}),
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
                "#/properties/x: ",
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
            assert!(!err.contains('\n'), "{s}: {err}");
            assert!(!err.contains(SCHEMA_URL), "{s}: {err}");
        }
    }

    #[test]
    fn keywords_of_the_wrong_type_and_bad_regexes_are_refused() {
        for (s, want) in [
            (
                json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": "x"}}}),
                "#/properties/n/minimum",
            ),
            (
                json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": -1}}}),
                "#/properties/s/maxLength",
            ),
            (
                json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(a"}}}),
                "#/properties/s/pattern",
            ),
            (
                json!({"type": "object", "patternProperties": {"[a-": {"type": "string"}}}),
                "'[a-' is not valid regex",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
                "#/$defs/missing",
            ),
        ] {
            let err = check_input_schema(&s).unwrap_err();
            assert!(err.contains(want), "{s}: {err}");
            assert!(!err.contains('\n'), "{s}: {err}");
        }
    }

    #[test]
    fn ecmascript_regexes_the_rust_engine_lacks_are_valid() {
        // zod's e-mail pattern (look-ahead) and a backreference: valid JSON Schema.
        let s = json!({"type": "object", "properties": {
            "email": {"type": "string", "pattern": "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"},
            "twice": {"type": "string", "pattern": "^(a)\\1$"},
        }, "patternProperties": {"^(?!x)": {"type": "string"}, "^(?=y)": {"type": "number"}}});
        check_input_schema(&s).unwrap();
        // What they hold is still checked.
        let s = json!({"type": "object", "patternProperties": {"^(?!x)": {"type": "strnig"}}});
        let err = check_input_schema(&s).unwrap_err();
        assert!(err.contains("/type"), "{err}");
    }

    #[test]
    fn refs_to_anything_but_the_schema_are_refused_without_loading_them() {
        // A collector on loopback: a client that fetched the ref would connect to it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/schema.json", listener.local_addr().unwrap());
        // A file that holds a valid schema: boon's own loader would read it.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("string.json");
        std::fs::write(&file, br#"{"type": "string"}"#).unwrap();
        let file_url = format!("file://{}", file.display());
        let base = format!("http://{}/", listener.local_addr().unwrap());
        for s in [
            json!({"type": "object", "properties": {"a": {"$ref": url}}}),
            json!({"type": "object", "properties": {"a": {"$ref": file_url}}}),
            json!({"$schema": url, "type": "object"}),
            // A relative ref against a remote `$id`.
            json!({"$id": base, "type": "object", "properties": {"a": {"$ref": "b.json"}}}),
        ] {
            let err = check_input_schema(&s).unwrap_err();
            assert!(err.contains("is not loaded"), "{s}: {err}");
            assert!(!err.contains('\n'), "{s}: {err}");
        }
        // A relative ref with no base to resolve it against.
        let err = check_input_schema(
            &json!({"type": "object", "properties": {"a": {"$ref": "other.json"}}}),
        )
        .unwrap_err();
        assert!(!err.contains(SCHEMA_URL), "{err}");
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("something reached the loopback URL: {other:?}"),
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

    #[test]
    fn the_deepest_schema_allowed_compiles_on_a_small_stack() {
        // As deep as the bound lets a schema be, checked from a thread with a far
        // smaller stack than a tokio worker's (2 MiB).
        let mut s = json!({"type": "string"});
        while json_depth(&s) + 2 < MAX_DEPTH {
            s = json!({"type": "array", "items": s});
        }
        let root = json!({"type": "object", "properties": {"deep": s}});
        assert_eq!(json_depth(&root), MAX_DEPTH);
        let checked = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || check_input_schema(&root))
            .unwrap()
            .join()
            .unwrap();
        checked.unwrap();
    }
}
