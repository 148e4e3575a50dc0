//! `OpenAiModel` against the real recorded traffic in `tests/fixtures/openai`, served from
//! a loopback HTTP server: parsed content, kept bytes, typed errors, and the request sent.

use crate::support;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use provrun_model::{
    FinishReason, Message, Model, ModelError, ModelRequest, ModelResponse, StreamDelta, ToolCall,
    ToolChoice, ToolDefinition,
};
use serde_json::{Value, json};
use support::{Canned, Received, SECRET_KEY, model_for, serve};

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openai")
}

struct Fixture {
    meta: Value,
    request: Option<Value>,
    request_bytes: Option<Vec<u8>>,
    body: Vec<u8>,
}

fn load(prefix: &str) -> Fixture {
    let dir = fixtures_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!("the fixtures must be at {}: {e}", dir.display());
    });
    let meta_path = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(prefix) && n.ends_with(".meta.json")
        })
        .unwrap_or_else(|| panic!("no fixture {prefix}"));
    let meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    let body_file = meta["response_body"]["file"].as_str().unwrap();
    let body = std::fs::read(dir.join(body_file)).unwrap();
    let request_bytes = meta["request_body"]["file"]
        .as_str()
        .map(|f| std::fs::read(dir.join(f)).unwrap());
    let request = request_bytes
        .as_ref()
        .map(|b| serde_json::from_slice(b).unwrap());
    Fixture {
        meta,
        request,
        request_bytes,
        body,
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The provider-neutral request that produced a recorded OpenAI request.
fn model_request_from(req: &Value) -> ModelRequest {
    let mut names = std::collections::HashMap::new();
    let mut messages = Vec::new();
    for m in req["messages"].as_array().unwrap() {
        let msg = match m["role"].as_str().unwrap() {
            "system" => Message::system(text_of(&m["content"])),
            "user" => Message::user(text_of(&m["content"])),
            "assistant" => {
                let tool_calls: Vec<ToolCall> = m["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| ToolCall {
                        id: c["id"].as_str().unwrap().into(),
                        name: c["function"]["name"].as_str().unwrap().into(),
                        arguments: c["function"]["arguments"].as_str().unwrap().into(),
                    })
                    .collect();
                for c in &tool_calls {
                    names.insert(c.id.clone(), c.name.clone());
                }
                Message::Assistant {
                    text: m["content"].as_str().map(str::to_owned),
                    tool_calls,
                    provider_items: vec![],
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap();
                Message::tool_result(
                    id,
                    names.get(id).cloned().unwrap_or_default(),
                    text_of(&m["content"]),
                    true,
                )
            }
            other => panic!("role {other}"),
        };
        messages.push(msg);
    }
    let tools = req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| ToolDefinition {
            name: t["function"]["name"].as_str().unwrap().into(),
            description: t["function"]["description"].as_str().unwrap_or("").into(),
            parameters: t["function"]["parameters"].clone(),
        })
        .collect();
    let mut request = ModelRequest {
        messages,
        tools,
        ..Default::default()
    };
    request.settings.tool_choice = match req["tool_choice"].as_str() {
        Some("auto") => Some(ToolChoice::Auto),
        Some("required") => Some(ToolChoice::Required),
        Some("none") => Some(ToolChoice::None),
        _ => None,
    };
    request
}

/// Drops what differs between clients but not in meaning: `n`, `"stream": false`,
/// `stream_options` (we always ask for usage; checked in `assert_chat_request`), tools'
/// `strict`, and an absent assistant `content` (same as null).
fn normalise(v: &Value) -> Value {
    let mut v = v.clone();
    let o = v.as_object_mut().unwrap();
    o.remove("n");
    o.remove("stream_options");
    if o.get("stream") == Some(&json!(false)) {
        o.remove("stream");
    }
    for m in o
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if m["role"] == "assistant" && m.get("content").is_none() {
            m["content"] = Value::Null;
        }
    }
    for t in o
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        t["function"].as_object_mut().unwrap().remove("strict");
    }
    v
}

fn has_extension_key(v: &Value) -> bool {
    match v {
        Value::Object(o) => o
            .iter()
            .any(|(k, v)| k.starts_with("x-") || has_extension_key(v)),
        Value::Array(a) => a.iter().any(has_extension_key),
        _ => false,
    }
}

