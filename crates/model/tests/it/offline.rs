//! Offline models: TestModel, FunctionModel, ScriptModel and ReplayModel.

use std::sync::{Arc, Mutex};

use provrun_model::{
    FinishReason, FunctionModel, Message, Model, ModelError, ModelRequest, RecordedResponse,
    ReplayModel, Reply, ScriptModel, StreamDelta, TestModel, ToolCall, ToolDefinition,
    arguments_for_schema, estimate_usage, parse_response,
};
use serde_json::{Value, json};

fn tool(name: &str, parameters: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters,
    }
}

fn request(messages: Vec<Message>, tools: Vec<ToolDefinition>) -> ModelRequest {
    ModelRequest {
        messages,
        tools,
        ..Default::default()
    }
}

#[test]
fn schema_arguments_follow_default_examples_enum_and_types() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "mode": {"type": "string", "enum": ["r", "w"]},
            "count": {"type": "integer", "minimum": 3},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean", "default": true},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "name": {"type": "string", "examples": ["Ada"]},
            "inner": {"$ref": "#/$defs/Inner"},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 2}]},
            "optional": {"type": "string"}
        },
        "required": ["path", "mode", "count", "ratio", "flag", "tags", "name", "inner", "maybe"],
        "$defs": {"Inner": {"type": "object", "properties": {"x": {"type": "integer"}},
                            "required": ["x"]}}
    });
    assert_eq!(
        arguments_for_schema(&schema),
        json!({"path": "", "mode": "r", "count": 3, "ratio": 0, "flag": true, "tags": [""],
               "name": "Ada", "inner": {"x": 0}, "maybe": "aa"})
    );
    // A schema that is not an object still yields an arguments object.
    assert_eq!(arguments_for_schema(&json!(true)), json!({}));
}

#[tokio::test]
async fn test_model_calls_every_tool_once_then_summarises() {
    let model = TestModel::new();
    let tools = vec![
        tool(
            "read_file",
            json!({"type": "object", "properties": {"path": {"type": "string", "default": "/input/a.txt"}}, "required": ["path"]}),
        ),
        tool("list_dir", json!({"type": "object", "properties": {}})),
    ];
    let mut messages = vec![Message::system("be brief"), Message::user("go")];
    let first = model
        .request(&request(messages.clone(), tools.clone()))
        .await
        .unwrap();
    assert_eq!(first.text, None);
    assert_eq!(first.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        first.tool_calls,
        vec![
            ToolCall {
                id: "test_call_0".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"/input/a.txt"}"#.into()
            },
            ToolCall {
                id: "test_call_1".into(),
                name: "list_dir".into(),
                arguments: "{}".into()
            },
        ]
    );
    assert!(first.usage_reported);
    assert_eq!(
        first.usage,
        estimate_usage(
            &first.raw.request_body,
            &Reply::tool_calls(first.tool_calls.clone())
        )
    );
    // The raw bytes parse back to the same response.
    let again = parse_response(first.raw.clone()).unwrap();
    assert_eq!(again.tool_calls, first.tool_calls);
    // The request bytes are an OpenAI chat request.
    let sent: Value = serde_json::from_slice(&first.raw.request_body).unwrap();
    assert_eq!(sent["model"], "test");
    assert_eq!(sent["tools"][0]["type"], "function");

    messages.push(first.to_message());
    messages.push(Message::tool_result(
        "test_call_0",
        "read_file",
        "hello",
        true,
    ));
    messages.push(Message::tool_result(
        "test_call_1",
        "list_dir",
        "no such dir",
        false,
    ));
    let second = model.request(&request(messages, tools)).await.unwrap();
    assert!(second.tool_calls.is_empty());
    assert_eq!(second.finish_reason, Some(FinishReason::Stop));
    let summary: Value = serde_json::from_str(second.text.as_deref().unwrap()).unwrap();
    assert_eq!(
        summary,
        json!({"tool_results": [{"name": "read_file", "ok": true}, {"name": "list_dir", "ok": false}]})
    );
}

#[tokio::test]
async fn offline_streaming_reports_deltas_and_keeps_sse() {
    let model = TestModel::new();
    let tools = vec![tool(
        "echo",
        json!({"type": "object", "properties": {"s": {"type": "string", "const": "hi"}}, "required": ["s"]}),
    )];
    let deltas = Arc::new(Mutex::new(Vec::new()));
    let sink = deltas.clone();
    let resp = model
        .request_stream(&request(vec![Message::user("x")], tools), &move |d| {
            sink.lock().unwrap().push(d)
        })
        .await
        .unwrap();
    assert_eq!(
        resp.raw.response_media_type.as_deref(),
        Some("text/event-stream")
    );
    assert!(resp.raw.response_body.ends_with(b"data: [DONE]\n\n"));
    let sent: Value = serde_json::from_slice(&resp.raw.request_body).unwrap();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
    assert_eq!(
        *deltas.lock().unwrap(),
        vec![StreamDelta::ToolCall {
            index: 0,
            id: Some("test_call_0".into()),
            name: Some("echo".into()),
            arguments: r#"{"s":"hi"}"#.into()
        }]
    );
    assert_eq!(resp.tool_calls[0].arguments, r#"{"s":"hi"}"#);
}

#[tokio::test]
async fn function_model_sees_history_and_tools() {
    let model: Arc<dyn Model> = Arc::new(FunctionModel::new("f", |req: &ModelRequest| {
        if req.tools.is_empty() {
            return Err(ModelError::Function("no tools".into()));
        }
        Ok(Reply::text(format!(
            "{} messages, {} tools",
            req.messages.len(),
            req.tools.len()
        )))
    }));
    let resp = model
        .request(&request(
            vec![Message::user("a")],
            vec![tool("t", json!({}))],
        ))
        .await
        .unwrap();
    assert_eq!(resp.text.as_deref(), Some("1 messages, 1 tools"));
    let err = model.request(&request(vec![], vec![])).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Function(ref m) if m == "no tools"),
        "{err}"
    );
}

