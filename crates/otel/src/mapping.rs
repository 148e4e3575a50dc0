//! A bundle's events as GenAI spans: one `invoke_agent` span for the run, a `chat` span
//! per model request and an `execute_tool` span per completed tool call, all in one trace
//! whose id is derived from the run id, with the times recorded in the evidence.

use std::borrow::Cow;
use std::path::Path;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, StringValue, Value as OtelValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use provrun_evidence::{
    BlobRef, Event, EventPayload, EventType, ModelCalled, RunFinished, RunStarted, RunStatus,
    ToolCalled, read_blob,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::OtelError;

/// The trace id of a run: the first 16 bytes of SHA-256 over a fixed prefix and the run
/// id, as 32 lower-case hex digits. Derived, so `run_started` can record it before any
/// span exists and a later `export` of the bundle lands in the same trace.
pub fn trace_id_for_run(run_id: &str) -> String {
    hex::encode(trace_id_bytes(run_id))
}

fn trace_id_bytes(run_id: &str) -> [u8; 16] {
    let digest = Sha256::new()
        .chain_update(b"provrun-otel trace\0")
        .chain_update(run_id.as_bytes())
        .finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    if out == [0u8; 16] {
        out[15] = 1;
    }
    out
}

fn span_id(run_id: &str, seq: u64) -> SpanId {
    let digest = Sha256::new()
        .chain_update(b"provrun-otel span\0")
        .chain_update(run_id.as_bytes())
        .chain_update(seq.to_be_bytes())
        .finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    if out == [0u8; 8] {
        out[7] = 1;
    }
    SpanId::from_bytes(out)
}

fn time_of(event: &Event) -> SystemTime {
    humantime::parse_rfc3339_weak(&event.ts).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The start of something that ended at `event`'s time and took `duration_ms`.
fn started(event: &Event, duration_ms: Option<u64>) -> SystemTime {
    let end = time_of(event);
    end.checked_sub(Duration::from_millis(duration_ms.unwrap_or(0)))
        .unwrap_or(end)
}

/// A string member of provider JSON (a request or response body).
fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// `openai:gpt-4o` → (`openai`, `gpt-4o`); a model id without a known prefix is its own
/// model name, from an unknown provider.
fn split_model(model: &str) -> (&str, &str) {
    match model.split_once(':') {
        Some((p @ ("openai" | "script" | "test" | "replay" | "function"), rest)) => (p, rest),
        _ => ("", model),
    }
}

/// The provider name the conventions use (`openai`), or `provrun.<kind>` for provrun's
/// offline models.
fn provider_name(prefix: &str) -> String {
    match prefix {
        "openai" => "openai".into(),
        "" => "unknown".into(),
        other => format!("provrun.{other}"),
    }
}

/// The bytes of a blob named by an event, if it is there and intact.
fn blob_bytes(bundle: &Path, blob: Option<&BlobRef>) -> Option<Vec<u8>> {
    read_blob(bundle, blob?).ok()
}

/// The JSON of a response body: the object itself, or for a streamed (SSE) body the
/// `data:` chunks' objects.
fn response_objects(bytes: &[u8]) -> Vec<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        return vec![v];
    }
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .collect()
}

/// A number from usage, under either naming.
fn usage_of(usage: &Value, keys: &[&str]) -> Option<i64> {
    keys.iter()
        .find_map(|k| usage.get(*k).and_then(Value::as_i64))
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

struct Builder<'a> {
    bundle: &'a Path,
    run_id: &'a str,
    trace_id: TraceId,
    capture: bool,
    scope: InstrumentationScope,
}

