//! Steering a running agent (`RunControl::steer`) and the in-process permit wait
//! (`WaitForPermit`) as evidence: through the public API, with replay of what they
//! recorded.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use provrun::agent::{
    AgentSpec, Backend, RunControl, RunEvent, RunSpec, RunStatus, ToolHooks, WaitForPermit, replay,
};
use provrun::evidence::{BlobRef, Confidence, Event, EventType, read_blob, read_events, verify};
use provrun::model::{FunctionModel, Message, ModelRequest, Reply, ScriptModel, ToolCall};
use serde_json::json;

struct Fixture {
    root: tempfile::TempDir,
    input: PathBuf,
    bundle: PathBuf,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let input = root.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("a.txt"), "alpha\n").unwrap();
    Fixture {
        bundle: root.path().join("bundle"),
        input,
        root,
    }
}

fn agent(tools: &[&str]) -> AgentSpec {
    let mut a = AgentSpec::new("steer", "test");
    a.tools = tools.iter().map(|s| s.to_string()).collect();
    a
}

/// Each event as `type` or `tool_called:NAME[:deferred]`.
fn timeline(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e.kind {
            EventType::ToolCalled if e.payload["deferred"] == true => {
                format!(
                    "tool_called:{}:deferred",
                    e.payload["name"].as_str().unwrap()
                )
            }
            EventType::ToolCalled => format!("tool_called:{}", e.payload["name"].as_str().unwrap()),
            other => other.as_str().to_string(),
        })
        .collect()
}

fn steered(bundle: &Path, events: &[Event]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter(|e| e.kind == EventType::Steered)
        .map(|e| {
            assert_eq!(e.confidence, Confidence::Observed);
            let blob: BlobRef = serde_json::from_value(e.payload["text"].clone()).unwrap();
            let text = String::from_utf8(read_blob(bundle, &blob).unwrap()).unwrap();
            (e.payload["before_request"].as_u64().unwrap(), text)
        })
        .collect()
}

fn assert_verifies(bundle: &Path) {
    let report = verify(bundle);
    assert!(
        report.ok && report.complete,
        "bundle does not verify: {:?}",
        report.failures().collect::<Vec<_>>()
    );
}