#[tokio::test]
async fn script_model_follows_the_design_example() {
    let script = json!([
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "/input/a.txt"}},
                        {"id": "c2", "name": "list_dir",  "arguments": "{\"path\": \"/input\"}"},
                        {"name": "broken", "arguments": "{not json"}]},
        {"text": "done", "delay_ms": 5}
    ]);
    let model = ScriptModel::from_value(&script).unwrap();
    let req = request(vec![Message::user("go")], vec![]);
    let first = model.request(&req).await.unwrap();
    let calls: Vec<(&str, &str, &str)> = first
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("c1", "read_file", r#"{"path":"/input/a.txt"}"#),
            ("c2", "list_dir", r#"{"path": "/input"}"#),
            ("call_0_2", "broken", "{not json"),
        ]
    );
    // The script position comes from the history: one assistant turn in it → element 1.
    let mut history = vec![Message::user("go")];
    history.push(Message::Assistant {
        text: None,
        tool_calls: first.tool_calls.clone(),
        provider_items: vec![],
    });
    let req2 = request(history.clone(), vec![]);
    let started = std::time::Instant::now();
    let second = model.request(&req2).await.unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(5));
    assert_eq!(second.text.as_deref(), Some("done"));
    // The same model serves another run from its start, at any time: it keeps no state.
    let again = model.request(&req).await.unwrap();
    assert_eq!(again.tool_calls.len(), 3);
    history.push(Message::Assistant {
        text: Some("done".into()),
        tool_calls: vec![],
        provider_items: vec![],
    });
    let third = model.request(&request(history, vec![])).await.unwrap_err();
    match &third {
        ModelError::ScriptExhausted {
            request,
            len,
            exchange,
        } => {
            assert_eq!((*request, *len), (3, 2));
            assert!(!exchange.request_body.is_empty());
        }
        other => panic!("expected ScriptExhausted, got {other}"),
    }
    assert!(third.to_string().contains("request 3"), "{third}");
}

