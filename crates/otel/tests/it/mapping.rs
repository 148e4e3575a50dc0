//! The event-to-span mapping on hand-made logs: the edge cases a scripted run does not
//! reach (no run, a recorded trace id, deferred calls, failed requests and runs, blobs
//! that are missing), and a representative log whose spans are pinned field by field.
//! The end-to-end tests over OTLP are in crates/cli/tests/it/otel.rs.

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

/// A span as text, every field the exporter sends: what the representative log below
/// pins. Attribute values are written with their type, not their storage.
fn render(spans: &[SpanData]) -> String {
    let value = |v: &OtelValue| match v {
        OtelValue::Bool(b) => format!("bool {b}"),
        OtelValue::I64(n) => format!("i64 {n}"),
        OtelValue::F64(n) => format!("f64 {n}"),
        OtelValue::String(s) => format!("str {:?}", s.as_str()),
        OtelValue::Array(opentelemetry::Array::String(items)) => format!(
            "str[] {:?}",
            items.iter().map(|s| s.as_str()).collect::<Vec<_>>()
        ),
        other => format!("other {other:?}"),
    };
    let nanos = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    };
    let mut out = String::new();
    for s in spans {
        let c = &s.span_context;
        out.push_str(&format!(
            "{} {:?} trace {} span {} parent {} remote {} {} flags {:?} start {} end {} status {:?} scope {} {:?} dropped {} events {} links {}\n",
            s.name,
            s.span_kind,
            c.trace_id(),
            c.span_id(),
            s.parent_span_id,
            c.is_remote(),
            s.parent_span_is_remote,
            c.trace_flags(),
            nanos(s.start_time),
            nanos(s.end_time),
            s.status,
            s.instrumentation_scope.name(),
            s.instrumentation_scope.version(),
            s.dropped_attributes_count,
            s.events.len(),
            s.links.len(),
        ));
        for kv in &s.attributes {
            out.push_str(&format!("  {} = {}\n", kv.key.as_str(), value(&kv.value)));
        }
    }
    out
}

/// A bundle folder with `blobs` stored in the loose layout, and their refs.
fn bundle_with(blobs: &[(&[u8], &str)]) -> (tempfile::TempDir, Vec<Value>) {
    use sha2::{Digest as _, Sha256};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("blobs/sha256")).unwrap();
    let mut refs = Vec::new();
    for (bytes, media_type) in blobs {
        let hex = hex::encode(Sha256::digest(bytes));
        std::fs::write(dir.path().join("blobs/sha256").join(&hex), bytes).unwrap();
        refs.push(
            json!({"digest": {"sha256": hex}, "size": bytes.len(), "media_type": media_type}),
        );
    }
    (dir, refs)
}

