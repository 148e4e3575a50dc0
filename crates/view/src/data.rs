//! The page's data: a bundle read into one JSON value that the page's script renders —
//! the header and verdict, the conversation's start, the steps with their tool calls, the
//! inputs and outputs, and the raw bytes of the blobs. Every string in it is bundle text
//! (untrusted): the script only ever puts it into the page as text.

use std::collections::BTreeMap;

use provrun_evidence::{
    BlobRef, CheckStatus, Event, EventPayload, EventType, FileRecord, ModelCalled, RunStarted,
    RunStatus, Steered, ToolCalled, VerifyReport,
};
use provrun_model::{RawExchange, WireApi};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::source::BundleSource;
use crate::steps::{Steps, Tally};

/// The most bytes of one blob embedded in the page (its head and tail beyond that).
pub const BLOB_EMBED_LIMIT: usize = 16 * 1024;
/// The most bytes of blobs embedded in one page; later blobs are named, not embedded.
pub const BLOBS_TOTAL_LIMIT: usize = 16 * 1024 * 1024;
/// The most bytes of one text file, tool value or message shown.
pub const TEXT_SHOW_LIMIT: usize = 64 * 1024;

/// `text` cut to about `limit` bytes at a character boundary, and whether it was cut.
pub(crate) fn cut(text: &str, limit: usize) -> (String, bool) {
    if text.len() <= limit {
        return (text.to_owned(), false);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), true)
}

/// A JSON value as a person reads it: a string as itself, anything else pretty-printed.
fn readable(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// Tool-call arguments as sent (a JSON string), pretty-printed when they parse.
fn pretty_arguments(raw: &str) -> String {
    serde_json::from_str::<Value>(raw)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| raw.to_owned())
}

fn blob_hex(blob: Option<&BlobRef>) -> Option<String> {
    blob.map(|b| b.digest.sha256.clone())
}

/// Builds the page's data from a bundle.
struct Builder<'a> {
    source: &'a BundleSource,
    blobs: BTreeMap<String, Value>,
    blob_bytes: usize,
}