#[test]
fn script_errors_name_the_element_and_field() {
    let cases = [
        (json!({"text": "x"}), None, None),
        (json!([{"text": "ok"}, 5]), Some(1), None),
        (json!([{"txt": "typo"}]), Some(0), Some("txt")),
        (json!([{"text": 3}]), Some(0), Some("text")),
        (json!([{}]), Some(0), None),
        (
            json!([{"tool_calls": [{"name": "a", "arguments": 5}]}]),
            Some(0),
            Some("tool_calls[0].arguments"),
        ),
        (
            json!([{"text": "a"}, {"tool_calls": [{"arguments": {}}]}]),
            Some(1),
            Some("tool_calls[0].name"),
        ),
        (
            json!([{"text": "a", "delay_ms": -1}]),
            Some(0),
            Some("delay_ms"),
        ),
    ];
    for (value, want_element, want_field) in cases {
        match ScriptModel::from_value(&value) {
            Err(ModelError::InvalidScript { element, field, .. }) => {
                assert_eq!(element, want_element, "{value}");
                assert_eq!(field.as_deref(), want_field, "{value}");
            }
            other => panic!("{value}: expected InvalidScript, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn script_model_loads_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(&path, r#"[{"text": "hello"}]"#).unwrap();
    let model = ScriptModel::from_path(&path).unwrap();
    assert_eq!(model.name(), format!("script:{}", path.display()));
    let resp = model
        .request(&request(vec![Message::user("x")], vec![]))
        .await
        .unwrap();
    assert_eq!(resp.text.as_deref(), Some("hello"));

    std::fs::write(&path, "[{").unwrap();
    let err = ScriptModel::from_path(&path).unwrap_err();
    assert!(
        matches!(err, ModelError::InvalidScript { element: None, .. }),
        "{err}"
    );
    let err = ScriptModel::from_path(dir.path().join("missing.json")).unwrap_err();
    assert!(err.to_string().contains("cannot read"), "{err}");
}

#[tokio::test]
async fn replay_answers_in_order_and_reports_divergence() {
    // Record a run with the script model, then replay it.
    let original = ScriptModel::from_value(&json!([
        {"tool_calls": [{"id": "c1", "name": "t", "arguments": {"a": 1}}]},
        {"text": "finished"}
    ]))
    .unwrap();
    let tools = vec![tool("t", json!({"type": "object", "x-internal": true}))];
    let mut history = vec![Message::user("go")];
    let r1 = original
        .request(&request(history.clone(), tools.clone()))
        .await
        .unwrap();
    history.push(r1.to_message());
    history.push(Message::tool_result("c1", "t", "1", true));
    let r2 = original
        .request(&request(history.clone(), tools.clone()))
        .await
        .unwrap();
    let recorded: Vec<RecordedResponse> = [&r1, &r2]
        .iter()
        .map(|r| RecordedResponse {
            response_body: r.raw.response_body.clone(),
            response_media_type: r.raw.response_media_type.clone(),
            status: r.raw.status,
            request_body: Some(r.raw.request_body.clone()),
        })
        .collect();

    let replay = ReplayModel::new(recorded.clone());
    let first = replay
        .request(&request(vec![Message::user("go")], tools.clone()))
        .await
        .unwrap();
    assert_eq!(first.tool_calls, r1.tool_calls);
    let second = replay
        .request(&request(history.clone(), tools.clone()))
        .await
        .unwrap();
    assert_eq!(second.text.as_deref(), Some("finished"));
    let past_end = replay
        .request(&request(history.clone(), tools.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(past_end, ModelError::ReplayDiverged { request: 3, .. }),
        "{past_end}"
    );

    // A different tool result diverges at the first differing field.
    let replay = ReplayModel::new(recorded);
    replay
        .request(&request(vec![Message::user("go")], tools.clone()))
        .await
        .unwrap();
    let mut changed = history.clone();
    changed[2] = Message::tool_result("c1", "t", "2", true);
    let err = replay.request(&request(changed, tools)).await.unwrap_err();
    match &err {
        ModelError::ReplayDiverged {
            request,
            difference,
            ..
        } => {
            assert_eq!(*request, 2);
            assert_eq!(difference, r#"/messages/2/content: recorded "1", now "2""#);
        }
        other => panic!("expected ReplayDiverged, got {other}"),
    }
}

#[tokio::test]
async fn replay_of_a_recorded_error_status_gives_the_typed_error() {
    let replay = ReplayModel::new(vec![RecordedResponse {
        response_body: br#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#
            .to_vec()
            .into(),
        response_media_type: Some("application/json".into()),
        status: Some(429),
        request_body: None,
    }]);
    let err = replay
        .request(&request(vec![Message::user("x")], vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::RateLimited { status: 429, .. }),
        "{err}"
    );
}

#[test]
fn models_from_spec_strings() {
    assert_eq!(
        provrun_model::model_from_spec("test").unwrap().name(),
        "test"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    std::fs::write(&path, r#"[{"text": "hi"}]"#).unwrap();
    let m = provrun_model::model_from_spec(&format!("script:{}", path.display())).unwrap();
    assert_eq!(m.name(), format!("script:{}", path.display()));
    for bad in ["", "gpt-4o", "script:", "replay:/some/bundle", "openai:"] {
        let err = provrun_model::model_from_spec(bad).err().expect(bad);
        assert!(matches!(err, ModelError::Config(_)), "{bad}: {err}");
    }
}

#[test]
fn attempts_serialise_as_a_summary_without_bytes() {
    let a = provrun_model::Attempt {
        status: Some(429),
        error: Some("rate limited".into()),
        duration: std::time::Duration::from_millis(1234),
        retry_after: Some(std::time::Duration::from_secs(2)),
        response_body: bytes::Bytes::from_static(b"{\"error\":{}}"),
        response_media_type: Some("application/json".into()),
    };
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        json!({"status": 429, "error": "rate limited", "duration_ms": 1234,
               "retry_after_ms": 2000, "response_size": 12,
               "response_media_type": "application/json"})
    );
}

#[tokio::test]
async fn a_script_step_can_give_reasoning_whole_or_streamed() {
    let model =
        ScriptModel::from_value(&json!([{"reasoning": "think first", "text": "then answer"}]))
            .unwrap();
    let req = request(vec![Message::user("q")], vec![]);
    let whole = model.request(&req).await.unwrap();
    assert_eq!(whole.reasoning.as_deref(), Some("think first"));
    assert_eq!(whole.text.as_deref(), Some("then answer"));

    let deltas = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&deltas);
    let streamed = model
        .request_stream(&req, &move |d| seen.lock().unwrap().push(d))
        .await
        .unwrap();
    assert_eq!(streamed.reasoning.as_deref(), Some("think first"));
    let deltas = deltas.lock().unwrap().clone();
    let reasoning_first = deltas
        .iter()
        .position(|d| matches!(d, StreamDelta::Reasoning(r) if r == "think first"));
    let text_at = deltas
        .iter()
        .position(|d| matches!(d, StreamDelta::Text(t) if t == "then answer"));
    assert!(reasoning_first.unwrap() < text_at.unwrap(), "{deltas:?}");
    // A mistyped reasoning is an error naming the field.
    let err = ScriptModel::from_value(&json!([{"text": "a", "reasoning": 1}])).unwrap_err();
    assert!(err.to_string().contains("reasoning"), "{err}");
}
