//! A before hook that rewrites a call's arguments, written as a user would (the facade
//! alone, `#[provrun::async_trait]`): the tool runs with the rewritten arguments, the
//! evidence keeps both and who rewrote them, and a replay without the hook reproduces it.

use std::sync::{Arc, Mutex};

use provrun::agent::{
    AgentSpec, Backend, BeforeToolHook, HookDecision, RunControl, RunSpec, RunStatus, ToolCallInfo,
    ToolHooks, replay,
};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::ScriptModel;
use serde_json::{Value, json};

/// What a hook saw of a call: its parsed arguments and the tool's metadata.
type Seen = (Value, serde_json::Map<String, Value>);

/// Rewrites what `write_file` writes, and notes what it saw of each call.
struct Policy {
    seen: Arc<Mutex<Vec<Seen>>>,
}

#[provrun::async_trait]
impl BeforeToolHook for Policy {
    async fn before(&self, call: &ToolCallInfo, _control: &RunControl) -> HookDecision {
        self.seen
            .lock()
            .unwrap()
            .push((call.parsed_arguments.clone(), call.metadata.clone()));
        if call.name != "write_file" {
            return HookDecision::Allow;
        }
        let mut arguments = call.parsed_arguments.clone();
        arguments["content"] = json!("rewritten by policy");
        HookDecision::rewrite("policy", arguments)
    }
}

fn tool_called(bundle: &std::path::Path) -> Vec<Value> {
    read_events(bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| e.payload)
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn a_hook_rewrites_arguments_and_replay_reproduces_it() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let mut agent = AgentSpec::new("rewriter", "test");
    agent.tools = vec!["write_file".into()];
    let model = ScriptModel::from_value(&json!([
        {"tool_calls": [{"id": "w1", "name": "write_file",
            "arguments": {"path": "/output/note.txt", "content": "from the model"}}]},
        {"text": "done"}
    ]))
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let backend = Backend::new()
        .with_model(Arc::new(model))
        .with_hooks(ToolHooks::new().before(Policy { seen: seen.clone() }));
    let result = backend
        .execute(&RunControl::new(), &agent, &RunSpec::new("write", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());

    // The hook saw the parsed arguments and the tool's metadata.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0].0["content"], "from the model");
    assert_eq!(seen[0].1["x-category"], "write");
    assert_eq!(seen[0].1["x-destructive"], true);

    // The tool ran with the rewritten arguments.
    let written = std::fs::read_to_string(bundle.join("output/note.txt")).unwrap();
    assert_eq!(written, "rewritten by policy");

    // The evidence keeps the model's arguments, the rewritten ones, and who rewrote them.
    let calls = tool_called(&bundle);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["arguments"]["content"], "from the model");
    assert_eq!(
        calls[0]["rewritten_arguments"]["content"],
        "rewritten by policy"
    );
    assert_eq!(calls[0]["rewritten_by"], "policy");
    assert_eq!(calls[0]["decided_by"], "tool");
    let report = verify(&bundle);
    assert!(report.ok && report.complete);

    // A replay without the hook runs the tool with the recorded rewrite.
    let again = dir.path().join("again");
    let replayed = replay(&Backend::new(), &RunControl::new(), &bundle, &again)
        .await
        .unwrap();
    assert!(replayed.matches(), "{:?}", replayed.difference);
    let rewritten = std::fs::read_to_string(again.join("output/note.txt")).unwrap();
    assert_eq!(rewritten, "rewritten by policy");
    let replayed_calls = tool_called(&again);
    assert_eq!(replayed_calls[0]["rewritten_by"], "policy");
    assert_eq!(
        replayed_calls[0]["rewritten_arguments"],
        calls[0]["rewritten_arguments"]
    );
    assert_eq!(replayed_calls[0]["arguments"], calls[0]["arguments"]);
}
