//! Cancelling a run while a tool runs: an async tool is dropped at its next await, a sync
//! tool is waited for a short grace and then recorded as cancelled (or with what it gave
//! back within the grace). Every bundle verifies, records exactly one completed
//! `tool_called` for the call, and replays.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use provrun::agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus, replay};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::{FunctionModel, ModelRequest, Reply, ToolCall};
use provrun::tool;
use serde_json::Value;

static ASYNC_STARTED: AtomicBool = AtomicBool::new(false);
static ASYNC_DROPPED: AtomicBool = AtomicBool::new(false);
/// The `ms` of every `block_for` call that has started (each test blocks for its own).
static SYNC_STARTED: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

struct SetOnDrop(&'static AtomicBool);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Wait a long time, asynchronously.
#[tool]
async fn wait_async() -> String {
    let _guard = SetOnDrop(&ASYNC_DROPPED);
    ASYNC_STARTED.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(600)).await;
    "woke up".to_string()
}

/// Block the thread for `ms` milliseconds, then say so.
#[tool]
fn block_for(
    /// How long.
    ms: u64,
) -> String {
    SYNC_STARTED.lock().unwrap().push(ms);
    std::thread::sleep(Duration::from_millis(ms));
    format!("blocked {ms} ms")
}

/// A run of one call to `tool` with `arguments`, cancelled once `started` says the tool
/// runs. Returns the completed `tool_called` payloads of the bundle.
async fn cancelled_run(
    dir: &Path,
    tool: &str,
    arguments: &str,
    started: impl Fn() -> bool + Send + 'static,
) -> Vec<Value> {
    let mut agent = AgentSpec::new("cancel", "test");
    agent.tools = vec![tool.to_string()];
    let (name, args) = (tool.to_string(), arguments.to_string());
    let model = FunctionModel::new("fn", move |req: &ModelRequest| {
        if req.messages.len() > 2 {
            return Ok(Reply::text("done"));
        }
        Ok(Reply::tool_calls(vec![ToolCall {
            id: "c1".into(),
            name: name.clone(),
            arguments: args.clone(),
        }]))
    });
    let control = RunControl::new();
    let canceller = control.clone();
    let watcher = tokio::spawn(async move {
        while !started() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        canceller.cancel();
    });
    let bundle = dir.join("bundle");
    let run = RunSpec::new("go", &bundle);
    let r = Backend::new()
        .with_model(Arc::new(model))
        .execute(&control, &agent, &run)
        .await
        .unwrap();
    watcher.await.unwrap();
    assert_eq!(r.status(), RunStatus::Cancelled);
    let report = verify(&bundle);
    assert!(
        report.ok && report.complete,
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    let replayed = replay(
        &Backend::new(),
        &RunControl::new(),
        &bundle,
        &dir.join("again"),
    )
    .await
    .unwrap();
    assert!(replayed.matches(), "{:?}", replayed.difference);
    assert_eq!(replayed.answered_from_recording, 1);
    read_events(&bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::ToolCalled && e.payload["deferred"] != true)
        .map(|e| e.payload)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_tool_is_dropped_at_its_next_await() {
    let dir = tempfile::tempdir().unwrap();
    let calls = cancelled_run(dir.path(), "wait_async", "{}", || {
        ASYNC_STARTED.load(Ordering::SeqCst)
    })
    .await;
    assert!(
        ASYNC_DROPPED.load(Ordering::SeqCst),
        "the tool's future still lives"
    );
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["cancelled"], true);
    assert_eq!(calls[0]["ok"], false);
    assert!(
        calls[0]["result"]
            .as_str()
            .unwrap()
            .starts_with("cancelled")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_tool_gets_a_grace_and_is_then_recorded_as_cancelled() {
    // Blocks far longer than the grace: recorded as cancelled, not waited for.
    let dir = tempfile::tempdir().unwrap();
    let calls = cancelled_run(dir.path(), "block_for", r#"{"ms": 4000}"#, || {
        SYNC_STARTED.lock().unwrap().contains(&4000)
    })
    .await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["cancelled"], true);
    assert!(
        calls[0]["result"]
            .as_str()
            .unwrap()
            .starts_with("cancelled")
    );
    let waited = calls[0]["duration_ms"].as_u64().unwrap();
    assert!(
        waited < 4_000,
        "the run waited for the whole call ({waited} ms)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_tool_that_returns_within_the_grace_keeps_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let calls = cancelled_run(dir.path(), "block_for", r#"{"ms": 300}"#, || {
        SYNC_STARTED.lock().unwrap().contains(&300)
    })
    .await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["cancelled"], true);
    assert_eq!(calls[0]["ok"], true);
    assert_eq!(calls[0]["result"], "blocked 300 ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_in_a_turn_with_a_call_that_would_wait_ends_cancelled_not_paused() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentSpec::new("cancel", "test");
    agent.tools = vec!["block_for".into(), "write_file".into()];
    agent.approve = provrun::agent::ApprovePolicy::Destructive;
    // block_for runs first; write_file would wait for approval; read after it.
    let model = FunctionModel::new("fn", |_req: &ModelRequest| {
        Ok(Reply::tool_calls(vec![
            ToolCall {
                id: "b".into(),
                name: "block_for".into(),
                arguments: r#"{"ms": 200}"#.into(),
            },
            ToolCall {
                id: "w".into(),
                name: "write_file".into(),
                arguments: r#"{"path": "/output/x.txt", "content": "x"}"#.into(),
            },
            ToolCall {
                id: "b2".into(),
                name: "block_for".into(),
                arguments: r#"{"ms": 1}"#.into(),
            },
        ]))
    });
    let control = RunControl::new();
    let canceller = control.clone();
    let watcher = tokio::spawn(async move {
        while !SYNC_STARTED.lock().unwrap().contains(&200) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        canceller.cancel();
    });
    let bundle = dir.path().join("bundle");
    let r = Backend::new()
        .with_model(Arc::new(model))
        .execute(&control, &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap();
    watcher.await.unwrap();
    assert_eq!(r.status(), RunStatus::Cancelled);
    assert!(r.deferred().is_empty());
    let report = verify(&bundle);
    assert!(
        report.ok && report.complete,
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    let calls: Vec<Value> = read_events(&bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| e.payload)
        .collect();
    let ids: Vec<&str> = calls
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["b", "w", "b2"],
        "one completed event per call, none deferred"
    );
    for c in &calls {
        assert_eq!(c["deferred"], false, "{c}");
        assert_eq!(c["cancelled"], true, "{c}");
    }
    assert!(!bundle.join("output/x.txt").exists());
    let replayed = replay(
        &Backend::new(),
        &RunControl::new(),
        &bundle,
        &dir.path().join("again"),
    )
    .await
    .unwrap();
    assert!(replayed.matches(), "{:?}", replayed.difference);
}
