//! The event-to-span mapping on hand-made logs: the edge cases a scripted run does not
//! reach (no run, a recorded trace id, deferred calls, failed requests and runs, blobs
//! that are missing). The end-to-end tests over OTLP are in crates/cli/tests/it/otel.rs.

use std::path::Path;

use opentelemetry::Value as OtelValue;
use opentelemetry::trace::{SpanId, Status};
use provrun_evidence::{Confidence, Event, EventType};
use provrun_otel::{OtelError, SpanData, spans_from_events, trace_id_for_run};
use serde_json::{Value, json};

fn event(seq: u64, kind: EventType, ts: &str, payload: Value) -> Event {
    Event {
        v: 1,
        run_id: "run-test".into(),
        seq,
        prev: None,
        ts: ts.into(),
        kind,
        confidence: Confidence::Observed,
        payload,
    }
}

fn started(details: Value) -> Event {
    event(
        0,
        EventType::RunStarted,
        "2026-01-02T03:04:05.000Z",
        json!({"agent": "a", "model": "openai:gpt-x", "tools": [], "limits": {}, "details": details}),
    )
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn nowhere() -> &'static Path {
    Path::new("/nonexistent/provrun-otel-bundle")
}

#[test]
fn a_log_without_run_started_is_refused() {
    assert!(matches!(
        spans_from_events(nowhere(), &[], false),
        Err(OtelError::NoRun)
    ));
    let only = event(0, EventType::Declared, "2026-01-02T03:04:05Z", json!({}));
    assert!(matches!(
        spans_from_events(nowhere(), &[only], false),
        Err(OtelError::NoRun)
    ));
}

#[test]
fn the_trace_id_is_derived_from_the_run_id_unless_recorded() {
    let derived = trace_id_for_run("run-test");
    assert_eq!(derived.len(), 32);
    assert_ne!(derived, trace_id_for_run("run-other"));
    let spans = spans_from_events(nowhere(), &[started(Value::Null)], false).unwrap();
    assert_eq!(spans[0].span_context.trace_id().to_string(), derived);
    assert_eq!(spans[0].parent_span_id, SpanId::INVALID);

    let recorded = "0123456789abcdef0123456789abcdef";
    let spans = spans_from_events(
        nowhere(),
        &[started(json!({"otel": {"trace_id": recorded}}))],
        false,
    )
    .unwrap();
    assert_eq!(spans[0].span_context.trace_id().to_string(), recorded);
}

#[test]
fn calls_requests_and_runs_map_with_their_failures() {
    let blob =
        json!({"digest": {"sha256": "ab".repeat(32)}, "size": 3, "media_type": "application/json"});
    let log = vec![
        started(Value::Null),
        event(
            1,
            EventType::ModelCalled,
            "2026-01-02T03:04:06.500Z",
            json!({"model": "openai:gpt-x", "stream": false, "request": blob, "response": null,
                   "usage": {"prompt_tokens": 7, "completion_tokens": 2}, "finish_reason": null,
                   "duration_ms": 1500, "error": "HTTP 503"}),
        ),
        event(
            2,
            EventType::ToolCalled,
            "2026-01-02T03:04:07Z",
            json!({"name": "rm", "call_id": "c1", "arguments": {}, "result": null, "ok": false,
                   "duration_ms": 0, "deferred": true, "output_tool": false, "provider_run": false}),
        ),
        event(
            3,
            EventType::ToolCalled,
            "2026-01-02T03:04:08Z",
            json!({"name": "rm", "call_id": "c1", "arguments": {}, "result": "denied", "ok": false,
                   "duration_ms": 0, "deferred": false, "output_tool": false, "provider_run": false,
                   "mode": "remote_mcp", "decided_by": "approval"}),
        ),
        event(
            4,
            EventType::RunFinished,
            "2026-01-02T03:04:09Z",
            json!({"status": "failed", "error": "gave up", "usage": {"input_tokens": 7, "output_tokens": 2}}),
        ),
    ];
    let spans = spans_from_events(nowhere(), &log, true).unwrap();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(names, ["invoke_agent a", "chat gpt-x", "execute_tool rm"]);

    let run = &spans[0];
    assert!(matches!(&run.status, Status::Error { description } if description == "gave up"));
    assert_eq!(
        attr(run, "gen_ai.provider.name").unwrap().as_str(),
        "openai"
    );
    assert_eq!(
        attr(run, "gen_ai.usage.input_tokens"),
        Some(&OtelValue::I64(7))
    );

    let chat = &spans[1];
    assert_eq!(chat.parent_span_id, run.span_context.span_id());
    assert!(matches!(&chat.status, Status::Error { description } if description == "HTTP 503"));
    assert_eq!(
        attr(chat, "gen_ai.usage.input_tokens"),
        Some(&OtelValue::I64(7))
    );
    assert_eq!(
        attr(chat, "gen_ai.usage.output_tokens"),
        Some(&OtelValue::I64(2))
    );
    assert_eq!(
        attr(chat, "provrun.request.sha256").unwrap().as_str(),
        "ab".repeat(32)
    );
    // The request blob is not there: its contents and the response model are left out.
    assert!(attr(chat, "gen_ai.input.messages").is_none());
    assert!(attr(chat, "gen_ai.response.model").is_none());
    let took = chat.end_time.duration_since(chat.start_time).unwrap();
    assert_eq!(took.as_millis(), 1500);

    let tool = &spans[2];
    assert_eq!(attr(tool, "provrun.seq"), Some(&OtelValue::I64(3)));
    assert_eq!(
        attr(tool, "gen_ai.tool.type").unwrap().as_str(),
        "extension"
    );
    assert_eq!(
        attr(tool, "provrun.tool.decided_by").unwrap().as_str(),
        "approval"
    );
    assert_eq!(
        attr(tool, "gen_ai.tool.call.result").unwrap().as_str(),
        "denied"
    );
    assert!(matches!(tool.status, Status::Error { .. }));
    assert_eq!(
        tool.end_time,
        run.end_time - std::time::Duration::from_secs(1)
    );
}
