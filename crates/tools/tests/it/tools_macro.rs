//! Behaviour of `#[tool]`: names, descriptions, schemas, metadata, arguments and dispatch.

use provrun_tools::{
    Json, RunContext, RunDeps, RunInfo, Tool, ToolCategory, ToolError, ToolMode, ToolOutput,
    ToolRegistry, tool,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// Add two numbers.
///
/// This second paragraph is for humans and stays out of the description.
#[tool]
fn add(
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
) -> i64 {
    a + b
}

/// Greet someone, politely or not.
#[tool(name = "say_hello", summary = "Greet", category = "other")]
fn greet(
    /// Who to greet.
    name: String,
    /// Shout the greeting.
    loud: Option<bool>,
) -> String {
    let text = format!("hello, {name}");
    if loud == Some(true) {
        text.to_uppercase()
    } else {
        text
    }
}

/// Delete everything (only in this test's imagination).
#[tool(destructive, category = "write", confirm = "Really delete everything?")]
fn nuke() -> Result<String, String> {
    Err("refused: this is a test".to_string())
}

/// Wait a moment, then echo.
#[tool(category = Search)]
async fn slow_echo(
    /// What to echo.
    text: String,
) -> String {
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    text
}

/// Report which run the call is part of.
#[tool]
fn whoami(ctx: &RunContext) -> String {
    ctx.run_id().to_string()
}

/// Report the run id and a number, asynchronously.
#[tool]
async fn whoami_async(
    ctx: &RunContext,
    /// A number to echo.
    n: u32,
) -> String {
    format!("{}:{n}", ctx.run_id())
}

/// Always panics.
#[tool]
fn boom(
    /// Ignored.
    _x: Option<u8>,
) -> String {
    panic!("kaboom {}", 42)
}

/// Always panics, asynchronously.
#[tool]
async fn async_boom() -> String {
    panic!("async kaboom")
}

/// A nested argument type.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Point {
    /// Horizontal.
    x: f64,
    /// Vertical.
    y: f64,
}

/// Measure a polyline.
#[tool]
fn polyline_length(
    /// The points, in order.
    points: Vec<Point>,
) -> Json<f64> {
    let length = points
        .windows(2)
        .map(|w| ((w[1].x - w[0].x).powi(2) + (w[1].y - w[0].y).powi(2)).sqrt())
        .sum();
    Json(length)
}

/// A tool the caller runs.
#[tool(mode = "client_round_trip")]
fn ask_user(
    /// The question.
    question: String,
) -> String {
    question
}