const STEER: &str = "Also tell me how many files /input holds.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steering_message_reaches_the_next_request_and_replays() {
    let fx = fixture();
    let control = RunControl::new();
    let mut progress = control.subscribe();
    let steering = control.clone();
    let requests = Arc::new(AtomicUsize::new(0));
    let second: Arc<Mutex<Vec<Message>>> = Arc::default();
    let (count, seen) = (requests.clone(), second.clone());
    // While answering its first request, the model's caller steers the run (as a person
    // would while the model thinks); the second request must carry the message, after
    // the tool's result.
    let model = FunctionModel::new("fn", move |req: &ModelRequest| {
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            steering.steer(STEER);
            steering.steer("   ");
            Ok(Reply::tool_calls(vec![ToolCall {
                id: "l1".into(),
                name: "list_dir".into(),
                arguments: r#"{"path": "/input"}"#.into(),
            }]))
        } else {
            *seen.lock().unwrap() = req.messages.clone();
            Ok(Reply::text("one file"))
        }
    });
    let run = RunSpec::new("List /input.", &fx.bundle).input(&fx.input);
    let result = Backend::new()
        .with_model(Arc::new(model))
        .execute(&control, &agent(&["list_dir"]), &run)
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished);
    assert_eq!(result.output(), "one file");

    let messages = second.lock().unwrap().clone();
    let n = messages.len();
    assert!(
        matches!(&messages[n - 2], Message::Tool { content, .. } if content.contains("a.txt")),
        "{messages:?}"
    );
    assert!(
        matches!(&messages[n - 1], Message::User { content, .. } if content == STEER),
        "the steering message is the last of the second request: {messages:?}"
    );

    // Recorded once (the blank one is not), between the tool call and the second request.
    let events = read_events(&fx.bundle).unwrap();
    let line = timeline(&events);
    let at = line.iter().position(|t| t == "steered").unwrap();
    assert_eq!(line[at - 1], "tool_called:list_dir");
    assert_eq!(line[at + 1], "model_called");
    assert_eq!(steered(&fx.bundle, &events), vec![(2, STEER.to_string())]);
    // The request the model was sent holds it too.
    let second_call = events
        .iter()
        .filter(|e| e.kind == EventType::ModelCalled)
        .nth(1)
        .unwrap();
    let request: BlobRef = serde_json::from_value(second_call.payload["request"].clone()).unwrap();
    let body = String::from_utf8(read_blob(&fx.bundle, &request).unwrap()).unwrap();
    assert!(body.contains(STEER), "{body}");
    assert_verifies(&fx.bundle);

    // The progress stream said so, before the second request.
    let mut said = Vec::new();
    while let Ok(e) = progress.try_recv() {
        said.push(e);
    }
    let steered_at = said
        .iter()
        .position(|e| matches!(e, RunEvent::Steered { step: 2, text } if text == STEER))
        .expect("a Steered event");
    assert!(matches!(
        said[steered_at + 1],
        RunEvent::ModelRequest { step: 2 }
    ));

    // Replay injects the recorded message at the same point (and nothing a replay's own
    // caller sends), so the recorded responses fit and everything matches.
    let out = fx.root.path().join("replayed");
    let replay_control = RunControl::new();
    replay_control.steer("not part of the recording");
    let report = replay(&Backend::new(), &replay_control, &fx.bundle, &out)
        .await
        .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
    assert_verifies(&out);
    let again = read_events(&out).unwrap();
    assert_eq!(timeline(&again), line);
    assert_eq!(steered(&out, &again), vec![(2, STEER.to_string())]);
}

