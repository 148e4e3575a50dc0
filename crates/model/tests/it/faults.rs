//! `OpenAiModel` under faults: retries, servers that stay down, stalls, timeouts, broken and
//! malformed bodies, lenient variants, and keeping the API key secret. All on loopback.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use provrun_model::{
    ApiKey, FinishReason, Message, Model, ModelError, ModelRequest, OpenAiConfig, OpenAiModel,
    RetryPolicy, StreamDelta, TimeoutKind, Timeouts,
};
use support::{Canned, Mode, SECRET_KEY, config_for, model_for, serve};

fn fixture(name: &str) -> Vec<u8> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openai");
    std::fs::read(dir.join(name)).unwrap()
}

const TEXT_JSON: &str = "15_seq_final_text_bytes.response.json";
const TOOL_SSE: &str = "03_stream_tool_call_split_args.response.sse";

fn hello() -> ModelRequest {
    ModelRequest {
        messages: vec![Message::user("hello")],
        ..Default::default()
    }
}

fn sse(body: impl Into<Vec<u8>>) -> Canned {
    Canned::new(200, "text/event-stream", body)
}

async fn stream(
    model: &OpenAiModel,
) -> (
    Result<provrun_model::ModelResponse, ModelError>,
    Vec<StreamDelta>,
) {
    let deltas = Arc::new(Mutex::new(Vec::new()));
    let sink = deltas.clone();
    let r = model
        .request_stream(&hello(), &move |d| sink.lock().unwrap().push(d))
        .await;
    let d = deltas.lock().unwrap().clone();
    (r, d)
}

#[tokio::test]
async fn rate_limit_then_success_honours_retry_after() {
    let server = serve(vec![
        Canned::json(
            429,
            r#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#,
        )
        .header("Retry-After", "1"),
        Canned::json(200, fixture(TEXT_JSON)),
    ])
    .await;
    let model = model_for(&server.base_url, "gpt-4o-mini");
    let started = Instant::now();
    let r = model.request(&hello()).await.unwrap();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(1),
        "waited {elapsed:?}, not the 1 s asked for"
    );
    assert!(elapsed < Duration::from_secs(4));
    assert_eq!(r.text.as_deref(), Some("YES"));
    let a = &r.raw.attempts;
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].status, Some(429));
    assert_eq!(a[0].retry_after, Some(Duration::from_secs(1)));
    assert!(a[0].error.as_deref().unwrap().contains("slow down"));
    assert!(a[0].response_body.starts_with(b"{\"error\""));
    assert_eq!((a[1].status, a[1].error.as_deref()), (Some(200), None));
    // Both attempts sent the same bytes.
    let got = server.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].body, got[1].body);
}

