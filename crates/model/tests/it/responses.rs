//! `OpenAiResponsesModel` against real recorded Responses traffic
//! (`tests/fixtures/openai-responses`), served from a loopback HTTP server: parsed
//! content, reasoning items and their round trip, usage, the request sent, typed errors,
//! retries, streams cut at every event boundary, and hostile bodies.

use crate::support;

use std::sync::{Arc, Mutex};

use provrun_model::{
    ApiKey, FinishReason, Message, Model, ModelError, ModelRequest, ModelResponse,
    OpenAiResponsesConfig, OpenAiResponsesModel, ProviderItem, RawExchange, StreamDelta, ToolCall,
    ToolDefinition, WireApi,
};
use serde_json::{Value, json};
use support::{Canned, SECRET_KEY, event_boundaries, quick_retry, recorded, serve};

const DIR: &str = "openai-responses";

fn model(base_url: &str) -> OpenAiResponsesModel {
    let mut config =
        OpenAiResponsesConfig::new("gpt-test", base_url, Some(ApiKey::new(SECRET_KEY)));
    config.retry = quick_retry();
    OpenAiResponsesModel::new(config).unwrap()
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The provider-neutral request behind a recorded Responses request: consecutive
/// reasoning, assistant and function_call items are one assistant turn.
fn request_from(req: &Value) -> ModelRequest {
    let mut messages: Vec<Message> = Vec::new();
    let mut names = std::collections::HashMap::new();
    let mut open_turn = false;
    for item in req["input"].as_array().unwrap() {
        let kind = item["type"].as_str().unwrap_or("message");
        let role = item["role"].as_str().unwrap_or("");
        let assistant_part = matches!(kind, "reasoning" | "function_call") || role == "assistant";
        if assistant_part && !open_turn {
            messages.push(Message::Assistant {
                text: None,
                tool_calls: vec![],
                provider_items: vec![],
            });
        }
        open_turn = assistant_part;
        let Some(Message::Assistant {
            text,
            tool_calls,
            provider_items,
        }) = messages.last_mut().filter(|_| assistant_part)
        else {
            match (kind, role) {
                ("function_call_output", _) => {
                    let id = item["call_id"].as_str().unwrap();
                    messages.push(Message::tool_result(
                        id,
                        names.get(id).cloned().unwrap_or_default(),
                        item["output"].as_str().unwrap(),
                        true,
                    ));
                }
                (_, "system" | "developer") => {
                    messages.push(Message::system(text_of(&item["content"])))
                }
                (_, "user") => messages.push(Message::user(text_of(&item["content"]))),
                other => panic!("input item {other:?}"),
            }
            continue;
        };
        match kind {
            "reasoning" => provider_items.push(ProviderItem {
                api: "openai-responses".into(),
                item: item.clone(),
            }),
            "function_call" => {
                let id = item["call_id"].as_str().unwrap().to_owned();
                names.insert(id.clone(), item["name"].as_str().unwrap().to_owned());
                tool_calls.push(ToolCall {
                    id,
                    name: item["name"].as_str().unwrap().into(),
                    arguments: item["arguments"].as_str().unwrap().into(),
                });
            }
            _ => *text = Some(text_of(&item["content"])),
        }
    }
    let tools = req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| ToolDefinition {
            name: t["name"].as_str().unwrap().into(),
            description: t["description"].as_str().unwrap_or("").into(),
            parameters: t["parameters"].clone(),
        })
        .collect();
    let mut request = ModelRequest {
        messages,
        tools,
        ..Default::default()
    };
    if !req["reasoning"].is_null() {
        request
            .settings
            .extra
            .insert("reasoning".into(), req["reasoning"].clone());
    }
    request
}

/// Input items in one canonical form: arguments as parsed JSON (clients re-serialise
/// them), message content as text, without output-only fields.
fn canonical(input: &Value) -> Value {
    Value::Array(
        input
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let mut i = i.clone();
                let o = i.as_object_mut().unwrap();
                o.remove("status");
                if o.get("type").and_then(Value::as_str) == Some("function_call") {
                    o.remove("id");
                    let args: Value =
                        serde_json::from_str(o["arguments"].as_str().unwrap()).unwrap();
                    o.insert("arguments".into(), args);
                }
                if o.contains_key("role") {
                    o.remove("type");
                    let t = text_of(&o["content"]);
                    o.insert("content".into(), json!(t));
                }
                i
            })
            .collect(),
    )
}

