//! Reading a bundle's events through their typed payloads, as a user's program does with
//! the facade alone: a run's `model_called`, `tool_called` and `run_finished` events come
//! back as structs (`EventPayload`), and the JSON stays beside them.

use std::sync::Arc;

use provrun::agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun::evidence::{EventPayload, read_events, read_typed_events};
use provrun::model::{Message, Model, ModelError, ModelRequest, ModelResponse, ToolCall};
use provrun_downstream as _;

/// Asks for one `word_count` call, then answers with its result.
struct OneCall;

#[provrun::async_trait]
impl Model for OneCall {
    fn name(&self) -> &str {
        "one-call"
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let answered = request.messages.iter().rev().find_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        });
        Ok(match answered {
            Some(count) => ModelResponse::text(format!("{count} words")),
            None => ModelResponse::tool_calls(vec![ToolCall {
                id: "c1".into(),
                name: "word_count".into(),
                arguments: r#"{"text": "a b c d"}"#.into(),
            }]),
        })
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_runs_events_read_back_as_typed_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let mut agent = AgentSpec::new("typed", "one-call");
    agent.tools = vec!["word_count".into()];
    let result = Backend::new()
        .with_model(Arc::new(OneCall))
        .execute(&RunControl::new(), &agent, &RunSpec::new("count", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());

    let events = read_typed_events(&bundle).unwrap();
    let mut models = 0;
    let mut calls = Vec::new();
    let mut finished = None;
    for e in &events {
        // The enum grows with the format: a wildcard arm is required.
        match &e.body {
            EventPayload::RunStarted(s) => assert_eq!(s.agent, "typed"),
            EventPayload::ModelCalled(m) => {
                models += 1;
                assert_eq!(m.model, "one-call");
                assert!(m.response_rendered);
            }
            EventPayload::ToolCalled(t) => calls.push(t.clone()),
            EventPayload::RunFinished(f) => finished = Some(f.clone()),
            _ => {}
        }
    }
    assert_eq!(models, 2);
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!((call.name.as_str(), call.ok), ("word_count", true));
    assert_eq!(call.arguments["text"], "a b c d");
    assert_eq!(call.result, "4");
    assert_eq!(call.key(), "1.1");
    let finished = finished.expect("a run_finished event");
    assert_eq!(finished.status, RunStatus::Finished);
    assert_eq!(finished.event_count, events.len() as u64);

    // The JSON reader's events give the same structs.
    let plain = read_events(&bundle).unwrap();
    for (p, t) in plain.iter().zip(&events) {
        assert_eq!(p.typed().unwrap(), t.body);
        assert_eq!(p.payload, t.payload);
    }
}
