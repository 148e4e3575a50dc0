//! A bundle's log as the readers of a recording use it: its payloads as typed structs,
//! its blobs, the `run_started` and the agent spec it recorded, a call's recorded result,
//! and the id each call is known by.

use std::path::{Path, PathBuf};

use provrun_evidence::{
    BlobRef, Event, EventPayload, EventType, RunStarted, ToolCalled, read_blob,
};
use serde_json::Value;

use provrun_model::{Message, ToolDefinition};

use crate::error::AgentError;
use crate::spec::{AgentSpec, Continuation};

/// What `run_started.details` recorded of a run's place in a conversation and of the
/// tools its caller runs (see `RunSpec::history`, `continues`, `client_tools`); empty for
/// a run that had none, and for every run recorded before they existed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conversation {
    pub(crate) client_tools: Vec<ToolDefinition>,
    pub(crate) history: Vec<Message>,
    pub(crate) continues: Option<Continuation>,
}

/// Read [`Conversation`] from a `run_started`'s details.
pub(crate) fn recorded_conversation(
    bundle: &Path,
    details: &Value,
) -> Result<Conversation, AgentError> {
    fn field<T: serde::de::DeserializeOwned + Default>(
        bundle: &Path,
        details: &Value,
        key: &str,
    ) -> Result<T, AgentError> {
        match details.get(key) {
            None | Some(Value::Null) => Ok(T::default()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
                bundle_err(
                    bundle,
                    format!("run_started's details.{key} does not parse: {e}"),
                )
            }),
        }
    }
    Ok(Conversation {
        client_tools: field(bundle, details, "client_tools")?,
        history: field(bundle, details, "history")?,
        continues: field(bundle, details, "continues")?,
    })
}

/// The message history a finished (or paused) run recorded: its last `trace_imported`,
/// which holds every message of the run, the history it started from included. This is
/// what a conversation's next turn starts from.
///
/// # Errors
///
/// [`AgentError::Evidence`] when the log or the history blob cannot be read;
/// [`AgentError::Bundle`] when the run recorded no history or it does not parse.
pub fn recorded_messages(bundle: &Path) -> Result<Vec<Message>, AgentError> {
    let events = provrun_evidence::read_events(bundle)?;
    let log = typed_log(&events)?;
    let trace = log
        .iter()
        .rev()
        .find_map(|e| match e {
            EventPayload::TraceImported(t) => Some(t),
            _ => None,
        })
        .ok_or_else(|| bundle_err(bundle, "the run recorded no message history"))?;
    let bytes = read_blob(bundle, &trace.trace)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| bundle_err(bundle, format!("the message history does not parse: {e}")))
}

pub(crate) fn bundle_err(path: &Path, message: impl Into<String>) -> AgentError {
    AgentError::Bundle {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

pub(crate) fn blob_of(
    bundle: &Path,
    blob: Option<&BlobRef>,
) -> Result<Option<Vec<u8>>, AgentError> {
    blob.map(|b| read_blob(bundle, b))
        .transpose()
        .map_err(Into::into)
}

/// A log's payloads as their types' structs, in order.
pub(crate) fn typed_log(events: &[Event]) -> Result<Vec<EventPayload>, AgentError> {
    events
        .iter()
        .map(|e| e.typed().map_err(Into::into))
        .collect()
}

/// The `tool_called` payloads of a log, in order.
pub(crate) fn calls_in(log: &[EventPayload]) -> impl Iterator<Item = &ToolCalled> {
    log.iter().filter_map(EventPayload::as_tool_called)
}

/// The log's `run_started` (seq 0).
pub(super) fn run_started<'a>(
    bundle: &Path,
    log: &'a [EventPayload],
) -> Result<&'a RunStarted, AgentError> {
    match log.first() {
        Some(EventPayload::RunStarted(s)) => Ok(s),
        _ => Err(bundle_err(bundle, "the log does not open with run_started")),
    }
}

/// The agent spec a bundle's `run_started` recorded, with relative paths resolving where
/// they did for the original run.
///
/// # Errors
///
/// [`AgentError::Bundle`] when the log does not open with a `run_started` that records the
/// agent spec; [`AgentError::Evidence`] for a malformed payload; the spec's own errors
/// (e.g. [`AgentError::InvalidSpec`]) when it does not parse.
pub fn recorded_agent(bundle: &Path, events: &[Event]) -> Result<(AgentSpec, String), AgentError> {
    let first = events
        .first()
        .filter(|e| e.kind == EventType::RunStarted)
        .ok_or_else(|| bundle_err(bundle, "the log does not open with run_started"))?;
    let EventPayload::RunStarted(first) = first.typed()? else {
        return Err(bundle_err(bundle, "the log does not open with run_started"));
    };
    // `details` is free-form in the format: the agent's own record of the run.
    let details = &first.details;
    let text = details["agent_spec"]
        .as_str()
        .ok_or_else(|| bundle_err(bundle, "run_started does not record the agent spec"))?;
    // A replay's model answers whatever the recorded spec names (a custom model's name too).
    let mut agent = AgentSpec::parse_toml(text, None, true)?;
    agent.base_dir = details["spec_dir"].as_str().map(PathBuf::from);
    // The settings the run's requests carried, when recorded (added later; the spec's
    // text has them too, unless the run changed them with `--set`, which also
    // recorded that text).
    if let Some(settings) = details.get("model_settings").filter(|v| !v.is_null()) {
        agent.settings = serde_json::from_value(settings.clone()).map_err(|e| {
            bundle_err(
                bundle,
                format!("run_started's model_settings cannot be read: {e}"),
            )
        })?;
    }
    // A run that recorded the folders it searched for skills (the defaults among them)
    // searches the same ones again, wherever it is resumed or replayed.
    if let Some(folders) = details["default_skill_folders"].as_array() {
        agent.pinned_default_skills = Some(
            folders
                .iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
                .collect(),
        );
    }
    let prompt = details["prompt"].as_str().unwrap_or_default().to_string();
    Ok((agent, prompt))
}

pub(crate) fn tool_result(bundle: &Path, call: &ToolCalled) -> Result<String, AgentError> {
    if let Some(bytes) = blob_of(bundle, call.result_blob.as_ref())? {
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| bundle_err(bundle, format!("a result blob is not JSON: {e}")))?;
        return Ok(value
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| value.to_string()));
    }
    Ok(match &call.result {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// Whether a log is older than run-unique call ids (a `tool_called` without
/// `run_call_id`): its calls are then known by the model's `call_id`.
pub(crate) fn legacy_ids(log: &[EventPayload]) -> bool {
    calls_in(log).any(|t| t.run_call_id.is_none())
}

/// The id a call is known by in a log: its `run_call_id`, or in a legacy log (see
/// [`legacy_ids`]) its `call_id`.
pub(super) fn key_of(call: &ToolCalled, legacy: bool) -> Option<&str> {
    if legacy {
        Some(&call.call_id)
    } else {
        call.run_call_id.as_deref()
    }
}