struct Served {
    result: Result<ModelResponse, ModelError>,
    deltas: Vec<StreamDelta>,
}

async fn serve_fixture(prefix: &str) -> Served {
    let fx = recorded(DIR, prefix);
    let req = fx.request.clone().unwrap();
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
    assert_eq!(received.len(), 1, "{prefix}");
    let head = received[0].head.to_ascii_lowercase();
    assert!(head.starts_with("post /v1/responses "), "{head}");
    assert!(received[0].head.contains(&format!("Bearer {SECRET_KEY}")));
    let sent: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(
        canonical(&sent["input"]),
        canonical(&req["input"]),
        "{prefix}: the input sent differs"
    );
    assert_eq!(sent["store"], json!(false));
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(sent["stream"] == true, req["stream"] == true);
    let shown = match &result {
        Ok(r) => format!("{r:?}"),
        Err(e) => format!("{e} {e:?}"),
    };
    assert!(!shown.contains(SECRET_KEY));
    if let Ok(r) = &result {
        assert_eq!(
            r.raw.response_body, fx.body,
            "{prefix}: the bytes are kept verbatim"
        );
        assert_eq!(r.raw.request_body, received[0].body);
    }
    let deltas = deltas.lock().unwrap().clone();
    Served { result, deltas }
}

struct Expect {
    text_starts: Option<&'static str>,
    calls: &'static [(&'static str, &'static str)],
    usage: (u64, u64),
    reasoning_tokens: u64,
    reasoning_items: usize,
}

