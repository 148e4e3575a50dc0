//! Snapshots of the argument schemas `#[tool]` generates: every built-in tool and a few
//! representative fns. The snapshots live in `tests/snapshots/`; each schema is also
//! checked here against the rules every tool schema must follow, so a wrong snapshot
//! cannot be accepted by accident.

use provrun_tools::{BUILTIN_TOOLS, RunContext, Tool, ToolRegistry, tool};
use serde::Deserialize;
use serde_json::Value;

/// Only optional parameters.
#[tool(category = "search", summary = "Find")]
fn find_things(
    /// What to look for.
    query: Option<String>,
    /// Most results to return.
    limit: Option<u32>,
) -> String {
    format!("{query:?} {limit:?}")
}

/// A corner of a box.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Corner {
    /// Distance from the left edge.
    x: i32,
    /// Distance from the top edge.
    y: i32,
}

/// A box given by two corners.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Area {
    /// The top-left corner.
    top_left: Corner,
    /// The bottom-right corner.
    bottom_right: Corner,
}

/// Crop an image to an area.
#[tool(
    destructive,
    category = "write",
    confirm = "Crop the image in place?",
    summary = "Crop"
)]
fn crop(
    /// The image file.
    path: String,
    /// The area to keep.
    area: Area,
) -> String {
    let width = area.bottom_right.x - area.top_left.x;
    let height = area.bottom_right.y - area.top_left.y;
    format!("{path}: {width}x{height}")
}

/// How loudly to say something.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Volume {
    /// Barely audible.
    Whisper,
    /// Normal speech.
    Normal,
    /// Everyone hears it.
    Shout,
}

/// Say something at a volume.
#[tool]
fn say(
    /// The words.
    words: String,
    /// How loudly (default normal).
    volume: Option<Volume>,
) -> String {
    format!("{words} {volume:?}")
}

/// Sum a list of numbers.
#[tool(category = "other")]
fn sum(
    /// The numbers to add up.
    numbers: Vec<f64>,
    /// Labels, ignored.
    tags: Vec<String>,
) -> f64 {
    let _ = tags;
    numbers.iter().sum()
}

/// Report the time of day.
#[tool(category = "read")]
fn what_time() -> &'static str {
    "noon"
}

/// Tag the run with a label.
#[tool(mode = "client_round_trip")]
fn tag_run(
    ctx: &RunContext,
    /// The label.
    label: String,
) -> String {
    format!("{}: {label}", ctx.run_id())
}

/// Check the rules every generated tool schema follows, whatever its snapshot says.
fn check_schema(tool: &Tool, params: &[(&str, bool)]) {
    let name = tool.name();
    let schema = tool.schema();
    assert_eq!(schema["type"], "object", "{name}: root type");
    assert_eq!(
        schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{name}: dialect"
    );
    assert_eq!(
        schema["additionalProperties"], false,
        "{name}: unknown arguments must be refused"
    );
    assert!(schema.get("title").is_none(), "{name}: leaked struct title");
    assert_eq!(schema["x-destructive"], tool.is_destructive(), "{name}");
    assert_eq!(schema["x-category"], tool.category().as_str(), "{name}");
    assert_eq!(
        schema.get("x-confirm").and_then(Value::as_str),
        tool.confirm(),
        "{name}"
    );
    assert_eq!(
        schema.get("x-summary").and_then(Value::as_str),
        tool.summary(),
        "{name}"
    );
    let properties = schema["properties"].as_object().expect("properties object");
    let mut declared: Vec<&str> = properties.keys().map(String::as_str).collect();
    declared.sort();
    let mut expected: Vec<&str> = params.iter().map(|(p, _)| *p).collect();
    expected.sort();
    assert_eq!(declared, expected, "{name}: properties");
    assert!(
        !properties.contains_key("ctx") && !properties.contains_key("__ctx"),
        "{name}: the context leaked into the schema"
    );
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (param, is_required) in params {
        assert_eq!(
            required.contains(param),
            *is_required,
            "{name}: `{param}` required should be {is_required}"
        );
        assert!(
            properties[*param]
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.is_empty()),
            "{name}: `{param}` has no description"
        );
    }
}

/// The built-in tools and their parameters as docs/contract.md §5 fixes them (`true` = required).
const BUILTIN_PARAMS: [(&str, &[(&str, bool)]); 8] = [
    ("copy_from_host", &[("host_path", true), ("path", true)]),
    ("copy_to_host", &[("path", true), ("host_path", true)]),
    ("list_dir", &[("path", true)]),
    ("list_host_files", &[("path", true)]),
    (
        "read_file",
        &[("path", true), ("offset", false), ("limit", false)],
    ),
    ("run_command", &[("command", true), ("timeout_s", false)]),
    (
        "str_replace",
        &[("path", true), ("old", true), ("new", true)],
    ),
    ("write_file", &[("path", true), ("content", true)]),
];

#[test]
fn builtin_tool_schemas() {
    let linked = ToolRegistry::linked();
    let names: Vec<&str> = BUILTIN_PARAMS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, BUILTIN_TOOLS);
    for (name, params) in BUILTIN_PARAMS {
        let tool = linked.tool(name).unwrap();
        assert!(
            tool.takes_context(),
            "{name} reaches files through its context"
        );
        check_schema(tool, params);
        insta::assert_json_snapshot!(format!("builtin_{name}"), tool.schema());
    }
    // Exactly the destructive ones of docs/contract.md §5.
    let destructive: Vec<&str> = linked
        .iter()
        .filter(|t| BUILTIN_TOOLS.contains(&t.name()) && t.is_destructive())
        .map(Tool::name)
        .collect();
    assert_eq!(
        destructive,
        ["copy_to_host", "run_command", "str_replace", "write_file"]
    );
}

#[test]
fn only_optional_parameters() {
    let tool = FindThingsTool::tool();
    check_schema(&tool, &[("query", false), ("limit", false)]);
    assert!(tool.schema().get("required").is_none());
    insta::assert_json_snapshot!("optional_params", tool.schema());
}

#[test]
fn nested_struct_parameter() {
    let tool = CropTool::tool();
    check_schema(&tool, &[("path", true), ("area", true)]);
    // The nested types are definitions the property refers to.
    let defs = tool.schema()["$defs"].as_object().unwrap();
    assert!(defs.contains_key("Area") && defs.contains_key("Corner"));
    insta::assert_json_snapshot!("nested_struct", tool.schema());
}

#[test]
fn enum_parameter() {
    let tool = SayTool::tool();
    check_schema(&tool, &[("words", true), ("volume", false)]);
    insta::assert_json_snapshot!("enum_param", tool.schema());
}

#[test]
fn vec_parameters() {
    let tool = SumTool::tool();
    check_schema(&tool, &[("numbers", true), ("tags", true)]);
    assert_eq!(tool.schema()["properties"]["numbers"]["type"], "array");
    insta::assert_json_snapshot!("vec_params", tool.schema());
}

#[test]
fn no_parameters() {
    let tool = WhatTimeTool::tool();
    check_schema(&tool, &[]);
    insta::assert_json_snapshot!("no_params", tool.schema());
}

#[test]
fn context_parameter_is_not_in_the_schema() {
    let tool = TagRunTool::tool();
    assert!(tool.takes_context());
    check_schema(&tool, &[("label", true)]);
    insta::assert_json_snapshot!("context_param", tool.schema());
}
