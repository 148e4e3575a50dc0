//! Trace import for PydanticAI: the message history `result.all_messages_json()` writes,
//! turned into a bundle of `parsed` events.
//!
//! The history is a JSON array of messages, each `{"kind": "request" | "response",
//! "parts": [...]}`; parts carry a `part_kind` (`system-prompt`, `user-prompt`,
//! `tool-return`, `retry-prompt` in requests; `text`, `tool-call`, `thinking`, ... in
//! responses). The import writes, in the history's order:
//!
//! - one `model_called` per response message (confidence `parsed`): the request blob is
//!   the JSON array of the request messages since the previous response, the response
//!   blob the response message itself; `model`, `usage` and `finish_reason` come from it;
//! - one `tool_called` per `tool-call` part (confidence `parsed`), with the result of the
//!   `tool-return` or `retry-prompt` part of the same `tool_call_id` that follows it
//!   (`ok` when its `outcome` is absent or `success`); a call the history never answers
//!   is recorded with `result: null`, `ok: false` and no `decided_by`;
//! - one `trace_imported` holding the history's bytes verbatim
//!   (format [`PYDANTIC_AI_FORMAT`]);
//! - `output/response.txt` with the text of the last response, when it has text.
//!
//! Times come from the history (its `timestamp` fields), not from the import: `run_started` is stamped
//! with the first message's `timestamp`; each `model_called` with its response's, and its
//! `duration_ms` is the time from the request message before it to the response; each
//! `tool_called` with the `timestamp` of the part that answered it, and its `duration_ms`
//! is the time from the response that asked for it to that answer (an upper bound of the
//! tool's own time: it includes waiting for the calls before it); the trace, the outputs
//! and `run_finished` with the latest time the history gives. Where the history gives no
//! time, the event takes the time before it; a history without any is stamped with the
//! import's clock, and its durations are 0.
//!
//! Everything is checked before the bundle is created: a history that is not JSON or
//! not of this shape is a [`CaptureError::Trace`] that names where, and nothing is written.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use provrun_evidence::{Durability, RunStatus};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::capture::{Capture, ToolCallRecord};
use crate::error::CaptureError;
use crate::record::{Body, ModelExchange};

mod times;

/// The `format` of a `trace_imported` holding a PydanticAI history.
pub const PYDANTIC_AI_FORMAT: &str = "pydantic-ai-messages/1";

/// The largest history imported, in bytes (64 MiB).
pub const MAX_TRACE_BYTES: usize = 64 << 20;

/// The `builder` of an imported bundle.
pub const IMPORT_BUILDER: &str = concat!("provrun-import/", env!("CARGO_PKG_VERSION"));

/// What an import wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// The bundle's run id.
    pub run_id: String,
    /// Messages in the history.
    pub messages: u64,
    /// `model_called` events written (one per response).
    pub model_calls: u64,
    /// `tool_called` events written (one per tool call).
    pub tool_calls: u64,
}

/// Options of an import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The run id (default: the history's own `run_id` when it is a plain id, else one
    /// derived from the history's SHA-256, so importing the same history twice gives the
    /// same id).
    pub run_id: Option<String>,
    /// How durable the bundle is before the import returns (default
    /// [`Durability::default`]).
    pub durability: Durability,
}

fn bad(at: impl Into<String>, message: impl Into<String>) -> CaptureError {
    CaptureError::Trace {
        format: "pydantic-ai",
        at: at.into(),
        message: message.into(),
    }
}

struct ToolCallPart {
    name: String,
    id: String,
    arguments: Value,
}

struct ToolResultPart {
    content: Value,
    ok: bool,
    /// When the answer was made (the part's `timestamp`).
    at: Option<SystemTime>,
}

enum Message {
    Request {
        value: Value,
        results: Vec<(String, ToolResultPart)>,
        /// When it was sent: its `timestamp`, else its latest part's.
        at: Option<SystemTime>,
    },
    Response {
        value: Value,
        model: Option<String>,
        calls: Vec<ToolCallPart>,
        text: String,
        /// When it came: its `timestamp`.
        at: Option<SystemTime>,
    },
}

