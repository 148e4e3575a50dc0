//! End-to-end agent runs: the exact evidence each scenario writes, that every bundle
//! verifies, and that replay reproduces it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use provrun::agent::{
    AfterToolHook, AgentSpec, ApprovePolicy, Backend, BeforeToolHook, Decision, DeferReason,
    HookDecision, ResumeSpec, RunControl, RunResult, RunSpec, RunStatus, ToolCallInfo, ToolHooks,
    replay,
};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::{
    FunctionModel, Model, ModelError, ModelRequest, ModelResponse, ProviderToolCall, RawExchange,
    Reply, ScriptModel, StreamDelta, ToolCall, Usage,
};
use provrun::tool;
use provrun::tools::{Tool, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

/// Ask the caller for a number (the caller runs this tool).
#[tool(mode = "client_round_trip")]
fn ask_caller(
    /// The question.
    question: String,
) -> String {
    question
}

struct Fixture {
    _dir: tempfile::TempDir,
    input: PathBuf,
    bundle: PathBuf,
    root: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(input.join("b.txt"), "bravo\n").unwrap();
    Fixture {
        bundle: dir.path().join("bundle"),
        root: dir.path().to_path_buf(),
        input,
        _dir: dir,
    }
}

fn agent(tools: &[&str]) -> AgentSpec {
    let mut a = AgentSpec::new("e2e", "test");
    a.instructions = "You are tested.".into();
    a.tools = tools.iter().map(|s| s.to_string()).collect();
    a
}

fn script(value: Value) -> Arc<dyn Model> {
    Arc::new(ScriptModel::from_value(&value).unwrap())
}

async fn run_with(backend: Backend, agent: &AgentSpec, fx: &Fixture) -> RunResult {
    let run = RunSpec::new("Do the task.", &fx.bundle).input(&fx.input);
    backend
        .execute(&RunControl::new(), agent, &run)
        .await
        .unwrap()
}

/// The log as short strings: `type` plus, for tool calls, `name:ok|failed|deferred` and
/// the flags; for run_finished, its status.
fn timeline(bundle: &Path) -> Vec<String> {
    read_events(bundle)
        .unwrap()
        .iter()
        .map(|e| {
            let p = &e.payload;
            match e.kind {
                EventType::ToolCalled => {
                    let state = if p["deferred"] == true {
                        "deferred"
                    } else if p["ok"] == true {
                        "ok"
                    } else {
                        "failed"
                    };
                    let mut s = format!("tool_called:{}:{state}", p["name"].as_str().unwrap());
                    if p["output_tool"] == true {
                        s.push_str(":output_tool");
                    }
                    if p["provider_run"] == true {
                        s.push_str(&format!(":provider_run:{}", e.confidence.as_str()));
                    }
                    s
                }
                EventType::RunFinished => format!("run_finished:{}", p["status"].as_str().unwrap()),
                EventType::InputStaged | EventType::OutputProduced => {
                    format!("{}:{}", e.kind.as_str(), p["path"].as_str().unwrap())
                }
                other => other.as_str().to_string(),
            }
        })
        .collect()
}

fn tool_results(bundle: &Path) -> Vec<(String, bool, String)> {
    read_events(bundle)
        .unwrap()
        .iter()
        .filter(|e| e.kind == EventType::ToolCalled && e.payload["deferred"] != true)
        .map(|e| {
            (
                e.payload["name"].as_str().unwrap().to_string(),
                e.payload["ok"] == true,
                e.payload["result"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn assert_verifies(bundle: &Path, complete: bool) {
    let report = verify(bundle);
    assert!(
        report.ok,
        "bundle does not verify: {:?}",
        report.failures().collect::<Vec<_>>()
    );
    assert_eq!(report.complete, complete);
}

/// Replay the fixture's bundle with a plain backend (no hooks, the linked tools) into a
/// new bundle: it must match, verify, write the same log line for line (types, tool
/// names, results, flags, statuses — pauses included) and end with the same status.
/// Returns the new bundle.
async fn assert_replays(fx: &Fixture) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let out = fx.root.join(format!("replay-{n}"));
    let report = replay(&Backend::new(), &RunControl::new(), &fx.bundle, &out)
        .await
        .unwrap();
    assert!(report.matches(), "replay differs: {:?}", report.difference);
    assert_verifies(&out, true);
    assert_eq!(
        timeline(&out),
        timeline(&fx.bundle),
        "replay wrote another log"
    );
    assert_eq!(
        tool_calls_in_full(&out),
        tool_calls_in_full(&fx.bundle),
        "replay made other tool calls"
    );
    out
}

/// Every tool_called payload without its timing.
fn tool_calls_in_full(bundle: &Path) -> Vec<Value> {
    read_events(bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| {
            let mut p = e.payload;
            p.as_object_mut().unwrap().remove("duration_ms");
            p
        })
        .collect()
}

/// The `decided_by` of each completed call, in order.
fn decided_by(bundle: &Path) -> Vec<String> {
    read_events(bundle)
        .unwrap()
        .iter()
        .filter(|e| e.kind == EventType::ToolCalled && e.payload["deferred"] != true)
        .map(|e| e.payload["decided_by"].as_str().unwrap().to_string())
        .collect()
}

fn s(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_run_and_are_recorded_in_call_order() {
    let fx = fixture();
    let a = agent(&["read_file", "list_dir", "write_file"]);
    let model = script(json!([
        {"tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
            {"id": "c2", "name": "list_dir", "arguments": {"path": "/input"}},
            {"id": "c3", "name": "write_file", "arguments": {"path": "/output/x.md", "content": "x"}},
            {"id": "c4", "name": "write_file", "arguments": {"path": "/output/y.md", "content": "y"}}
        ]},
        {"text": "done"}
    ]));
    let r = run_with(Backend::new().with_model(model), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(r.output(), "done");
    assert_eq!((r.usage.requests, r.usage.tool_calls), (2, 4));
    assert_eq!(
        timeline(&fx.bundle),
        s(&[
            "run_started",
            "input_staged:a.txt",
            "input_staged:b.txt",
            "model_called",
            "tool_called:read_file:ok",
            "tool_called:list_dir:ok",
            "tool_called:write_file:ok",
            "tool_called:write_file:ok",
            "model_called",
            "trace_imported",
            "output_produced:response.txt",
            "output_produced:x.md",
            "output_produced:y.md",
            "run_finished:finished",
        ])
    );
    let results = tool_results(&fx.bundle);
    assert_eq!(results[0].2, "alpha\n");
    assert!(results[1].2.contains("a.txt") && results[1].2.contains("b.txt"));
    assert_eq!(
        std::fs::read_to_string(fx.bundle.join("output/response.txt")).unwrap(),
        "done"
    );
    assert_eq!(
        std::fs::read_to_string(fx.bundle.join("output/y.md")).unwrap(),
        "y"
    );
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_unknown_tools_are_failed_results_the_model_sees() {
    let fx = fixture();
    let a = agent(&["read_file"]);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let model = FunctionModel::new("fn", move |req: &ModelRequest| {
        let tool_msgs: Vec<String> = req
            .messages
            .iter()
            .filter_map(|m| match m {
                provrun::model::Message::Tool {
                    content, ok: false, ..
                } => Some(content.clone()),
                _ => None,
            })
            .collect();
        if tool_msgs.is_empty() {
            Ok(Reply::tool_calls(vec![
                ToolCall {
                    id: "bad-json".into(),
                    name: "read_file".into(),
                    arguments: "{not json".into(),
                },
                ToolCall {
                    id: "bad-type".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path": 5}"#.into(),
                },
                ToolCall {
                    id: "extra".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path": "/input/a.txt", "mode": "x"}"#.into(),
                },
                ToolCall {
                    id: "ghost".into(),
                    name: "delete_everything".into(),
                    arguments: "{}".into(),
                },
            ]))
        } else {
            seen2.lock().unwrap().extend(tool_msgs);
            Ok(Reply::text("understood"))
        }
    });
    let r = run_with(Backend::new().with_model(Arc::new(model)), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(
        timeline(&fx.bundle)[3..9],
        s(&[
            "model_called",
            "tool_called:read_file:failed",
            "tool_called:read_file:failed",
            "tool_called:read_file:failed",
            "tool_called:delete_everything:failed",
            "model_called",
        ])
    );
    let seen = seen.lock().unwrap().clone();
    assert!(seen[0].contains("not valid JSON"), "{}", seen[0]);
    assert!(
        seen[1].contains("`path`") && seen[1].contains("invalid type"),
        "{}",
        seen[1]
    );
    assert!(seen[2].contains("unknown field `mode`"), "{}", seen[2]);
    assert!(
        seen[3].contains("unknown tool `delete_everything`") && seen[3].contains("read_file"),
        "{}",
        seen[3]
    );
    // Evidence keeps unparseable arguments as the raw text.
    let events = read_events(&fx.bundle).unwrap();
    let bad = events
        .iter()
        .find(|e| e.payload["call_id"] == "bad-json")
        .unwrap();
    assert_eq!(bad.payload["arguments"], "{not json");
    assert_eq!(
        decided_by(&fx.bundle),
        s(&["tool", "tool", "tool", "runtime"])
    );
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

struct Gate;

#[async_trait]
impl BeforeToolHook for Gate {
    async fn before(&self, call: &ToolCallInfo, _control: &RunControl) -> HookDecision {
        if call.arguments.contains("secret") {
            HookDecision::Deny("writing secrets is not allowed".into())
        } else if call.name == "read_file" {
            HookDecision::Replace("[redacted by policy]".into())
        } else {
            HookDecision::Allow
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_deny_and_replace_calls_without_running_the_tool() {
    let fx = fixture();
    let a = agent(&["read_file", "write_file"]);
    let model = script(json!([
        {"tool_calls": [
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/secret.txt", "content": "pw"}},
            {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
            {"id": "w2", "name": "write_file", "arguments": {"path": "/output/ok.txt", "content": "fine"}}
        ]},
        {"text": "ok"}
    ]));
    let backend = Backend::new()
        .with_model(model)
        .with_hooks(ToolHooks::new().before(Gate));
    let r = run_with(backend, &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(
        tool_results(&fx.bundle),
        vec![
            (
                "write_file".into(),
                false,
                "writing secrets is not allowed".into()
            ),
            ("read_file".into(), true, "[redacted by policy]".into()),
            (
                "write_file".into(),
                true,
                "created /output/ok.txt (4 bytes)".into()
            ),
        ]
    );
    assert!(
        !fx.bundle.join("output/secret.txt").exists(),
        "a denied call must not run"
    );
    assert!(fx.bundle.join("output/ok.txt").exists());
    assert_eq!(decided_by(&fx.bundle), s(&["hook", "hook", "tool"]));
    assert_verifies(&fx.bundle, true);
    // The replay has no hooks: it takes the hooks' decisions from the log, runs only w2.
    let again = assert_replays(&fx).await;
    assert!(!again.join("output/secret.txt").exists());
    assert!(again.join("output/ok.txt").exists());
}

/// Rewrites what the model sees of every `read_file` and `write_file` result.
struct Rewrite;

#[async_trait]
impl AfterToolHook for Rewrite {
    async fn after(&self, call: &ToolCallInfo, output: ToolOutput) -> ToolOutput {
        match call.name.as_str() {
            "read_file" => ToolOutput::succeed(output.content.to_uppercase()),
            "write_file" => ToolOutput::succeed("[written]"),
            _ => output,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_hooks_rewrite_results_and_replay_runs_the_tool_but_keeps_the_rewrite() {
    let fx = fixture();
    let a = agent(&["read_file", "write_file", "list_dir"]);
    let model = script(json!([
        {"tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/w.txt", "content": "w"}}
        ]},
        // In a turn of its own: calls of one turn run concurrently, so a listing beside the
        // write could see the folder before or after it.
        {"tool_calls": [{"id": "l1", "name": "list_dir", "arguments": {"path": "/output"}}]},
        {"text": "ok"}
    ]));
    let backend = Backend::new()
        .with_model(model)
        .with_hooks(ToolHooks::new().after(Rewrite));
    let r = run_with(backend, &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Finished);
    let results = tool_results(&fx.bundle);
    assert_eq!(results[0].2, "ALPHA\n");
    assert_eq!(results[1].2, "[written]");
    assert_eq!(
        decided_by(&fx.bundle),
        s(&["after_hook", "after_hook", "tool"])
    );
    assert_verifies(&fx.bundle, true);
    // The replay runs write_file again (its file is an output) but the model is given
    // the rewritten results, as recorded.
    let again = assert_replays(&fx).await;
    assert_eq!(
        std::fs::read_to_string(again.join("output/w.txt")).unwrap(),
        "w"
    );
}

// One scenario: the run pauses, a fresh backend resumes it, and the bundle is read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_pauses_and_a_fresh_backend_resumes_from_the_bundle_alone() {
    let fx = fixture();
    let script_path = fx.root.join("script.json");
    std::fs::write(
        &script_path,
        json!([
            {"tool_calls": [
                {"id": "r1", "name": "read_file", "arguments": {"path": "/input/b.txt"}},
                {"id": "w1", "name": "write_file", "arguments": {"path": "/output/out.txt", "content": "approved"}}
            ]},
            {"text": "all done"}
        ])
        .to_string(),
    )
    .unwrap();
    let mut a = agent(&["read_file", "write_file"]);
    a.model = format!("script:{}", script_path.display());
    a.approve = ApprovePolicy::Destructive;
    let r = run_with(Backend::new(), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Paused);
    assert_eq!(r.deferred().len(), 1);
    assert_eq!(r.deferred()[0].call_id, "w1");
    assert_eq!(r.deferred()[0].run_call_id, "1.2");
    assert_eq!(r.deferred()[0].reason, DeferReason::Approval);
    assert!(!fx.bundle.join("output/out.txt").exists());
    assert_eq!(
        timeline(&fx.bundle)[3..],
        s(&[
            "model_called",
            "tool_called:read_file:ok",
            "tool_called:write_file:deferred",
            "trace_imported",
            "run_finished:paused",
        ])
    );
    assert_verifies(&fx.bundle, true);
    // A run still paused replays up to its pause, and ends paused too.
    let again = assert_replays(&fx).await;
    assert!(!again.join("output/out.txt").exists());

    // Decisions that do not fit are refused before anything is written.
    let before = std::fs::read(fx.bundle.join("events.jsonl")).unwrap();
    let err = Backend::new()
        .resume(&RunControl::new(), &fx.bundle, &[])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("1.2 (write_file, model id \"w1\")"),
        "{err}"
    );
    let err = Backend::new()
        .resume(
            &RunControl::new(),
            &fx.bundle,
            &[Decision::Approve("nope".into())],
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no call `nope` waits"), "{err}");
    assert_eq!(
        std::fs::read(fx.bundle.join("events.jsonl")).unwrap(),
        before
    );

    // A new backend, knowing nothing but the bundle path, continues the same chain.
    let r = Backend::new()
        .resume(
            &RunControl::new(),
            &fx.bundle,
            &[Decision::Approve("w1".into())],
        )
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(r.output(), "all done");
    assert_eq!((r.usage.requests, r.usage.tool_calls), (2, 2));
    assert_eq!(
        std::fs::read_to_string(fx.bundle.join("output/out.txt")).unwrap(),
        "approved"
    );
    assert_eq!(
        timeline(&fx.bundle)[8..],
        s(&[
            "tool_called:write_file:ok",
            "model_called",
            "trace_imported",
            "output_produced:out.txt",
            "output_produced:response.txt",
            "run_finished:finished",
        ])
    );
    assert_verifies(&fx.bundle, true);
    // The replay pauses at the same call and resumes with the recorded approval.
    let again = assert_replays(&fx).await;
    assert_eq!(
        std::fs::read_to_string(again.join("output/out.txt")).unwrap(),
        "approved"
    );
    // A finished run cannot be resumed again.
    let err = Backend::new()
        .resume(
            &RunControl::new(),
            &fx.bundle,
            &[Decision::Approve("w1".into())],
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not paused"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_approval_tells_the_model_and_runs_nothing() {
    let fx = fixture();
    let mut a = agent(&["write_file"]);
    a.approve = ApprovePolicy::All;
    let model = script(json!([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "/output/o.txt", "content": "x"}}]},
        {"text": "ok, not written"}
    ]));
    let r = run_with(Backend::new().with_model(model.clone()), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Paused);
    let r = Backend::new()
        .with_model(model)
        .resume(
            &RunControl::new(),
            &fx.bundle,
            &[Decision::Deny {
                call_id: "w1".into(),
                message: "not today".into(),
            }],
        )
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(
        tool_results(&fx.bundle),
        vec![("write_file".into(), false, "denied: not today".into())]
    );
    assert!(!fx.bundle.join("output/o.txt").exists());
    assert_eq!(decided_by(&fx.bundle), s(&["approval"]));
    assert_verifies(&fx.bundle, true);
    // The replay is denied the same call with the same message.
    let again = assert_replays(&fx).await;
    assert!(!again.join("output/o.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_round_trip_pauses_for_the_callers_result() {
    let fx = fixture();
    let a = agent(&["ask_caller"]);
    let model = script(json!([
        {"tool_calls": [{"id": "q1", "name": "ask_caller", "arguments": {"question": "how many?"}}]},
        {"text": "the caller said so"}
    ]));
    let r = run_with(Backend::new().with_model(model.clone()), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Paused);
    assert_eq!(r.deferred()[0].reason, DeferReason::ClientRoundTrip);
    let events = read_events(&fx.bundle).unwrap();
    let deferred = events
        .iter()
        .find(|e| e.payload["deferred"] == true)
        .unwrap();
    assert_eq!(deferred.payload["mode"], "client_round_trip");
    // An approval is not an answer for a call the caller runs.
    let err = Backend::new()
        .with_model(model.clone())
        .resume(
            &RunControl::new(),
            &fx.bundle,
            &[Decision::Approve("q1".into())],
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("give its result"), "{err}");
    let r = Backend::new()
        .with_model(model)
        .resume(
            &RunControl::new(),
            &fx.bundle,
            &[Decision::Result {
                call_id: "q1".into(),
                content: "42".into(),
                ok: true,
            }],
        )
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(
        tool_results(&fx.bundle),
        vec![("ask_caller".into(), true, "42".into())]
    );
    assert_eq!(decided_by(&fx.bundle), s(&["caller"]));
    assert_verifies(&fx.bundle, true);
    // The replay pauses for the caller and is given the recorded result.
    assert_replays(&fx).await;
}

async fn output_tool_run(stream: bool) -> (Fixture, RunResult) {
    let fx = fixture();
    let mut a = agent(&["read_file"]);
    a.stream = stream;
    a.output_schema = Some(json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"]
    }));
    let model = script(json!([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}}]},
        {"tool_calls": [{"id": "f1", "name": "final_result", "arguments": {"answer": "alpha"}}]}
    ]));
    let r = run_with(Backend::new().with_model(model), &a, &fx).await;
    (fx, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_tool_is_recorded_after_its_request_when_not_streamed() {
    let (fx, r) = output_tool_run(false).await;
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(r.output(), r#"{"answer":"alpha"}"#);
    assert_eq!(
        timeline(&fx.bundle)[3..8],
        s(&[
            "model_called",
            "tool_called:read_file:ok",
            "model_called",
            "tool_called:final_result:ok:output_tool",
            "trace_imported",
        ])
    );
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_tool_is_recorded_before_its_request_when_streamed() {
    let (fx, r) = output_tool_run(true).await;
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(
        timeline(&fx.bundle)[3..8],
        s(&[
            "model_called",
            "tool_called:read_file:ok",
            "tool_called:final_result:ok:output_tool",
            "model_called",
            "trace_imported",
        ])
    );
    let events = read_events(&fx.bundle).unwrap();
    let streamed: Vec<bool> = events
        .iter()
        .filter(|e| e.kind == EventType::ModelCalled)
        .map(|e| e.payload["stream"] == true)
        .collect();
    assert_eq!(streamed, vec![true, true]);
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_finishes_its_bundle_as_cancelled() {
    let fx = fixture();
    let a = agent(&["read_file"]);
    let control = RunControl::new();
    let c2 = control.clone();
    let model = FunctionModel::new("fn", move |_req: &ModelRequest| {
        c2.cancel(); // the caller cancels while the first request is under way
        Ok(Reply::tool_calls(vec![ToolCall {
            id: "r1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"/input/a.txt"}"#.into(),
        }]))
    });
    let run = RunSpec::new("go", &fx.bundle).input(&fx.input);
    let r = Backend::new()
        .with_model(Arc::new(model))
        .execute(&control, &a, &run)
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Cancelled);
    // The response came back, but its call had not started when the run was cancelled:
    // it is recorded, as not run.
    assert_eq!(
        timeline(&fx.bundle)[3..],
        s(&[
            "model_called",
            "tool_called:read_file:failed",
            "trace_imported",
            "run_finished:cancelled",
        ])
    );
    assert_verifies(&fx.bundle, true);
    // Replayed up to the last recorded request, and cancelled there.
    let again = assert_replays(&fx).await;
    let finished = read_events(&again).unwrap().pop().unwrap();
    assert_eq!(finished.payload["usage"]["requests"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_steps_ends_the_run_as_failed_with_a_verifiable_bundle() {
    let fx = fixture();
    let mut a = agent(&["list_dir"]);
    a.max_steps = 2;
    let call = json!({"tool_calls": [{"name": "list_dir", "arguments": {"path": "/input"}}]});
    let model = script(json!([call, call, call]));
    let r = run_with(Backend::new().with_model(model), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Failed);
    assert!(
        r.error().unwrap().contains("max_steps reached"),
        "{:?}",
        r.error()
    );
    assert_eq!(
        timeline(&fx.bundle)[3..],
        s(&[
            "model_called",
            "tool_called:list_dir:ok",
            "model_called",
            "tool_called:list_dir:ok",
            "trace_imported",
            "run_finished:failed",
        ])
    );
    assert!(!fx.bundle.join("output/response.txt").exists());
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_model_fails_the_run_and_records_the_request() {
    let fx = fixture();
    let a = agent(&[]);
    let model = script(json!([]));
    let r = run_with(Backend::new().with_model(model), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Failed);
    assert!(
        r.error().unwrap().contains("model request 1 failed"),
        "{:?}",
        r.error()
    );
    let events = read_events(&fx.bundle).unwrap();
    let called = events
        .iter()
        .find(|e| e.kind == EventType::ModelCalled)
        .unwrap();
    assert!(
        called.payload["error"].as_str().unwrap().contains("script"),
        "{}",
        called.payload
    );
    assert!(
        called.payload["request"].is_object(),
        "the request sent is kept"
    );
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_model_calls_every_tool_once_then_answers() {
    let fx = fixture();
    let a = agent(&["list_dir", "read_file", "write_file"]);
    let r = run_with(Backend::new(), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Finished, "{:?}", r.error());
    let names: Vec<String> = tool_results(&fx.bundle).into_iter().map(|t| t.0).collect();
    assert_eq!(names, s(&["list_dir", "read_file", "write_file"]));
    let answer: Value = serde_json::from_str(r.output()).unwrap();
    assert_eq!(answer["tool_results"].as_array().unwrap().len(), 3);
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

/// A model whose first response says the provider ran a web search itself.
struct SearchingProvider;

#[async_trait]
impl Model for SearchingProvider {
    fn name(&self) -> &str {
        "provider"
    }
    async fn request(&self, _request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            text: Some("It rained.".into()),
            reasoning: None,
            tool_calls: vec![],
            provider_items: vec![],
            provider_tool_calls: vec![ProviderToolCall {
                kind: "search".into(),
                arguments: Some(r#"{"query":"weather"}"#.into()),
                output: Some("rain".into()),
                details: Value::Null,
            }],
            usage: Usage {
                input_tokens: 3,
                output_tokens: 2,
                total_tokens: 5,
                ..Usage::default()
            },
            usage_reported: true,
            finish_reason: None,
            model: None,
            id: Some("resp1".into()),
            // What Groq sends for a tool it ran (crates/model/tests/fixtures/openai/21_*), so that
            // a replay parses the same response back; no request body is kept.
            raw: RawExchange {
                response_body: json!({
                    "id": "resp1",
                    "object": "chat.completion",
                    "choices": [{
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": "It rained.",
                            "executed_tools": [{
                                "index": 0,
                                "type": "search",
                                "arguments": "{\"query\":\"weather\"}",
                                "output": "rain"
                            }]
                        }
                    }],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
                })
                .to_string()
                .into_bytes()
                .into(),
                ..RawExchange::default()
            },
        })
    }
    async fn request_stream(
        &self,
        request: &ModelRequest,
        _on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.request(request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_run_tools_are_recorded_as_parsed() {
    let fx = fixture();
    let r = run_with(
        Backend::new().with_model(Arc::new(SearchingProvider)),
        &agent(&[]),
        &fx,
    )
    .await;
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (3, 2));
    assert_eq!(
        timeline(&fx.bundle)[3..6],
        s(&[
            "model_called",
            "tool_called:search:ok:provider_run:parsed",
            "trace_imported"
        ])
    );
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_specs_and_inputs_fail_before_anything_is_written() {
    let fx = fixture();
    let run = RunSpec::new("go", &fx.bundle).input(&fx.input);
    let err = Backend::new()
        .execute(&RunControl::new(), &agent(&["no_such_tool"]), &run)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown tool `no_such_tool`"),
        "{err}"
    );
    let missing = RunSpec::new("go", &fx.bundle).input(fx.root.join("missing.txt"));
    let err = Backend::new()
        .execute(&RunControl::new(), &agent(&[]), &missing)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("missing.txt"), "{err}");
    assert!(
        !fx.bundle.exists(),
        "nothing may be written for a run that never started"
    );
    let err = AgentSpec::from_toml_str(
        "name = \"x\"\nmodel = \"gpt:4\"\n",
        Some(Path::new("a.toml")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("a.toml") && err.contains("unknown model"),
        "{err}"
    );
    // A value holding a newline (found by the agent_spec fuzz target in CI) is quoted
    // escaped: the error stays one line.
    let err = AgentSpec::from_toml_str(
        "name = \"x\"\nmodel = \"gpt\\n  4\\u001b\"\n",
        Some(Path::new("a.toml")),
    )
    .unwrap_err()
    .to_string();
    assert!(!err.contains('\n') && !err.contains('\u{1b}'), "{err}");
    assert!(err.contains("gpt\\n  4\\u{1b}"), "{err}");
    let err = AgentSpec::from_toml_str(
        "name = \"x\"\nmodel = \"test\"\nmax_step = 3\n",
        Some(Path::new("a.toml")),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("line 3") && err.contains("max_step"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_listed_to_the_model_and_loaded_on_demand() {
    let fx = fixture();
    let skills = fx.root.join("skills");
    std::fs::create_dir_all(skills.join("haiku")).unwrap();
    std::fs::write(
        skills.join("haiku/SKILL.md"),
        "---\nname: haiku\ndescription: Write answers as a haiku.\n---\nFive, seven, five syllables.\n",
    )
    .unwrap();
    let mut a = agent(&[]);
    a.skills = vec![skills];
    let system_seen = Arc::new(std::sync::Mutex::new(String::new()));
    let seen = system_seen.clone();
    let model = FunctionModel::new("fn", move |req: &ModelRequest| {
        if let Some(provrun::model::Message::System { content }) = req.messages.first() {
            *seen.lock().unwrap() = content.clone();
        }
        let loaded = req
            .messages
            .iter()
            .any(|m| matches!(m, provrun::model::Message::Tool { .. }));
        if loaded {
            Ok(Reply::text("an old pond / a frog jumps in / splash"))
        } else {
            assert!(
                req.tools.iter().any(|t| t.name == "use_skill"),
                "use_skill is offered"
            );
            Ok(Reply::tool_calls(vec![ToolCall {
                id: "s1".into(),
                name: "use_skill".into(),
                arguments: r#"{"name":"haiku"}"#.into(),
            }]))
        }
    });
    let r = run_with(Backend::new().with_model(Arc::new(model)), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Finished);
    let system = system_seen.lock().unwrap().clone();
    assert!(system.starts_with("You are tested."), "{system}");
    assert!(
        system.contains("- haiku: Write answers as a haiku."),
        "{system}"
    );
    assert_eq!(
        tool_results(&fx.bundle),
        vec![(
            "use_skill".into(),
            true,
            "Five, seven, five syllables.".into()
        )]
    );
    let events = read_events(&fx.bundle).unwrap();
    assert_eq!(events[0].payload["details"]["skills"][0]["name"], "haiku");
    assert_eq!(
        events[0].payload["details"]["skills"][0]["sha256"]
            .as_str()
            .unwrap()
            .len(),
        64
    );
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_events_arrive_in_order_and_permits_gate_calls() {
    use provrun::agent::{RunEvent, WaitForPermit};
    let fx = fixture();
    let a = agent(&["read_file", "write_file"]);
    let model = script(json!([
        {"tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/w.txt", "content": "w"}},
            {"id": "w2", "name": "write_file", "arguments": {"path": "/output/v.txt", "content": "v"}}
        ]},
        {"text": "done"}
    ]));
    let control = RunControl::new();
    let mut events = control.subscribe();
    // Another task answers the permit requests that the hook waits on.
    let answering = control.clone();
    let answers = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(ev) = events.recv().await {
            if let RunEvent::CallBegin { call_id, .. } = &ev {
                if call_id == "w1" {
                    answering.permit("w1");
                } else if call_id == "w2" {
                    answering.deny("w2", "no v today");
                }
            }
            let done = matches!(ev, RunEvent::Finished { .. });
            seen.push(ev);
            if done {
                break;
            }
        }
        seen
    });
    let backend = Backend::new()
        .with_model(model)
        .with_hooks(ToolHooks::new().before(WaitForPermit::default()));
    let run = RunSpec::new("go", &fx.bundle).input(&fx.input);
    let r = backend.execute(&control, &a, &run).await.unwrap();
    assert_eq!(r.status(), RunStatus::Finished);
    let seen = answers.await.unwrap();
    assert!(
        matches!(seen.first(), Some(RunEvent::ModelRequest { step: 1 })),
        "{seen:?}"
    );
    assert!(matches!(
        seen.last(),
        Some(RunEvent::Finished {
            status: RunStatus::Finished
        })
    ));
    for id in ["r1", "w1", "w2"] {
        let begin = seen
            .iter()
            .position(|e| matches!(e, RunEvent::CallBegin { call_id, .. } if call_id == id))
            .unwrap();
        let end = seen
            .iter()
            .position(|e| matches!(e, RunEvent::ToolResult { call_id, .. } if call_id == id))
            .unwrap();
        assert!(begin < end, "{id}: a call begins before it ends");
    }
    assert_eq!(
        tool_results(&fx.bundle),
        vec![
            ("read_file".into(), true, "alpha\n".into()),
            (
                "write_file".into(),
                true,
                "created /output/w.txt (1 bytes)".into()
            ),
            ("write_file".into(), false, "no v today".into()),
        ]
    );
    assert!(!fx.bundle.join("output/v.txt").exists());
    // w1 was permitted (the tool ran), w2 denied by the hook.
    assert_eq!(decided_by(&fx.bundle), s(&["tool", "tool", "hook"]));
    assert_verifies(&fx.bundle, true);
    let again = assert_replays(&fx).await;
    assert!(again.join("output/w.txt").exists() && !again.join("output/v.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beside_the_final_result_are_recorded_as_not_run() {
    let fx = fixture();
    let mut a = agent(&["write_file"]);
    a.output_schema = Some(json!({"type": "object", "properties": {"answer": {"type": "string"}}}));
    let model = script(json!([
        {"tool_calls": [
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/late.txt", "content": "x"}},
            {"id": "f1", "name": "final_result", "arguments": {"answer": "done"}}
        ]}
    ]));
    let r = run_with(Backend::new().with_model(model), &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(r.output(), r#"{"answer":"done"}"#);
    assert_eq!(
        tool_results(&fx.bundle),
        vec![
            ("final_result".into(), true, "final result accepted".into()),
            (
                "write_file".into(),
                false,
                "not run: a final result was already given".into()
            ),
        ]
    );
    assert!(
        !fx.bundle.join("output/late.txt").exists(),
        "a call beside the answer must not run"
    );
    assert_verifies(&fx.bundle, true);
    assert_replays(&fx).await;
}

async fn schema_checked_run(stream: bool) -> (Fixture, RunResult) {
    let fx = fixture();
    let mut a = agent(&[]);
    a.stream = stream;
    a.output_schema = Some(json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": false
    }));
    let model = script(json!([
        {"tool_calls": [{"id": "f1", "name": "final_result", "arguments": {"answer": 5}}]},
        {"tool_calls": [{"id": "f2", "name": "final_result", "arguments": {"answer": "five"}}]}
    ]));
    let r = run_with(Backend::new().with_model(model), &a, &fx).await;
    (fx, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_results_that_do_not_follow_the_output_schema_are_failed_results() {
    for stream in [false, true] {
        let (fx, r) = schema_checked_run(stream).await;
        assert_eq!(r.status(), RunStatus::Finished, "stream {stream}");
        assert_eq!(r.output(), r#"{"answer":"five"}"#);
        let results = tool_results(&fx.bundle);
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!(
            (results[0].0.as_str(), results[0].1),
            ("final_result", false)
        );
        assert!(
            results[0]
                .2
                .contains("do not follow the output schema: at '/answer'"),
            "{}",
            results[0].2
        );
        assert_eq!(
            results[1],
            ("final_result".into(), true, "final result accepted".into())
        );
        // The model is told why (the rejected answer's result is in the next request).
        let events = read_events(&fx.bundle).unwrap();
        let second = events
            .iter()
            .filter(|e| e.kind == EventType::ModelCalled)
            .nth(1)
            .unwrap();
        let blob: provrun::evidence::BlobRef =
            serde_json::from_value(second.payload["request"].clone()).unwrap();
        let request = provrun::evidence::read_blob(&fx.bundle, &blob).unwrap();
        assert!(
            String::from_utf8_lossy(&request).contains("do not follow the output schema"),
            "the second request carries the verdict"
        );
        let expected: &[&str] = if stream {
            &[
                "tool_called:final_result:failed:output_tool",
                "model_called",
                "tool_called:final_result:ok:output_tool",
                "model_called",
            ]
        } else {
            &[
                "model_called",
                "tool_called:final_result:failed:output_tool",
                "model_called",
                "tool_called:final_result:ok:output_tool",
            ]
        };
        assert_eq!(timeline(&fx.bundle)[3..7], s(expected));
        assert_verifies(&fx.bundle, true);
        assert_replays(&fx).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_output_schema_is_a_spec_error_before_anything_runs() {
    let fx = fixture();
    let mut a = agent(&[]);
    a.output_schema = Some(json!({"type": "object", "properties": {"a": {"type": 5}}}));
    let run = RunSpec::new("go", &fx.bundle).input(&fx.input);
    let err = Backend::new()
        .execute(&RunControl::new(), &a, &run)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`output_schema` is not a valid JSON Schema"),
        "{err}"
    );
    assert!(!fx.bundle.exists());
    let err = AgentSpec::from_toml_str(
        "name = \"x\"\nmodel = \"test\"\n[output_schema]\ntype = \"object\"\nrequired = \"a\"\n",
        Some(Path::new("a.toml")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("a.toml") && err.contains("not a valid JSON Schema"),
        "{err}"
    );
}

/// A registry whose only tool, `stamp`, answers `text`.
fn stamp_registry(text: &'static str) -> ToolRegistry {
    let mut reg = ToolRegistry::empty();
    reg.add(
        Tool::builder("stamp", "Stamps the run.")
            .sync_handler(false, move |_, _| ToolOutput::succeed(text))
            .build()
            .unwrap(),
    );
    reg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_names_the_first_call_whose_tool_now_answers_differently() {
    let fx = fixture();
    let a = agent(&["stamp"]);
    let model = script(json!([
        {"tool_calls": [{"id": "s1", "name": "stamp", "arguments": {}}]},
        {"text": "stamped"}
    ]));
    let backend = Backend::new()
        .with_model(model)
        .with_registry(stamp_registry("version 1"));
    assert_eq!(
        run_with(backend, &a, &fx).await.status(),
        RunStatus::Finished
    );
    // The same tool registry replays to a match.
    let same = fx.root.join("same");
    let backend = Backend::new().with_registry(stamp_registry("version 1"));
    let report = replay(&backend, &RunControl::new(), &fx.bundle, &same)
        .await
        .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
    assert_eq!((report.tool_calls, report.outputs), (1, 1));
    // Another implementation of the tool is a named difference.
    let other = fx.root.join("other");
    let backend = Backend::new().with_registry(stamp_registry("version 2"));
    let report = replay(&backend, &RunControl::new(), &fx.bundle, &other)
        .await
        .unwrap();
    let difference = report.difference.unwrap();
    assert!(
        difference.starts_with("tool call 1 differs")
            && difference.contains("\"version 1\"")
            && difference.contains("\"version 2\""),
        "{difference}"
    );
    // The new bundle records what happened: the model then saw another history, so
    // the replay diverged and failed; it still verifies.
    assert_eq!(report.result.status(), RunStatus::Failed);
    assert_verifies(&other, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_grants_the_host_folder_again() {
    let fx = fixture();
    let host = fx.root.join("host");
    std::fs::create_dir(&host).unwrap();
    let mut a = agent(&["copy_to_host"]);
    a.approve = ApprovePolicy::Destructive;
    let model = script(json!([
        {"tool_calls": [{"id": "c1", "name": "copy_to_host",
                         "arguments": {"path": "/input/a.txt", "host_path": "copied.txt"}}]},
        {"text": "copied"}
    ]));
    let run = RunSpec::new("go", &fx.bundle)
        .input(&fx.input)
        .host_dir(&host);
    let r = Backend::new()
        .with_model(model.clone())
        .execute(&RunControl::new(), &a, &run)
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Paused);
    let approve = [Decision::Approve("c1".into())];
    // Without the folder the resume is refused, and so is a folder for a run without one.
    let err = Backend::new()
        .with_model(model.clone())
        .resume(&RunControl::new(), &fx.bundle, &approve)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("grant it again"), "{err}");
    let r = Backend::new()
        .with_model(model)
        .resume_with(
            &RunControl::new(),
            &fx.bundle,
            &approve,
            &ResumeSpec::new().host_dir(&host),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished, "{:?}", r.error());
    assert_eq!(
        std::fs::read_to_string(host.join("copied.txt")).unwrap(),
        "alpha\n"
    );
    assert!(tool_results(&fx.bundle)[0].1);
    assert_verifies(&fx.bundle, true);

    let fx2 = fixture();
    let mut a = agent(&["write_file"]);
    a.approve = ApprovePolicy::All;
    let model = script(json!([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "/output/o.txt", "content": "x"}}]}
    ]));
    assert_eq!(
        run_with(Backend::new().with_model(model.clone()), &a, &fx2)
            .await
            .status(),
        RunStatus::Paused
    );
    let err = Backend::new()
        .with_model(model)
        .resume_with(
            &RunControl::new(),
            &fx2.bundle,
            &[Decision::Approve("w1".into())],
            &ResumeSpec::new().host_dir(&host),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not granted a host folder"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_paused_twice_replays_through_both_pauses() {
    let fx = fixture();
    let mut a = agent(&["write_file", "read_file"]);
    a.approve = ApprovePolicy::Destructive;
    let model = script(json!([
        {"tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/one.txt", "content": "1"}}
        ]},
        {"tool_calls": [
            {"id": "w2", "name": "write_file", "arguments": {"path": "/output/two.txt", "content": "2"}},
            {"id": "w3", "name": "write_file", "arguments": {"path": "/output/three.txt", "content": "3"}}
        ]},
        {"text": "one and three"}
    ]));
    let backend = Backend::new().with_model(model);
    assert_eq!(
        run_with(backend.clone(), &a, &fx).await.status(),
        RunStatus::Paused
    );
    let control = RunControl::new();
    let r = backend
        .resume(&control, &fx.bundle, &[Decision::Approve("w1".into())])
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Paused);
    let r = backend
        .resume(
            &control,
            &fx.bundle,
            &[
                Decision::Deny {
                    call_id: "w2".into(),
                    message: "not two".into(),
                },
                Decision::Approve("w3".into()),
            ],
        )
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished);
    assert_eq!(
        decided_by(&fx.bundle),
        s(&["tool", "tool", "approval", "tool"])
    );
    assert_verifies(&fx.bundle, true);
    let again = assert_replays(&fx).await;
    assert!(again.join("output/one.txt").exists());
    assert!(!again.join("output/two.txt").exists());
    assert!(again.join("output/three.txt").exists());
    let paused = timeline(&again)
        .iter()
        .filter(|l| *l == "run_finished:paused")
        .count();
    assert_eq!(paused, 2);
}
