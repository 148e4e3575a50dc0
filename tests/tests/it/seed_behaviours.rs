//! The seed behaviours through the public API: category approval policies and the
//! category hooks see, confirmation and summary texts, the sandbox tool set.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use provrun::agent::read::waiting_calls;
use provrun::agent::{
    AgentSpec, ApprovePolicy, Backend, BeforeToolHook, DeferReason, HookDecision, RunControl,
    RunEvent, RunResult, RunSpec, RunStatus, ToolCallInfo, ToolHooks,
};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::{Model, ScriptModel};
use provrun::tools::ToolCategory;
use serde_json::{Value, json};

struct Fixture {
    _dir: tempfile::TempDir,
    input: PathBuf,
    bundle: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("a.txt"), "alpha\n").unwrap();
    Fixture {
        bundle: dir.path().join("bundle"),
        input,
        _dir: dir,
    }
}

fn agent(tools: &[&str]) -> AgentSpec {
    let mut a = AgentSpec::new("seeds", "test");
    a.tools = tools.iter().map(|s| s.to_string()).collect();
    a
}

fn script(value: Value) -> Arc<dyn Model> {
    Arc::new(ScriptModel::from_value(&value).unwrap())
}

async fn run(backend: Backend, agent: &AgentSpec, fx: &Fixture) -> RunResult {
    let spec = RunSpec::new("Do the task.", &fx.bundle).input(&fx.input);
    backend
        .execute(&RunControl::new(), agent, &spec)
        .await
        .unwrap()
}

/// The turn every approval test sends: a read, a listing and a write.
fn three_calls() -> Value {
    json!([
        {"tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
            {"id": "l1", "name": "list_dir", "arguments": {"path": "/input"}},
            {"id": "w1", "name": "write_file", "arguments": {"path": "/output/b.txt", "content": "b"}}
        ]},
        {"text": "done"}
    ])
}