impl Builder<'_> {
    /// Embeds the blob `hex` (once) and returns its digest for the page to refer to.
    fn embed_blob(&mut self, blob: Option<&BlobRef>) -> Value {
        let Some(blob) = blob else {
            return Value::Null;
        };
        let hex = blob.digest.sha256.clone();
        if self.blobs.contains_key(&hex) {
            return Value::String(hex);
        }
        let size = blob.size;
        let media_type = blob.media_type.clone();
        let mut entry = json!({"size": size, "media_type": media_type});
        if self.blob_bytes >= BLOBS_TOTAL_LIMIT {
            entry["missing"] = json!("not embedded: the page's budget for raw bytes is spent");
        } else {
            match (self.source.blob)(&hex) {
                Ok(bytes) => {
                    let (text, omitted) = head_and_tail(&bytes);
                    self.blob_bytes += text.len();
                    entry["text"] = json!(text);
                    entry["omitted"] = json!(omitted);
                }
                Err(e) => entry["missing"] = json!(format!("cannot be read: {e}")),
            }
        }
        self.blobs.insert(hex.clone(), entry);
        Value::String(hex)
    }

    /// A JSON value stored inline or, when large, in a blob: as readable text.
    fn value_text(&self, inline: &Value, blob: Option<&BlobRef>) -> (String, bool) {
        if inline.is_null()
            && let Some(hex) = blob_hex(blob)
        {
            return match (self.source.blob)(&hex) {
                Ok(bytes) => {
                    let text = serde_json::from_slice::<Value>(&bytes)
                        .map(|v| readable(&v))
                        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
                    cut(&text, TEXT_SHOW_LIMIT)
                }
                Err(e) => (format!("(the blob cannot be read: {e})"), false),
            };
        }
        cut(&readable(inline), TEXT_SHOW_LIMIT)
    }

    fn file(&self, dir: &str, p: &FileRecord) -> Value {
        let path = p.path.as_str();
        let recorded = p.sha256.as_str();
        let mut f = json!({
            "path": path,
            "sha256": recorded,
            "size": p.size,
        });
        match (self.source.file)(&format!("{dir}/{path}")) {
            Ok(Some(bytes)) => {
                let actual = hex_of(&Sha256::digest(&bytes));
                f["matches"] = json!(actual == recorded);
                let head = &bytes[..bytes.len().min(TEXT_SHOW_LIMIT)];
                let text = match std::str::from_utf8(head) {
                    Ok(t) => Some(t),
                    // A cut in the middle of a character is still text.
                    Err(e) if e.error_len().is_none() => {
                        std::str::from_utf8(&head[..e.valid_up_to()]).ok()
                    }
                    Err(_) => None,
                };
                match text.filter(|t| !t.contains('\0')) {
                    Some(t) => {
                        f["text"] = json!(t);
                        f["truncated"] = json!(bytes.len() > TEXT_SHOW_LIMIT);
                    }
                    None => f["note"] = json!("binary content, not shown"),
                }
            }
            Ok(None) => f["note"] = json!("too large to read here; not shown"),
            Err(e) => f["note"] = json!(format!("not shown: {e}")),
        }
        f
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A blob's bytes as text for the page: whole when small, else its head and its tail
/// (the new part of a request that resends the history is at its end), and how many
/// bytes were left out.
fn head_and_tail(bytes: &[u8]) -> (String, usize) {
    if bytes.len() <= BLOB_EMBED_LIMIT {
        return (String::from_utf8_lossy(bytes).into_owned(), 0);
    }
    let head = BLOB_EMBED_LIMIT / 4;
    let tail = BLOB_EMBED_LIMIT - head;
    let omitted = bytes.len() - head - tail;
    let text = format!(
        "{}\n\n[… {omitted} bytes left out here; `provrun cat` prints them all …]\n\n{}",
        String::from_utf8_lossy(&bytes[..head]),
        String::from_utf8_lossy(&bytes[bytes.len() - tail..])
    );
    (text, omitted)
}

/// What one recorded model response said, read back with the model crate's parser for
/// its wire format.
fn parsed_response(model: &str, response: Option<&[u8]>, media_type: &str) -> Value {
    let Some(body) = response else {
        return json!({});
    };
    let raw = RawExchange {
        response_body: bytes::Bytes::copy_from_slice(body),
        response_media_type: Some(media_type.to_owned()),
        status: Some(200),
        ..RawExchange::default()
    };
    let by_name = WireApi::of_model(model);
    let parsed = by_name.parse_response(raw.clone()).or_else(|e| {
        let by_shape = WireApi::of_response_body(body);
        if by_shape == by_name {
            Err(e)
        } else {
            by_shape.parse_response(raw)
        }
    });
    match parsed {
        Ok(r) => json!({
            "text": r.text.map(|t| cut(&t, TEXT_SHOW_LIMIT).0),
            "reasoning": r.reasoning.map(|t| cut(&t, TEXT_SHOW_LIMIT).0),
            "tool_calls": r.tool_calls.iter().map(|c| json!({
                "id": c.id,
                "name": c.name,
                "arguments": cut(&pretty_arguments(&c.arguments), TEXT_SHOW_LIMIT).0,
            })).collect::<Vec<_>>(),
        }),
        Err(e) => json!({"parse_error": e.to_string()}),
    }
}

/// The system and user messages that open the conversation, from a `trace_imported`
/// history (`provrun-messages/1`).
fn opening(trace: &[u8]) -> Vec<Value> {
    let Ok(Value::Array(messages)) = serde_json::from_slice::<Value>(trace) else {
        return Vec::new();
    };
    messages
        .iter()
        .take_while(|m| m["role"] != "assistant")
        .map(|m| {
            json!({
                "role": m["role"].as_str().unwrap_or("?"),
                "text": cut(&readable(&m["content"]), TEXT_SHOW_LIMIT).0,
            })
        })
        .collect()
}

/// The page's data for a bundle: the one JSON value the page's script renders (its
/// shape is the page's own business, not a contract; docs/view.md describes what the
/// page shows).
pub fn page_data(source: &BundleSource) -> Value {
    let mut b = Builder {
        source,
        blobs: BTreeMap::new(),
        blob_bytes: 0,
    };
    let mut data = json!({
        "bundle": source.label,
        "verify": verify_data(&source.report),
        "log_error": Value::Null,
    });
    let (events, log) = read_log(source, &mut data);

    let mut run = Map::new();
    let mut inputs = Vec::new();
    let mut outputs: Vec<Value> = Vec::new();
    let mut steps = Steps::default();
    let mut conversation = Vec::new();
    let mut tally = Tally::default();
    let mut after_pause = false;

    for (e, payload) in events.iter().zip(&log) {
        // The first event after a paused segment's end: the run was resumed. Outputs of
        // the paused segment are superseded by the ones the resumed run ends with.
        let resumed_here =
            after_pause && e.kind != EventType::OutputProduced && e.kind != EventType::RunFinished;
        if resumed_here {
            after_pause = false;
            outputs.clear();
        }
        let entry = match payload {
            EventPayload::RunStarted(p) => {
                run_started(&mut run, e, p);
                continue;
            }
            EventPayload::InputStaged(p) => {
                inputs.push(b.file("input", &p.0));
                continue;
            }
            EventPayload::OutputProduced(p) => {
                outputs.push(b.file("output", &p.0));
                continue;
            }
            EventPayload::ModelCalled(p) => {
                tally.model_called(p);
                let model = b.model_call(e, p);
                steps.push_model(model, resumed_here);
                continue;
            }
            EventPayload::ToolCalled(p) => {
                tally.tool_called(p);
                b.tool_call(p)
            }
            EventPayload::Steered(p) => b.steered(p),
            EventPayload::Declared(p) => json!({
                "kind": "declared",
                "source": p.source,
                "declared_kind": p.kind,
                "data": cut(&readable(&p.data), TEXT_SHOW_LIMIT).0,
            }),
            EventPayload::OutputSkipped(p) => json!({
                "kind": "skipped",
                "path": p.path,
                "entry_kind": p.kind,
                "reason": p.reason,
                "size": p.size,
            }),
            EventPayload::TraceImported(p) => {
                if p.source.is_none()
                    && let Ok(bytes) = (source.blob)(&p.trace.digest.sha256)
                {
                    conversation = opening(&bytes);
                }
                json!({"kind": "trace", "messages": p.messages, "format": p.format, "source": p.source})
            }
            EventPayload::HttpExchanged(p) => crate::wrapped::http_exchanged(p),
            EventPayload::ConnectionHandled(p) => crate::wrapped::connection(p),
            EventPayload::ProgramExited(p) => crate::wrapped::program_exited(p),
            EventPayload::ProcessRan(p) => crate::observed::process(p),
            EventPayload::TrailRecorded(p) => crate::observed::trail(p),
            EventPayload::FileChanged(p) => crate::observed::change(p),
            EventPayload::WorkspaceChanged(p) => {
                let diff = b.embed_blob(p.diff.as_ref());
                crate::observed::workspace(p, diff)
            }
            EventPayload::ToolCallSeen(p) => crate::observed::seen(p),
            EventPayload::RunFinished(p) => {
                after_pause = p.status == RunStatus::Paused;
                tally.run_finished(p)
            }
            // An event type this version does not know: the reader refuses those, so
            // none reaches here; a later one would have nothing to show yet.
            _ => continue,
        };
        steps.push_entry(entry, e, resumed_here);
    }

    tally.summarize(&mut run, events);
    data["run"] = Value::Object(run);
    data["inputs"] = json!(inputs);
    data["outputs"] = json!(outputs);
    data["conversation"] = json!(conversation);
    data["steps"] = json!(steps.steps);
    data["claims"] = crate::observed::claims(events);
    data["blobs"] = json!(b.blobs);
    data
}

/// The verdict of `provrun verify` for the page: `verifies`, `incomplete` or `fails`, and
/// each check.
fn verify_data(report: &VerifyReport) -> Value {
    let failed = report.failures().count();
    let verdict = if failed > 0 {
        "fails"
    } else if !report.complete {
        "incomplete"
    } else {
        "verifies"
    };
    let checks: Vec<Value> = report
        .checks
        .iter()
        .map(|c| {
            json!({
                "code": c.code.as_str(),
                "status": match c.status {
                    CheckStatus::Pass => "pass",
                    CheckStatus::Fail => "fail",
                    CheckStatus::Warn => "warn",
                },
                "detail": c.detail,
            })
        })
        .collect();
    json!({"verdict": verdict, "ok": report.ok, "complete": report.complete, "checks": checks})
}

/// The bundle's events and their typed payloads; none when the log cannot be read, with
/// why in `data["log_error"]`.
fn read_log<'a>(source: &'a BundleSource, data: &mut Value) -> (&'a [Event], Vec<EventPayload>) {
    let events: &[Event] = match &source.events {
        Ok(events) => events,
        Err(e) => {
            data["log_error"] = json!(e);
            &[]
        }
    };
    // The payloads as their types' structs (the reader checked them, so this fails only
    // for a log changed by hand under it).
    match events.iter().map(Event::typed).collect() {
        Ok(log) => (events, log),
        Err(e) => {
            data["log_error"] = json!(e.to_string());
            (&[], Vec::new())
        }
    }
}

