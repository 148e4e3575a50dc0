//! Inspect `.eval` logs read back as bundles: [`EvalLog`] opens the zip and reads its
//! `samples/ID_epoch_N.json` members (nothing else is taken from the zip, so no member
//! path is ever used as a file path), each capped at [`MAX_SAMPLE_BYTES`];
//! [`import_sample`] turns one sample into a bundle of `parsed` events:
//!
//! - one `model_called` per `model` event of the sample (its `input`, `tools` and `config`
//!   as the request, its `output` as the response, with the output's `usage` and stop
//!   reason);
//! - one `tool_called` per `tool` event (its `function`, `id`, `arguments` and `result`;
//!   failed when the event carries an `error`);
//! - one `trace_imported` holding the sample's JSON verbatim
//!   (format [`INSPECT_SAMPLE_FORMAT`]);
//! - `output/response.txt` with the sample's final `output.completion`, when it has text.
//!
//! Texts Inspect moved into the sample's `attachments` (`attachment://ID`) are put back in
//! the events. Other events (scores, spans, sandbox, ...) are kept only in the trace.

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use provrun_capture::pydantic_ai::IMPORT_BUILDER;
use provrun_capture::{Body, Capture, ImportOptions, ImportSummary, ModelExchange, ToolCallRecord};
use provrun_evidence::RunStatus;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::error::InspectError;

/// The `format` of a `trace_imported` holding one Inspect sample.
pub const INSPECT_SAMPLE_FORMAT: &str = "inspect-eval-sample/1";

/// The largest sample read, in bytes (64 MiB, the PydanticAI import's cap).
pub const MAX_SAMPLE_BYTES: u64 = 64 << 20;

/// The most members a log may hold.
pub const MAX_MEMBERS: usize = 100_000;

/// An Inspect `.eval` log opened for reading its samples.
pub struct EvalLog {
    archive: zip::ZipArchive<std::fs::File>,
    /// (member index, folder name) of each sample, in the log's order.
    samples: Vec<(usize, String)>,
}

impl std::fmt::Debug for EvalLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalLog")
            .field("samples", &self.samples)
            .finish()
    }
}

/// A name safe as one folder: letters, digits, `-`, `_`, `.`, not starting with `.`.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The folder name of the sample member `name` (`samples/ID_epoch_N.json`), the `n`th
/// sample: the id (with `_epoch_N` kept past epoch 1) when it is a plain name, else
/// `sample-n`.
fn folder_name(stem: &str, n: usize) -> String {
    let name = stem.strip_suffix("_epoch_1").unwrap_or(stem);
    if plain_name(name) {
        name.to_owned()
    } else {
        format!("sample-{n}")
    }
}