impl Message {
    fn at(&self) -> Option<SystemTime> {
        match self {
            Message::Request { at, .. } | Message::Response { at, .. } => *at,
        }
    }
}

fn str_field<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<&'a str>, CaptureError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(format!("{at}/{key}"), "expected a string")),
    }
}

fn parse(bytes: &[u8]) -> Result<(Vec<Message>, Option<String>), CaptureError> {
    if bytes.len() > MAX_TRACE_BYTES {
        return Err(bad(
            "",
            format!(
                "{} bytes, more than the {MAX_TRACE_BYTES} an import takes",
                bytes.len()
            ),
        ));
    }
    let root: Value =
        serde_json::from_slice(bytes).map_err(|e| bad("", format!("not JSON: {e}")))?;
    let Value::Array(items) = root else {
        return Err(bad("", "expected a JSON array of messages"));
    };
    let mut run_id = None;
    let mut messages = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = format!("/{i}");
        let Value::Object(obj) = &item else {
            return Err(bad(at, "a message must be an object"));
        };
        if run_id.is_none() {
            run_id = str_field(obj, "run_id", &at)?.map(str::to_string);
        }
        let kind = str_field(obj, "kind", &at)?
            .ok_or_else(|| bad(&at, "a message needs a `kind`"))?
            .to_string();
        let Some(Value::Array(parts)) = obj.get("parts") else {
            return Err(bad(format!("{at}/parts"), "expected an array of parts"));
        };
        let Parts {
            results,
            calls,
            text,
        } = parse_parts(&kind, parts, &at)?;
        let stamped = times::timestamp(obj);
        messages.push(match kind.as_str() {
            "request" => Message::Request {
                at: stamped.or_else(|| {
                    parts
                        .iter()
                        .filter_map(|p| p.as_object().and_then(times::timestamp))
                        .max()
                }),
                value: item,
                results,
            },
            "response" => {
                let model = match (
                    str_field(obj, "model_id", &at)?,
                    str_field(obj, "model_name", &at)?,
                ) {
                    (Some(m), _) | (None, Some(m)) => Some(m.to_string()),
                    _ => None,
                };
                Message::Response {
                    value: item,
                    model,
                    calls,
                    text,
                    at: stamped,
                }
            }
            other => {
                return Err(bad(
                    format!("{at}/kind"),
                    format!("unknown message kind `{other}` (expected request or response)"),
                ));
            }
        });
    }
    Ok((messages, run_id))
}

/// What the parts of one message carry: the tool results of a request; the tool calls and
/// the text of a response.
#[derive(Default)]
struct Parts {
    results: Vec<(String, ToolResultPart)>,
    calls: Vec<ToolCallPart>,
    text: String,
}

/// Reads the `parts` of the message at `at`, of kind `kind`.
fn parse_parts(kind: &str, parts: &[Value], at: &str) -> Result<Parts, CaptureError> {
    let mut found = Parts::default();
    for (j, part) in parts.iter().enumerate() {
        let pat = format!("{at}/parts/{j}");
        let Value::Object(p) = part else {
            return Err(bad(pat, "a part must be an object"));
        };
        let part_kind = str_field(p, "part_kind", &pat)?
            .ok_or_else(|| bad(&pat, "a part needs a `part_kind`"))?;
        match (kind, part_kind) {
            ("request", "tool-return") => found.results.push(tool_return(p, &pat)?),
            ("request", "retry-prompt") => {
                if let Some(result) = tool_retry(p, &pat)? {
                    found.results.push(result);
                }
            }
            ("response", "tool-call") => found.calls.push(tool_call(p, &pat)?),
            ("response", "text") => {
                if let Some(t) = str_field(p, "content", &pat)? {
                    found.text.push_str(t);
                }
            }
            // Prompts, thinking, files, built-in tools: kept in the model exchange's
            // blobs and in the trace, with no event of their own.
            _ => {}
        }
    }
    Ok(found)
}