/// Two writes gated by `WaitForPermit`: the first is permitted, the second denied, each
/// only once the log shows it waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_a_permit_is_recorded_waiting_then_completed() {
    let fx = fixture();
    let model = ScriptModel::from_value(&json!([
        {"tool_calls": [
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/w.txt", "content": "w"}},
            {"id": "w2", "name": "write_file", "arguments": {"path": "/output/v.txt", "content": "v"}}
        ]},
        {"text": "done"}
    ]))
    .unwrap();
    let control = RunControl::new();
    let mut progress = control.subscribe();
    let answering = control.clone();
    let bundle = fx.bundle.clone();
    let answers = tokio::spawn(async move {
        let mut waited = Vec::new();
        while let Some(ev) = progress.recv().await {
            match ev {
                RunEvent::Deferred { run_call_id, .. } => {
                    // The wait is on record before it is announced.
                    let events = read_events(&bundle).unwrap();
                    let last = events.last().unwrap();
                    assert_eq!(last.kind, EventType::ToolCalled);
                    assert_eq!(last.payload["deferred"], true);
                    assert_eq!(last.payload["waits_for"], "permit");
                    assert_eq!(last.payload["run_call_id"], run_call_id.as_str());
                    if run_call_id == "1.1" {
                        answering.permit(&run_call_id);
                    } else {
                        answering.deny(&run_call_id, "not v");
                    }
                    waited.push(run_call_id);
                }
                RunEvent::Finished { .. } => break,
                _ => {}
            }
        }
        waited
    });
    let backend = Backend::new()
        .with_model(Arc::new(model))
        .with_hooks(ToolHooks::new().before(WaitForPermit::default()));
    let run = RunSpec::new("go", &fx.bundle).input(&fx.input);
    let result = backend
        .execute(&control, &agent(&["write_file"]), &run)
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished);
    assert_eq!(answers.await.unwrap(), vec!["1.1", "1.2"]);
    let events = read_events(&fx.bundle).unwrap();
    let calls: Vec<(String, bool, String)> = events
        .iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| {
            let p = &e.payload;
            (
                p["run_call_id"].as_str().unwrap().to_string(),
                p["deferred"] == true,
                p["decided_by"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    // Each waits (recorded as it begins to), then the turn's results in call order.
    assert_eq!(
        calls,
        vec![
            ("1.1".into(), true, "-".into()),
            ("1.2".into(), true, "-".into()),
            ("1.1".into(), false, "tool".into()),
            ("1.2".into(), false, "hook".into()),
        ]
    );
    assert!(fx.bundle.join("output/w.txt").exists());
    assert!(!fx.bundle.join("output/v.txt").exists());
    assert_verifies(&fx.bundle);

    // Replay waits again where the recording waited (answered from the recording).
    let out = fx.root.path().join("replayed");
    let report = replay(&Backend::new(), &RunControl::new(), &fx.bundle, &out)
        .await
        .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
    assert_verifies(&out);
    let again = read_events(&out).unwrap();
    assert_eq!(timeline(&again), timeline(&events));
    let waits = |events: &[Event]| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.payload["waits_for"] == "permit")
            .map(|e| e.payload["run_call_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(waits(&again), waits(&events));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_while_waiting_for_a_permit_shows_the_waiting_call() {
    let fx = fixture();
    let model = ScriptModel::from_value(&json!([
        {"tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/w.txt", "content": "w"}}
        ]},
        {"text": "done"}
    ]))
    .unwrap();
    let control = RunControl::new();
    let mut progress = control.subscribe();
    let backend = Backend::new()
        .with_model(Arc::new(model))
        .with_hooks(ToolHooks::new().before(WaitForPermit::default()));
    let run = RunSpec::new("go", &fx.bundle).input(&fx.input);
    let a = agent(&["read_file", "write_file"]);
    let running = {
        let control = control.clone();
        tokio::spawn(async move { backend.execute(&control, &a, &run).await })
    };
    // Nobody answers: the run is killed while it waits (its task dropped, as a killed
    // process leaves it: no run_finished).
    loop {
        match progress.recv().await {
            Some(RunEvent::Deferred { run_call_id, .. }) => {
                assert_eq!(run_call_id, "1.2");
                break;
            }
            Some(_) => {}
            None => panic!("the run ended without waiting"),
        }
    }
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());

    let events = read_events(&fx.bundle).unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, EventType::ToolCalled);
    assert_eq!(last.payload["name"], "write_file");
    assert_eq!(last.payload["run_call_id"], "1.2");
    assert_eq!(last.payload["deferred"], true);
    assert_eq!(last.payload["waits_for"], "permit");
    assert_eq!(
        last.payload["arguments"],
        json!({"path": "/output/w.txt", "content": "w"})
    );
    // Nothing is wrong with the log, it just stops; verify names the waiting call.
    let report = verify(&fx.bundle);
    assert!(report.ok && !report.complete, "{report:?}");
    let warned: Vec<String> = report
        .checks
        .iter()
        .map(|c| c.detail.clone())
        .filter(|d| d.contains("never completed"))
        .collect();
    assert_eq!(warned.len(), 1, "{report:?}");
    assert!(warned[0].contains("\"1.2\""), "{warned:?}");
}

