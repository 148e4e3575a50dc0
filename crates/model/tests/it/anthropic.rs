//! `AnthropicModel` against real recorded Messages traffic (`tests/fixtures/anthropic`),
//! served from a loopback HTTP server: parsed content, thinking, usage, the request sent
//! (tool results by id, thinking sent back unchanged), typed errors, retries, streams cut
//! at every event boundary, and hostile bodies.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use provrun_model::{
    AnthropicConfig, AnthropicModel, ApiKey, FinishReason, Message, Model, ModelError,
    ModelRequest, ModelResponse, ProviderItem, RawExchange, StreamDelta, ToolCall, ToolDefinition,
    WireApi,
};
use serde_json::{Value, json};
use support::{Canned, Mode, SECRET_KEY, event_boundaries, quick_retry, recorded, serve};

const DIR: &str = "anthropic";

fn model(base_url: &str) -> AnthropicModel {
    let base = base_url.trim_end_matches("/v1");
    let mut config = AnthropicConfig::new("claude-test", base, Some(ApiKey::new(SECRET_KEY)));
    config.retry = quick_retry();
    AnthropicModel::new(config).unwrap()
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The provider-neutral request behind a recorded Messages request.
fn request_from(req: &Value) -> ModelRequest {
    let mut messages = Vec::new();
    if !req["system"].is_null() {
        messages.push(Message::system(text_of(&req["system"])));
    }
    let mut names = HashMap::new();
    for m in req["messages"].as_array().unwrap() {
        let blocks = match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            other => panic!("content {other}"),
        };
        if m["role"] == "assistant" {
            let mut text = None::<String>;
            let mut tool_calls = Vec::new();
            let mut provider_items = Vec::new();
            for b in blocks {
                match b["type"].as_str().unwrap() {
                    "text" => text
                        .get_or_insert_default()
                        .push_str(b["text"].as_str().unwrap()),
                    "tool_use" => {
                        names.insert(b["id"].clone(), b["name"].clone());
                        tool_calls.push(ToolCall {
                            id: b["id"].as_str().unwrap().into(),
                            name: b["name"].as_str().unwrap().into(),
                            arguments: b["input"].to_string(),
                        });
                    }
                    _ => provider_items.push(ProviderItem {
                        api: "anthropic".into(),
                        item: b,
                    }),
                }
            }
            messages.push(Message::Assistant {
                text,
                tool_calls,
                provider_items,
            });
        } else {
            for b in blocks {
                match b["type"].as_str().unwrap() {
                    "text" => messages.push(Message::user(b["text"].as_str().unwrap())),
                    "tool_result" => messages.push(Message::tool_result(
                        b["tool_use_id"].as_str().unwrap(),
                        names[&b["tool_use_id"]].as_str().unwrap(),
                        text_of(&b["content"]),
                        b["is_error"] != true,
                    )),
                    other => panic!("user block {other}"),
                }
            }
        }
    }
    let tools = req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| ToolDefinition {
            name: t["name"].as_str().unwrap().into(),
            description: t["description"].as_str().unwrap_or("").into(),
            parameters: t["input_schema"].clone(),
        })
        .collect();
    let mut request = ModelRequest {
        messages,
        tools,
        ..Default::default()
    };
    request.settings.max_tokens = req["max_tokens"].as_u64().map(|n| n as u32);
    request.settings.temperature = req["temperature"].as_f64();
    if !req["thinking"].is_null() {
        request
            .settings
            .extra
            .insert("thinking".into(), req["thinking"].clone());
    }
    request
}

/// Messages in one canonical form: content as a list of blocks, tool results as text,
/// without what clients add that does not change the meaning (`caller`, `cache_control`,
/// `is_error: false`).
fn canonical(messages: &Value) -> Value {
    let mut out = Vec::new();
    for m in messages.as_array().unwrap() {
        let blocks = match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            _ => vec![],
        };
        let blocks: Vec<Value> = blocks
            .into_iter()
            .map(|mut b| {
                let o = b.as_object_mut().unwrap();
                o.remove("caller");
                o.remove("cache_control");
                if o.get("is_error") == Some(&json!(false)) {
                    o.remove("is_error");
                }
                if o["type"] == "tool_result" {
                    let text = text_of(&o["content"]);
                    o.insert("content".into(), json!(text));
                }
                b
            })
            .collect();
        out.push(json!({"role": m["role"], "content": blocks}));
    }
    Value::Array(out)
}

struct Served {
    result: Result<ModelResponse, ModelError>,
    deltas: Vec<StreamDelta>,
}

