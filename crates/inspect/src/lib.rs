//! provrun bundles as an Inspect log: [`export_eval`] writes an `.eval` file (the zip
//! Inspect's `inspect-ai` writes and reads: `header.json`, one `samples/ID_epoch_1.json`
//! per run, `summaries.json`) with one sample per bundle — its messages (the system and
//! user messages that opened the run, each model step as an assistant message with its
//! tool calls, each tool result as a tool message), the model's usage, model and tool
//! events, and the run id, the bundle's statement digest and its verify verdict in the
//! sample's metadata.
//!
//! The members are stored uncompressed, which every zip reader (Inspect's included)
//! reads. The bundles are read with `provrun-view`, the same way the run page reads them.
//!
//! The other way, [`EvalLog::open`] reads an `.eval` log (written by `inspect-ai` or by
//! [`export_eval`]) and [`import_sample`] turns one of its samples into a bundle of
//! `parsed` events through `provrun-capture`, as the PydanticAI import does.

use std::io::Write as _;
use std::path::Path;

use provrun_view::{BundleSource, RunSummary};

mod error;
mod import;

pub use error::InspectError;
pub use import::{EvalLog, INSPECT_SAMPLE_FORMAT, MAX_MEMBERS, MAX_SAMPLE_BYTES, import_sample};
use serde_json::{Value, json};