/// A log as a recorder writes one (every payload whole), through streamed and plain
/// requests, both usage namings, a failed request, a provrun model, deferred, blobbed,
/// MCP and failed calls, and events that make no span: the spans it maps to, with and
/// without content, are pinned field by field.
// Long by design: the expected spans are written out whole, so any change shows.
#[test]
fn a_representative_log_maps_to_exactly_these_spans() {
    let request_1 = br#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Review a.txt"}],"stream":true}"#;
    let response_1 = b"data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    let request_2 = br#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Review a.txt"},{"role":"tool","content":"ok"}]}"#;
    let response_2 = br#"{"id":"chatcmpl-2","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}]}"#;
    let big_arguments = format!(r#"{{"path":"/input/a.txt","text":"{}"}}"#, "x".repeat(40));
    let big_result = "line\n".repeat(12);
    let steer = b"also check b.txt";
    let (dir, refs) = bundle_with(&[
        (request_1, "application/json"),
        (response_1, "text/event-stream"),
        (request_2, "application/json"),
        (response_2, "application/json"),
        (big_arguments.as_bytes(), "application/json"),
        (big_result.as_bytes(), "application/json"),
        (steer, "text/plain"),
    ]);
    // A request blob named but not in the bundle.
    let missing =
        json!({"digest": {"sha256": "cd".repeat(32)}, "size": 9, "media_type": "application/json"});
    let long_failure = format!("MCP server `notes` failed the call: {}", "é".repeat(230));
    let call = |name: &str, extra: Value| {
        let mut p = json!({"name": name, "call_id": "call_1", "arguments": {"path": "/input/a.txt"},
            "result": "ok", "ok": true, "duration_ms": 250, "deferred": false,
            "output_tool": false, "provider_run": false});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let log = vec![
        event(
            0,
            EventType::RunStarted,
            "2026-03-04T05:06:07.100Z",
            json!({"builder": "provrun/0.1.0", "agent_spec_digest": "ef".repeat(32),
                   "agent": "reviewer", "model": "openai:gpt-4o-mini",
                   "tools": [{"name": "read_file", "schema_sha256": "01".repeat(32)}],
                   "limits": {"max_steps": 8}, "details": {"sandbox": {"mode": "confined"}}}),
        ),
        event(
            1,
            EventType::InputStaged,
            "2026-03-04T05:06:07.200Z",
            json!({"path": "a.txt", "sha256": "02".repeat(32), "size": 5}),
        ),
        event(
            2,
            EventType::ModelCalled,
            "2026-03-04T05:06:08.500Z",
            json!({"model": "openai:gpt-4o-mini", "stream": true, "request": refs[0],
                   "response": refs[1], "usage": {"prompt_tokens": 12, "completion_tokens": 5,
                   "total_tokens": 17}, "finish_reason": "tool_calls", "duration_ms": 1200,
                   "error": null}),
        ),
        event(
            3,
            EventType::ToolCalled,
            "2026-03-04T05:06:08.600Z",
            call(
                "delete_file",
                json!({"run_call_id": "1.1", "result": null, "ok": false, "duration_ms": 0,
                       "deferred": true, "mode": "in_process", "confirm": "Delete?"}),
            ),
        ),
        event(
            4,
            EventType::ToolCalled,
            "2026-03-04T05:06:09.000Z",
            call(
                "read_file",
                json!({"run_call_id": "1.2", "mode": "in_process", "decided_by": "tool",
                       "start_order": 1, "end_order": 2}),
            ),
        ),
        event(
            5,
            EventType::ToolCalled,
            "2026-03-04T05:06:09.250Z",
            call(
                "write_file",
                json!({"call_id": "call_2", "run_call_id": "1.3", "arguments": null,
                       "result": null, "arguments_blob": refs[4], "result_blob": refs[5],
                       "mode": "in_process", "decided_by": "after_hook", "duration_ms": 40}),
            ),
        ),
        event(
            6,
            EventType::ToolCalled,
            "2026-03-04T05:06:10.000Z",
            call(
                "notes_find",
                json!({"call_id": "call_3", "run_call_id": "1.4", "arguments": "{not json",
                       "result": long_failure, "ok": false, "mode": "remote_mcp",
                       "decided_by": "tool", "duration_ms": 700,
                       "mcp": {"server": {"name": "notes"}, "tool": "find"}}),
            ),
        ),
        event(
            7,
            EventType::Steered,
            "2026-03-04T05:06:10.100Z",
            json!({"text": refs[6], "before_request": 2}),
        ),
        event(
            8,
            EventType::ModelCalled,
            "2026-03-04T05:06:11.000Z",
            json!({"model": "openai:gpt-4o-mini", "stream": false, "request": refs[2],
                   "response": refs[3], "usage": {"input_tokens": 30, "output_tokens": 7},
                   "finish_reason": "stop", "duration_ms": 800, "error": null,
                   "attempts": [{"status": 429}, {"status": 200}]}),
        ),
        event(
            9,
            EventType::ModelCalled,
            "2026-03-04T05:06:12.000Z",
            json!({"model": "openai:gpt-4o-mini", "stream": false, "request": missing,
                   "response": null, "usage": null, "finish_reason": null,
                   "duration_ms": 300, "error": "HTTP 429: slow down"}),
        ),
        event(
            10,
            EventType::ModelCalled,
            "2026-03-04T05:06:12.500Z",
            json!({"model": "script:demo", "stream": false, "request": null, "response": null,
                   "usage": {"input_tokens": 0, "output_tokens": 0}, "finish_reason": "stop",
                   "duration_ms": 0, "error": null}),
        ),
        event(
            11,
            EventType::OutputProduced,
            "2026-03-04T05:06:12.600Z",
            json!({"path": "review.md", "sha256": "03".repeat(32), "size": 6}),
        ),
        event(
            12,
            EventType::RunFinished,
            "2026-03-04T05:06:12.700Z",
            json!({"status": "finished", "event_count": 13, "outputs": 1,
                   "usage": {"input_tokens": 42, "output_tokens": 12, "requests": 4},
                   "error": null}),
        ),
    ];
    // Every payload is whole: the log is one a bundle could hold.
    for e in &log {
        e.typed().unwrap();
    }
    let with_content = render(&spans_from_events(dir.path(), &log, true).unwrap());
    let without = render(&spans_from_events(dir.path(), &log, false).unwrap());
    // The instrumentation scope names the crate's own version.
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(with_content, WITH_CONTENT.replace("{VERSION}", version));
    assert_eq!(without, WITHOUT_CONTENT.replace("{VERSION}", version));
}

/// The spans of the representative log, with content.
const WITH_CONTENT: &str = r#"invoke_agent reviewer Internal trace c9bfd46fbc36a2a776c7436aa186647d span 582e22cc2ebf07b1 parent 0000000000000000 remote false false flags TraceFlags(1) start 1772600767100000000 end 1772600772700000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "invoke_agent"
  gen_ai.agent.name = str "reviewer"
  gen_ai.provider.name = str "openai"
  gen_ai.request.model = str "gpt-4o-mini"
  provrun.status = str "finished"
  gen_ai.usage.input_tokens = i64 42
  gen_ai.usage.output_tokens = i64 12
  provrun.run_id = str "run-test"
  provrun.seq = i64 0
chat gpt-4o-mini Client trace c9bfd46fbc36a2a776c7436aa186647d span d33fa813c2ffefce parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600767300000000 end 1772600768500000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "chat"
  gen_ai.provider.name = str "openai"
  gen_ai.request.model = str "gpt-4o-mini"
  provrun.model = str "openai:gpt-4o-mini"
  gen_ai.response.model = str "gpt-4o-mini-2024-07-18"
  gen_ai.response.id = str "chatcmpl-1"
  gen_ai.response.finish_reasons = str[] ["tool_calls"]
  gen_ai.usage.input_tokens = i64 12
  gen_ai.usage.output_tokens = i64 5
  gen_ai.input.messages = str "[{\"parts\":[{\"content\":\"Review a.txt\",\"type\":\"text\"}],\"role\":\"user\"}]"
  gen_ai.request.stream = bool true
  provrun.stream = bool true
  provrun.request.sha256 = str "c071e461378c811a92132030b23ccf9b4e778af423e7a6519e04635372b3b715"
  provrun.response.sha256 = str "d2fc558d8f2dce0ef2ab117825315f1c282eb5687d63d20cba9d08cd3efdc7ea"
  provrun.run_id = str "run-test"
  provrun.seq = i64 2
execute_tool read_file Internal trace c9bfd46fbc36a2a776c7436aa186647d span 64855e5808b9f3ea parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600768750000000 end 1772600769000000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "execute_tool"
  gen_ai.tool.name = str "read_file"
  gen_ai.tool.type = str "function"
  gen_ai.tool.call.id = str "call_1"
  provrun.tool.mode = str "in_process"
  provrun.tool.decided_by = str "tool"
  gen_ai.tool.call.arguments = str "{\"path\":\"/input/a.txt\"}"
  gen_ai.tool.call.result = str "ok"
  provrun.run_id = str "run-test"
  provrun.seq = i64 4
execute_tool write_file Internal trace c9bfd46fbc36a2a776c7436aa186647d span 822e8add8baca0e7 parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600769210000000 end 1772600769250000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "execute_tool"
  gen_ai.tool.name = str "write_file"
  gen_ai.tool.type = str "function"
  gen_ai.tool.call.id = str "call_2"
  provrun.tool.mode = str "in_process"
  provrun.tool.decided_by = str "after_hook"
  provrun.arguments.sha256 = str "cb21f159108ab255aa9d5b317ed489ef814f8773e2c7bc23bb2bab0e6eb1d57e"
  gen_ai.tool.call.arguments = str "{\"path\":\"/input/a.txt\",\"text\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"
  provrun.result.sha256 = str "40d9900f69d3a483d9e92eedc592d94168b426849cf73fb58142e154db343a5e"
  gen_ai.tool.call.result = str "line\nline\nline\nline\nline\nline\nline\nline\nline\nline\nline\nline\n"
  provrun.run_id = str "run-test"
  provrun.seq = i64 5
execute_tool notes_find Internal trace c9bfd46fbc36a2a776c7436aa186647d span 4d8c6d2ebdf351d2 parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600769300000000 end 1772600770000000000 status Error { description: "MCP server `notes` failed the call: éééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé" } scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "execute_tool"
  gen_ai.tool.name = str "notes_find"
  gen_ai.tool.type = str "extension"
  gen_ai.tool.call.id = str "call_3"
  provrun.tool.mode = str "remote_mcp"
  provrun.tool.decided_by = str "tool"
  gen_ai.tool.call.arguments = str "{not json"
  gen_ai.tool.call.result = str "MCP server `notes` failed the call: éééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé"
  error.type = str "tool_error"
  provrun.run_id = str "run-test"
  provrun.seq = i64 6
chat gpt-4o-mini Client trace c9bfd46fbc36a2a776c7436aa186647d span ca9dab76f2f0f4b2 parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600770200000000 end 1772600771000000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "chat"
  gen_ai.provider.name = str "openai"
  gen_ai.request.model = str "gpt-4o-mini"
  provrun.model = str "openai:gpt-4o-mini"
  gen_ai.response.model = str "gpt-4o-mini-2024-07-18"
  gen_ai.response.id = str "chatcmpl-2"
  gen_ai.response.finish_reasons = str[] ["stop"]
  gen_ai.usage.input_tokens = i64 30
  gen_ai.usage.output_tokens = i64 7
  gen_ai.input.messages = str "[{\"parts\":[{\"content\":\"Review a.txt\",\"type\":\"text\"}],\"role\":\"user\"},{\"parts\":[{\"id\":\"\",\"response\":\"ok\",\"type\":\"tool_call_response\"}],\"role\":\"tool\"}]"
  gen_ai.output.messages = str "[{\"finish_reason\":\"stop\",\"parts\":[{\"content\":\"Done.\",\"type\":\"text\"}],\"role\":\"assistant\"}]"
  gen_ai.request.stream = bool false
  provrun.stream = bool false
  provrun.request.sha256 = str "3740cabeff51656430e280ef5d643163f1e62f435067ce9fe7a25a4c1b42be34"
  provrun.response.sha256 = str "c600b1fdca49ac3f21d5a8e3e60c66e8dfce37b9ccf3ac528e0321b817f5dc9b"
  provrun.run_id = str "run-test"
  provrun.seq = i64 8
chat gpt-4o-mini Client trace c9bfd46fbc36a2a776c7436aa186647d span 6f5d06f240fc3cbd parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600771700000000 end 1772600772000000000 status Error { description: "HTTP 429: slow down" } scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "chat"
  gen_ai.provider.name = str "openai"
  gen_ai.request.model = str "gpt-4o-mini"
  provrun.model = str "openai:gpt-4o-mini"
  gen_ai.request.stream = bool false
  provrun.stream = bool false
  provrun.request.sha256 = str "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
  error.type = str "model_error"
  provrun.run_id = str "run-test"
  provrun.seq = i64 9
chat demo Client trace c9bfd46fbc36a2a776c7436aa186647d span 16b167cd425335ee parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600772500000000 end 1772600772500000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "chat"
  gen_ai.provider.name = str "provrun.script"
  gen_ai.request.model = str "demo"
  provrun.model = str "script:demo"
  gen_ai.response.finish_reasons = str[] ["stop"]
  gen_ai.usage.input_tokens = i64 0
  gen_ai.usage.output_tokens = i64 0
  gen_ai.request.stream = bool false
  provrun.stream = bool false
  provrun.run_id = str "run-test"
  provrun.seq = i64 10
"#;

/// The spans of the representative log, without content.
const WITHOUT_CONTENT: &str = r#"invoke_agent reviewer Internal trace c9bfd46fbc36a2a776c7436aa186647d span 582e22cc2ebf07b1 parent 0000000000000000 remote false false flags TraceFlags(1) start 1772600767100000000 end 1772600772700000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "invoke_agent"
  gen_ai.agent.name = str "reviewer"
  gen_ai.provider.name = str "openai"
  gen_ai.request.model = str "gpt-4o-mini"
  provrun.status = str "finished"
  gen_ai.usage.input_tokens = i64 42
  gen_ai.usage.output_tokens = i64 12
  provrun.run_id = str "run-test"
  provrun.seq = i64 0
chat gpt-4o-mini Client trace c9bfd46fbc36a2a776c7436aa186647d span d33fa813c2ffefce parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600767300000000 end 1772600768500000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "chat"
  gen_ai.provider.name = str "openai"
  gen_ai.request.model = str "gpt-4o-mini"
  provrun.model = str "openai:gpt-4o-mini"
  gen_ai.response.model = str "gpt-4o-mini-2024-07-18"
  gen_ai.response.id = str "chatcmpl-1"
  gen_ai.response.finish_reasons = str[] ["tool_calls"]
  gen_ai.usage.input_tokens = i64 12
  gen_ai.usage.output_tokens = i64 5
  gen_ai.request.stream = bool true
  provrun.stream = bool true
  provrun.request.sha256 = str "c071e461378c811a92132030b23ccf9b4e778af423e7a6519e04635372b3b715"
  provrun.response.sha256 = str "d2fc558d8f2dce0ef2ab117825315f1c282eb5687d63d20cba9d08cd3efdc7ea"
  provrun.run_id = str "run-test"
  provrun.seq = i64 2
execute_tool read_file Internal trace c9bfd46fbc36a2a776c7436aa186647d span 64855e5808b9f3ea parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600768750000000 end 1772600769000000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "execute_tool"
  gen_ai.tool.name = str "read_file"
  gen_ai.tool.type = str "function"
  gen_ai.tool.call.id = str "call_1"
  provrun.tool.mode = str "in_process"
  provrun.tool.decided_by = str "tool"
  provrun.run_id = str "run-test"
  provrun.seq = i64 4
execute_tool write_file Internal trace c9bfd46fbc36a2a776c7436aa186647d span 822e8add8baca0e7 parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600769210000000 end 1772600769250000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "execute_tool"
  gen_ai.tool.name = str "write_file"
  gen_ai.tool.type = str "function"
  gen_ai.tool.call.id = str "call_2"
  provrun.tool.mode = str "in_process"
  provrun.tool.decided_by = str "after_hook"
  provrun.arguments.sha256 = str "cb21f159108ab255aa9d5b317ed489ef814f8773e2c7bc23bb2bab0e6eb1d57e"
  provrun.result.sha256 = str "40d9900f69d3a483d9e92eedc592d94168b426849cf73fb58142e154db343a5e"
  provrun.run_id = str "run-test"
  provrun.seq = i64 5
execute_tool notes_find Internal trace c9bfd46fbc36a2a776c7436aa186647d span 4d8c6d2ebdf351d2 parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600769300000000 end 1772600770000000000 status Error { description: "MCP server `notes` failed the call: éééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé" } scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "execute_tool"
  gen_ai.tool.name = str "notes_find"
  gen_ai.tool.type = str "extension"
  gen_ai.tool.call.id = str "call_3"
  provrun.tool.mode = str "remote_mcp"
  provrun.tool.decided_by = str "tool"
  error.type = str "tool_error"
  provrun.run_id = str "run-test"
  provrun.seq = i64 6
chat gpt-4o-mini Client trace c9bfd46fbc36a2a776c7436aa186647d span ca9dab76f2f0f4b2 parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600770200000000 end 1772600771000000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "chat"
  gen_ai.provider.name = str "openai"
  gen_ai.request.model = str "gpt-4o-mini"
  provrun.model = str "openai:gpt-4o-mini"
  gen_ai.response.model = str "gpt-4o-mini-2024-07-18"
  gen_ai.response.id = str "chatcmpl-2"
  gen_ai.response.finish_reasons = str[] ["stop"]
  gen_ai.usage.input_tokens = i64 30
  gen_ai.usage.output_tokens = i64 7
  gen_ai.request.stream = bool false
  provrun.stream = bool false
  provrun.request.sha256 = str "3740cabeff51656430e280ef5d643163f1e62f435067ce9fe7a25a4c1b42be34"
  provrun.response.sha256 = str "c600b1fdca49ac3f21d5a8e3e60c66e8dfce37b9ccf3ac528e0321b817f5dc9b"
  provrun.run_id = str "run-test"
  provrun.seq = i64 8
chat gpt-4o-mini Client trace c9bfd46fbc36a2a776c7436aa186647d span 6f5d06f240fc3cbd parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600771700000000 end 1772600772000000000 status Error { description: "HTTP 429: slow down" } scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "chat"
  gen_ai.provider.name = str "openai"
  gen_ai.request.model = str "gpt-4o-mini"
  provrun.model = str "openai:gpt-4o-mini"
  gen_ai.request.stream = bool false
  provrun.stream = bool false
  provrun.request.sha256 = str "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
  error.type = str "model_error"
  provrun.run_id = str "run-test"
  provrun.seq = i64 9
chat demo Client trace c9bfd46fbc36a2a776c7436aa186647d span 16b167cd425335ee parent 582e22cc2ebf07b1 remote false false flags TraceFlags(1) start 1772600772500000000 end 1772600772500000000 status Unset scope provrun Some("{VERSION}") dropped 0 events 0 links 0
  gen_ai.operation.name = str "chat"
  gen_ai.provider.name = str "provrun.script"
  gen_ai.request.model = str "demo"
  provrun.model = str "script:demo"
  gen_ai.response.finish_reasons = str[] ["stop"]
  gen_ai.usage.input_tokens = i64 0
  gen_ai.usage.output_tokens = i64 0
  gen_ai.request.stream = bool false
  provrun.stream = bool false
  provrun.run_id = str "run-test"
  provrun.seq = i64 10
"#;