/// The essential shape of an OpenAI chat completion request.
fn assert_chat_request(v: &Value, stream: bool) {
    assert!(
        v["model"].as_str().is_some_and(|m| !m.is_empty()),
        "model: {v}"
    );
    let messages = v["messages"].as_array().expect("messages array");
    assert!(!messages.is_empty());
    for m in messages {
        match m["role"].as_str().unwrap() {
            "system" | "user" => assert!(m["content"].is_string(), "{m}"),
            "assistant" => {
                assert!(m["content"].is_string() || m["content"].is_null(), "{m}");
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    assert!(c["id"].is_string() && c["type"] == "function", "{c}");
                    assert!(c["function"]["name"].is_string(), "{c}");
                    assert!(c["function"]["arguments"].is_string(), "{c}");
                }
            }
            "tool" => assert!(
                m["tool_call_id"].is_string() && m["content"].is_string(),
                "{m}"
            ),
            other => panic!("unexpected role {other}"),
        }
    }
    for t in v["tools"].as_array().into_iter().flatten() {
        assert_eq!(t["type"], "function");
        let f = t["function"].as_object().unwrap();
        assert!(
            f["name"].is_string() && f["description"].is_string() && f["parameters"].is_object(),
            "{t}"
        );
    }
    assert!(!has_extension_key(&v["tools"]), "x-* keys were sent");
    if stream {
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
    } else {
        assert_ne!(v["stream"], true);
    }
}

struct Run {
    fixture: Fixture,
    result: Result<ModelResponse, ModelError>,
    deltas: Vec<StreamDelta>,
    received: Vec<Received>,
}

async fn run_times(prefix: &str, times: usize) -> Run {
    let fixture = load(prefix);
    let status = fixture.meta["status"].as_u64().unwrap() as u16;
    let content_type = fixture.meta["response_content_type"].as_str().unwrap();
    let canned = Canned::new(status, content_type, fixture.body.clone());
    let server = serve(vec![canned; times]).await;
    let stream = fixture.request.as_ref().is_none_or(|r| r["stream"] == true);
    let model_name = fixture
        .request
        .as_ref()
        .map_or("kimi-k2", |r| r["model"].as_str().unwrap());
    let request = fixture.request.as_ref().map_or_else(
        || ModelRequest {
            messages: vec![Message::user("version?")],
            ..Default::default()
        },
        model_request_from,
    );
    let model = model_for(&server.base_url, model_name);
    let deltas = Arc::new(Mutex::new(Vec::new()));
    let sink = deltas.clone();
    let result = if stream {
        model
            .request_stream(&request, &move |d| sink.lock().unwrap().push(d))
            .await
    } else {
        model.request(&request).await
    };
    let received = server.received();
    // Every request sent is an OpenAI chat request, and means what the recorded one meant.
    for r in &received {
        let sent: Value = serde_json::from_slice(&r.body).unwrap();
        assert_chat_request(&sent, stream);
        if let Some(recorded) = &fixture.request {
            assert_eq!(
                normalise(&sent),
                normalise(recorded),
                "{prefix}: sent request differs"
            );
        }
        assert!(
            r.head.contains(&format!("Bearer {SECRET_KEY}")),
            "the key goes in the header"
        );
    }
    // The key appears nowhere else.
    let shown = match &result {
        Ok(r) => format!("{r:?}"),
        Err(e) => format!("{e} {e:?}"),
    };
    assert!(!shown.contains(SECRET_KEY), "{prefix}: key leaked");
    assert!(!format!("{model:?}").contains(SECRET_KEY));
    let deltas = deltas.lock().unwrap().clone();
    Run {
        fixture,
        result,
        deltas,
        received,
    }
}

async fn run(prefix: &str) -> Run {
    run_times(prefix, 1).await
}