impl Builder<'_> {
    #[allow(clippy::too_many_arguments)]
    fn span(
        &self,
        seq: u64,
        parent: SpanId,
        kind: SpanKind,
        name: String,
        start: SystemTime,
        end: SystemTime,
        mut attributes: Vec<KeyValue>,
        status: Status,
    ) -> SpanData {
        attributes.push(KeyValue::new("provrun.run_id", self.run_id.to_string()));
        attributes.push(KeyValue::new("provrun.seq", seq as i64));
        SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                span_id(self.run_id, seq),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: kind,
            name: Cow::Owned(name),
            start_time: start,
            end_time: end.max(start),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        }
    }

    fn chat(&self, ev: &Event, p: &ModelCalled, parent: SpanId) -> SpanData {
        let model_id = p.model.as_str();
        let (prefix, fallback_model) = split_model(model_id);
        let request = blob_bytes(self.bundle, p.request.as_ref());
        let response = blob_bytes(self.bundle, p.response.as_ref());
        let request_json = request
            .as_ref()
            .and_then(|b| serde_json::from_slice::<Value>(b).ok());
        let request_model = request_json
            .as_ref()
            .and_then(|r| str_of(r, "model"))
            .unwrap_or(fallback_model)
            .to_string();
        let objects = response
            .as_ref()
            .map(|b| response_objects(b))
            .unwrap_or_default();
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider_name(prefix)),
            KeyValue::new("gen_ai.request.model", request_model.clone()),
            KeyValue::new("provrun.model", model_id.to_string()),
        ];
        if let Some(m) = objects.iter().find_map(|o| str_of(o, "model")) {
            attrs.push(KeyValue::new("gen_ai.response.model", m.to_string()));
        }
        if let Some(id) = objects.iter().find_map(|o| str_of(o, "id")) {
            attrs.push(KeyValue::new("gen_ai.response.id", id.to_string()));
        }
        if let Some(reason) = &p.finish_reason {
            attrs.push(KeyValue::new(
                "gen_ai.response.finish_reasons",
                OtelValue::Array(vec![StringValue::from(reason.clone())].into()),
            ));
        }
        if let Some(n) = usage_of(&p.usage, &["input_tokens", "prompt_tokens"]) {
            attrs.push(KeyValue::new("gen_ai.usage.input_tokens", n));
        }
        if let Some(n) = usage_of(&p.usage, &["output_tokens", "completion_tokens"]) {
            attrs.push(KeyValue::new("gen_ai.usage.output_tokens", n));
        }
        attrs.push(KeyValue::new("provrun.stream", p.stream));
        for (key, blob) in [("request", &p.request), ("response", &p.response)] {
            if let Some(b) = blob {
                attrs.push(KeyValue::new(
                    format!("provrun.{key}.sha256"),
                    b.digest.sha256.clone(),
                ));
            }
        }
        if self.capture {
            if let Some(messages) = request_json.as_ref().and_then(|r| r.get("messages")) {
                attrs.push(KeyValue::new("gen_ai.input.messages", messages.to_string()));
            }
            let output: Vec<Value> = objects
                .iter()
                .filter_map(|o| o.get("choices"))
                .flat_map(|c| c.as_array().cloned().unwrap_or_default())
                .collect();
            if !output.is_empty() {
                attrs.push(KeyValue::new(
                    "gen_ai.output.messages",
                    Value::Array(output).to_string(),
                ));
            }
        }
        let status = match &p.error {
            Some(e) => {
                attrs.push(KeyValue::new("error.type", "model_error"));
                Status::error(e.clone())
            }
            None => Status::Unset,
        };
        self.span(
            ev.seq,
            parent,
            SpanKind::Client,
            format!("chat {request_model}"),
            started(ev, Some(p.duration_ms)),
            time_of(ev),
            attrs,
            status,
        )
    }

    fn tool(&self, ev: &Event, p: &ToolCalled, parent: SpanId) -> SpanData {
        let name = p.name.clone();
        let mode = p.mode.as_deref();
        let tool_type = if mode == Some("remote_mcp") {
            "extension"
        } else {
            "function"
        };
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", name.clone()),
            KeyValue::new("gen_ai.tool.type", tool_type),
            KeyValue::new("gen_ai.tool.call.id", p.call_id.clone()),
        ];
        if let Some(m) = mode {
            attrs.push(KeyValue::new("provrun.tool.mode", m.to_string()));
        }
        if let Some(d) = &p.decided_by {
            attrs.push(KeyValue::new("provrun.tool.decided_by", d.clone()));
        }
        for (key, inline, blob) in [
            ("arguments", &p.arguments, &p.arguments_blob),
            ("result", &p.result, &p.result_blob),
        ] {
            if let Some(b) = blob {
                attrs.push(KeyValue::new(
                    format!("provrun.{key}.sha256"),
                    b.digest.sha256.clone(),
                ));
            }
            if self.capture {
                let inline = Some(inline).filter(|v| !v.is_null()).map(text);
                let value = inline.or_else(|| {
                    blob_bytes(self.bundle, blob.as_ref())
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                });
                if let Some(v) = value {
                    attrs.push(KeyValue::new(format!("gen_ai.tool.call.{key}"), v));
                }
            }
        }
        let status = if p.ok {
            Status::Unset
        } else {
            attrs.push(KeyValue::new("error.type", "tool_error"));
            let message = text(&p.result);
            Status::error(message.chars().take(256).collect::<String>())
        };
        self.span(
            ev.seq,
            parent,
            SpanKind::Internal,
            format!("execute_tool {name}"),
            started(ev, Some(p.duration_ms)),
            time_of(ev),
            attrs,
            status,
        )
    }
}

