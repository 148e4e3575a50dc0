//! The per-call tool timeout (`tool_timeout_s`): a call that outlives it is answered as
//! failed (`timed_out: true`) and the run goes on, whether the tool is async (dropped) or
//! sync (given a short grace, then left to finish on its blocking thread). The tools here
//! only read (category `read`), so the three calls of the turn run together.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use provrun_agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun_evidence::{EventType, read_events, verify};
use provrun_model::ScriptModel;
use provrun_tools::{Tool, ToolCategory, ToolOutput, ToolRegistry};
use serde_json::json;

fn registry(sync_done: Arc<AtomicBool>) -> ToolRegistry {
    let mut reg = ToolRegistry::empty();
    reg.add(
        Tool::builder("slow_async", "Sleeps for a minute.")
            .category(ToolCategory::Read)
            .async_handler(false, |_, _| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                ToolOutput::succeed("woke up")
            })
            .build()
            .unwrap(),
    );
    reg.add(
        Tool::builder("slow_sync", "Blocks for three seconds.")
            .category(ToolCategory::Read)
            .sync_handler(false, move |_, _| {
                std::thread::sleep(Duration::from_secs(3));
                sync_done.store(true, Ordering::SeqCst);
                ToolOutput::succeed("finished late")
            })
            .build()
            .unwrap(),
    );
    reg.add(
        Tool::builder("quick", "Answers at once.")
            .category(ToolCategory::Read)
            .sync_handler(false, |_, _| ToolOutput::succeed("quick answer"))
            .build()
            .unwrap(),
    );
    reg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_timeout_fail_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let sync_done = Arc::new(AtomicBool::new(false));
    let mut agent = AgentSpec::new("timeouts", "test");
    agent.tools = vec!["slow_async".into(), "slow_sync".into(), "quick".into()];
    agent.tool_timeout_s = 1;
    let model = ScriptModel::from_value(&json!([
        {"tool_calls": [
            {"id": "a", "name": "slow_async", "arguments": {}},
            {"id": "s", "name": "slow_sync", "arguments": {}},
            {"id": "q", "name": "quick", "arguments": {}}
        ]},
        {"text": "carried on"}
    ]))
    .unwrap();
    let backend = Backend::new()
        .with_model(Arc::new(model))
        .with_registry(registry(sync_done.clone()));
    let started = Instant::now();
    let r = backend
        .execute(&RunControl::new(), &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(r.status(), RunStatus::Finished, "{:?}", r.error());
    assert_eq!(r.output(), "carried on");
    assert!(
        took < Duration::from_millis(2900),
        "the run waited {took:?}"
    );
    // The sync tool was still running when its call was answered (at the timeout plus
    // the grace).
    assert!(!sync_done.load(Ordering::SeqCst));
    let events = read_events(&bundle).unwrap();
    let timed_out: Vec<bool> = events
        .iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| e.payload["timed_out"] == true)
        .collect();
    assert_eq!(timed_out, [true, true, false]);
    let calls: Vec<(String, bool, String)> = events
        .into_iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| {
            (
                e.payload["name"].as_str().unwrap().to_string(),
                e.payload["ok"] == true,
                e.payload["result"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(calls.len(), 3);
    for (name, ok, result) in &calls[..2] {
        assert!(!ok, "{name}");
        assert!(result.contains("timed out after 1 s"), "{name}: {result}");
    }
    assert_eq!(calls[2], ("quick".into(), true, "quick answer".into()));
    let report = verify(&bundle);
    assert!(
        report.ok && report.complete,
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
    // The abandoned thread finishes on its own; nothing waits for it.
    tokio::time::sleep(Duration::from_millis(3500) - took.min(Duration::from_millis(3500))).await;
    assert!(sync_done.load(Ordering::SeqCst));
}

#[test]
fn the_timeout_defaults_to_300_s_and_must_be_positive() {
    let spec = AgentSpec::from_toml_str("name = \"a\"\nmodel = \"test\"\n", None).unwrap();
    assert_eq!(spec.tool_timeout_s, 300);
    let spec =
        AgentSpec::from_toml_str("name = \"a\"\nmodel = \"test\"\ntool_timeout_s = 5\n", None)
            .unwrap();
    assert_eq!(spec.tool_timeout_s, 5);
    let e = AgentSpec::from_toml_str("name = \"a\"\nmodel = \"test\"\ntool_timeout_s = 0\n", None)
        .unwrap_err();
    assert!(e.to_string().contains("tool_timeout_s"), "{e}");
}