/// Asserts a successful fixture: content, usage, finish reason, and the kept bytes.
fn check_ok(
    run: &Run,
    text: Option<&str>,
    calls: &[(&str, &str, &str)],
    usage: (u64, u64, u64),
    finish: Option<FinishReason>,
) -> ModelResponse {
    let r = match &run.result {
        Ok(r) => r.clone(),
        Err(e) => panic!("expected a response, got {e}"),
    };
    assert_eq!(r.text.as_deref(), text);
    let got: Vec<(&str, &str, &str)> = r
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(got, calls);
    assert!(r.usage_reported);
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.total_tokens
        ),
        usage
    );
    assert_eq!(r.finish_reason, finish);
    // The exact bytes, both ways.
    assert_eq!(
        r.raw.response_body.as_ref(),
        run.fixture.body.as_slice(),
        "response bytes"
    );
    assert_eq!(
        r.raw.request_body.as_ref(),
        run.received[0].body.as_slice(),
        "request bytes"
    );
    assert_eq!(r.raw.status, Some(200));
    assert_eq!(
        r.raw.response_media_type.as_deref(),
        run.fixture.meta["response_content_type"].as_str()
    );
    assert_eq!(r.raw.attempts.len(), 1);
    assert_eq!(r.raw.attempts[0].status, Some(200));
    // Streamed deltas add up to the same response.
    if !run.deltas.is_empty() {
        let streamed_text: String = run
            .deltas
            .iter()
            .filter_map(|d| match d {
                StreamDelta::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            Some(streamed_text.as_str()).filter(|s| !s.is_empty()),
            r.text.as_deref()
        );
        for (i, call) in r.tool_calls.iter().enumerate() {
            let args: String = run
                .deltas
                .iter()
                .filter_map(|d| match d {
                    StreamDelta::ToolCall {
                        index, arguments, ..
                    } if *index == i => Some(arguments.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(args, call.arguments, "streamed arguments of call {i}");
        }
    }
    // Parsing the kept bytes again gives the same response (what replay relies on).
    let again = provrun_model::parse_response(r.raw.clone()).unwrap();
    assert_eq!(again.tool_calls, r.tool_calls);
    assert_eq!(again.text, r.text);
    assert_eq!(again.usage, r.usage);
    r
}

fn err(run: &Run) -> &ModelError {
    match &run.result {
        Ok(r) => panic!("expected an error, got {r:?}"),
        Err(e) => {
            let x = e
                .exchange()
                .expect("errors from a server carry the exchange");
            assert_eq!(x.response_body.as_ref(), run.fixture.body.as_slice());
            assert_eq!(
                x.request_body.as_ref(),
                run.received.last().unwrap().body.as_slice()
            );
            e
        }
    }
}

#[tokio::test]
async fn f01_parallel_tool_calls() {
    let run = run("01_").await;
    check_ok(
        &run,
        None,
        &[
            (
                "call_jYdIdRZHxZTn5bWCq5jlMrJi",
                "delete_file",
                r#"{"path": ".env"}"#,
            ),
            (
                "call_TmlTVWQbzrXCZ4jNsCVNbNqu",
                "create_file",
                r#"{"path": "test.txt"}"#,
            ),
        ],
        (71, 46, 117),
        Some(FinishReason::ToolCalls),
    );
}

#[tokio::test]
async fn f02_final_text_after_parallel_tools() {
    let run = run("02_").await;
    check_ok(
        &run,
        Some("The file `.env` has been deleted and `test.txt` has been created successfully."),
        &[],
        (133, 19, 152),
        Some(FinishReason::Stop),
    );
}

#[tokio::test]
async fn f03_stream_tool_call_split_args() {
    let run = run("03_").await;
    check_ok(
        &run,
        None,
        &[(
            "call_ZR5UUuTt3pf61kjwAJIYdVMj",
            "get_capital",
            r#"{"country":"UK"}"#,
        )],
        (53, 15, 68),
        Some(FinishReason::ToolCalls),
    );
    let fragments = run
        .deltas
        .iter()
        .filter(|d| matches!(d, StreamDelta::ToolCall { arguments, .. } if !arguments.is_empty()))
        .count();
    assert_eq!(fragments, 5, "the arguments arrive in five pieces");
}

#[tokio::test]
async fn f04_stream_final_text_with_usage() {
    let run = run("04_").await;
    check_ok(
        &run,
        Some("The capital of the UK is London."),
        &[],
        (78, 9, 87),
        Some(FinishReason::Stop),
    );
    assert!(run.deltas.len() > 3, "text arrives in pieces");
}

#[tokio::test]
async fn f05_stream_parallel_tool_calls() {
    let run = run("05_").await;
    check_ok(
        &run,
        None,
        &[
            ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", "{}"),
            ("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", "{}"),
        ],
        (364, 40, 404),
        Some(FinishReason::ToolCalls),
    );
}

#[tokio::test]
async fn f06_stream_split_args() {
    let run = run("06_").await;
    check_ok(
        &run,
        None,
        &[(
            "call_LwxJUB9KppVyogRRLQsamRJv",
            "get_weather",
            r#"{"city":"Mexico City"}"#,
        )],
        (423, 15, 438),
        Some(FinishReason::ToolCalls),
    );
}

#[tokio::test]
async fn f07_stream_output_tool_over_53_chunks() {
    let run = run("07_").await;
    let r = run.result.as_ref().unwrap();
    let args = r.tool_calls[0].arguments.clone();
    check_ok(
        &run,
        None,
        &[("call_CCGIWaMeYWmxOQ91orkmTvzn", "final_result", &args)],
        (448, 62, 510),
        Some(FinishReason::ToolCalls),
    );
    let v: Value = serde_json::from_str(&args).unwrap();
    assert_eq!(v["answers"].as_array().unwrap().len(), 3);
    assert_eq!(
        v["answers"][2]["answer"],
        "The product name is Pydantic AI."
    );
}

#[tokio::test]
async fn f08_error_400_unsupported_value() {
    let run = run("08_").await;
    match err(&run) {
        ModelError::BadRequest {
            status: 400,
            code,
            param,
            message,
            ..
        } => {
            assert_eq!(code.as_deref(), Some("unsupported_value"));
            assert_eq!(param.as_deref(), Some("messages[0].role"));
            assert!(message.contains("does not support 'system'"), "{message}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(run.received.len(), 1, "a 400 is not retried");
}

#[tokio::test]
async fn f09_error_404_model_not_found() {
    let run = run("09_").await;
    match err(&run) {
        ModelError::BadRequest {
            status: 404, code, ..
        } => {
            assert_eq!(code.as_deref(), Some("model_not_found"))
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn f10_error_429_openrouter_integer_code() {
    // A 429 is retried; the server keeps answering 429, so all four attempts fail.
    let run = run_times("10_", 4).await;
    let e = err(&run);
    match e {
        ModelError::RateLimited {
            status: 429,
            code,
            message,
            exchange,
            ..
        } => {
            assert_eq!(code.as_deref(), Some("429"));
            assert!(message.contains("Provider returned error"), "{message}");
            assert!(message.contains("Google"), "{message}");
            assert_eq!(exchange.attempts.len(), 4);
            assert!(
                exchange
                    .attempts
                    .iter()
                    .all(|a| a.status == Some(429) && a.error.is_some())
            );
        }
        other => panic!("{other}"),
    }
    assert_eq!(run.received.len(), 4);
}

#[tokio::test]
async fn f11_error_400_groq_tool_use_failed() {
    let run = run("11_").await;
    match err(&run) {
        ModelError::BadRequest {
            status: 400,
            code,
            param,
            message,
            ..
        } => {
            assert_eq!(code.as_deref(), Some("tool_use_failed"));
            assert_eq!(param.as_deref(), None);
            assert!(
                message.starts_with("Tool call validation failed"),
                "{message}"
            );
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn f12_stream_error_event_midstream() {
    let run = run("12_").await;
    match err(&run) {
        ModelError::ProviderError {
            code,
            status,
            message,
            ..
        } => {
            assert_eq!(code.as_deref(), Some("tool_use_failed"));
            assert_eq!(*status, Some(400));
            assert!(message.contains("did not match schema"), "{message}");
        }
        other => panic!("{other}"),
    }
    // The reasoning before the error was streamed to the caller.
    assert!(
        run.deltas
            .iter()
            .any(|d| matches!(d, StreamDelta::Reasoning(_)))
    );
}

#[tokio::test]
async fn f13_seq_tool_call_bytes() {
    let run = run("13_").await;
    check_ok(
        &run,
        None,
        &[(
            "call_TTY8UFNo7rNCaOBUNtlRSvMG",
            "lookup_population",
            r#"{"country":"Crumpet"}"#,
        )],
        (92, 17, 109),
        Some(FinishReason::ToolCalls),
    );
    // Byte-exact request fixture: same JSON value as the openai client sent.
    let recorded: Value =
        serde_json::from_slice(run.fixture.request_bytes.as_ref().unwrap()).unwrap();
    let sent: Value = serde_json::from_slice(&run.received[0].body).unwrap();
    assert_eq!(normalise(&sent), normalise(&recorded));
}

#[tokio::test]
async fn f14_seq_second_tool_call_bytes() {
    let run = run("14_").await;
    check_ok(
        &run,
        None,
        &[(
            "call_aq9UyiSFkzX6W8Ydc33DoI9Y",
            "can_have_dragons",
            r#"{"population":123124}"#,
        )],
        (118, 18, 136),
        Some(FinishReason::ToolCalls),
    );
}

#[tokio::test]
async fn f15_seq_final_text_bytes() {
    let run = run("15_").await;
    check_ok(
        &run,
        Some("YES"),
        &[],
        (146, 3, 149),
        Some(FinishReason::Stop),
    );
}

#[tokio::test]
async fn f16_stream_split_args_bytes() {
    let run = run("16_").await;
    check_ok(
        &run,
        None,
        &[(
            "call_1EYWDzueHEp8OsB8jJSEp7WB",
            "multiply",
            r#"{"a":1231,"b":2331}"#,
        )],
        (54, 20, 74),
        Some(FinishReason::ToolCalls),
    );
}

#[tokio::test]
async fn f17_stream_final_text_bytes() {
    let run = run("17_").await;
    check_ok(
        &run,
        Some(r"The result of \( 1231 \times 2331 \) is \( 2,869,461 \)."),
        &[],
        (87, 26, 113),
        Some(FinishReason::Stop),
    );
}

#[tokio::test]
async fn f18_openrouter_args_empty_then_full() {
    let run = run("18_").await;
    check_ok(
        &run,
        None,
        &[("0", "llm_version", "{}")],
        (57, 17, 74),
        None,
    );
}

#[tokio::test]
async fn f19_openrouter_args_full_first() {
    let run = run("19_").await;
    check_ok(
        &run,
        None,
        &[("0", "llm_version", "{}")],
        (57, 17, 74),
        None,
    );
}

#[tokio::test]
async fn f20_openrouter_args_key_absent() {
    let run = run("20_").await;
    check_ok(
        &run,
        None,
        &[("llm_version:0", "llm_version", "{}")],
        (56, 12, 68),
        Some(FinishReason::ToolCalls),
    );
}

#[tokio::test]
async fn f21_provider_run_tool() {
    let run = run("21_").await;
    let r = run.result.as_ref().unwrap();
    let text = r.text.clone().unwrap();
    assert!(
        text.starts_with("The weather in San Francisco today"),
        "{text}"
    );
    check_ok(
        &run,
        Some(&text),
        &[],
        (5296, 387, 5683),
        Some(FinishReason::Stop),
    );
    assert!(
        r.tool_calls.is_empty(),
        "a provider-run tool is not ours to run"
    );
    assert!(!r.provider_tool_calls.is_empty());
    let search = &r.provider_tool_calls[0];
    assert_eq!(search.kind, "search");
    assert!(
        search
            .arguments
            .as_deref()
            .unwrap()
            .contains("San Francisco")
    );
    assert!(
        search
            .output
            .as_deref()
            .unwrap()
            .contains("Weather in San Francisco")
    );
    assert!(r.reasoning.is_some());
}

#[tokio::test]
async fn extension_keys_are_stripped_from_tool_schemas() {
    let fixture = load("13_");
    let server = serve(vec![Canned::json(200, fixture.body.clone())]).await;
    let mut request = model_request_from(fixture.request.as_ref().unwrap());
    let schema = request.tools[0].parameters.as_object_mut().unwrap();
    schema.insert("x-provrun-digest".into(), json!("abc"));
    schema["properties"]["country"]["x-hint"] = json!(1);
    schema["properties"]["x-kept-name"] = json!({"type": "string", "x-drop": true});
    let model = model_for(&server.base_url, "gpt-4o-mini");
    model.request(&request).await.unwrap();
    let sent: Value = serde_json::from_slice(&server.received()[0].body).unwrap();
    let params = &sent["tools"][0]["function"]["parameters"];
    assert!(params.get("x-provrun-digest").is_none());
    assert!(params["properties"]["country"].get("x-hint").is_none());
    // A property that happens to be named x-… is data, not a keyword: it stays.
    assert_eq!(
        params["properties"]["x-kept-name"],
        json!({"type": "string"})
    );
}