/// One run to export: its bundle folder and the name it is known by.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    /// The bundle folder (a tar or an object opened as one first).
    pub dir: &'a Path,
    /// How the user named it (kept in the sample's metadata).
    pub label: String,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Arguments as a JSON object (Inspect's tool calls carry a dict): parsed when the text
/// is an object, else kept under `value`.
fn arguments(v: &Value) -> Value {
    match serde_json::from_str::<Value>(&text(v)) {
        Ok(Value::Object(o)) => Value::Object(o),
        _ => json!({"value": text(v)}),
    }
}

/// The messages and events of a run, from its page data.
fn conversation(data: &Value, model: &str, started: &str) -> (Vec<Value>, Vec<Value>, String) {
    let mut messages: Vec<Value> = Vec::new();
    for m in data["conversation"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("user");
        if role == "system" || role == "user" {
            messages.push(json!({"role": role, "content": text(&m["content"])}));
        }
    }
    let input = messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(|m| text(&m["content"]))
        .unwrap_or_default();
    let mut events = Vec::new();
    for step in data["steps"].as_array().into_iter().flatten() {
        let m = &step["model"];
        if !m.is_null() {
            let calls: Vec<Value> = m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| json!({"id": text(&c["id"]), "function": text(&c["name"]), "arguments": arguments(&c["arguments"]), "type": "function"}))
                .collect();
            let mut said = json!({"role": "assistant", "content": text(&m["text"]), "model": model, "source": "generate"});
            if !calls.is_empty() {
                said["tool_calls"] = json!(calls);
            }
            let input_msgs = messages.clone();
            messages.push(said.clone());
            let usage = json!({"input_tokens": m["input_tokens"].as_u64().unwrap_or(0), "output_tokens": m["output_tokens"].as_u64().unwrap_or(0),
                "total_tokens": m["input_tokens"].as_u64().unwrap_or(0) + m["output_tokens"].as_u64().unwrap_or(0)});
            events.push(json!({
                "event": "model",
                "timestamp": m["ts"].as_str().unwrap_or(started),
                "model": model,
                "input": input_msgs,
                "tools": [],
                "tool_choice": "auto",
                "config": {},
                "output": {"model": model, "choices": [{"message": said, "stop_reason": "stop"}], "usage": usage},
                "working_time": m["duration_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
            }));
        }
        for e in step["entries"].as_array().into_iter().flatten() {
            if e["kind"] != "tool" || e["deferred"] == true {
                continue;
            }
            let id = text(&e["call_id"]);
            let mut tool = json!({"role": "tool", "content": text(&e["result"]), "tool_call_id": id, "function": text(&e["name"])});
            if e["ok"] == false {
                tool["error"] = json!({"type": "unknown", "message": text(&e["result"])});
            }
            messages.push(tool);
            events.push(json!({
                "event": "tool",
                "timestamp": e["ts"].as_str().unwrap_or(started),
                "type": "function",
                "id": id,
                "function": text(&e["name"]),
                "arguments": arguments(&e["arguments"]),
                "result": text(&e["result"]),
                "working_time": e["duration_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
            }));
        }
    }
    (messages, events, input)
}

/// One run as an Inspect sample (`id` is its 1-based place in the log).
pub fn sample(run: &Run<'_>, id: usize) -> Value {
    let source = BundleSource::folder(run.dir).with_label(run.label.clone());
    let data = provrun_view::page_data(&source);
    let s: RunSummary =
        provrun_view::summarize_events(source.events.as_deref().unwrap_or(&[]), &source.report);
    let model = if s.model.is_empty() {
        "provrun/unknown".to_owned()
    } else {
        s.model.clone()
    };
    let (messages, events, input) = conversation(&data, &model, &s.started);
    let last = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .cloned();
    let run_usage = &data["run"];
    let (input_tokens, output_tokens) = (
        run_usage["input_tokens"].as_u64().unwrap_or(0),
        run_usage["output_tokens"].as_u64().unwrap_or(0),
    );
    let usage = json!({"input_tokens": input_tokens, "output_tokens": output_tokens, "total_tokens": input_tokens + output_tokens});
    let choices: Vec<Value> = last
        .iter()
        .map(|m| json!({"message": m, "stop_reason": "stop"}))
        .collect();
    let completion = last
        .as_ref()
        .map(|m| text(&m["content"]))
        .unwrap_or_default();
    json!({
        "id": id,
        "epoch": 1,
        "input": input,
        "target": "",
        "messages": messages,
        "output": {"model": model, "choices": choices, "completion": completion, "usage": usage},
        "metadata": {
            "provrun_run_id": s.run_id,
            "provrun_bundle": run.label,
            "provrun_statement_sha256": provrun_view::statement_sha256(run.dir),
            "provrun_verdict": s.verdict,
            "provrun_failed_checks": s.failed_checks,
            "provrun_status": s.status,
            "provrun_agent": s.agent,
        },
        "store": {},
        "events": events,
        "model_usage": {model.clone(): usage},
        "total_time": s.duration_ms as f64 / 1000.0,
        "working_time": s.duration_ms as f64 / 1000.0,
        "started_at": s.started,
        "completed_at": s.ended,
        "error": if s.status == "failed" { json!({"message": s.error.clone().unwrap_or_default(), "traceback": "", "traceback_ansi": ""}) } else { Value::Null },
    })
}

/// The log's header for `samples`, created at `created` (RFC 3339).
fn header(samples: &[Value], created: &str) -> Value {
    let models: Vec<&str> = samples
        .iter()
        .filter_map(|s| s["output"]["model"].as_str())
        .collect();
    let model = match models.first() {
        Some(first) if models.iter().all(|m| m == first) => (*first).to_owned(),
        _ => "provrun/mixed".to_owned(),
    };
    let ids: Vec<usize> = (1..=samples.len()).collect();
    json!({
        "version": 2,
        "status": "success",
        "eval": {
            "created": created,
            "task": "provrun",
            "task_id": "provrun-export",
            "task_version": 0,
            "dataset": {"name": "provrun bundles", "samples": samples.len(), "sample_ids": ids, "shuffled": false},
            "model": model,
            "config": {},
            "packages": {},
        },
        "plan": {"name": "plan", "steps": [], "config": {}},
        "results": {"total_samples": samples.len(), "completed_samples": samples.len(), "scores": []},
        "stats": {"started_at": created, "completed_at": created, "model_usage": {}},
    })
}

/// The summary of a sample, for `summaries.json` (what a log viewer lists).
fn summary(sample: &Value) -> Value {
    json!({
        "id": sample["id"],
        "epoch": 1,
        "input": sample["input"],
        "target": "",
        "metadata": sample["metadata"],
        "model_usage": sample["model_usage"],
        "total_time": sample["total_time"],
        "working_time": sample["working_time"],
        "started_at": sample["started_at"],
        "completed_at": sample["completed_at"],
        "message_count": sample["messages"].as_array().map_or(0, Vec::len),
        "completed": true,
    })
}

/// The time now as the log's `created` (RFC 3339, UTC, seconds).
pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Writes `runs` as one `.eval` log at `out`, created at `created` (RFC 3339, UTC).
/// Returns the number of samples.
///
/// # Errors
///
/// [`InspectError::Empty`] when `runs` is empty; [`InspectError::Write`] when the log cannot
/// be created or written.
pub fn export_eval(runs: &[Run<'_>], out: &Path, created: &str) -> Result<usize, InspectError> {
    if runs.is_empty() {
        return Err(InspectError::Empty);
    }
    let failed = |message: String| InspectError::Write {
        path: out.display().to_string(),
        message,
    };
    let samples: Vec<Value> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| sample(r, i + 1))
        .collect();
    let file = std::fs::File::create(out).map_err(|e| failed(e.to_string()))?;
    let mut zip = zip::ZipWriter::new(file);
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut put = |name: &str, value: &Value| -> Result<(), InspectError> {
        zip.start_file(name, options)
            .map_err(|e| failed(e.to_string()))?;
        let bytes = serde_json::to_vec(value).map_err(|e| failed(e.to_string()))?;
        zip.write_all(&bytes).map_err(|e| failed(e.to_string()))
    };
    for s in &samples {
        put(&format!("samples/{}_epoch_1.json", s["id"]), s)?;
    }
    put(
        "summaries.json",
        &json!(samples.iter().map(summary).collect::<Vec<_>>()),
    )?;
    put("header.json", &header(&samples, created))?;
    zip.finish().map_err(|e| failed(e.to_string()))?;
    Ok(samples.len())
}