/// The run's header fields from its `run_started` event.
fn run_started(run: &mut Map<String, Value>, e: &Event, p: &RunStarted) {
    run.insert("run_id".into(), json!(e.run_id));
    run.insert("agent".into(), json!(p.agent));
    run.insert("model".into(), json!(p.model));
    run.insert("builder".into(), json!(p.builder));
    run.insert("started".into(), json!(e.ts));
    run.insert(
        "tools".into(),
        json!(p.tools.iter().map(|t| &t.name).collect::<Vec<_>>()),
    );
    // The layout member the recorder writes beside the typed fields.
    run.insert(
        "blob_store".into(),
        json!(e.payload["blob_store"].as_str().unwrap_or("loose")),
    );
}

impl Builder<'_> {
    /// A model request for its step: its record, its request and response embedded, and
    /// what the response said.
    fn model_call(&mut self, e: &Event, p: &ModelCalled) -> Value {
        let request = self.embed_blob(p.request.as_ref());
        let response = self.embed_blob(p.response.as_ref());
        let body = blob_hex(p.response.as_ref()).and_then(|hex| (self.source.blob)(&hex).ok());
        let said = parsed_response(
            &p.model,
            body.as_deref(),
            p.response.as_ref().map_or("", |r| r.media_type.as_str()),
        );
        let mut model = json!({
            "seq": e.seq,
            "ts": e.ts,
            "model": p.model,
            "stream": p.stream,
            "duration_ms": p.duration_ms,
            "input_tokens": p.usage["input_tokens"],
            "output_tokens": p.usage["output_tokens"],
            "finish_reason": p.finish_reason,
            "error": p.error,
            "request": request,
            "response": response,
            // Absent from the log when the request took one attempt.
            "attempts": (!p.attempts.is_empty()).then(|| serde_json::to_string_pretty(&p.attempts).unwrap_or_default()),
        });
        if let (Some(m), Value::Object(said)) = (model.as_object_mut(), said) {
            m.extend(said);
        }
        model
    }

    /// A tool call's entry: its record, its arguments and result as text, and its MCP
    /// provenance and confinement pretty-printed.
    fn tool_call(&self, p: &ToolCalled) -> Value {
        let (arguments, args_cut) = self.value_text(&p.arguments, p.arguments_blob.as_ref());
        let (result, result_cut) = self.value_text(&p.result, p.result_blob.as_ref());
        let mcp = match &p.mcp {
            Some(mcp) if mcp.is_object() => Some(mcp.clone()),
            _ => blob_hex(p.mcp_blob.as_ref())
                .and_then(|hex| (self.source.blob)(&hex).ok())
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok()),
        };
        json!({
            "kind": "tool",
            "name": p.name,
            "call_id": p.call_id,
            "run_call_id": p.run_call_id,
            "ok": p.ok,
            "deferred": p.deferred,
            "duration_ms": p.duration_ms,
            "decided_by": p.decided_by,
            "mode": p.mode,
            "output_tool": p.output_tool,
            "provider_run": p.provider_run,
            // Absent from the log when false: the page's data has `null` then, as
            // it always had.
            "timed_out": p.timed_out.then_some(true),
            "cancelled": p.cancelled.then_some(true),
            "waits_for": p.waits_for,
            "arguments": arguments,
            "arguments_cut": args_cut,
            "result": result,
            "result_cut": result_cut,
            "mcp_server": mcp.as_ref().map(|m| m["server"]["name"].clone()),
            "mcp_confidence": mcp.as_ref().map(|m| m["claims"]["confidence"].clone()),
            "mcp": mcp.as_ref().map(|m| serde_json::to_string_pretty(m).unwrap_or_default()),
            "confinement": p.confinement.as_ref().filter(|c| c.is_object()).map(|c| serde_json::to_string_pretty(c).unwrap_or_default()),
        })
    }

    /// A message the caller sent into the run, read from its blob.
    fn steered(&self, p: &Steered) -> Value {
        let text = match blob_hex(Some(&p.text)).map(|hex| (self.source.blob)(&hex)) {
            Some(Ok(bytes)) => cut(&String::from_utf8_lossy(&bytes), TEXT_SHOW_LIMIT).0,
            Some(Err(e)) => format!("(the blob cannot be read: {e})"),
            None => "(no text blob)".to_owned(),
        };
        json!({
            "kind": "steered",
            "text": text,
            "before_request": p.before_request,
        })
    }
}