/// `payload` read as `T`, each field it leaves out taken from `empty`; `empty` itself
/// when it does not fit `T` even so.
fn filled<T: Serialize + DeserializeOwned>(payload: &Value, empty: T) -> T {
    let Ok(mut base) = serde_json::to_value(&empty) else {
        return empty;
    };
    if let (Value::Object(base), Value::Object(fields)) = (&mut base, payload) {
        base.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    serde_json::from_value(base).unwrap_or(empty)
}

/// An event's payload as its type's struct ([`Event::typed`]), which every event of a
/// log [`provrun_evidence::read_events`] gives is. An event built by hand may leave
/// fields out: in the payloads spans are made from, those read as empty (no text, no
/// blob, zero, false, `null`), except a `run_started`'s agent (`agent`), a call's tool
/// name (`unknown`) and outcome (it succeeded) and a `run_finished`'s status
/// (finished); a payload that does not fit its type even so reads as those values.
fn payload(ev: &Event) -> EventPayload {
    if let Ok(typed) = ev.typed() {
        return typed;
    }
    let p = &ev.payload;
    match ev.kind {
        EventType::RunStarted => EventPayload::RunStarted(filled(
            p,
            RunStarted {
                builder: String::new(),
                agent_spec_digest: String::new(),
                agent: "agent".into(),
                model: String::new(),
                tools: Vec::new(),
                limits: Value::Null,
                details: Value::Null,
            },
        )),
        EventType::ModelCalled => EventPayload::ModelCalled(filled(
            p,
            ModelCalled {
                model: String::new(),
                stream: false,
                request: None,
                response: None,
                usage: Value::Null,
                finish_reason: None,
                duration_ms: 0,
                error: None,
                attempts: Vec::new(),
                response_rendered: false,
                http: None,
                tool_calls: Vec::new(),
            },
        )),
        EventType::ToolCalled => EventPayload::ToolCalled(filled(
            p,
            ToolCalled {
                name: "unknown".into(),
                ok: true,
                ..ToolCalled::default()
            },
        )),
        EventType::RunFinished => EventPayload::RunFinished(filled(
            p,
            RunFinished {
                status: RunStatus::Finished,
                event_count: 0,
                outputs: 0,
                usage: Value::Null,
                error: None,
            },
        )),
        // No span is made from the others.
        other => EventPayload::Unknown {
            kind: other.as_str().to_string(),
            payload: p.clone(),
        },
    }
}

/// The spans of a bundle's events (as [`provrun_evidence::read_events`] gives them): the
/// run's `invoke_agent` span first, then its children in log order. `bundle` is where
/// request and response blobs are read from (for the response model and, with
/// `capture_content`, the messages); a missing or damaged blob only leaves its
/// attributes out. Payloads are read as their types' structs; of an event built by hand,
/// a field it leaves out reads as empty.
pub fn spans_from_events(
    bundle: &Path,
    events: &[Event],
    capture_content: bool,
) -> Result<Vec<SpanData>, OtelError> {
    let first = events.first().ok_or(OtelError::NoRun)?;
    if first.kind != EventType::RunStarted {
        return Err(OtelError::NoRun);
    }
    let run_id = first.run_id.as_str();
    let log: Vec<EventPayload> = events.iter().map(payload).collect();
    let EventPayload::RunStarted(run) = &log[0] else {
        return Err(OtelError::NoRun);
    };
    let recorded = run
        .details
        .pointer("/otel/trace_id")
        .and_then(Value::as_str)
        .and_then(|h| TraceId::from_hex(h).ok())
        .filter(|t| *t != TraceId::INVALID);
    let trace_id = recorded.unwrap_or_else(|| TraceId::from_bytes(trace_id_bytes(run_id)));
    let builder = Builder {
        bundle,
        run_id,
        trace_id,
        capture: capture_content,
        scope: InstrumentationScope::builder("provrun")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    };
    let root = span_id(run_id, first.seq);
    let mut children = Vec::new();
    for (ev, p) in events.iter().zip(&log).skip(1) {
        match p {
            EventPayload::ModelCalled(m) => children.push(builder.chat(ev, m, root)),
            EventPayload::ToolCalled(t) if !t.deferred => children.push(builder.tool(ev, t, root)),
            _ => {}
        }
    }

    let agent = run.agent.clone();
    let (prefix, model) = split_model(&run.model);
    let mut attrs = vec![
        KeyValue::new("gen_ai.operation.name", "invoke_agent"),
        KeyValue::new("gen_ai.agent.name", agent.clone()),
        KeyValue::new("gen_ai.provider.name", provider_name(prefix)),
        KeyValue::new("gen_ai.request.model", model.to_string()),
    ];
    let finished = log.iter().rev().find_map(EventPayload::as_run_finished);
    let mut status = Status::Unset;
    if let Some(fin) = finished {
        attrs.push(KeyValue::new("provrun.status", fin.status.as_str()));
        if fin.status == RunStatus::Failed {
            let message = fin.error.as_deref().unwrap_or("the run failed").to_string();
            attrs.push(KeyValue::new("error.type", "run_failed"));
            status = Status::error(message);
        }
        if let Some(n) = usage_of(&fin.usage, &["input_tokens"]) {
            attrs.push(KeyValue::new("gen_ai.usage.input_tokens", n));
        }
        if let Some(n) = usage_of(&fin.usage, &["output_tokens"]) {
            attrs.push(KeyValue::new("gen_ai.usage.output_tokens", n));
        }
    }
    let last = events.last().unwrap_or(first);
    let run_span = builder.span(
        first.seq,
        SpanId::INVALID,
        SpanKind::Internal,
        format!("invoke_agent {agent}"),
        time_of(first),
        time_of(last),
        attrs,
        status,
    );
    let mut spans = Vec::with_capacity(children.len() + 1);
    spans.push(run_span);
    spans.extend(children);
    Ok(spans)
}
