//! Unit tests of the Responses backend: the history as input items, an answer sent back
//! after its reasoning, and hostile bodies as typed problems.

use serde_json::json;

use super::*;
use crate::types::{Message, ModelRequest, ProviderItem, ToolCall};
use crate::wire::BodyProblem;

#[test]
fn history_goes_out_as_input_items_keyed_by_call_id() {
    let request = ModelRequest {
        messages: vec![
            Message::system("sys"),
            Message::user("hi"),
            Message::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "f".into(),
                    arguments: "{\"a\":1}".into(),
                }],
                provider_items: vec![
                    ProviderItem {
                        api: API_TAG.into(),
                        item: json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "E", "summary": []}),
                    },
                    ProviderItem {
                        api: "anthropic".into(),
                        item: json!({"type": "thinking"}),
                    },
                ],
            },
            Message::tool_result("call_1", "f", "2", true),
        ],
        ..Default::default()
    };
    let body = build_request_body("gpt", &request, false, false);
    assert_eq!(
        body["input"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "E", "summary": []},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "2"},
        ])
    );
    assert_eq!(body["store"], json!(false));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    let stored = build_request_body("gpt", &request, true, true);
    assert!(stored.get("include").is_none() && stored["stream"] == json!(true));
}

#[test]
fn an_answer_goes_back_as_its_message_item_after_its_reasoning() {
    let body = br#"{"status":"completed","output":[
        {"type":"reasoning","id":"rs_1","encrypted_content":"E","summary":[],"status":"completed"},
        {"type":"message","id":"msg_1","role":"assistant","status":"completed",
         "content":[{"type":"output_text","text":"hi","annotations":[]}]}]}"#;
    let p = parse_body(body, Some("application/json"), &mut |_| {}).unwrap();
    assert_eq!(p.text.as_deref(), Some("hi"));
    let turn = Message::Assistant {
        text: p.text,
        tool_calls: vec![],
        provider_items: p.provider_items,
    };
    let request = ModelRequest {
        messages: vec![Message::user("q"), turn, Message::user("more")],
        ..Default::default()
    };
    let body = build_request_body("gpt", &request, false, false);
    let kinds: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap())
        .collect();
    assert_eq!(kinds, ["user", "reasoning", "message", "user"]);
    assert_eq!(body["input"][2]["id"], "msg_1");
    assert!(body["input"][1].get("status").is_none());
}

#[test]
fn hostile_bodies_are_typed_problems() {
    for (body, expected) in [
        (&b"{nope"[..], "not JSON"),
        (b"[]", "not a JSON object"),
        (
            br#"{"output":[{"type":"hologram"}]}"#,
            "unknown output item type",
        ),
        (
            br#"{"output":[{"type":"function_call","name":"f"}]}"#,
            "no call_id",
        ),
        (br#"{"status":"completed"}"#, "no `output`"),
    ] {
        match parse_body(body, Some("application/json"), &mut |_| {}) {
            Err(BodyProblem::Malformed(m)) => assert!(m.contains(expected), "{m}"),
            other => panic!("{expected}: {other:?}"),
        }
    }
    let big = format!(
        "event: response.created\ndata: {}\n\n",
        "x".repeat(10 << 20)
    );
    assert!(matches!(
        parse_body(big.as_bytes(), Some("text/event-stream"), &mut |_| {}),
        Err(BodyProblem::Malformed(m)) if m.contains("larger than the limit")
    ));
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n";
    assert!(matches!(
        parse_body(failed.as_bytes(), Some("text/event-stream"), &mut |_| {}),
        Err(BodyProblem::Provider { code: Some(c), .. }) if c == "server_error"
    ));
    let error = "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow\"}\n\n";
    assert!(matches!(
        parse_body(error.as_bytes(), Some("text/event-stream"), &mut |_| {}),
        Err(BodyProblem::Provider { code: Some(c), .. }) if c == "rate_limit_exceeded"
    ));
}
