//! A rig agent on an offline model of the test's own, with a tool on the capture's
//! sandbox: its `prompt()` leaves a bundle that verifies, whose model events are `parsed`
//! (no wire bytes were seen) and whose tool events carry the model's call ids.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use provrun_evidence::{Confidence, RunStatus, read_blob_by_digest, read_events, verify};
use provrun_rig::{DeclareRigTools, RigEvidence};
use provrun_sandbox::Sandbox;
use rig_core::OneOrMany;
use rig_core::agent::AgentBuilder;
use rig_core::completion::{
    AssistantContent, CompletionError, CompletionModel, CompletionRequest, CompletionResponse,
    Prompt, Usage,
};
use rig_core::streaming::StreamingCompletionResponse;
use rig_core::tool::Tool;
use serde::Deserialize;
use serde_json::{Value, json};

/// Answers from a script, one turn per call; counts its calls.
#[derive(Clone)]
struct ScriptedModel {
    turns: Arc<Vec<AssistantContent>>,
    calls: Arc<AtomicUsize>,
}

impl CompletionModel for ScriptedModel {
    type Response = Value;
    type StreamingResponse = ();
    type Client = ();

    fn make(_: &(), _: impl Into<String>) -> Self {
        unreachable!("the test builds its model directly")
    }

    async fn completion(
        &self,
        _request: CompletionRequest,
    ) -> Result<CompletionResponse<Value>, CompletionError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let turn = self
            .turns
            .get(n)
            .cloned()
            .ok_or_else(|| CompletionError::ProviderError("script exhausted".into()))?;
        let mut usage = Usage::new();
        usage.input_tokens = 10 + n as u64;
        usage.output_tokens = 1;
        usage.total_tokens = usage.input_tokens + 1;
        Ok(CompletionResponse {
            choice: OneOrMany::one(turn),
            usage,
            raw_response: json!({"turn": n}),
            message_id: None,
        })
    }

    async fn stream(
        &self,
        _request: CompletionRequest,
    ) -> Result<StreamingCompletionResponse<()>, CompletionError> {
        Err(CompletionError::ProviderError("not streamed".into()))
    }
}

/// Writes a note under the sandbox's `/output`.
struct WriteNote {
    sandbox: Sandbox,
}

#[derive(Deserialize)]
struct NoteArgs {
    path: String,
    text: String,
}

impl Tool for WriteNote {
    const NAME: &'static str = "write_note";
    type Error = std::io::Error;
    type Args = NoteArgs;
    type Output = String;

    fn description(&self) -> String {
        "Write a note into the output folder".into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "required": ["path", "text"]
        })
    }

    async fn call(&self, args: NoteArgs) -> Result<String, std::io::Error> {
        let written = self
            .sandbox
            .write_file(&format!("/output/{}", args.path), args.text.as_bytes())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(format!("wrote {} bytes", written.bytes))
    }
}

