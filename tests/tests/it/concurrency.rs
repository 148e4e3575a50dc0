//! 200 agent runs at once in one process, sharing nothing but one (stateless) script
//! model: each gets its own bundle, input and sandbox; each bundle verifies and holds only
//! its own data; runs whose model fails end as failed without touching the others.

use std::sync::Arc;
use std::time::{Duration, Instant};

use provrun::agent::{AgentSpec, Backend, Durability, RunControl, RunSpec, RunStatus};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::{Model, ScriptModel};
use serde_json::json;

const RUNS: usize = 200;

/// Runs whose index is 7 modulo this get a model that fails at once.
const FAIL_EVERY: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_runs_share_nothing_and_all_verify() {
    let dir = tempfile::tempdir().unwrap();
    let shared: Arc<dyn Model> = Arc::new(
        ScriptModel::from_value(&json!([
            {"tool_calls": [
                {"id": "r", "name": "read_file", "arguments": {"path": "/input/id.txt"}},
                {"id": "l", "name": "list_dir", "arguments": {"path": "/input"}},
                {"id": "w", "name": "write_file", "arguments": {"path": "/output/note.md", "content": "written"}}
            ]},
            {"text": "done"}
        ]))
        .unwrap(),
    );
    let failing: Arc<dyn Model> = Arc::new(ScriptModel::from_value(&json!([])).unwrap());
    let mut agent = AgentSpec::new("crowd", "test");
    agent.tools = vec!["read_file".into(), "list_dir".into(), "write_file".into()];
    let agent = Arc::new(agent);
    let policies = [
        Durability::AtEnd,
        Durability::PerStep,
        Durability::GroupCommit,
        Durability::Flush,
    ];

    let started = Instant::now();
    let mut handles = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        let input = dir.path().join(format!("in-{i}"));
        std::fs::create_dir(&input).unwrap();
        std::fs::write(input.join("id.txt"), format!("run number {i}")).unwrap();
        let run = RunSpec::new(format!("Run {i}."), dir.path().join(format!("b-{i}")))
            .input(&input)
            .durability(policies[i % policies.len()]);
        let model = if i % FAIL_EVERY == 7 {
            failing.clone()
        } else {
            shared.clone()
        };
        let agent = agent.clone();
        handles.push(tokio::spawn(async move {
            Backend::new()
                .with_model(model)
                .execute(&RunControl::new(), &agent, &run)
                .await
        }));
    }
    let mut finished = 0;
    let mut failed = 0;
    let mut run_ids = std::collections::BTreeSet::new();
    for (i, h) in handles.into_iter().enumerate() {
        let r = h.await.unwrap().unwrap();
        assert!(
            run_ids.insert(r.run_id.clone()),
            "run id {} reused",
            r.run_id
        );
        let bundle = dir.path().join(format!("b-{i}"));
        assert_eq!(r.bundle, bundle);
        let report = verify(&bundle);
        assert!(
            report.ok && report.complete,
            "run {i}: {:?}",
            report.failures().collect::<Vec<_>>()
        );
        let events = read_events(&bundle).unwrap();
        assert!(events.iter().all(|e| e.run_id == r.run_id), "run {i}");
        if i % FAIL_EVERY == 7 {
            failed += 1;
            assert_eq!(r.status(), RunStatus::Failed, "run {i}");
            assert!(r.error().unwrap().contains("script exhausted"));
            assert!(!bundle.join("output/note.md").exists());
            continue;
        }
        finished += 1;
        assert_eq!(r.status(), RunStatus::Finished, "run {i}: {:?}", r.error());
        assert_eq!(r.output(), "done");
        // The run read its own input, nobody else's.
        let read = events
            .iter()
            .find(|e| e.kind == EventType::ToolCalled && e.payload["name"] == "read_file")
            .unwrap();
        assert_eq!(read.payload["result"], format!("run number {i}"), "run {i}");
        assert_eq!(
            std::fs::read_to_string(bundle.join("output/note.md")).unwrap(),
            "written"
        );
        let outputs: Vec<_> = std::fs::read_dir(bundle.join("output"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(outputs.len(), 2, "run {i}: {outputs:?}");
    }
    println!(
        "{RUNS} concurrent runs: {finished} finished, {failed} failed on purpose, all verified, in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(failed, RUNS / FAIL_EVERY);
    assert!(started.elapsed() < Duration::from_secs(50));
}
