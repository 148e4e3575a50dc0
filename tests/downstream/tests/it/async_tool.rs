//! An async `#[tool]` that reads `/input` in one line (`ctx.read_to_string(…).await`),
//! run by an agent on a multi-threaded runtime and on a current-thread one.

use std::sync::Arc;

use provrun::agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun::model::ScriptModel;
use provrun_downstream as _;
use serde_json::json;

async fn run_line_count() -> provrun::agent::RunResult {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("poem.txt"), "one\ntwo\nthree\n").unwrap();
    let mut agent = AgentSpec::new("lines", "test");
    agent.tools = vec!["line_count".into()];
    let model = ScriptModel::from_value(&json!([
        {"tool_calls": [{"id": "l1", "name": "line_count", "arguments": {"path": "/input/poem.txt"}},
                        {"id": "l2", "name": "line_count", "arguments": {"path": "/input/missing.txt"}}]},
        {"text": "done"}
    ]))
    .unwrap();
    let bundle = dir.path().join("bundle");
    let result = Backend::new()
        .with_model(Arc::new(model))
        .execute(
            &RunControl::new(),
            &agent,
            &RunSpec::new("count", &bundle).input(&input),
        )
        .await
        .unwrap();
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    let results: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_called")
        .map(|e| e["payload"].clone())
        .collect();
    assert_eq!(results[0]["result"], "3", "{}", results[0]);
    assert_eq!(results[0]["ok"], true);
    assert_eq!(results[1]["ok"], false, "a missing file is a failed result");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_tool_reads_input_in_one_line() {
    let result = run_line_count().await;
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
}

#[tokio::test(flavor = "current_thread")]
async fn an_async_tool_reads_input_on_a_current_thread_runtime_too() {
    let result = run_line_count().await;
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
}