// One scenario: a rig agent runs once and its one bundle is read back event by event.
#[tokio::test(flavor = "current_thread")]
async fn prompt_leaves_a_verifying_bundle_with_parsed_model_events() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let probe = WriteNote {
        sandbox: Sandbox::with_temp_scratch(dir.path(), dir.path(), Default::default()).unwrap(),
    };
    let capture = RigEvidence::builder(&bundle)
        .agent("note-taker")
        .model("scripted")
        .rig_tool(&probe)
        .unwrap()
        .open()
        .unwrap();
    let evidence = RigEvidence::new(capture);

    let model = ScriptedModel {
        turns: Arc::new(vec![
            // An escape the sandbox refuses: the call fails, the model is told.
            AssistantContent::tool_call(
                "call_bad",
                "write_note",
                json!({"path": "../escape.txt", "text": "x"}),
            ),
            AssistantContent::tool_call(
                "call_good",
                "write_note",
                json!({"path": "answer.txt", "text": "42"}),
            ),
            AssistantContent::text("The answer is in answer.txt."),
        ]),
        calls: Arc::new(AtomicUsize::new(0)),
    };
    let calls = model.calls.clone();
    let note = evidence.sandboxed(|sandbox| WriteNote { sandbox }).unwrap();
    let agent = AgentBuilder::new(evidence.model(model))
        .preamble("You keep notes.")
        .tools(vec![Box::new(note)])
        .build();
    let answer = agent
        .prompt("Write the answer down.")
        .max_turns(5)
        .await
        .unwrap();
    assert_eq!(answer, "The answer is in answer.txt.");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    evidence
        .finish(RunStatus::Finished, json!({"turns": 3}), None)
        .await
        .unwrap();

    let report = verify(&bundle);
    assert!(report.ok && report.complete, "{report:?}");
    let events = read_events(&bundle).unwrap();
    // The totals a native run's run_finished has, and the caller's own member.
    let finished = events.last().unwrap();
    assert_eq!(finished.kind.as_str(), "run_finished");
    assert_eq!(
        finished.payload["usage"],
        json!({"requests": 3, "tool_calls": 2, "input_tokens": 33, "output_tokens": 3, "turns": 3})
    );
    let started = &events[0];
    assert_eq!(started.payload["builder"], provrun_rig::RIG_BUILDER);
    assert_eq!(started.payload["tools"][0]["name"], "write_note");

    let models: Vec<_> = events
        .iter()
        .filter(|e| e.kind.as_str() == "model_called")
        .collect();
    assert_eq!(models.len(), 3);
    for m in &models {
        assert_eq!(m.confidence, Confidence::Parsed, "{:?}", m.payload);
        assert_eq!(m.payload["model"], "scripted");
    }
    // The parsed request is rig's own: the preamble and the prompt are in it.
    let request = read_blob_by_digest(
        &bundle,
        models[0].payload["request"]["digest"]["sha256"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let request = String::from_utf8(request).unwrap();
    assert!(request.contains("You keep notes."), "{request}");
    assert!(request.contains("Write the answer down."), "{request}");
    let response: Value = serde_json::from_slice(
        &read_blob_by_digest(
            &bundle,
            models[2].payload["response"]["digest"]["sha256"]
                .as_str()
                .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(response["raw_response"], json!({"turn": 2}));
    assert_eq!(models[2].payload["usage"]["input_tokens"], 12);

    let tools: Vec<_> = events
        .iter()
        .filter(|e| e.kind.as_str() == "tool_called")
        .collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0].confidence, Confidence::Observed);
    assert_eq!(tools[0].payload["call_id"], "call_bad");
    assert_eq!(tools[0].payload["ok"], false);
    assert_eq!(tools[1].payload["call_id"], "call_good");
    assert_eq!(tools[1].payload["ok"], true);
    assert_eq!(
        tools[1].payload["arguments"],
        json!({"path": "answer.txt", "text": "42"})
    );
    assert_eq!(tools[1].payload["result"], "wrote 2 bytes");

    // The file the tool wrote is the run's output, and nothing escaped.
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/answer.txt")).unwrap(),
        "42"
    );
    assert!(!bundle.join("escape.txt").exists() && !dir.path().join("escape.txt").exists());
    assert!(
        events.iter().any(|e| e.kind.as_str() == "output_produced"
            && e.payload.to_string().contains("answer.txt"))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn streamed_completions_are_refused_not_left_unrecorded() {
    let dir = tempfile::tempdir().unwrap();
    let evidence = RigEvidence::new(
        RigEvidence::builder(dir.path().join("b"))
            .model("scripted")
            .open()
            .unwrap(),
    );
    let model = evidence.model(ScriptedModel {
        turns: Arc::new(vec![AssistantContent::text("hi")]),
        calls: Arc::new(AtomicUsize::new(0)),
    });
    let request = model.completion_request("hello").build();
    let err = match model.stream(request).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a stream was let through"),
    };
    assert!(err.contains("does not record streamed"), "{err}");
    assert_eq!(model.inner().calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_completion_is_recorded_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    let evidence = RigEvidence::new(
        RigEvidence::builder(&bundle)
            .model("scripted")
            .open()
            .unwrap(),
    );
    let model = evidence.model(ScriptedModel {
        turns: Arc::new(vec![]),
        calls: Arc::new(AtomicUsize::new(0)),
    });
    let request = model.completion_request("hello").build();
    assert!(model.completion(request).await.is_err());
    evidence
        .finish(RunStatus::Failed, Value::Null, Some("model failed".into()))
        .await
        .unwrap();
    assert!(verify(&bundle).ok);
    let events = read_events(&bundle).unwrap();
    let m = events
        .iter()
        .find(|e| e.kind.as_str() == "model_called")
        .unwrap();
    assert_eq!(m.confidence, Confidence::Parsed);
    assert!(
        m.payload["error"]
            .as_str()
            .unwrap()
            .contains("script exhausted"),
        "{:?}",
        m.payload
    );
    assert!(m.payload.get("response").is_none_or(Value::is_null));
}
