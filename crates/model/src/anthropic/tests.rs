//! Unit tests of the Messages backend: the request body from a history, thinking and
//! server tool blocks kept, stop reasons, and hostile streams as typed problems.

use serde_json::{Value, json};

use super::*;
use crate::types::{FinishReason, Message, ModelRequest, ProviderItem, ToolCall};
use crate::wire::BodyProblem;

fn sse(events: &[&str]) -> String {
    events
        .iter()
        .map(|e| {
            let v: Value = serde_json::from_str(e).unwrap();
            format!("event: {}\ndata: {e}\n\n", v["type"].as_str().unwrap())
        })
        .collect()
}

#[test]
fn history_goes_out_as_messages_blocks_with_results_merged_by_id() {
    let mut request = ModelRequest {
        messages: vec![
            Message::system("be brief"),
            Message::user("hi"),
            Message::Assistant {
                text: Some("calling".into()),
                tool_calls: vec![
                    ToolCall {
                        id: "t1".into(),
                        name: "f".into(),
                        arguments: r#"{"a":1}"#.into(),
                    },
                    ToolCall {
                        id: "t2".into(),
                        name: "g".into(),
                        arguments: "".into(),
                    },
                ],
                provider_items: vec![
                    ProviderItem {
                        api: API_TAG.into(),
                        item: json!({"type": "thinking", "thinking": "hm", "signature": "sig"}),
                    },
                    ProviderItem {
                        api: "openai-responses".into(),
                        item: json!({"type": "reasoning"}),
                    },
                ],
            },
            Message::tool_result("t1", "f", "one", true),
            Message::tool_result("t2", "g", "boom", false),
            Message::user("and?"),
        ],
        tools: vec![crate::ToolDefinition {
            name: "f".into(),
            description: "".into(),
            parameters: json!({"type": "object", "x-internal": 1}),
        }],
        ..Default::default()
    };
    request.settings.prompt_caching = true;
    request.settings.parallel_tool_calls = Some(false);
    let body = build_request_body("claude", &request, true, 100);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "f", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        (body["max_tokens"].clone(), body["stream"].clone()),
        (json!(100), json!(true))
    );
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(
        m[1]["content"],
        json!([
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
            {"type": "tool_use", "id": "t2", "name": "g", "input": {}},
        ])
    );
    assert_eq!(
        m[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": true},
            {"type": "text", "text": "and?"},
        ])
    );
}

#[test]
fn redacted_thinking_and_server_tools_are_kept_and_thinking_goes_back_first() {
    let body = br#"{"type":"message","id":"m","model":"c","stop_reason":"pause_turn","content":[
        {"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},
        {"type":"server_tool_use","id":"srv","name":"web_search","input":{"query":"q"}},
        {"type":"web_search_tool_result","tool_use_id":"srv","content":[]},
        {"type":"text","text":"so far"}],
        "usage":{"input_tokens":3,"output_tokens":4}}"#;
    let p = parse_body(body, Some("application/json"), &mut |_| {}).unwrap();
    assert_eq!(
        p.finish_reason.as_ref().map(FinishReason::as_str),
        Some("pause_turn")
    );
    assert_eq!(
        p.provider_items,
        vec![ProviderItem {
            api: API_TAG.into(),
            item: json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}),
        }]
    );
    let kinds: Vec<&str> = p
        .provider_tool_calls
        .iter()
        .map(|c| c.kind.as_str())
        .collect();
    assert_eq!(kinds, ["web_search", "web_search_tool_result"]);
    let request = ModelRequest {
        messages: vec![
            Message::user("q"),
            Message::Assistant {
                text: p.text,
                tool_calls: vec![],
                provider_items: p.provider_items,
            },
        ],
        ..Default::default()
    };
    let sent = build_request_body("c", &request, false, 10);
    assert_eq!(
        sent["messages"][1]["content"],
        json!([{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
               {"type": "text", "text": "so far"}])
    );
}

#[test]
fn stop_reasons_map_and_unknown_ones_are_kept() {
    assert_eq!(finish_reason("end_turn"), FinishReason::Stop);
    assert_eq!(finish_reason("stop_sequence"), FinishReason::Stop);
    assert_eq!(finish_reason("tool_use"), FinishReason::ToolCalls);
    assert_eq!(finish_reason("max_tokens"), FinishReason::Length);
    assert_eq!(finish_reason("refusal"), FinishReason::ContentFilter);
    assert_eq!(finish_reason("pause_turn").as_str(), "pause_turn");
    assert_eq!(finish_reason("brand_new").as_str(), "brand_new");
}

#[test]
fn hostile_streams_are_typed_problems() {
    let start = r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1,"output_tokens":0}}}"#;
    let stop = r#"{"type":"message_stop"}"#;
    let cases: Vec<(String, &str)> = vec![
        (
            sse(&[
                start,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"hologram"}}"#,
                stop,
            ]),
            "unknown content block type",
        ),
        (
            sse(&[
                start,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":[1]}}"#,
                stop,
            ]),
            "not a JSON object",
        ),
        (
            sse(&[
                start,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"[1,2]"}}"#,
                stop,
            ]),
            "not a JSON object",
        ),
        (
            sse(&[
                start,
                r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
                stop,
            ]),
            "never started",
        ),
        (
            sse(&[
                start,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
                stop,
            ]),
            "which is text",
        ),
        (
            "event: message_start\ndata: {not json\n\n".to_string(),
            "not JSON",
        ),
        (
            format!(
                "event: message_start\ndata: {}\n\n",
                "x".repeat(10 * 1024 * 1024)
            ),
            "larger than the limit",
        ),
    ];
    for (body, expected) in cases {
        let r = parse_body(body.as_bytes(), Some("text/event-stream"), &mut |_| {});
        match r {
            Err(BodyProblem::Malformed(m)) => assert!(m.contains(expected), "{m} / {expected}"),
            other => panic!("{expected}: {other:?}"),
        }
    }
    let body = sse(&[
        start,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ]);
    match parse_body(body.as_bytes(), Some("text/event-stream"), &mut |_| {}) {
        Err(BodyProblem::Provider { code, message, .. }) => {
            assert_eq!(
                (code.as_deref(), message.as_str()),
                (Some("overloaded_error"), "Overloaded")
            )
        }
        other => panic!("{other:?}"),
    }
    match parse_body(sse(&[start]).as_bytes(), None, &mut |_| {}) {
        Err(BodyProblem::Incomplete(m)) => assert!(m.contains("message_stop"), "{m}"),
        other => panic!("{other:?}"),
    }
    for bad in [
        &b"{"[..],
        b"[]",
        br#"{"type":"message"}"#,
        br#"{"content":[{"type":"tool_use","id":"t","input":"s"}]}"#,
    ] {
        assert!(matches!(
            parse_body(bad, Some("application/json"), &mut |_| {}),
            Err(BodyProblem::Malformed(_))
        ));
    }
}