#[tokio::test]
async fn a_retry_after_date_is_honoured_like_seconds() {
    // Two seconds from now, as an HTTP date (whole seconds): a wait of one to two seconds.
    let at = std::time::SystemTime::now() + Duration::from_secs(2);
    let server = serve(vec![
        Canned::json(429, r#"{"error":{"message":"slow down"}}"#)
            .header("Retry-After", &httpdate::fmt_http_date(at)),
        Canned::json(200, fixture(TEXT_JSON)),
    ])
    .await;
    let model = model_for(&server.base_url, "m");
    let r = model.request(&hello()).await.unwrap();
    assert_eq!(r.text.as_deref(), Some("YES"));
    let a = &r.raw.attempts;
    assert_eq!(a.len(), 2);
    let wait = a[0].retry_after.expect("the date was read as a wait");
    assert!(
        (Duration::from_millis(200)..=Duration::from_secs(2)).contains(&wait),
        "{wait:?}"
    );
}

#[tokio::test]
async fn server_error_with_html_body_is_retried() {
    let server = serve(vec![
        Canned::new(502, "text/html", "<html><body>Bad gateway</body></html>")
            .header("retry-after-ms", "200"),
        Canned::json(200, fixture(TEXT_JSON)),
    ])
    .await;
    let model = model_for(&server.base_url, "m");
    let r = model.request(&hello()).await.unwrap();
    assert_eq!(r.raw.attempts.len(), 2);
    assert_eq!(r.raw.attempts[0].status, Some(502));
    assert!(
        r.raw.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("Bad gateway")
    );
}

#[tokio::test]
async fn a_server_that_stays_down_fails_in_bounded_time() {
    // Nothing listens on this port any more: every connection is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = model_for(&format!("http://{addr}/v1"), "m");
    let started = Instant::now();
    let e = model.request(&hello()).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    match &e {
        ModelError::Connection { message, exchange } => {
            assert!(!message.is_empty());
            assert_eq!(exchange.attempts.len(), 4, "first try and three retries");
            assert!(
                exchange
                    .attempts
                    .iter()
                    .all(|a| a.status.is_none() && a.error.is_some())
            );
            assert!(!exchange.request_body.is_empty(), "what was sent is kept");
        }
        other => panic!("expected Connection, got {other}"),
    }
    assert!(e.to_string().starts_with("connection failed"), "{e}");
}

#[tokio::test]
async fn retries_stop_at_the_time_budget() {
    let server = serve(vec![
        Canned::new(503, "text/plain", "upstream unavailable");
        20
    ])
    .await;
    let mut config = config_for(&server.base_url, "m");
    config.retry = RetryPolicy {
        max_retries: 50,
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(100),
        max_elapsed: Duration::from_millis(450),
    };
    let model = OpenAiModel::new(config).unwrap();
    let started = Instant::now();
    let e = model.request(&hello()).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    match &e {
        ModelError::ServerError {
            status: 503,
            message,
            exchange,
            ..
        } => {
            assert_eq!(message, "upstream unavailable");
            // Each wait is 50 to 100 ms (the backoff, jittered), so a 450 ms budget holds
            // a few attempts and at most about ten.
            let n = exchange.attempts.len();
            assert!((2..=10).contains(&n), "{n} attempts");
        }
        other => panic!("expected ServerError, got {other}"),
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_budget_is_not_waited_for() {
    let server = serve(vec![
        Canned::json(429, r#"{"error":{"message":"come back later"}}"#)
            .header("Retry-After", "3600"),
    ])
    .await;
    let model = model_for(&server.base_url, "m");
    let started = Instant::now();
    let e = model.request(&hello()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    match &e {
        ModelError::RateLimited {
            retry_after,
            exchange,
            ..
        } => {
            assert_eq!(*retry_after, Some(Duration::from_secs(3600)));
            assert_eq!(exchange.attempts.len(), 1);
        }
        other => panic!("expected RateLimited, got {other}"),
    }
    assert!(e.to_string().contains("retry after 3600"), "{e}");
}

#[tokio::test]
async fn insufficient_quota_is_not_retried() {
    let server = serve(vec![Canned::json(
        429,
        r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
    )])
    .await;
    let model = model_for(&server.base_url, "m");
    let e = model.request(&hello()).await.unwrap_err();
    assert!(
        matches!(&e, ModelError::RateLimited { code: Some(c), .. } if c == "insufficient_quota"),
        "{e}"
    );
    assert_eq!(server.received().len(), 1);
}

fn with_timeouts(base_url: &str, timeouts: Timeouts) -> OpenAiModel {
    let mut config = config_for(base_url, "m");
    config.timeouts = timeouts;
    OpenAiModel::new(config).unwrap()
}

#[tokio::test]
async fn a_stall_mid_stream_hits_the_idle_timeout() {
    let body = fixture(TOOL_SSE);
    let server = serve(vec![sse(body.clone()).mode(Mode::StallAfter(700))]).await;
    let model = with_timeouts(
        &server.base_url,
        Timeouts {
            idle: Duration::from_millis(300),
            ..Timeouts::default()
        },
    );
    let started = Instant::now();
    let (r, deltas) = stream(&model).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    match r.unwrap_err() {
        ModelError::Timeout {
            kind,
            after,
            exchange,
        } => {
            assert_eq!(kind, TimeoutKind::Idle);
            assert_eq!(after, Duration::from_millis(300));
            assert_eq!(
                exchange.response_body.as_ref(),
                &body[..700],
                "bytes up to the stall are kept"
            );
            assert_eq!(
                exchange.attempts.len(),
                1,
                "a started stream is not retried"
            );
        }
        other => panic!("expected an idle Timeout, got {other}"),
    }
    // The deltas before the stall reached the caller.
    assert!(
        deltas.iter().any(
            |d| matches!(d, StreamDelta::ToolCall { name: Some(n), .. } if n == "get_capital")
        )
    );
}

#[tokio::test]
async fn no_response_headers_hits_the_first_byte_timeout() {
    let server = serve(vec![Canned::json(200, "{}").mode(Mode::Silent)]).await;
    let model = with_timeouts(
        &server.base_url,
        Timeouts {
            first_byte: Duration::from_millis(300),
            ..Timeouts::default()
        },
    );
    let started = Instant::now();
    let e = model.request(&hello()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    match &e {
        ModelError::Timeout {
            kind: TimeoutKind::FirstByte,
            exchange,
            ..
        } => {
            assert_eq!(exchange.attempts.len(), 1);
            assert_eq!(exchange.status, None);
        }
        other => panic!("expected a first-byte Timeout, got {other}"),
    }
    assert_eq!(e.to_string(), "first byte timeout after 0.3s");
}

#[tokio::test]
async fn a_malformed_body_is_a_typed_error_with_the_bytes() {
    for body in [
        &b"<html>oops</html>"[..],
        br#"{"id":"x","object":"chat.completion"}"#,
        b"",
        b"[1,2]",
    ] {
        let server = serve(vec![Canned::json(200, body.to_vec())]).await;
        let model = model_for(&server.base_url, "m");
        match model.request(&hello()).await.unwrap_err() {
            ModelError::MalformedResponse { exchange, message } => {
                assert_eq!(exchange.response_body.as_ref(), body);
                assert_eq!(exchange.status, Some(200));
                assert!(!message.is_empty());
            }
            other => panic!(
                "{:?}: expected MalformedResponse, got {other}",
                String::from_utf8_lossy(body)
            ),
        }
    }
}

#[tokio::test]
async fn a_non_json_stream_event_is_malformed() {
    let server = serve(vec![sse(
        "data: {\"choices\":[]}\n\ndata: not json at all\n\ndata: [DONE]\n\n",
    )])
    .await;
    let model = model_for(&server.base_url, "m");
    let (r, _) = stream(&model).await;
    assert!(
        matches!(r, Err(ModelError::MalformedResponse { .. })),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_stream_cut_before_its_end_is_incomplete() {
    let body = fixture(TOOL_SSE);
    let text = String::from_utf8(body.clone()).unwrap();
    // Keep the chunks before the one that carries the finish reason.
    let cut = text.find("\"finish_reason\":\"tool_calls\"").unwrap();
    let cut = text[..cut].rfind("\n\n").unwrap() + 2;
    let server = serve(vec![sse(&body[..cut]).mode(Mode::CloseDelimited)]).await;
    let model = model_for(&server.base_url, "m");
    let (r, _) = stream(&model).await;
    match r.unwrap_err() {
        ModelError::StreamIncomplete { message, exchange } => {
            assert!(message.contains("[DONE]"), "{message}");
            assert_eq!(exchange.response_body.as_ref(), &body[..cut]);
        }
        other => panic!("expected StreamIncomplete, got {other}"),
    }
}

#[tokio::test]
async fn a_stream_with_a_finish_reason_but_no_done_is_accepted() {
    let body = fixture(TOOL_SSE);
    let text = String::from_utf8(body).unwrap();
    let without_done = text.replace("data: [DONE]\n\n", "");
    let server = serve(vec![sse(without_done.clone()).mode(Mode::CloseDelimited)]).await;
    let model = model_for(&server.base_url, "m");
    let (r, _) = stream(&model).await;
    let r = r.unwrap();
    assert_eq!(r.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(r.tool_calls[0].arguments, r#"{"country":"UK"}"#);
    assert_eq!(r.raw.response_body.as_ref(), without_done.as_bytes());
}

#[tokio::test]
async fn a_connection_broken_mid_body_is_incomplete() {
    let body = fixture(TOOL_SSE);
    let server = serve(vec![sse(body.clone()).mode(Mode::Truncate(500))]).await;
    let model = model_for(&server.base_url, "m");
    let (r, _) = stream(&model).await;
    match r.unwrap_err() {
        ModelError::StreamIncomplete { message, exchange } => {
            assert!(message.contains("connection broke"), "{message}");
            assert_eq!(exchange.response_body.as_ref(), &body[..500]);
        }
        other => panic!("expected StreamIncomplete, got {other}"),
    }
}

#[tokio::test]
async fn lenient_variants_parse() {
    // Unknown finish reason, a tool call without `type`, arguments sent as an object, a
    // missing id, content as an array of parts, usage with floats.
    let body = r#"{"id":"r1","model":"local","choices":[{"index":0,"finish_reason":"eos","message":{
        "role":"assistant","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}],
        "tool_calls":[{"function":{"name":"a","arguments":{"x":1}}},
                      {"id":"c2","function":{"name":"b"}}]}}],
        "usage":{"prompt_tokens":10.0,"completion_tokens":2}}"#;
    let server = serve(vec![Canned::json(200, body)]).await;
    let model = model_for(&server.base_url, "m");
    let r = model.request(&hello()).await.unwrap();
    assert_eq!(r.finish_reason, Some(FinishReason::Other("eos".into())));
    assert_eq!(r.finish_reason.as_ref().unwrap().to_string(), "eos");
    assert_eq!(r.text.as_deref(), Some("hi there"));
    let calls: Vec<(&str, &str, &str)> = r
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(calls, vec![("call_0", "a", r#"{"x":1}"#), ("c2", "b", "")]);
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.total_tokens
        ),
        (10, 2, 12)
    );
}

#[tokio::test]
async fn a_200_carrying_an_error_object_is_a_provider_error() {
    let server = serve(vec![Canned::json(
        200,
        r#"{"error":{"message":"upstream failed","code":502}}"#,
    )])
    .await;
    let model = model_for(&server.base_url, "m");
    let e = model.request(&hello()).await.unwrap_err();
    assert!(
        matches!(&e, ModelError::ProviderError { code: Some(c), .. } if c == "502"),
        "{e}"
    );
}

#[tokio::test]
async fn the_key_never_leaks_even_when_the_server_echoes_it() {
    let echo = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {SECRET_KEY}","code":"invalid_api_key"}}}}"#
    );
    let server = serve(vec![Canned::json(401, echo)]).await;
    let model = model_for(&server.base_url, "m");
    let e = model.request(&hello()).await.unwrap_err();
    assert!(
        matches!(e, ModelError::Unauthorized { status: 401, .. }),
        "{e}"
    );
    let x = e.exchange().unwrap();
    for shown in [
        e.to_string(),
        format!("{e:?}"),
        String::from_utf8_lossy(&x.response_body).into_owned(),
        format!("{:?}", x.attempts),
        format!("{model:?}"),
        format!("{:?}", model.config()),
    ] {
        assert!(!shown.contains(SECRET_KEY), "leaked in {shown}");
    }
    assert!(e.to_string().contains("[REDACTED]"), "{e}");
    assert_eq!(
        format!("{:?}", ApiKey::new(SECRET_KEY)),
        "ApiKey(<redacted>)"
    );
}

#[test]
fn configuration_is_checked_without_panicking() {
    let e = OpenAiConfig::from_values("m", None, None).unwrap_err();
    assert!(e.to_string().contains("OPENAI_API_KEY"), "{e}");
    // A local server needs no key.
    let local = OpenAiConfig::from_values("m", Some("http://127.0.0.1:1/v1".into()), None).unwrap();
    assert!(OpenAiModel::new(local).is_ok());
    let bad_key = OpenAiConfig::new("m", "http://127.0.0.1:1/v1", Some(ApiKey::new("sk-a\nb")));
    let e = OpenAiModel::new(bad_key).unwrap_err();
    assert!(
        matches!(e, ModelError::Config(_)) && !e.to_string().contains("sk-a"),
        "{e}"
    );
    let bad_url = OpenAiConfig::new("m", "ftp://example", None);
    assert!(matches!(
        OpenAiModel::new(bad_url),
        Err(ModelError::Config(_))
    ));
    let model =
        OpenAiModel::new(OpenAiConfig::new("gpt-4o", "http://127.0.0.1:1/v1/", None)).unwrap();
    assert_eq!(model.name(), "openai:gpt-4o");
}

#[tokio::test]
async fn a_streamed_request_is_retried_before_it_starts() {
    let body = fixture(TOOL_SSE);
    let server = serve(vec![
        Canned::json(500, r#"{"error":{"message":"The server had an error"}}"#),
        sse(body.clone()),
    ])
    .await;
    let model = model_for(&server.base_url, "m");
    let (r, deltas) = stream(&model).await;
    let r = r.unwrap();
    assert_eq!(r.raw.attempts.len(), 2);
    assert_eq!(r.raw.attempts[0].status, Some(500));
    assert_eq!(r.raw.response_body.as_ref(), body.as_slice());
    // Only the successful attempt produced deltas, once each.
    let args: String = deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::ToolCall { arguments, .. } => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, r#"{"country":"UK"}"#);
}

#[tokio::test]
async fn an_enormous_body_stops_at_the_size_limit() {
    // 4 MiB of JSON-looking padding against a 256 KiB limit, plain and streamed.
    let huge = {
        let mut b = b"{\"id\":\"x\",\"pad\":\"".to_vec();
        b.resize(4 << 20, b'a');
        b.extend_from_slice(b"\"}");
        b
    };
    let server = serve(vec![
        Canned::json(200, huge.clone()),
        sse(huge.clone()).mode(Mode::CloseDelimited),
        Canned::json(500, huge.clone()),
    ])
    .await;
    let mut config = config_for(&server.base_url, "m");
    config.max_response_bytes = 256 * 1024;
    config.retry = RetryPolicy::none();
    let model = OpenAiModel::new(config).unwrap();
    for streamed in [false, true] {
        let e = if streamed {
            stream(&model).await.0.unwrap_err()
        } else {
            model.request(&hello()).await.unwrap_err()
        };
        match &e {
            ModelError::MalformedResponse { message, exchange } => {
                assert!(message.contains("larger than the limit"), "{message}");
                assert_eq!(exchange.response_body.len(), 256 * 1024);
            }
            other => panic!("streamed={streamed}: expected MalformedResponse, got {other:?}"),
        }
    }
    // An error status with a huge body is read up to the limit, and still an HTTP error.
    let e = model.request(&hello()).await.unwrap_err();
    let body_len = e.exchange().unwrap().response_body.len();
    assert!(matches!(e, ModelError::ServerError { .. }), "{e:?}");
    assert!(body_len <= 256 * 1024, "{body_len}");
    assert_eq!(
        provrun_model::DEFAULT_MAX_RESPONSE_BYTES,
        OpenAiConfig::new("m", "http://127.0.0.1:1/v1", None).max_response_bytes
    );
}

/// A server that answers with a redirect to another server is not followed: the request
/// (its body and key) goes nowhere else, and the run gets an error naming the status.
#[tokio::test]
async fn a_redirect_is_not_followed() {
    let elsewhere = serve(vec![Canned::json(200, fixture(TEXT_JSON))]).await;
    let target = format!("{}/chat/completions", elsewhere.base_url);
    let server = serve(vec![Canned::json(307, "{}").header("location", &target)]).await;
    let model = model_for(&server.base_url, "m");
    let e = model.request(&hello()).await.unwrap_err();
    assert!(e.to_string().contains("307"), "{e}");
    assert_eq!(server.received().len(), 1);
    assert!(elsewhere.received().is_empty(), "the redirect was followed");
}
