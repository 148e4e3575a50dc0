//! A run's place in a conversation and the tools its caller runs: `RunSpec::history`,
//! `continues` and `client_tools` are what the model is sent and what `run_started`
//! records, a paused round trip resumes with the caller's result, and both replay from
//! the bundle alone; `RunEvent::ModelAnswer` and `CallBegin`'s confirm text reach a
//! subscriber.

use std::sync::Arc;

use provrun_agent::{
    AgentSpec, ApprovePolicy, Backend, Continuation, Decision, RunControl, RunEvent, RunSpec,
    RunStatus, replay,
};
use provrun_evidence::{read_events, verify};
use provrun_model::{Message, ScriptModel, ToolDefinition};
use serde_json::json;

fn script(value: serde_json::Value) -> Arc<ScriptModel> {
    Arc::new(ScriptModel::from_value(&value).unwrap())
}

fn pick_colour() -> ToolDefinition {
    ToolDefinition {
        name: "pick_colour".into(),
        description: "Ask the person for a colour.".into(),
        parameters: json!({"type": "object", "properties": {"hint": {"type": "string"}}}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_pauses_the_run_and_its_result_resumes_it_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let agent = AgentSpec::new("chat", "test");
    let model = script(json!([
        {"tool_calls": [{"id": "c1", "name": "pick_colour", "arguments": {"hint": "warm"}}]},
        {"text": "You picked red."}
    ]));
    let backend = Backend::new().with_model(model);
    let run = RunSpec::new("Pick a colour.", &bundle).client_tool(pick_colour());
    let paused = backend
        .execute(&RunControl::new(), &agent, &run)
        .await
        .unwrap();
    assert_eq!(paused.status(), RunStatus::Paused);
    assert_eq!(paused.deferred()[0].name, "pick_colour");
    let started = &read_events(&bundle).unwrap()[0].payload;
    assert_eq!(
        started["details"]["client_tools"][0]["name"], "pick_colour",
        "{started}"
    );
    assert!(
        started["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "pick_colour")
    );

    let result = backend
        .resume(
            &RunControl::new(),
            &bundle,
            &[Decision::Result {
                call_id: paused.deferred()[0].run_call_id.clone(),
                content: "red".into(),
                ok: true,
            }],
        )
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
    assert_eq!(result.output(), "You picked red.");
    assert!(verify(&bundle).ok);

    let report = replay(
        &Backend::new(),
        &RunControl::new(),
        &bundle,
        &dir.path().join("replayed"),
    )
    .await
    .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_turn_sends_the_history_records_it_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let mut agent = AgentSpec::new("chat", "test");
    agent.instructions = "Be brief.".into();
    // The script counts the history's assistant messages: the second turn gets the
    // second answer.
    let model = script(json!([{"text": "Hello."}, {"text": "Still here."}]));
    let backend = Backend::new().with_model(model.clone());
    backend
        .execute(&RunControl::new(), &agent, &RunSpec::new("Hi", &first))
        .await
        .unwrap();
    let history = provrun_agent::read::recorded_messages(&first).unwrap();
    assert_eq!(history.len(), 3, "{history:?}");

    let earlier = Continuation {
        run_id: "run-first".into(),
        statement_sha256: "ab".repeat(32),
    };
    let run = RunSpec::new("Are you there?", &second)
        .history(history.clone())
        .continues(earlier.clone());
    let result = backend
        .execute(&RunControl::new(), &agent, &run)
        .await
        .unwrap();
    assert_eq!(result.output(), "Still here.");
    // What the model was sent: the instructions once, the first turn, the new prompt.
    let sent = provrun_agent::read::recorded_messages(&second).unwrap();
    let expected = vec![
        Message::system("Be brief."),
        Message::user("Hi"),
        Message::assistant_text("Hello."),
        Message::user("Are you there?"),
        Message::assistant_text("Still here."),
    ];
    assert_eq!(sent, expected);
    let details = &read_events(&second).unwrap()[0].payload["details"];
    assert_eq!(details["continues"]["run_id"], "run-first");
    assert_eq!(details["continues"]["statement_sha256"], "ab".repeat(32));
    assert_eq!(details["history"].as_array().unwrap().len(), 3);
    assert!(verify(&second).ok);

    let report = replay(
        &Backend::new(),
        &RunControl::new(),
        &second,
        &dir.path().join("replayed"),
    )
    .await
    .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
    let replayed = &read_events(dir.path().join("replayed")).unwrap()[0].payload["details"];
    assert_eq!(replayed["continues"], details["continues"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_may_not_take_a_name_the_run_has() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentSpec::new("chat", "test");
    agent.tools = vec!["read_file".into()];
    let mut clash = pick_colour();
    clash.name = "read_file".into();
    let run = RunSpec::new("go", dir.path().join("b")).client_tool(clash);
    let err = Backend::new()
        .execute(&RunControl::new(), &agent, &run)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("read_file"), "{err}");
    assert!(!dir.path().join("b").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_sees_each_answer_and_the_confirm_text_of_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = AgentSpec::new("chat", "test");
    agent.tools = vec!["write_file".into()];
    agent.approve = ApprovePolicy::None;
    let model = script(json!([
        {"tool_calls": [{"id": "w", "name": "write_file",
                         "arguments": {"path": "/output/a.txt", "content": "x"}}]},
        {"text": "Written."}
    ]));
    let control = RunControl::new();
    let mut events = control.subscribe();
    let result = Backend::new()
        .with_model(model)
        .execute(&control, &agent, &RunSpec::new("go", dir.path().join("b")))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    let answers: Vec<_> = seen
        .iter()
        .filter_map(|e| match e {
            RunEvent::ModelAnswer { step, text, .. } => Some((*step, text.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(answers, [(2, Some("Written.".to_string()))]);
    let confirm = seen.iter().find_map(|e| match e {
        RunEvent::CallBegin { confirm, .. } => Some(confirm.clone()),
        _ => None,
    });
    let write_file = provrun_tools::ToolRegistry::linked()
        .get(&["write_file".to_string()])
        .unwrap()
        .remove(0);
    let expected = write_file.confirm_for(r#"{"path": "/output/a.txt", "content": "x"}"#);
    assert!(expected.as_deref().unwrap().contains("/output/a.txt"));
    assert_eq!(confirm.unwrap(), expected);
}