/// Serves fixture `prefix` to the request its recording was made with.
async fn serve_fixture(prefix: &str) -> Served {
    let fx = recorded(DIR, prefix);
    let req = fx.request.clone().expect("a recorded request");
    let server = serve(vec![fx.canned()]).await;
    let model = model(&server.base_url);
    let request = request_from(&req);
    let deltas = Arc::new(Mutex::new(Vec::new()));
    let sink = deltas.clone();
    let result = if req["stream"] == true {
        model
            .request_stream(&request, &move |d| sink.lock().unwrap().push(d))
            .await
    } else {
        model.request(&request).await
    };
    let received = server.received();
    assert_eq!(received.len(), 1, "{prefix}: no retry of a recorded answer");
    let head = received[0].head.to_ascii_lowercase();
    assert!(head.starts_with("post /v1/messages "), "{head}");
    assert!(head.contains(&format!("x-api-key: {}", SECRET_KEY.to_ascii_lowercase())));
    assert!(head.contains("anthropic-version: 2023-06-01"), "{head}");
    let sent: Value = serde_json::from_slice(&received[0].body).unwrap();
    // The request means what the recorded one meant: same history block for block
    // (tool results by id, thinking with its signature), tools and token limit.
    assert_eq!(
        canonical(&sent["messages"]),
        canonical(&req["messages"]),
        "{prefix}: the messages sent differ from the recording"
    );
    assert_eq!(text_of(&sent["system"]), text_of(&req["system"]));
    assert_eq!(sent["max_tokens"], req["max_tokens"]);
    assert_eq!(sent["stream"] == true, req["stream"] == true);
    for (s, r) in sent["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(req["tools"].as_array().into_iter().flatten())
    {
        assert_eq!(
            (&s["name"], &s["input_schema"]),
            (&r["name"], &r["input_schema"])
        );
    }
    let shown = match &result {
        Ok(r) => format!("{r:?}"),
        Err(e) => format!("{e} {e:?}"),
    };
    assert!(!shown.contains(SECRET_KEY), "{prefix}: the key leaked");
    if let Ok(r) = &result {
        assert_eq!(
            r.raw.response_body, fx.body,
            "{prefix}: the bytes are kept verbatim"
        );
        assert_eq!(
            r.raw.request_body, received[0].body,
            "{prefix}: the request bytes are kept"
        );
        assert!(
            !r.raw
                .request_body
                .windows(SECRET_KEY.len())
                .any(|w| w == SECRET_KEY.as_bytes())
        );
    }
    let deltas = deltas.lock().unwrap().clone();
    Served { result, deltas }
}

struct Expect {
    text_starts: Option<&'static str>,
    calls: &'static [(&'static str, &'static str)],
    usage: (u64, u64),
    finish: FinishReason,
    thinking: bool,
}

fn check(prefix: &str, served: &Served, e: &Expect) -> ModelResponse {
    let r = match &served.result {
        Ok(r) => r.clone(),
        Err(err) => panic!("{prefix}: {err}"),
    };
    match e.text_starts {
        Some(t) => assert!(
            r.text.as_deref().is_some_and(|x| x.starts_with(t)),
            "{prefix}: {:?}",
            r.text
        ),
        None => assert_eq!(r.text, None, "{prefix}"),
    }
    let calls: Vec<(&str, &str)> = r
        .tool_calls
        .iter()
        .map(|c| (c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(calls, e.calls, "{prefix}");
    assert!(
        r.tool_calls.iter().all(|c| c.id.starts_with("toolu_")),
        "{prefix}"
    );
    assert_eq!(
        (r.usage.input_tokens, r.usage.output_tokens),
        e.usage,
        "{prefix}"
    );
    assert_eq!(
        r.usage.cached_input_tokens,
        Some(0),
        "{prefix}: cache reads are reported"
    );
    assert_eq!(r.usage.cache_creation_input_tokens, Some(0), "{prefix}");
    assert!(r.usage_reported);
    assert_eq!(r.finish_reason.as_ref(), Some(&e.finish), "{prefix}");
    assert_eq!(
        r.provider_items
            .iter()
            .any(|p| p.item["type"] == "thinking"),
        e.thinking,
        "{prefix}"
    );
    assert_eq!(r.reasoning.is_some(), e.thinking, "{prefix}");
    // Streamed deltas add up to the final response.
    if !served.deltas.is_empty() {
        let text: String = served
            .deltas
            .iter()
            .filter_map(|d| match d {
                StreamDelta::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(Some(text).filter(|t| !t.is_empty()), r.text, "{prefix}");
        for (i, c) in r.tool_calls.iter().enumerate() {
            let args: String = served
                .deltas
                .iter()
                .filter_map(|d| match d {
                    StreamDelta::ToolCall {
                        index, arguments, ..
                    } if *index == i => Some(arguments.as_str()),
                    _ => None,
                })
                .collect();
            let expected = if args.is_empty() { "{}" } else { &args };
            assert_eq!(c.arguments, expected, "{prefix} call {i}");
        }
    }
    // A replay of the kept bytes reads the same response.
    let replayed = WireApi::AnthropicMessages
        .parse_response(RawExchange {
            status: Some(200),
            ..r.raw.clone()
        })
        .unwrap();
    assert_eq!(
        (
            &replayed.text,
            &replayed.tool_calls,
            &replayed.provider_items,
            replayed.usage
        ),
        (&r.text, &r.tool_calls, &r.provider_items, r.usage)
    );
    r
}

const RETRIEVE: (&str, &str) = ("retrieve_entity_info", "");
const DICE: (&str, &str) = ("dice_roll", "{}");

// One table: each recorded response beside what it must parse to, then one loop over it.
#[tokio::test]
async fn every_recorded_response_parses_into_messages_calls_thinking_and_usage() {
    let cases: Vec<(&str, Expect)> = vec![
        (
            "02",
            Expect {
                text_starts: Some("Based on the retrieved information"),
                calls: &[],
                usage: (771, 77),
                finish: FinishReason::Stop,
                thinking: false,
            },
        ),
        (
            "03",
            Expect {
                text_starts: None,
                calls: &[DICE, DICE, DICE],
                usage: (596, 75),
                finish: FinishReason::ToolCalls,
                thinking: false,
            },
        ),
        (
            "04",
            Expect {
                text_starts: Some("Here are your three dice rolls"),
                calls: &[],
                usage: (771, 45),
                finish: FinishReason::Stop,
                thinking: false,
            },
        ),
        (
            "05",
            Expect {
                text_starts: None,
                calls: &[(
                    "weather",
                    r#"{"latitude": "52.5200", "longitude": "13.4050"}"#,
                )],
                usage: (633, 75),
                finish: FinishReason::ToolCalls,
                thinking: false,
            },
        ),
        (
            "06",
            Expect {
                text_starts: Some("The weather in Berlin is currently"),
                calls: &[],
                usage: (748, 49),
                finish: FinishReason::Stop,
                thinking: false,
            },
        ),
        (
            "07",
            Expect {
                text_starts: None,
                calls: &[
                    ("pelican_name_generator", "{}"),
                    ("pelican_name_generator", "{}"),
                ],
                usage: (0, 0),
                finish: FinishReason::ToolCalls,
                thinking: false,
            },
        ),
        (
            "08",
            Expect {
                text_starts: Some("Here are two great names for your pet pelican"),
                calls: &[],
                usage: (678, 0),
                finish: FinishReason::Stop,
                thinking: false,
            },
        ),
        (
            "10",
            Expect {
                text_starts: Some("Based on the information that you're from Mexico"),
                calls: &[],
                usage: (566, 126),
                finish: FinishReason::Stop,
                thinking: false,
            },
        ),
        (
            "11",
            Expect {
                text_starts: None,
                calls: &[("fixed_version", "{}")],
                usage: (0, 0),
                finish: FinishReason::ToolCalls,
                thinking: true,
            },
        ),
        (
            "12",
            Expect {
                text_starts: Some("The version is **0.32a0**."),
                calls: &[],
                usage: (707, 0),
                finish: FinishReason::Stop,
                thinking: false,
            },
        ),
    ];
    for (prefix, expect) in cases {
        let served = serve_fixture(prefix).await;
        let mut e = expect;
        // Output counts not stated in the fixtures' README come from the final event;
        // they are checked against the body's own message_delta here.
        if e.usage.1 == 0 || e.usage.0 == 0 {
            let fx = recorded(DIR, prefix);
            let body = String::from_utf8(fx.body).unwrap();
            let last = body
                .lines()
                .rfind(|l| l.starts_with("data:") && l.contains("message_delta"))
                .unwrap();
            let v: Value = serde_json::from_str(&last[5..]).unwrap();
            let input = if e.usage.0 == 0 {
                v["usage"]["input_tokens"].as_u64().unwrap()
            } else {
                e.usage.0
            };
            e.usage = (input, v["usage"]["output_tokens"].as_u64().unwrap());
        }
        check(prefix, &served, &e);
    }
    // 01 and 09 (not streamed): the text beside the calls, and thinking with its signature.
    let served = serve_fixture("01").await;
    let r = served.result.as_ref().unwrap();
    assert!(
        r.text
            .as_deref()
            .unwrap()
            .starts_with("I'll help you find out who is the youngest")
    );
    let names: Vec<_> = r.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, [RETRIEVE.0; 4]);
    let args: Vec<Value> = r
        .tool_calls
        .iter()
        .map(|c| serde_json::from_str(&c.arguments).unwrap())
        .collect();
    assert_eq!(
        args.iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["Alice", "Bob", "Charlie", "Daisy"]
    );
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.total_tokens
        ),
        (423, 202, 625)
    );
    let served = serve_fixture("09").await;
    let r = served.result.as_ref().unwrap();
    assert_eq!(r.provider_items.len(), 1);
    let thinking = &r.provider_items[0].item;
    assert_eq!(thinking["type"], "thinking");
    assert!(
        thinking["signature"]
            .as_str()
            .unwrap()
            .starts_with("EqEECkYICxgCKkAo3UA4")
    );
    assert_eq!(r.reasoning.as_deref(), thinking["thinking"].as_str());
    assert_eq!(r.tool_calls[0].name, "get_user_country");
    assert_eq!(r.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn streamed_thinking_is_reassembled_and_goes_back_unchanged_on_the_next_turn() {
    let served = serve_fixture("11").await;
    let r = served.result.unwrap();
    let item = &r.provider_items[0].item;
    assert_eq!(item["type"], "thinking");
    assert!(
        item["thinking"]
            .as_str()
            .unwrap()
            .starts_with("The user wants me to:\n1. Use the fixed_version tool")
    );
    let recorded12 = recorded(DIR, "12").request.unwrap();
    assert_eq!(
        item, &recorded12["messages"][1]["content"][0],
        "the signature is whole"
    );
    assert!(
        served
            .deltas
            .iter()
            .any(|d| matches!(d, StreamDelta::Reasoning(_)))
    );
    // The thinking tokens of `output_tokens_details` are the reasoning tokens.
    assert!(r.usage.reasoning_tokens.is_some());
    // Turn 2 of the recording: the history our backend builds from turn 1's response
    // and the recorded result is what the recording sent (thinking block first, then the
    // tool_use, then the tool_result by id).
    let mut request = request_from(&recorded(DIR, "11").request.unwrap());
    request.messages.push(r.to_message());
    request.messages.push(Message::tool_result(
        &r.tool_calls[0].id,
        "fixed_version",
        "0.32a0",
        true,
    ));
    let body = WireApi::AnthropicMessages.request_body("claude", &request, true);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        canonical(&body["messages"]),
        canonical(&recorded12["messages"])
    );
}

#[tokio::test]
async fn recorded_errors_are_typed_with_status_type_and_message_and_not_retried() {
    for (prefix, status, kind, message) in [
        (
            "13",
            400,
            "invalid_request_error",
            "This model does not support effort level 'xhigh'",
        ),
        (
            "14",
            400,
            "invalid_request_error",
            "prompt is too long: 3333404 tokens > 200000 maximum",
        ),
        ("15", 401, "authentication_error", "invalid x-api-key"),
        ("16", 404, "not_found_error", "model: claude-sonet-4-5"),
    ] {
        let fx = recorded(DIR, prefix);
        let server = serve(vec![fx.canned(), fx.canned()]).await;
        let e = model(&server.base_url)
            .request(&ModelRequest {
                messages: vec![Message::user("hi")],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(
            server.received().len(),
            1,
            "{prefix}: a {status} is not retried"
        );
        let shown = e.to_string();
        assert!(
            shown.contains(&format!("HTTP {status}"))
                && shown.contains(kind)
                && shown.contains(message),
            "{prefix}: {shown}"
        );
        match (&e, status) {
            (ModelError::Unauthorized { code, .. }, 401)
            | (ModelError::BadRequest { code, .. }, 400 | 404) => {
                assert_eq!(code.as_deref(), Some(kind))
            }
            _ => panic!("{prefix}: {e:?}"),
        }
        let x = e.exchange().unwrap();
        assert_eq!(
            (x.status, x.response_body.as_ref()),
            (Some(status), fx.body.as_slice())
        );
        // A replay of the recorded status gives the same error.
        let replayed = WireApi::AnthropicMessages
            .parse_response(x.clone())
            .unwrap_err();
        assert_eq!(replayed.to_string(), shown);
    }
}

/// Anthropic's documented error shape.
fn error_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_test"})
        .to_string()
}

#[tokio::test]
async fn overloaded_rate_limited_and_api_errors_are_retried_with_retry_after() {
    let ok = recorded(DIR, "04").canned();
    let date = httpdate_in(1);
    let server = serve(vec![
        Canned::json(529, error_body("overloaded_error", "Overloaded")).header("retry-after", "0"),
        Canned::json(
            429,
            error_body(
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
        )
        .header("retry-after", &date),
        Canned::json(500, error_body("api_error", "Internal server error")),
        Canned::json(503, error_body("api_error", "Service unavailable"))
            .header("retry-after", "0.05"),
        ok,
    ])
    .await;
    let mut config = AnthropicConfig::new(
        "claude-test",
        server.base_url.trim_end_matches("/v1"),
        Some(ApiKey::new(SECRET_KEY)),
    );
    config.retry.max_retries = 5;
    config.retry.initial_backoff = std::time::Duration::from_millis(10);
    let started = std::time::Instant::now();
    let r = AnthropicModel::new(config)
        .unwrap()
        .request(&ModelRequest {
            messages: vec![Message::user("roll")],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        r.text
            .unwrap()
            .starts_with("Here are your three dice rolls")
    );
    let statuses: Vec<_> = r.raw.attempts.iter().map(|a| a.status).collect();
    assert_eq!(
        statuses,
        [Some(529), Some(429), Some(500), Some(503), Some(200)]
    );
    assert_eq!(
        r.raw.attempts[0].retry_after,
        Some(std::time::Duration::ZERO)
    );
    let waited = r.raw.attempts[1]
        .retry_after
        .expect("the HTTP date is read");
    assert!(waited <= std::time::Duration::from_secs(2), "{waited:?}");
    assert!(
        r.raw.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("overloaded_error")
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));

    // A 529 that never ends fails as a server error naming the type, every attempt kept.
    let server = serve(vec![
        Canned::json(
            529,
            error_body("overloaded_error", "Overloaded")
        );
        10
    ])
    .await;
    let e = model(&server.base_url)
        .request(&ModelRequest {
            messages: vec![Message::user("roll")],
            ..Default::default()
        })
        .await
        .unwrap_err();
    match &e {
        ModelError::ServerError {
            status: 529,
            code,
            message,
            exchange,
        } => {
            assert_eq!(
                (code.as_deref(), message.as_str()),
                (Some("overloaded_error"), "Overloaded")
            );
            assert_eq!(exchange.attempts.len(), 4);
        }
        other => panic!("{other:?}"),
    }
}

/// An HTTP date `secs` seconds from now, rounded up to the next whole second.
fn httpdate_in(secs: u64) -> String {
    let t = std::time::SystemTime::now() + std::time::Duration::from_secs(secs);
    httpdate::fmt_http_date(t)
}

#[tokio::test]
async fn a_stream_cut_at_any_event_boundary_is_an_incomplete_stream() {
    for prefix in ["05", "06", "07", "08", "11", "12"] {
        let fx = recorded(DIR, prefix);
        let cuts = event_boundaries(&fx.body);
        assert!(cuts.len() > 5, "{prefix}");
        for cut in cuts {
            let raw = RawExchange {
                response_body: fx.body[..cut].to_vec().into(),
                response_media_type: Some("text/event-stream".into()),
                status: Some(200),
                ..RawExchange::default()
            };
            match WireApi::AnthropicMessages.parse_response(raw) {
                Err(ModelError::StreamIncomplete { message, exchange }) => {
                    assert!(message.contains("before message_st"), "{message}");
                    assert_eq!(exchange.response_body.len(), cut);
                }
                other => panic!("{prefix} cut at {cut}: {other:?}"),
            }
        }
    }
    // Live: the connection closes after half the events.
    let fx = recorded(DIR, "05");
    let cut = event_boundaries(&fx.body)[6];
    let server = serve(vec![
        Canned::new(200, "text/event-stream", fx.body[..cut].to_vec()).mode(Mode::CloseDelimited),
    ])
    .await;
    let e = model(&server.base_url)
        .request_stream(
            &ModelRequest {
                messages: vec![Message::user("weather?")],
                ..Default::default()
            },
            &|_| {},
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ModelError::StreamIncomplete { .. }), "{e:?}");
    assert_eq!(e.exchange().unwrap().response_body.len(), cut);
}

#[tokio::test]
async fn hostile_bodies_are_typed_errors_not_panics() {
    let start = r#"event: message_start
data: {"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1,"output_tokens":1}}}

"#;
    let stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let huge = format!(
        "{start}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{}\"}}}}\n\n{stop}",
        "a".repeat(10 << 20)
    );
    let cases: Vec<(Canned, &str)> = vec![
        (Canned::json(200, "{\"content\": [oops"), "not JSON"),
        (
            Canned::json(
                200,
                r#"{"type":"message","content":[{"type":"tool_use","id":"t","name":"f","input":"rm -rf /"}]}"#,
            ),
            "not a JSON object",
        ),
        (
            Canned::json(
                200,
                r#"{"type":"message","content":[{"type":"mind_control","x":1}]}"#,
            ),
            "unknown content block type",
        ),
        (
            Canned::new(
                200,
                "text/event-stream",
                format!(
                    "{start}event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":7}}}}\n\n{stop}"
                ),
            ),
            "not a JSON object",
        ),
        (
            Canned::new(200, "text/event-stream", huge),
            "larger than the limit",
        ),
    ];
    for (canned, expected) in cases {
        let server = serve(vec![canned]).await;
        let e = model(&server.base_url)
            .request_stream(
                &ModelRequest {
                    messages: vec![Message::user("x")],
                    ..Default::default()
                },
                &|_| {},
            )
            .await
            .unwrap_err();
        match &e {
            ModelError::MalformedResponse { message, .. } => {
                assert!(message.contains(expected), "{message}")
            }
            other => panic!("{expected}: {other:?}"),
        }
    }
    // An error event mid-stream is the provider's error, typed.
    let body = format!(
        "{start}event: error\ndata: {}\n\n",
        error_body("overloaded_error", "Overloaded")
    );
    let server = serve(vec![Canned::new(200, "text/event-stream", body)]).await;
    let e = model(&server.base_url)
        .request_stream(
            &ModelRequest {
                messages: vec![Message::user("x")],
                ..Default::default()
            },
            &|_| {},
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ModelError::ProviderError { code: Some(c), .. } if c == "overloaded_error"),
        "{e:?}"
    );
}