/// A `tool-return` part: the call it answers, and its content (ok unless its `outcome`
/// says otherwise).
fn tool_return(
    p: &Map<String, Value>,
    pat: &str,
) -> Result<(String, ToolResultPart), CaptureError> {
    let id = str_field(p, "tool_call_id", pat)?
        .ok_or_else(|| bad(pat, "a tool-return needs a `tool_call_id`"))?;
    let outcome = str_field(p, "outcome", pat)?;
    Ok((
        id.to_string(),
        ToolResultPart {
            content: p.get("content").cloned().unwrap_or(Value::Null),
            ok: matches!(outcome, None | Some("success")),
            at: times::timestamp(p),
        },
    ))
}

/// A `retry-prompt` part: about a tool call, a failed answer to that call; about the
/// output (no tool), `None`: it is only part of the next request.
fn tool_retry(
    p: &Map<String, Value>,
    pat: &str,
) -> Result<Option<(String, ToolResultPart)>, CaptureError> {
    let (Some(id), Some(_)) = (
        str_field(p, "tool_call_id", pat)?,
        str_field(p, "tool_name", pat)?,
    ) else {
        return Ok(None);
    };
    Ok(Some((
        id.to_string(),
        ToolResultPart {
            content: p.get("content").cloned().unwrap_or(Value::Null),
            ok: false,
            at: times::timestamp(p),
        },
    )))
}

/// A `tool-call` part: the tool, the call id and the arguments (an object, or a JSON
/// string of one; kept as a string when it does not parse; none: `{}`).
fn tool_call(p: &Map<String, Value>, pat: &str) -> Result<ToolCallPart, CaptureError> {
    let name = str_field(p, "tool_name", pat)?
        .ok_or_else(|| bad(pat, "a tool-call needs a `tool_name`"))?;
    let id = str_field(p, "tool_call_id", pat)?
        .ok_or_else(|| bad(pat, "a tool-call needs a `tool_call_id`"))?;
    let arguments = match p.get("args") {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(s)) if s.trim().is_empty() => json!({}),
        Some(Value::String(s)) => {
            serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
        }
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(_) => {
            return Err(bad(format!("{pat}/args"), "expected an object or a string"));
        }
    };
    Ok(ToolCallPart {
        name: name.to_string(),
        id: id.to_string(),
        arguments,
    })
}

fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Import the PydanticAI history `bytes` (the output of `result.all_messages_json()`) into
/// a new bundle at `bundle`. The history is checked whole first: on
/// [`CaptureError::Trace`] nothing is written.
///
/// # Errors
///
/// [`CaptureError::Trace`] when the history is not valid PydanticAI JSON (nothing is written);
/// otherwise the errors of [`Capture`]'s recording calls, [`CaptureError::Evidence`] above
/// all, when the bundle cannot be created or written.
pub async fn import_pydantic_ai(
    bytes: &[u8],
    bundle: &Path,
    options: &ImportOptions,
) -> Result<ImportSummary, CaptureError> {
    let (messages, history_run_id) = parse(bytes)?;
    let digest = hex::encode(Sha256::digest(bytes));
    let run_id = import_run_id(options, history_run_id, &digest);
    let model = history_model(&messages);
    let answers = answers_by_call(&messages);

    let mut builder = Capture::builder(bundle)
        .run_id(run_id.clone())
        .builder(IMPORT_BUILDER)
        .agent("pydantic-ai")
        .model(model.clone())
        .durability(options.durability)
        .details(json!({
            "import": {"from": "pydantic-ai", "format": PYDANTIC_AI_FORMAT, "trace_sha256": digest}
        }));
    let mut clock = times::Clock::default();
    if let Some(first) = clock.stamp(messages.iter().find_map(Message::at)) {
        builder = builder.started_at(first);
    }
    let capture = builder.open()?;

    let mut summary = ImportSummary {
        run_id,
        messages: messages.len() as u64,
        model_calls: 0,
        tool_calls: 0,
    };
    let (mut input_tokens, mut output_tokens) = (0u64, 0u64);
    let mut pending: Vec<&Value> = Vec::new();
    let mut sent_at = None;
    let mut last_text = String::new();
    for m in &messages {
        match m {
            Message::Request { value, at, .. } => {
                pending.push(value);
                sent_at = at.or(sent_at);
            }
            Message::Response {
                value,
                model: response_model,
                calls,
                text,
                at,
            } => {
                let usage = value.get("usage").cloned().unwrap_or(Value::Null);
                let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
                input_tokens = input_tokens.saturating_add(count("input_tokens"));
                output_tokens = output_tokens.saturating_add(count("output_tokens"));
                let request = Value::Array(pending.drain(..).cloned().collect());
                let model = response_model
                    .as_ref()
                    .map(|m| format!("pydantic-ai:{m}"))
                    .unwrap_or_else(|| model.clone());
                let mut exchange = response_exchange(model, request, value, usage);
                exchange.duration_ms = times::millis_between(sent_at, *at).unwrap_or(0);
                capture.set_clock(clock.stamp(*at));
                capture.model_exchange(exchange).await?;
                summary.model_calls += 1;
                for call in calls {
                    let answer = answers.get(call.id.as_str()).copied();
                    let answered = answer.and_then(|a| a.at);
                    let took = times::millis_between(*at, answered).unwrap_or(0);
                    capture.set_clock(clock.stamp(answered.or(*at)));
                    let record = tool_record(call, answer).took(Duration::from_millis(took));
                    capture.tool_call(record).await?;
                    summary.tool_calls += 1;
                }
                last_text = text.clone();
            }
        }
    }
    // The trace, the outputs and the end: at the latest time the history gives.
    let latest = messages.iter().filter_map(Message::at).max();
    let answered = answers.values().filter_map(|a| a.at).max();
    capture.set_clock(clock.stamp(latest.max(answered)));
    capture
        .trace(PYDANTIC_AI_FORMAT, bytes, summary.messages)
        .await?;
    if !last_text.is_empty() {
        capture.write_output("response.txt", last_text.as_bytes())?;
    }
    capture.finish(
        RunStatus::Finished,
        json!({
            "requests": summary.model_calls,
            "tool_calls": summary.tool_calls,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        }),
        None,
    )?;
    Ok(summary)
}

/// The bundle's run id: the one asked for; else `pydantic-ai-` and the history's own when
/// it is a plain id; else `pydantic-ai-` and the start of the history's SHA-256 (`digest`).
fn import_run_id(options: &ImportOptions, history_run_id: Option<String>, digest: &str) -> String {
    match (&options.run_id, history_run_id) {
        (Some(id), _) => id.clone(),
        (None, Some(id)) if plain_id(&id) => format!("pydantic-ai-{id}"),
        _ => format!("pydantic-ai-{}", &digest[..32]),
    }
}

/// The run's model: the first response's, as `pydantic-ai:MODEL`.
fn history_model(messages: &[Message]) -> String {
    messages
        .iter()
        .find_map(|m| match m {
            Message::Response { model: Some(m), .. } => Some(format!("pydantic-ai:{m}")),
            _ => None,
        })
        .unwrap_or_else(|| "pydantic-ai:unknown".to_string())
}

/// Every tool result, by call id (the first answer wins, as in PydanticAI's own loop).
fn answers_by_call(messages: &[Message]) -> BTreeMap<&str, &ToolResultPart> {
    let mut answers: BTreeMap<&str, &ToolResultPart> = BTreeMap::new();
    for m in messages {
        if let Message::Request { results, .. } = m {
            for (id, r) in results {
                answers.entry(id.as_str()).or_insert(r);
            }
        }
    }
    answers
}

