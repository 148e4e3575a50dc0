//! A hand-written `Model`, as a user writes it with the facade alone: only `name` and
//! `request` (streaming comes by default), responses built with constructors and no wire
//! bytes, and a spec whose `model` names it. The run records the responses as rendered
//! JSON, verifies, and replays.

use std::sync::{Arc, Mutex};

use provrun::agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus, replay};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StreamDelta, ToolCall,
};
use provrun_downstream as _;

/// Counts the words of the prompt with the `word_count` tool, then reports the count.
struct Counter;

#[provrun::async_trait]
impl Model for Counter {
    fn name(&self) -> &str {
        "counter-model"
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
                arguments: r#"{"text": "one two three"}"#.into(),
            }]),
        })
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_custom_model_runs_by_its_own_name_records_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let mut agent = AgentSpec::new("counting", "counter-model");
    agent.tools = vec!["word_count".into()];
    let backend = Backend::new().with_model(Arc::new(Counter));
    let result = backend
        .execute(&RunControl::new(), &agent, &RunSpec::new("count", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
    assert_eq!(result.output(), "3 words");

    // Each response was recorded, rendered from its parsed content, and says so.
    let events = read_events(&bundle).unwrap();
    let calls: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventType::ModelCalled)
        .collect();
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert!(call.payload["response"].is_object(), "{}", call.payload);
        assert_eq!(call.payload["response_rendered"], true);
    }
    let report = verify(&bundle);
    assert!(report.ok && report.complete);

    // The replay reads the rendered responses back to the same run.
    let again = dir.path().join("again");
    let replayed = replay(&Backend::new(), &RunControl::new(), &bundle, &again)
        .await
        .unwrap();
    assert!(replayed.matches(), "{:?}", replayed.difference);
    assert_eq!(replayed.result.output(), "3 words");
}

#[tokio::test(flavor = "current_thread")]
async fn request_stream_defaults_to_request_with_one_delta_per_part() {
    let deltas = Mutex::new(Vec::new());
    let response = Counter
        .request_stream(&ModelRequest::default(), &|d| {
            deltas.lock().unwrap().push(d)
        })
        .await
        .unwrap();
    assert_eq!(response.tool_calls.len(), 1);
    let deltas = deltas.into_inner().unwrap();
    assert_eq!(
        deltas,
        [StreamDelta::ToolCall {
            index: 0,
            id: Some("c1".into()),
            name: Some("word_count".into()),
            arguments: r#"{"text": "one two three"}"#.into(),
        }]
    );
}