#[tokio::test]
async fn prompt_caching_marks_the_system_prompt_and_the_last_tool() {
    let fx = recorded(DIR, "06");
    let server = serve(vec![fx.canned()]).await;
    let mut request = request_from(&recorded(DIR, "05").request.unwrap());
    request
        .messages
        .insert(0, Message::system("You are a weather bot."));
    request.settings.prompt_caching = true;
    let r = model(&server.base_url)
        .request_stream(&request, &|_| {})
        .await
        .unwrap();
    assert_eq!(r.usage.cache_creation_input_tokens, Some(0));
    let sent: Value = serde_json::from_slice(&server.received()[0].body).unwrap();
    let system = sent["system"].as_array().unwrap();
    assert_eq!(
        system.last().unwrap()["cache_control"],
        json!({"type": "ephemeral"})
    );
    let tools = sent["tools"].as_array().unwrap();
    assert_eq!(
        tools.last().unwrap()["cache_control"],
        json!({"type": "ephemeral"})
    );
    // Usage with cache counts: the prompt counts cache writes and reads.
    let body = br#"{"type":"message","id":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",
        "usage":{"input_tokens":10,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,"output_tokens":5}}"#;
    let r = WireApi::AnthropicMessages
        .parse_response(RawExchange {
            response_body: body.to_vec().into(),
            status: Some(200),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.cached_input_tokens,
            r.usage.cache_creation_input_tokens,
            r.usage.total_tokens
        ),
        (3010, Some(2000), Some(1000), 3015)
    );
}

/// A redirect is not followed: the `x-api-key` header, which reqwest does not know is
/// secret, never reaches the server the redirect names.
#[tokio::test]
async fn a_redirect_is_not_followed_so_the_key_stays_put() {
    let elsewhere = serve(vec![Canned::json(200, "{}")]).await;
    let target = format!("{}/messages", elsewhere.base_url);
    let server = serve(vec![Canned::json(308, "{}").header("location", &target)]).await;
    let request = ModelRequest {
        messages: vec![Message::user("hello")],
        ..Default::default()
    };
    let e = model(&server.base_url).request(&request).await.unwrap_err();
    assert!(e.to_string().contains("308"), "{e}");
    assert_eq!(server.received().len(), 1);
    assert!(elsewhere.received().is_empty(), "the redirect was followed");
}