/// The model exchange of one response message: `request` (the request messages since the
/// previous response) and the response itself, with its `usage` and finish reason.
fn response_exchange<'a>(
    model: String,
    request: Value,
    response: &'a Value,
    usage: Value,
) -> ModelExchange<'a> {
    ModelExchange {
        model,
        request: Some(Body::parsed(request)),
        response: Some(Body::parsed_ref(response)),
        usage,
        finish_reason: response
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..ModelExchange::default()
    }
}

/// The record of one tool call with its `answer`; a call never answered is recorded with
/// no result and no one who decided it.
fn tool_record(call: &ToolCallPart, answer: Option<&ToolResultPart>) -> ToolCallRecord {
    let record = ToolCallRecord::new(&call.name, &call.id, call.arguments.clone()).parsed();
    match answer {
        Some(r) if r.ok => record.succeeded(r.content.clone()),
        Some(r) => record.failed(r.content.clone()),
        None => {
            let mut r = record;
            r.decided_by = None;
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(bytes: &[u8]) -> String {
        match parse(bytes) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted {}", String::from_utf8_lossy(bytes)),
        }
    }

    #[test]
    fn malformed_histories_are_refused_with_where() {
        assert!(err(b"not json").contains("not JSON"));
        assert!(err(b"{}").contains("expected a JSON array"));
        assert!(err(b"[1]").contains("at /0: a message must be an object"));
        assert!(err(br#"[{"parts": []}]"#).contains("needs a `kind`"));
        assert!(err(br#"[{"kind": 3, "parts": []}]"#).contains("/0/kind: expected a string"));
        assert!(err(br#"[{"kind": "request"}]"#).contains("/0/parts"));
        assert!(err(br#"[{"kind": "oops", "parts": []}]"#).contains("unknown message kind `oops`"));
        assert!(err(br#"[{"kind": "response", "parts": [7]}]"#).contains("/0/parts/0"));
        assert!(
            err(br#"[{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_call_id": "x"}]}]"#)
                .contains("needs a `tool_name`")
        );
        assert!(
            err(br#"[{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "tool_call_id": "x", "args": 5}]}]"#)
                .contains("/0/parts/0/args")
        );
        assert!(
            err(br#"[{"kind": "request", "parts": [{"part_kind": "tool-return", "tool_call_id": 1}]}]"#)
                .contains("tool_call_id: expected a string")
        );
        // nesting beyond serde_json's limit is an error, not a stack overflow
        let deep = "[".repeat(100_000);
        assert!(err(deep.as_bytes()).contains("not JSON"));
    }

    #[test]
    fn unknown_parts_are_kept_and_string_arguments_parsed() {
        let (messages, run_id) = parse(
            br#"[{"kind": "response", "run_id": "r1", "model_name": "m", "parts": [
                {"part_kind": "thinking", "content": "hmm"},
                {"part_kind": "tool-call", "tool_name": "t", "tool_call_id": "a", "args": "{\"x\": 1}"},
                {"part_kind": "tool-call", "tool_name": "t", "tool_call_id": "b", "args": "not json"},
                {"part_kind": "text", "content": "hi"}]}]"#,
        )
        .unwrap();
        assert_eq!(run_id.as_deref(), Some("r1"));
        let Message::Response {
            calls, text, model, ..
        } = &messages[0]
        else {
            panic!("a response")
        };
        assert_eq!(model.as_deref(), Some("m"));
        assert_eq!(text, "hi");
        assert_eq!(calls[0].arguments, json!({"x": 1}));
        assert_eq!(calls[1].arguments, json!("not json"));
    }

    #[test]
    fn only_plain_ids_are_reused() {
        assert!(plain_id("01a23dfc-0951-76b8"));
        assert!(!plain_id("../../etc"));
        assert!(!plain_id(""));
        assert!(!plain_id(&"a".repeat(101)));
    }
}