#[allow(clippy::disallowed_methods)] // the test sets up the host folders the sandbox opens
fn ctx() -> (RunContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["input", "output", "scratch"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    let sandbox = provrun_sandbox::Sandbox::new(
        dir.path().join("input"),
        dir.path().join("output"),
        dir.path().join("scratch"),
        provrun_sandbox::Limits::default(),
    )
    .unwrap();
    let ctx = RunContext::new(RunDeps {
        sandbox,
        run: RunInfo {
            run_id: "run-123".to_string(),
            declarer: None,
        },
    });
    (ctx, dir)
}

#[test]
fn name_and_description_come_from_the_fn_and_its_doc() {
    let t = AddTool::tool();
    assert_eq!(t.name(), "add");
    assert_eq!(t.description(), "Add two numbers.");
    assert_eq!(GreetTool::tool().name(), "say_hello");
    assert_eq!(
        ToolRegistry::linked()
            .tool("say_hello")
            .unwrap()
            .description(),
        "Greet someone, politely or not."
    );
}

#[test]
fn parameter_docs_become_property_descriptions() {
    let s = AddTool::tool().schema().clone();
    assert_eq!(s["type"], "object");
    assert_eq!(s["properties"]["a"]["description"], "The first number.");
    assert_eq!(s["properties"]["b"]["type"], "integer");
    assert_eq!(s["required"], json!(["a", "b"]));
    assert_eq!(s["additionalProperties"], false);
    assert!(
        s.get("title").is_none(),
        "schemars' struct title must not leak: {s}"
    );
    assert_eq!(
        s["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "schemas are draft 2020-12"
    );
}

#[test]
fn option_parameters_are_optional() {
    let s = GreetTool::tool().schema().clone();
    assert_eq!(s["required"], json!(["name"]));
    assert!(s["properties"]["loud"].is_object());
}

#[test]
fn metadata_is_stamped_as_x_keys() {
    let s = NukeTool::tool().schema().clone();
    assert_eq!(s["x-destructive"], true);
    assert_eq!(s["x-category"], "write");
    assert_eq!(s["x-confirm"], "Really delete everything?");
    assert!(s.get("x-summary").is_none());
    let g = GreetTool::tool().schema().clone();
    assert_eq!(g["x-destructive"], false);
    assert_eq!(g["x-summary"], "Greet");
    assert_eq!(SlowEchoTool::tool().category(), ToolCategory::Search);
    assert!(NukeTool::tool().is_destructive());
    assert_eq!(
        NukeTool::tool().confirm(),
        Some("Really delete everything?")
    );
}

#[test]
fn provider_schema_and_definition_drop_x_keys() {
    let t = NukeTool::tool();
    let p = t.provider_schema();
    assert!(
        p.as_object().unwrap().keys().all(|k| !k.starts_with("x-")),
        "{p}"
    );
    let d = t.definition();
    assert_eq!(d.name, "nuke");
    assert_eq!(d.parameters, p);
}

#[test]
fn the_context_parameter_is_never_in_the_schema() {
    let s = WhoamiAsyncTool::tool().schema().clone();
    assert_eq!(s["properties"].as_object().unwrap().len(), 1, "{s}");
    assert!(s["properties"]["n"].is_object());
    assert!(WhoamiAsyncTool::tool().takes_context());
    assert!(!AddTool::tool().takes_context());
    let w = WhoamiTool::tool().schema().clone();
    assert_eq!(w["properties"], json!({}));
}

#[test]
fn the_schema_is_computed_once() {
    let a = AddTool::tool();
    let b = AddTool::tool();
    assert!(
        std::ptr::eq(a.schema(), b.schema()),
        "the same schema value is shared"
    );
}

#[test]
fn arguments_may_be_none_text_or_object() {
    let t = AddTool::tool();
    assert_eq!(
        t.call(r#"{"a":1,"b":2}"#, None).unwrap(),
        ToolOutput::succeed("3")
    );
    assert_eq!(
        t.call(json!({"a": 1, "b": 2}), None).unwrap(),
        ToolOutput::succeed("3")
    );
    let w = WhoamiTool::tool();
    let (ctx, _dir) = ctx();
    assert_eq!(
        w.call((), Some(&ctx)).unwrap(),
        ToolOutput::succeed("run-123")
    );
    assert_eq!(
        w.call("", Some(&ctx)).unwrap(),
        ToolOutput::succeed("run-123")
    );
}

fn failure(out: Result<ToolOutput, ToolError>) -> String {
    let out = out.expect("argument problems are outputs, not errors");
    assert!(!out.ok, "expected a failed output, got {out:?}");
    out.content
}

#[test]
fn bad_arguments_are_failed_outputs_that_name_the_problem() {
    let t = AddTool::tool();
    let m = failure(t.call("{not json", None));
    assert!(m.contains("not valid JSON"), "{m}");
    let m = failure(t.call(json!({"a": "one", "b": 2}), None));
    assert!(m.contains("`a`") && m.contains("invalid type"), "{m}");
    let m = failure(t.call(json!({"a": 1}), None));
    assert!(m.contains("missing field `b`"), "{m}");
    let m = failure(t.call(json!({"a": 1, "b": 2, "c": 3}), None));
    assert!(m.contains("unknown field `c`"), "{m}");
    let m = failure(t.call("[1, 2]", None));
    assert!(m.contains("expected a JSON object"), "{m}");
    // Nested: the path names the element.
    let p = PolylineLengthTool::tool();
    let m = failure(p.call(json!({"points": [{"x": 0, "y": 0}, {"x": 1}]}), None));
    assert!(
        m.contains("points[1]") && m.contains("missing field `y`"),
        "{m}"
    );
}

#[test]
fn returns_convert_results_and_json() {
    assert_eq!(
        NukeTool::tool().call((), None).unwrap(),
        ToolOutput::fail("refused: this is a test")
    );
    let out = PolylineLengthTool::tool()
        .call(
            json!({"points": [{"x": 0, "y": 0}, {"x": 3, "y": 4}]}),
            None,
        )
        .unwrap();
    assert_eq!(out, ToolOutput::succeed("5.0"));
    let out = GreetTool::tool()
        .call(json!({"name": "ada", "loud": true}), None)
        .unwrap();
    assert_eq!(out, ToolOutput::succeed("HELLO, ADA"));
}

#[test]
fn sync_call_refuses_async_tools() {
    let err = SlowEchoTool::tool()
        .call(json!({"text": "x"}), None)
        .unwrap_err();
    assert!(matches!(err, ToolError::AsyncToolInSyncCall { .. }));
    assert!(err.to_string().contains("acall"), "{err}");
}

#[test]
fn a_context_tool_without_a_context_is_an_error() {
    let err = WhoamiTool::tool().call((), None).unwrap_err();
    assert!(
        matches!(err, ToolError::ContextRequired { ref tool } if tool == "whoami"),
        "{err}"
    );
}

#[test]
fn a_context_given_to_a_tool_without_one_is_ignored() {
    let (ctx, _dir) = ctx();
    assert_eq!(
        AddTool::tool()
            .call(json!({"a": 2, "b": 2}), Some(&ctx))
            .unwrap(),
        ToolOutput::succeed("4")
    );
}

#[test]
fn panics_become_failed_outputs() {
    let m = failure(BoomTool::tool().call((), None));
    assert!(m.contains("panicked") && m.contains("kaboom 42"), "{m}");
}

#[test]
fn client_round_trip_tools_are_declared_not_run() {
    let t = AskUserTool::tool();
    assert_eq!(t.mode(), ToolMode::ClientRoundTrip);
    assert!(
        t.is_runnable(),
        "the Rust body is there, the agent decides who runs it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acall_runs_sync_and_async_tools() {
    let (ctx, _dir) = ctx();
    assert_eq!(
        SlowEchoTool::tool()
            .acall(json!({"text": "hi"}), None)
            .await
            .unwrap(),
        ToolOutput::succeed("hi")
    );
    assert_eq!(
        AddTool::tool()
            .acall(r#"{"a": 40, "b": 2}"#, None)
            .await
            .unwrap(),
        ToolOutput::succeed("42")
    );
    assert_eq!(
        WhoamiAsyncTool::tool()
            .acall(json!({"n": 7}), Some(&ctx))
            .await
            .unwrap(),
        ToolOutput::succeed("run-123:7")
    );
    let err = WhoamiAsyncTool::tool()
        .acall(json!({"n": 7}), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::ContextRequired { .. }));
    let m = SlowEchoTool::tool()
        .acall(json!({"text": 5}), None)
        .await
        .unwrap();
    assert!(!m.ok && m.content.contains("invalid type"), "{m:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acall_survives_panics_sync_and_async() {
    let out = BoomTool::tool().acall((), None).await.unwrap();
    assert!(!out.ok && out.content.contains("kaboom 42"), "{out:?}");
    let out = AsyncBoomTool::tool().acall((), None).await.unwrap();
    assert!(!out.ok && out.content.contains("async kaboom"), "{out:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_blocking_sync_tool_does_not_stall_the_executor() {
    /// Sleep, blocking the thread.
    #[tool]
    fn block_for(
        /// Milliseconds.
        ms: u64,
    ) -> u64 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
        ms
    }
    // On a single-threaded runtime, a ticker keeps running while the sync tool blocks:
    // the tool must be on the blocking pool, not on the executor thread.
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let t2 = ticks.clone();
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            t2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let out = BlockForTool::tool()
        .acall(json!({"ms": 200}), None)
        .await
        .unwrap();
    ticker.abort();
    assert_eq!(out, ToolOutput::succeed("200"));
    let n = ticks.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        n >= 5,
        "the executor stalled while the sync tool ran (ticks: {n})"
    );
}

#[test]
fn tools_built_by_hand_follow_the_same_rules() {
    let t = Tool::builder("shout", "Upper-case a text.")
        .schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
        .category(ToolCategory::Other)
        .sync_handler(false, |_ctx, args| {
            ToolOutput::succeed(
                args.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_uppercase(),
            )
        })
        .build()
        .unwrap();
    assert_eq!(
        t.call(r#"{"text":"hi"}"#, None).unwrap(),
        ToolOutput::succeed("HI")
    );
    assert_eq!(t.schema()["x-category"], "other");
    // A space, a dot (OpenAI's function names refuse it) and 65 characters are refused;
    // `_` and `-` are fine.
    for bad in ["bad name", "server.tool", &"x".repeat(65), ""] {
        let err = Tool::builder(bad, "d").build().unwrap_err();
        assert!(matches!(err, ToolError::InvalidName { .. }), "{bad:?}");
    }
    assert!(Tool::builder("a-b_c9", "d").build().is_ok());
    let err = Tool::builder("s", "d")
        .schema(json!({"type": "array"}))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("object"), "{err}");
}

/// Look something up.
#[tool]
fn lookup(
    /// The key.
    #[schemars(example = "/input/a.txt")]
    key: String,
    /// How many, at most.
    #[serde(rename = "max")]
    #[schemars(range(min = 1, max = 10))]
    limit: Option<u8>,
) -> String {
    format!("{key}:{limit:?}")
}

#[test]
fn schemars_and_serde_attributes_on_parameters_reach_the_argument() {
    let t = LookupTool::tool();
    let s = t.schema();
    assert_eq!(s["properties"]["key"]["examples"], json!(["/input/a.txt"]));
    assert_eq!(s["properties"]["max"]["maximum"], 10);
    assert!(
        s["properties"].get("limit").is_none(),
        "serde rename applies: {s}"
    );
    assert_eq!(
        t.call(json!({"key": "k", "max": 3}), None).unwrap(),
        ToolOutput::succeed("k:Some(3)")
    );
    let out = t.call(json!({"key": "k", "limit": 3}), None).unwrap();
    assert!(
        !out.ok && out.content.contains("unknown field `limit`"),
        "{out:?}"
    );
}