/// A turn where a hook holds one call for a permit and the approval policy pauses the
/// next: the paused bundle verifies, resumes from the bundle alone, and replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_wait_and_a_pause_in_one_turn_resume_and_replay() {
    use provrun::agent::{ApprovePolicy, Decision};
    let fx = fixture();
    let model = ScriptModel::from_value(&json!([
        {"tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/w.txt", "content": "w"}}
        ]},
        {"text": "done"}
    ]))
    .unwrap();
    let model = Arc::new(model);
    let mut a = agent(&["read_file", "write_file"]);
    a.approve = ApprovePolicy::Destructive;
    let control = RunControl::new();
    let mut progress = control.subscribe();
    let answering = control.clone();
    let answers = tokio::spawn(async move {
        while let Some(ev) = progress.recv().await {
            match ev {
                // Only the hook's wait is answered here; the pause is answered by resume.
                RunEvent::Deferred { run_call_id, .. } if run_call_id == "1.1" => {
                    answering.permit(&run_call_id)
                }
                RunEvent::Finished { .. } => break,
                _ => {}
            }
        }
    });
    let backend = Backend::new()
        .with_model(model.clone())
        .with_hooks(ToolHooks::new().before(WaitForPermit {
            tools: vec!["read_file".into()],
        }));
    let run = RunSpec::new("go", &fx.bundle).input(&fx.input);
    let paused = backend.execute(&control, &a, &run).await.unwrap();
    answers.await.unwrap();
    assert_eq!(paused.status(), RunStatus::Paused);
    let waiting: Vec<&str> = paused
        .deferred()
        .iter()
        .map(|d| d.run_call_id.as_str())
        .collect();
    assert_eq!(waiting, vec!["1.2"]);
    let report = verify(&fx.bundle);
    assert!(report.ok && report.complete, "{report:?}");
    assert_eq!(
        provrun::agent::read::waiting_calls(&fx.bundle)
            .unwrap()
            .iter()
            .map(|d| d.run_call_id.clone())
            .collect::<Vec<_>>(),
        vec!["1.2".to_string()],
        "the call the hook held is not among the calls the pause waits on"
    );

    // A fresh backend resumes from the bundle alone.
    let resumed = Backend::new()
        .with_model(model)
        .resume(
            &RunControl::new(),
            &fx.bundle,
            &[Decision::Approve("1.2".into())],
        )
        .await
        .unwrap();
    assert_eq!(resumed.status(), RunStatus::Finished);
    assert!(fx.bundle.join("output/w.txt").exists());
    assert_verifies(&fx.bundle);

    let out = fx.root.path().join("replayed");
    let report = replay(&Backend::new(), &RunControl::new(), &fx.bundle, &out)
        .await
        .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
    assert_verifies(&out);
    assert_eq!(
        timeline(&read_events(&out).unwrap()),
        timeline(&read_events(&fx.bundle).unwrap())
    );
}

/// A message that arrives as the run is cancelled is on record, and the replay of the
/// cancelled run adds it at the same point. A source that steers through the control
/// itself is fine (it is asked without the control's lock held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_a_run_that_is_then_cancelled_replays() {
    let fx = fixture();
    let control = RunControl::new();
    let inner = control.clone();
    let mut asked = 0;
    control.steer_from(move || {
        asked += 1;
        if asked == 2 {
            inner.steer("from inside a source");
        }
        Vec::new()
    });
    let steering = control.clone();
    let model = FunctionModel::new("fn", move |_req: &ModelRequest| {
        steering.steer("stop after this");
        steering.cancel();
        Ok(Reply::tool_calls(vec![ToolCall {
            id: "l1".into(),
            name: "list_dir".into(),
            arguments: r#"{"path": "/input"}"#.into(),
        }]))
    });
    let run = RunSpec::new("List /input.", &fx.bundle).input(&fx.input);
    let result = Backend::new()
        .with_model(Arc::new(model))
        .execute(&control, &agent(&["list_dir"]), &run)
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Cancelled);
    let events = read_events(&fx.bundle).unwrap();
    assert_eq!(
        steered(&fx.bundle, &events),
        vec![
            (2, "stop after this".to_string()),
            (2, "from inside a source".to_string())
        ]
    );
    let out = fx.root.path().join("replayed");
    let report = replay(&Backend::new(), &RunControl::new(), &fx.bundle, &out)
        .await
        .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
    assert_eq!(report.result.status(), RunStatus::Cancelled);
    let again = read_events(&out).unwrap();
    assert_eq!(steered(&out, &again), steered(&fx.bundle, &events));
    assert_eq!(timeline(&again), timeline(&events));
}