impl EvalLog {
    /// Opens the log at `path`: it must be a zip holding at most [`MAX_MEMBERS`] members,
    /// at least one of them a sample.
    ///
    /// # Errors
    ///
    /// [`InspectError::Read`] when the file cannot be opened; [`InspectError::NotInspect`] when
    /// it is not a zip, has too many members, or holds no sample.
    pub fn open(path: &Path) -> Result<Self, InspectError> {
        let file = std::fs::File::open(path).map_err(|e| InspectError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let archive = zip::ZipArchive::new(file)
            .map_err(|e| InspectError::NotInspect(format!("not a zip: {e}")))?;
        if archive.len() > MAX_MEMBERS {
            return Err(InspectError::NotInspect(format!(
                "{} members, more than the {MAX_MEMBERS} read",
                archive.len()
            )));
        }
        let mut samples: Vec<(usize, String)> = Vec::new();
        for i in 0..archive.len() {
            let Some(Ok(name)) = archive.name_for_index(i) else {
                continue;
            };
            let Some(stem) = name
                .strip_prefix("samples/")
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            if stem.contains('/') {
                continue;
            }
            let mut folder = folder_name(stem, samples.len() + 1);
            if samples.iter().any(|(_, f)| *f == folder) {
                folder = format!("sample-{}", samples.len() + 1);
            }
            samples.push((i, folder));
        }
        if samples.is_empty() {
            return Err(InspectError::NotInspect(
                "no `samples/*.json` member".into(),
            ));
        }
        Ok(EvalLog { archive, samples })
    }

    /// The folder name of each sample (its id, or `sample-N`), in the log's order.
    pub fn names(&self) -> Vec<String> {
        self.samples.iter().map(|(_, n)| n.clone()).collect()
    }

    /// The JSON of the `n`th sample (0-based), at most [`MAX_SAMPLE_BYTES`] long.
    ///
    /// # Errors
    ///
    /// [`InspectError::NotInspect`] when there is no sample `n`, or its member cannot be read, is
    /// larger than [`MAX_SAMPLE_BYTES`], or is not a sample's JSON object.
    pub fn read(&mut self, n: usize) -> Result<Vec<u8>, InspectError> {
        let (index, name) = self
            .samples
            .get(n)
            .cloned()
            .ok_or_else(|| InspectError::NotInspect(format!("no sample {n}")))?;
        let bad = |m: String| InspectError::NotInspect(format!("sample `{name}`: {m}"));
        let member = self
            .archive
            .by_index(index)
            .map_err(|e| bad(e.to_string()))?;
        if member.size() > MAX_SAMPLE_BYTES {
            return Err(bad(format!(
                "{} bytes, more than the {MAX_SAMPLE_BYTES} read",
                member.size()
            )));
        }
        let mut bytes = Vec::new();
        member
            .take(MAX_SAMPLE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| bad(e.to_string()))?;
        if bytes.len() as u64 > MAX_SAMPLE_BYTES {
            return Err(bad(format!("more than the {MAX_SAMPLE_BYTES} bytes read")));
        }
        check_sample(&bytes).map_err(bad)?;
        Ok(bytes)
    }
}

/// The sample as an object, its events checked: each an object with an `event` string.
fn check_sample(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(sample) = value else {
        return Err("not a JSON object".into());
    };
    match sample.get("events") {
        None | Some(Value::Null) => {}
        Some(Value::Array(events)) => {
            for (i, e) in events.iter().enumerate() {
                if !e.get("event").is_some_and(Value::is_string) {
                    return Err(format!("event {i} has no `event` name"));
                }
            }
        }
        Some(_) => return Err("`events` is not an array".into()),
    }
    Ok(sample)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The model exchange of one `model` event.
fn model_exchange(e: &Value) -> ModelExchange<'static> {
    let output = e.get("output").cloned().unwrap_or(Value::Null);
    ModelExchange {
        model: text(&e["model"]),
        request: Some(Body::parsed(json!({
            "input": e["input"], "tools": e["tools"], "tool_choice": e["tool_choice"], "config": e["config"],
        }))),
        usage: output.get("usage").cloned().unwrap_or(Value::Null),
        finish_reason: output["choices"][0]["stop_reason"]
            .as_str()
            .map(str::to_owned),
        duration_ms: seconds_ms(&e["working_time"]),
        error: e["error"].as_str().map(str::to_owned),
        response: Some(Body::parsed(output)),
        ..ModelExchange::default()
    }
}

/// The record of one `tool` event: failed when it carries an `error`.
fn tool_record(e: &Value) -> ToolCallRecord {
    let arguments = match &e["arguments"] {
        Value::Null => json!({}),
        other => other.clone(),
    };
    let record = ToolCallRecord::new(text(&e["function"]), text(&e["id"]), arguments)
        .parsed()
        .took(Duration::from_millis(seconds_ms(&e["working_time"])));
    match &e["error"] {
        Value::Null => record.succeeded(e["result"].clone()),
        err => record.failed(err.get("message").cloned().unwrap_or_else(|| err.clone())),
    }
}

/// Seconds (a JSON number) as whole milliseconds; 0 when not a finite positive number.
fn seconds_ms(v: &Value) -> u64 {
    match v.as_f64() {
        Some(s) if s.is_finite() && s > 0.0 => (s * 1000.0).min(u64::MAX as f64) as u64,
        _ => 0,
    }
}

/// Replaces each `attachment://ID` string in `v` by the sample's attachment `ID` (Inspect
/// moves long texts out of its events into the sample's `attachments`); an unknown ID is
/// left as it is.
fn resolve(v: &mut Value, attachments: &Map<String, Value>) {
    match v {
        Value::String(s) => {
            if let Some(found) = s
                .strip_prefix("attachment://")
                .and_then(|id| attachments.get(id))
            {
                *v = found.clone();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| resolve(i, attachments)),
        Value::Object(fields) => fields.values_mut().for_each(|f| resolve(f, attachments)),
        _ => {}
    }
}

/// Imports one sample's JSON (as [`EvalLog::read`] returns it) into a new bundle at
/// `bundle`. The run id is the one asked for, else `inspect-` and the start of the
/// sample's SHA-256 (the same sample gives the same id).
///
/// # Errors
///
/// [`InspectError::NotInspect`] when `bytes` is not a sample's JSON object (nothing is
/// written); [`InspectError::Capture`] when the bundle cannot be created or written.
pub async fn import_sample(
    bytes: &[u8],
    bundle: &Path,
    options: &ImportOptions,
) -> Result<ImportSummary, InspectError> {
    let sample = check_sample(bytes).map_err(InspectError::NotInspect)?;
    let digest = hex::encode(Sha256::digest(bytes));
    let run_id = options
        .run_id
        .clone()
        .unwrap_or_else(|| format!("inspect-{}", &digest[..32]));
    let no_attachments = Map::new();
    let attachments = sample
        .get("attachments")
        .and_then(Value::as_object)
        .unwrap_or(&no_attachments);
    let mut events = sample.get("events").cloned().unwrap_or(Value::Null);
    resolve(&mut events, attachments);
    let events = events.as_array().map_or(&[][..], Vec::as_slice);
    let model = events
        .iter()
        .find(|e| e["event"] == "model")
        .map(|e| text(&e["model"]))
        .or_else(|| sample.get("output").map(|o| text(&o["model"])))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "inspect/unknown".to_owned());
    let capture = Capture::builder(bundle)
        .run_id(run_id.clone())
        .builder(IMPORT_BUILDER)
        .agent("inspect")
        .model(model)
        .durability(options.durability)
        .details(json!({"import": {
            "from": "inspect", "format": INSPECT_SAMPLE_FORMAT, "trace_sha256": digest,
            "sample_id": sample.get("id"), "epoch": sample.get("epoch"),
        }}))
        .open()?;
    let messages = sample
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, Vec::len) as u64;
    let mut summary = ImportSummary {
        run_id,
        messages,
        model_calls: 0,
        tool_calls: 0,
    };
    let (mut input_tokens, mut output_tokens) = (0u64, 0u64);
    for e in events {
        match e["event"].as_str() {
            Some("model") => {
                let exchange = model_exchange(e);
                let count = |k: &str| exchange.usage[k].as_u64().unwrap_or(0);
                input_tokens = input_tokens.saturating_add(count("input_tokens"));
                output_tokens = output_tokens.saturating_add(count("output_tokens"));
                capture.model_exchange(exchange).await?;
                summary.model_calls += 1;
            }
            Some("tool") => {
                capture.tool_call(tool_record(e)).await?;
                summary.tool_calls += 1;
            }
            _ => {}
        }
    }
    capture
        .trace(INSPECT_SAMPLE_FORMAT, bytes, summary.messages)
        .await?;
    let mut completion = sample
        .get("output")
        .map(|o| o["completion"].clone())
        .unwrap_or(Value::Null);
    resolve(&mut completion, attachments);
    let completion = text(&completion);
    if !completion.is_empty() {
        capture.write_output("response.txt", completion.as_bytes())?;
    }
    let (status, error) = match sample.get("error") {
        None | Some(Value::Null) => (RunStatus::Finished, None),
        Some(err) => (
            RunStatus::Failed,
            Some(err.get("message").map_or_else(|| text(err), text)),
        ),
    };
    capture.finish(
        status,
        json!({
            "requests": summary.model_calls,
            "tool_calls": summary.tool_calls,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        }),
        error,
    )?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn zip_of(members: &[(&str, &[u8])]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in members {
            zip.start_file(*name, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
        file
    }

    fn refused(file: &tempfile::NamedTempFile) -> String {
        match EvalLog::open(file.path()) {
            Err(e) => e.to_string(),
            Ok(log) => panic!("accepted {log:?}"),
        }
    }

    #[test]
    fn hostile_logs_are_refused_with_a_typed_error() {
        let not_zip = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(not_zip.path(), b"not a zip").unwrap();
        assert!(refused(&not_zip).contains("not a zip"));
        let no_samples = zip_of(&[("header.json", b"{}"), ("samples/x/y.json", b"{}")]);
        assert!(refused(&no_samples).contains("no `samples/*.json`"));

        let log = zip_of(&[
            ("samples/../../evil_epoch_1.json", b"{}"),
            ("samples/.. odd id_epoch_1.json", b"{}"),
            ("samples/bad_epoch_1.json", b"{not json"),
            ("samples/odd_epoch_1.json", br#"{"events": [1]}"#),
            ("samples/ok_epoch_2.json", br#"{"events": []}"#),
        ]);
        let mut log = EvalLog::open(log.path()).unwrap();
        // A member whose name is a path is not a sample; one whose id is not a plain name
        // becomes `sample-1`.
        assert_eq!(
            log.names(),
            ["sample-1", "bad", "odd", "ok_epoch_2"].map(String::from)
        );
        assert!(log.read(0).is_ok());
        assert!(log.read(1).unwrap_err().to_string().contains("not JSON"));
        assert!(log.read(2).unwrap_err().to_string().contains("event 0"));
        assert!(log.read(3).is_ok());
        assert!(log.read(9).is_err());
    }

    #[test]
    fn a_sample_becomes_parsed_events() {
        let sample = json!({"id": 1, "epoch": 1, "messages": [{}, {}, {}],
        "output": {"model": "m", "completion": "attachment://a2"},
            "attachments": {"a1": "the file's text", "a2": "done"},
        "events": [
            {"event": "model", "model": "m", "input": [], "output": {"usage": {"input_tokens": 3, "output_tokens": 4}, "choices": [{"stop_reason": "tool_calls"}]}},
            {"event": "tool", "id": "c1", "function": "read_file", "arguments": {"path": "/a"}, "result": "attachment://a1"},
            {"event": "tool", "id": "c2", "function": "nope", "arguments": {}, "result": "", "error": {"type": "unknown", "message": "no such tool"}},
            {"event": "score"}
        ]});
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("b");
        let bytes = serde_json::to_vec(&sample).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let summary = rt
            .block_on(import_sample(&bytes, &bundle, &ImportOptions::default()))
            .unwrap();
        assert_eq!((summary.model_calls, summary.tool_calls), (1, 2));
        let report = provrun_evidence::verify(&bundle);
        assert!(report.ok && report.complete, "{report:?}");
        let events = provrun_evidence::read_events(&bundle).unwrap();
        let kinds: Vec<_> = events
            .iter()
            .map(|e| (e.kind.as_str().to_owned(), e.confidence))
            .filter(|(k, _)| k == "model_called" || k == "tool_called" || k == "trace_imported")
            .collect();
        assert_eq!(kinds.len(), 4);
        let read = events
            .iter()
            .find(|e| e.kind.as_str() == "tool_called")
            .unwrap();
        assert_eq!(read.payload["result"], "the file's text");
        assert!(
            kinds
                .iter()
                .all(|(_, c)| *c == provrun_evidence::Confidence::Parsed)
        );
        assert_eq!(
            std::fs::read_to_string(bundle.join("output/response.txt")).unwrap(),
            "done"
        );
    }
}