// One table: each recorded response beside what it must parse to, then one loop over it.
#[tokio::test]
async fn every_recorded_response_parses_into_messages_calls_reasoning_and_usage() {
    const MULTIPLY: (&str, &str) = ("multiply", r#"{"a":1231,"b":2331}"#);
    const WEATHER: (&str, &str) = ("weather", r#"{"latitude":"52.5200","longitude":"13.4050"}"#);
    let cases: Vec<(&str, Expect)> = vec![
        (
            "01",
            Expect {
                text_starts: None,
                calls: &[MULTIPLY],
                usage: (58, 23),
                reasoning_tokens: 0,
                reasoning_items: 0,
            },
        ),
        (
            "02",
            Expect {
                text_starts: Some("1231 * 2331 = 2,869,461"),
                calls: &[],
                usage: (94, 17),
                reasoning_tokens: 0,
                reasoning_items: 0,
            },
        ),
        (
            "03",
            Expect {
                text_starts: None,
                calls: &[MULTIPLY],
                usage: (58, 23),
                reasoning_tokens: 0,
                reasoning_items: 0,
            },
        ),
        (
            "04",
            Expect {
                text_starts: Some("1231 × 2331 = **2,869,461**"),
                calls: &[],
                usage: (94, 18),
                reasoning_tokens: 0,
                reasoning_items: 0,
            },
        ),
        (
            "05",
            Expect {
                text_starts: None,
                calls: &[("lookup_population", r#"{"country":"Pundora"}"#)],
                usage: (94, 85),
                reasoning_tokens: 63,
                reasoning_items: 1,
            },
        ),
        (
            "06",
            Expect {
                text_starts: None,
                calls: &[("can_have_dragons", r#"{"population":123124}"#)],
                usage: (192, 21),
                reasoning_tokens: 0,
                reasoning_items: 0,
            },
        ),
        (
            "07",
            Expect {
                text_starts: Some(
                    "Pundora has a population of 123,124 — and yes, it can have dragons.",
                ),
                calls: &[],
                usage: (227, 24),
                reasoning_tokens: 0,
                reasoning_items: 0,
            },
        ),
        (
            "08",
            Expect {
                text_starts: None,
                calls: &[WEATHER, ("best_language_to_learn", "{}")],
                usage: (112, 284),
                reasoning_tokens: 192,
                reasoning_items: 1,
            },
        ),
        (
            "09",
            Expect {
                text_starts: Some(""),
                calls: &[],
                usage: (426, 385),
                reasoning_tokens: 256,
                reasoning_items: 1,
            },
        ),
        (
            "10",
            Expect {
                text_starts: None,
                calls: &[WEATHER],
                usage: (87, 339),
                reasoning_tokens: 256,
                reasoning_items: 1,
            },
        ),
        (
            "11",
            Expect {
                text_starts: Some(""),
                calls: &[],
                usage: (13, 1680),
                reasoning_tokens: 1408,
                reasoning_items: 1,
            },
        ),
    ];
    for (prefix, e) in cases {
        let served = serve_fixture(prefix).await;
        let r = match &served.result {
            Ok(r) => r.clone(),
            Err(err) => panic!("{prefix}: {err}"),
        };
        match e.text_starts {
            Some(t) => assert!(
                r.text
                    .as_deref()
                    .is_some_and(|x| x.starts_with(t) && !x.is_empty()),
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
            r.tool_calls.iter().all(|c| c.id.starts_with("call_")),
            "{prefix}"
        );
        assert_eq!(
            (r.usage.input_tokens, r.usage.output_tokens),
            e.usage,
            "{prefix}"
        );
        assert_eq!(
            r.usage.reasoning_tokens,
            Some(e.reasoning_tokens),
            "{prefix}"
        );
        assert_eq!(r.usage.cached_input_tokens, Some(0), "{prefix}");
        let finish = if e.calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        assert_eq!(r.finish_reason, Some(finish), "{prefix}");
        let reasoning: Vec<&Value> = r
            .provider_items
            .iter()
            .map(|p| &p.item)
            .filter(|i| i["type"] == "reasoning")
            .collect();
        assert_eq!(reasoning.len(), e.reasoning_items, "{prefix}");
        for item in reasoning {
            assert!(
                item["encrypted_content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("gAAAA")),
                "{prefix}"
            );
        }
        // The answer's message item is kept whole, to go back after its reasoning.
        let messages = r
            .provider_items
            .iter()
            .filter(|p| p.api == "openai-responses" && p.item["type"] == "message")
            .count();
        assert_eq!(messages, usize::from(r.text.is_some()), "{prefix}");
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
                assert_eq!(c.arguments, args, "{prefix}");
            }
        }
        let replayed = WireApi::OpenAiResponses
            .parse_response(RawExchange {
                status: Some(200),
                ..r.raw.clone()
            })
            .unwrap();
        assert_eq!(
            (
                &replayed.text,
                &replayed.tool_calls,
                &replayed.provider_items
            ),
            (&r.text, &r.tool_calls, &r.provider_items)
        );
    }
    // 11: the reasoning summary streams as reasoning deltas and is the reasoning text.
    let served = serve_fixture("11").await;
    let r = served.result.unwrap();
    let streamed: String = served
        .deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::Reasoning(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(streamed.len() > 1000);
    assert_eq!(r.reasoning.as_deref(), Some(streamed.as_str()));
}

#[tokio::test]
async fn the_three_turn_run_carries_reasoning_and_outputs_forward_by_call_id() {
    // Turn by turn, the request our backend builds from the recorded responses and the
    // recorded tool outputs is the request the recording sent.
    let mut request = request_from(&recorded(DIR, "05").request.unwrap());
    for (prefix, next, output) in [("05", "06", "123124"), ("06", "07", "true")] {
        let fx = recorded(DIR, prefix);
        let r = WireApi::OpenAiResponses
            .parse_response(RawExchange {
                response_body: fx.body.into(),
                status: Some(200),
                ..Default::default()
            })
            .unwrap();
        request.messages.push(r.to_message());
        let call = &r.tool_calls[0];
        request
            .messages
            .push(Message::tool_result(&call.id, &call.name, output, true));
        let body: Value = serde_json::from_slice(
            &WireApi::OpenAiResponses.request_body("gpt-5.5", &request, false),
        )
        .unwrap();
        let expected = recorded(DIR, next).request.unwrap();
        assert_eq!(
            canonical(&body["input"]),
            canonical(&expected["input"]),
            "turn after {prefix}"
        );
    }
}

#[tokio::test]
async fn recorded_errors_are_typed_with_status_code_and_message_and_not_retried() {
    for (prefix, status, code, message) in [
        (
            "12",
            400,
            "decimal_below_min_value",
            "Invalid 'temperature'",
        ),
        (
            "13",
            400,
            "model_not_found",
            "The requested model 'gpt-5.2-proo' does not exist.",
        ),
        (
            "14",
            400,
            "invalid_request_error",
            "was provided without its required following item",
        ),
        (
            "15",
            400,
            "context_length_exceeded",
            "Your input exceeds the context window",
        ),
        (
            "16",
            401,
            "invalid_api_key",
            "Incorrect API key provided: invalid-key",
        ),
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
        assert_eq!(server.received().len(), 1, "{prefix}");
        let shown = e.to_string();
        assert!(
            shown.contains(&format!("HTTP {status}"))
                && shown.contains(code)
                && shown.contains(message),
            "{prefix}: {shown}"
        );
        match &e {
            ModelError::BadRequest { code: c, .. } | ModelError::Unauthorized { code: c, .. } => {
                assert_eq!(c.as_deref(), Some(code))
            }
            other => panic!("{other:?}"),
        }
        let replayed = WireApi::OpenAiResponses
            .parse_response(e.exchange().unwrap().clone())
            .unwrap_err();
        assert_eq!(replayed.to_string(), shown);
    }
}

fn error_body(code: &str, kind: &str, message: &str) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_and_quota_is_not() {
    let server = serve(vec![
        Canned::json(
            429,
            error_body("rate_limit_exceeded", "requests", "Rate limit reached"),
        )
        .header("retry-after-ms", "30"),
        Canned::json(
            500,
            error_body("server_error", "server_error", "The server had an error"),
        ),
        Canned::json(
            503,
            error_body("server_error", "server_error", "overloaded"),
        )
        .header("retry-after", "0"),
        recorded(DIR, "02").canned(),
    ])
    .await;
    let r = model(&server.base_url)
        .request(&ModelRequest {
            messages: vec![Message::user("hi")],
            ..Default::default()
        })
        .await
        .unwrap();
    let statuses: Vec<_> = r.raw.attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [Some(429), Some(500), Some(503), Some(200)]);
    assert_eq!(
        r.raw.attempts[0].retry_after,
        Some(std::time::Duration::from_millis(30))
    );
    let server = serve(vec![
        Canned::json(
            429,
            error_body(
                "insufficient_quota",
                "insufficient_quota",
                "You exceeded your current quota"
            )
        );
        2
    ])
    .await;
    let e = model(&server.base_url)
        .request(&ModelRequest {
            messages: vec![Message::user("hi")],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ModelError::RateLimited { code: Some(c), .. } if c == "insufficient_quota"),
        "{e:?}"
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_at_any_event_boundary_is_an_incomplete_stream() {
    for prefix in ["03", "04", "10", "11"] {
        let fx = recorded(DIR, prefix);
        let mut cuts = event_boundaries(&fx.body);
        assert!(cuts.len() > 5, "{prefix}");
        if prefix == "11" {
            // 11 holds 670 events of the same few kinds, about 190 KB: every 20th
            // boundary and the last ten keep the test quadratic in a small number.
            let n = cuts.len();
            cuts = cuts
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % 20 == 0 || *i + 10 >= n)
                .map(|(_, c)| c)
                .collect();
        }
        for cut in cuts {
            let raw = RawExchange {
                response_body: fx.body[..cut].to_vec().into(),
                response_media_type: Some("text/event-stream".into()),
                status: Some(200),
                ..RawExchange::default()
            };
            match WireApi::OpenAiResponses.parse_response(raw) {
                Err(ModelError::StreamIncomplete { message, .. }) => {
                    assert!(message.contains("response.completed"), "{message}")
                }
                other => panic!("{prefix} cut at {cut}: {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn hostile_bodies_are_typed_errors_not_panics() {
    let huge = format!(
        "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"delta\":\"{}\"}}\n\n",
        "a".repeat(10 << 20)
    );
    let cases: Vec<(Canned, &str)> = vec![
        (Canned::json(200, "{\"output\": [oops"), "not JSON"),
        (
            Canned::json(
                200,
                r#"{"status":"completed","output":[{"type":"teleport"}]}"#,
            ),
            "unknown output item type",
        ),
        (
            Canned::new(
                200,
                "text/event-stream",
                "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"function_call\"}]}}\n\n",
            ),
            "no call_id",
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
}