fn waiting(result: &RunResult) -> Vec<&str> {
    result
        .deferred()
        .iter()
        .map(|d| {
            assert_eq!(d.reason, DeferReason::Approval);
            d.call_id.as_str()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approve_list_of_categories_and_names_pauses_exactly_those_calls() {
    // A category: only the write waits.
    let fx = fixture();
    let mut a = agent(&["read_file", "list_dir", "write_file"]);
    a.approve = ApprovePolicy::Listed(vec!["write".into()]);
    let backend = Backend::new().with_model(script(three_calls()));
    let r = run(backend, &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Paused);
    assert_eq!(waiting(&r), ["w1"]);
    assert!(verify(&fx.bundle).ok);

    // A tool name: the listing waits (it comes before the write, which then runs at resume).
    let fx = fixture();
    a.approve = ApprovePolicy::Listed(vec!["list_dir".into()]);
    let backend = Backend::new().with_model(script(three_calls()));
    let r = run(backend, &a, &fx).await;
    assert_eq!(waiting(&r), ["l1"]);

    // Neither a category nor one of the agent's tools: refused before anything is written.
    let fx = fixture();
    a.approve = ApprovePolicy::Listed(vec!["wirte".into()]);
    let backend = Backend::new().with_model(script(three_calls()));
    let spec = RunSpec::new("Do the task.", &fx.bundle).input(&fx.input);
    let err = backend
        .execute(&RunControl::new(), &a, &spec)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`wirte`"), "{err}");
    assert!(!fx.bundle.exists());
}

#[test]
fn the_spec_accepts_a_word_or_a_list_for_approve() {
    let a = AgentSpec::from_toml_str(
        "name = \"a\"\nmodel = \"test\"\napprove = [\"write\", \"execute\", \"copy_to_host\"]\n",
        None,
    )
    .unwrap();
    assert_eq!(
        a.approve,
        ApprovePolicy::Listed(vec![
            "write".into(),
            "execute".into(),
            "copy_to_host".into()
        ])
    );
    assert!(a.approve.wants("run_command", "execute", true));
    assert!(a.approve.wants("copy_to_host", "write", true));
    assert!(!a.approve.wants("read_file", "read", false));
    let a = AgentSpec::from_toml_str("name = \"a\"\nmodel = \"test\"\napprove = \"all\"\n", None)
        .unwrap();
    assert_eq!(a.approve, ApprovePolicy::All);
    let err =
        AgentSpec::from_toml_str("name = \"a\"\nmodel = \"test\"\napprove = \"some\"\n", None)
            .unwrap_err();
    assert!(
        err.to_string().contains("a list of tool categories"),
        "{err}"
    );
}

/// Denies every call of a `write` tool, remembering the categories it saw.
#[derive(Default, Clone)]
struct NoWrites {
    seen: Arc<Mutex<Vec<(String, ToolCategory)>>>,
}

#[async_trait]
impl BeforeToolHook for NoWrites {
    async fn before(&self, call: &ToolCallInfo, _: &RunControl) -> HookDecision {
        self.seen
            .lock()
            .unwrap()
            .push((call.name.clone(), call.category));
        if call.category == ToolCategory::Write {
            HookDecision::Deny("no writes".into())
        } else {
            HookDecision::Allow
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_see_the_tools_category() {
    let fx = fixture();
    let a = agent(&["read_file", "list_dir", "write_file"]);
    let hook = NoWrites::default();
    let backend = Backend::new()
        .with_model(script(three_calls()))
        .with_hooks(ToolHooks::new().before(hook.clone()));
    let r = run(backend, &a, &fx).await;
    assert_eq!(r.status(), RunStatus::Finished);
    let mut seen = hook.seen.lock().unwrap().clone();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        [
            ("list_dir".to_string(), ToolCategory::Read),
            ("read_file".to_string(), ToolCategory::Read),
            ("write_file".to_string(), ToolCategory::Write),
        ]
    );
    assert!(!fx.bundle.join("output/b.txt").exists());
    let write = read_events(&fx.bundle)
        .unwrap()
        .into_iter()
        .find(|e| e.kind == EventType::ToolCalled && e.payload["name"] == "write_file")
        .unwrap();
    assert_eq!(write.payload["result"], "no writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_calls_carry_the_tools_question_and_calls_their_summary() {
    let fx = fixture();
    let mut a = agent(&["read_file", "list_dir", "write_file"]);
    a.approve = ApprovePolicy::Destructive;
    let control = RunControl::new();
    let mut events = control.subscribe();
    let spec = RunSpec::new("Do the task.", &fx.bundle).input(&fx.input);
    let r = Backend::new()
        .with_model(script(three_calls()))
        .execute(&control, &a, &spec)
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Paused);
    assert_eq!(
        r.deferred()[0].confirm.as_deref(),
        Some("Write /output/b.txt, replacing any existing file?")
    );
    let mut summaries = Vec::new();
    let mut questions = Vec::new();
    while let Ok(event) = events.try_recv() {
        match event {
            RunEvent::CallBegin { summary, .. } => summaries.push(summary.unwrap()),
            RunEvent::Deferred { confirm, .. } => questions.push(confirm.unwrap()),
            _ => {}
        }
    }
    summaries.sort();
    assert_eq!(
        summaries,
        ["List /input", "Read /input/a.txt", "Write /output/b.txt"]
    );
    assert_eq!(
        questions,
        ["Write /output/b.txt, replacing any existing file?"]
    );
    // The bundle alone gives the same question back, in any process.
    let waiting = waiting_calls(&fx.bundle).unwrap();
    assert_eq!(waiting, r.deferred());
}

/// The README's agent-spec reference names every key the spec format has.
#[test]
fn the_readme_lists_every_agent_spec_key() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = readme
        .split("## The agent spec")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README has a section `The agent spec`");
    let schema = AgentSpec::json_schema();
    let keys = schema["properties"].as_object().unwrap().keys();
    for key in keys {
        let listed = section.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with(&format!("{key} ="))
                || l.starts_with(&format!("[{key}]"))
                || l.starts_with(&format!("[[{key}]]"))
        });
        assert!(listed, "README's agent spec section does not list `{key}`");
    }
}
