//! A bundle's events as GenAI spans: an `invoke_agent` span for the run (and one more for
//! each resumed part of a paused run), a `chat` span per model request and an
//! `execute_tool` span per completed tool call, all in one trace whose id is derived from
//! the run id, with the times recorded in the evidence. The same [`Walker`] makes them
//! from a whole log (`export`) and event by event while a run goes (live export).

use std::borrow::Cow;
use std::path::Path;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use provrun_evidence::{
    Event, EventPayload, EventType, ModelCalled, RunFinished, RunStarted, RunStatus, ToolCalled,
    read_blob,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::OtelError;
use crate::chat::{Blobs, RunFacts, chat_attributes, model_name, provider_name, server_of};

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

/// What a run's `run_started` gives every span of it.
pub(crate) struct RunMap {
    run_id: String,
    trace_id: TraceId,
    agent: String,
    model: String,
    facts: RunFacts,
    capture: bool,
    scope: InstrumentationScope,
}

impl RunMap {
    /// The run of a log whose first event is `first` (its `run_started`).
    pub(crate) fn new(first: &Event, capture: bool) -> Result<RunMap, OtelError> {
        if first.kind != EventType::RunStarted {
            return Err(OtelError::NoRun);
        }
        let EventPayload::RunStarted(run) = payload(first) else {
            return Err(OtelError::NoRun);
        };
        let run_id = first.run_id.clone();
        let recorded = run
            .details
            .pointer("/otel/trace_id")
            .and_then(Value::as_str)
            .and_then(|h| TraceId::from_hex(h).ok())
            .filter(|t| *t != TraceId::INVALID);
        let details = &run.details;
        Ok(RunMap {
            trace_id: recorded.unwrap_or_else(|| TraceId::from_bytes(trace_id_bytes(&run_id))),
            run_id,
            agent: run.agent.clone(),
            model: run.model.clone(),
            facts: RunFacts {
                server: details
                    .get("model_base_url")
                    .and_then(Value::as_str)
                    .and_then(server_of),
                settings: details
                    .get("model_settings")
                    .cloned()
                    .unwrap_or(Value::Null),
                thread: details
                    .get("thread")
                    .and_then(Value::as_str)
                    .map(String::from),
            },
            capture,
            scope: InstrumentationScope::builder("provrun")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        })
    }

    /// The run's trace id.
    pub(crate) fn trace_id(&self) -> TraceId {
        self.trace_id
    }

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
        attributes.push(KeyValue::new("provrun.run_id", self.run_id.clone()));
        attributes.push(KeyValue::new("provrun.seq", seq as i64));
        SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                span_id(&self.run_id, seq),
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

    fn chat(&self, ev: &Event, p: &ModelCalled, parent: SpanId, blobs: Blobs<'_>) -> SpanData {
        let (name, mut attrs) = chat_attributes(&self.facts, p, blobs, self.capture);
        attrs.push(KeyValue::new("gen_ai.request.stream", p.stream));
        attrs.push(KeyValue::new("provrun.stream", p.stream));
        for (key, blob) in [("request", &p.request), ("response", &p.response)] {
            if let Some(b) = blob {
                attrs.push(KeyValue::new(
                    format!("provrun.{key}.sha256"),
                    b.digest.sha256.clone(),
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
            name,
            started(ev, Some(p.duration_ms)),
            time_of(ev),
            attrs,
            status,
        )
    }

    fn tool(&self, ev: &Event, p: &ToolCalled, parent: SpanId, blobs: Blobs<'_>) -> SpanData {
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
                    blob.as_ref()
                        .and_then(blobs)
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

    /// The `invoke_agent` span of one part of the run: from its start to `end` (its
    /// `run_finished`, or the last event so far), the first part the run's own span, a
    /// resumed part a child of it.
    fn part_span(&self, part: &Part, end: &Event, finished: Option<&RunFinished>) -> SpanData {
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.name", self.agent.clone()),
            KeyValue::new("gen_ai.provider.name", provider_name(&self.model, None)),
            KeyValue::new("gen_ai.request.model", model_name(&self.model).to_string()),
        ];
        if let Some((host, port)) = &self.facts.server {
            attrs.push(KeyValue::new("server.address", host.clone()));
            attrs.push(KeyValue::new("server.port", i64::from(*port)));
        }
        if let Some(thread) = &self.facts.thread {
            attrs.push(KeyValue::new("gen_ai.conversation.id", thread.clone()));
        }
        if part.index > 0 {
            attrs.push(KeyValue::new("provrun.part", part.index as i64));
        }
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
        let parent = if part.index == 0 {
            SpanId::INVALID
        } else {
            span_id(&self.run_id, part.run_seq)
        };
        self.span(
            part.first_seq,
            parent,
            SpanKind::Internal,
            format!("invoke_agent {}", self.agent),
            part.start,
            time_of(end),
            attrs,
            status,
        )
    }
}

/// One part of a run: the whole of it, or what followed a pause.
#[derive(Debug, Clone)]
struct Part {
    /// 0 for the run's start, then 1, 2… for each resume.
    index: u64,
    /// The seq of the run's `run_started`.
    run_seq: u64,
    /// The seq of the part's first event (its span's id is derived from it).
    first_seq: u64,
    start: SystemTime,
}

/// What one event ends: a `chat` or `execute_tool` span, and (at a `run_finished`) the
/// span of the part it ends.
#[derive(Debug, Default)]
pub(crate) struct Step {
    /// The event's own span.
    pub child: Option<SpanData>,
    /// The span of the part this event ends.
    pub part: Option<SpanData>,
}

/// Walks a run's log event by event, making each span when its event is there.
pub(crate) struct Walker {
    map: RunMap,
    part: Part,
    /// The last event was a pause: the next one begins a part.
    paused: bool,
    /// The part has events not yet ended by a `run_finished`.
    open: bool,
}

impl Walker {
    /// A walk of the run whose `run_started` is `first`.
    pub(crate) fn new(first: &Event, capture: bool) -> Result<Walker, OtelError> {
        Ok(Walker {
            map: RunMap::new(first, capture)?,
            part: Part {
                index: 0,
                run_seq: first.seq,
                first_seq: first.seq,
                start: time_of(first),
            },
            paused: false,
            open: true,
        })
    }

    /// The run's trace id.
    pub(crate) fn trace_id(&self) -> TraceId {
        self.map.trace_id()
    }

    /// The spans `ev` ends (`blobs` gives the bodies and values its payload names).
    pub(crate) fn step(&mut self, ev: &Event, blobs: Blobs<'_>) -> Step {
        let p = payload(ev);
        if self.paused {
            let duration = match &p {
                EventPayload::ModelCalled(m) => Some(m.duration_ms),
                EventPayload::ToolCalled(t) => Some(t.duration_ms),
                _ => None,
            };
            self.part = Part {
                index: self.part.index + 1,
                run_seq: self.part.run_seq,
                first_seq: ev.seq,
                start: started(ev, duration),
            };
            self.paused = false;
        }
        self.open = true;
        let parent = span_id(&self.map.run_id, self.part.first_seq);
        let mut step = Step::default();
        match &p {
            EventPayload::ModelCalled(m) => step.child = Some(self.map.chat(ev, m, parent, blobs)),
            EventPayload::ToolCalled(t) if !t.deferred => {
                step.child = Some(self.map.tool(ev, t, parent, blobs));
            }
            EventPayload::RunFinished(fin) => {
                step.part = Some(self.map.part_span(&self.part, ev, Some(fin)));
                self.paused = fin.status == RunStatus::Paused;
                self.open = false;
            }
            _ => {}
        }
        step
    }

    /// The span of the part still open at `last` (a log that ends without
    /// `run_finished`), if there is one.
    pub(crate) fn close(&mut self, last: &Event) -> Option<SpanData> {
        if !self.open {
            return None;
        }
        self.open = false;
        Some(self.map.part_span(&self.part, last, None))
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

/// The spans of a bundle's events (as [`provrun_evidence::read_events`] gives them): for
/// each part of the run (the whole run, or each stretch between pauses) its
/// `invoke_agent` span, then its children in log order. `bundle` is where request and
/// response blobs are read from (for the response's model, id and usage and, with
/// `capture_content`, the messages); a missing or damaged blob only leaves its
/// attributes out. Payloads are read as their types' structs; of an event built by
/// hand, a field it leaves out reads as empty.
///
/// # Errors
///
/// [`OtelError::NoRun`] when `events` is empty or does not start with `run_started`; a blob
/// that cannot be read is not an error.
pub fn spans_from_events(
    bundle: &Path,
    events: &[Event],
    capture_content: bool,
) -> Result<Vec<SpanData>, OtelError> {
    let first = events.first().ok_or(OtelError::NoRun)?;
    let mut walker = Walker::new(first, capture_content)?;
    let blobs = |b: &provrun_evidence::BlobRef| read_blob(bundle, b).ok();
    let mut spans = Vec::new();
    let mut children = Vec::new();
    for ev in &events[1..] {
        let step = walker.step(ev, &blobs);
        children.extend(step.child);
        if let Some(part) = step.part {
            spans.push(part);
            spans.append(&mut children);
        }
    }
    if let Some(part) = walker.close(events.last().unwrap_or(first)) {
        spans.push(part);
    }
    spans.append(&mut children);
    Ok(spans)
}
