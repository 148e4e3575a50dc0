//! Payloads read as their types' structs: [`EventPayload`] (parsed from an event's JSON,
//! with field-naming errors), [`Event::typed`] and [`TypedEvent`].

use serde_json::Value;

use super::{
    Confidence, ConnectionHandled, Declared, Event, EventType, FileChanged, HttpExchanged,
    InputStaged, ModelCalled, OutputProduced, OutputSkipped, ProcessRan, ProgramExited,
    RunFinished, RunStarted, Steered, ToolCallSeen, ToolCalled, TraceImported, TrailRecorded,
    WorkspaceChanged,
};

/// An event's payload read as its type's struct: what a reader matches on instead of
/// looking fields up by name in [`Event::payload`] (a misspelt field is then a compile
/// error, not a silent `null`).
///
/// Get it with [`Event::typed`] for an event of [`crate::read_events`], or read a whole
/// log with [`crate::read_typed_events`], which also reads event types this version
/// does not know (as [`EventPayload::Unknown`]). New event types may be added, so a
/// `match` needs a wildcard arm.
// `ToolCalled` is far larger than the rest; it is also most of a log's events, so boxing
// it would add an allocation to most events rather than save space.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventPayload {
    /// `run_started`.
    RunStarted(RunStarted),
    /// `input_staged`.
    InputStaged(InputStaged),
    /// `model_called`.
    ModelCalled(ModelCalled),
    /// `tool_called`.
    ToolCalled(ToolCalled),
    /// `trace_imported`.
    TraceImported(TraceImported),
    /// `output_produced`.
    OutputProduced(OutputProduced),
    /// `output_skipped`.
    OutputSkipped(OutputSkipped),
    /// `run_finished`.
    RunFinished(RunFinished),
    /// `declared`.
    Declared(Declared),
    /// `steered`.
    Steered(Steered),
    /// `http_exchanged`.
    HttpExchanged(HttpExchanged),
    /// `connection_handled`.
    ConnectionHandled(ConnectionHandled),
    /// `program_exited`.
    ProgramExited(ProgramExited),
    /// `process_ran`.
    ProcessRan(ProcessRan),
    /// `trail_recorded`.
    TrailRecorded(TrailRecorded),
    /// `file_changed`.
    FileChanged(FileChanged),
    /// `workspace_changed`.
    WorkspaceChanged(WorkspaceChanged),
    /// `tool_call_seen`.
    ToolCallSeen(ToolCallSeen),
    /// An event type this version does not know (written by a later one): its name and
    /// its payload as JSON.
    Unknown {
        /// The event line's `type`.
        kind: String,
        /// The payload, untouched.
        payload: Value,
    },
}

impl EventPayload {
    /// Read the payload of the event at `seq` whose `type` is `kind`. A type this version
    /// does not know gives [`EventPayload::Unknown`]; a known type whose payload misses a
    /// field or has one of the wrong type gives [`crate::EvidenceError::MalformedPayload`],
    /// naming the event's seq and the field.
    ///
    /// # Errors
    ///
    /// [`crate::EvidenceError::MalformedPayload`] when `kind` is a known type and `payload`
    /// lacks a field or has one of the wrong type; an unknown `kind` is not an error.
    pub fn parse(seq: u64, kind: &str, payload: &Value) -> crate::Result<EventPayload> {
        let Some(known) = EventType::from_name(kind) else {
            return Ok(EventPayload::Unknown {
                kind: kind.to_owned(),
                payload: payload.clone(),
            });
        };
        EventPayload::parse_known(seq, known, payload)
    }

    fn parse_known(seq: u64, kind: EventType, payload: &Value) -> crate::Result<EventPayload> {
        fn de<T: serde::de::DeserializeOwned>(
            seq: u64,
            kind: EventType,
            payload: &Value,
        ) -> crate::Result<T> {
            serde_path_to_error::deserialize(payload).map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                let reason = inner.to_string();
                // serde names a missing field in its message, at the path of the object
                // that lacks it.
                let missing = reason
                    .strip_prefix("missing field `")
                    .and_then(|r| r.split('`').next());
                let field = match (path.as_str(), missing) {
                    (".", Some(name)) => name.to_owned(),
                    (".", None) => "(payload)".to_owned(),
                    (p, Some(name)) => format!("{p}.{name}"),
                    (p, None) => p.to_owned(),
                };
                crate::EvidenceError::MalformedPayload {
                    seq,
                    kind: kind.as_str(),
                    field,
                    reason,
                }
            })
        }
        Ok(match kind {
            EventType::RunStarted => EventPayload::RunStarted(de(seq, kind, payload)?),
            EventType::InputStaged => EventPayload::InputStaged(de(seq, kind, payload)?),
            EventType::ModelCalled => EventPayload::ModelCalled(de(seq, kind, payload)?),
            EventType::ToolCalled => EventPayload::ToolCalled(de(seq, kind, payload)?),
            EventType::TraceImported => EventPayload::TraceImported(de(seq, kind, payload)?),
            EventType::OutputProduced => EventPayload::OutputProduced(de(seq, kind, payload)?),
            EventType::OutputSkipped => EventPayload::OutputSkipped(de(seq, kind, payload)?),
            EventType::RunFinished => EventPayload::RunFinished(de(seq, kind, payload)?),
            EventType::Declared => EventPayload::Declared(de(seq, kind, payload)?),
            EventType::Steered => EventPayload::Steered(de(seq, kind, payload)?),
            EventType::HttpExchanged => EventPayload::HttpExchanged(de(seq, kind, payload)?),
            EventType::ConnectionHandled => {
                EventPayload::ConnectionHandled(de(seq, kind, payload)?)
            }
            EventType::ProgramExited => EventPayload::ProgramExited(de(seq, kind, payload)?),
            EventType::ProcessRan => EventPayload::ProcessRan(de(seq, kind, payload)?),
            EventType::TrailRecorded => EventPayload::TrailRecorded(de(seq, kind, payload)?),
            EventType::FileChanged => EventPayload::FileChanged(de(seq, kind, payload)?),
            EventType::WorkspaceChanged => EventPayload::WorkspaceChanged(de(seq, kind, payload)?),
            EventType::ToolCallSeen => EventPayload::ToolCallSeen(de(seq, kind, payload)?),
        })
    }

    /// The event type, `None` for [`EventPayload::Unknown`].
    pub fn event_type(&self) -> Option<EventType> {
        Some(match self {
            EventPayload::RunStarted(_) => EventType::RunStarted,
            EventPayload::InputStaged(_) => EventType::InputStaged,
            EventPayload::ModelCalled(_) => EventType::ModelCalled,
            EventPayload::ToolCalled(_) => EventType::ToolCalled,
            EventPayload::TraceImported(_) => EventType::TraceImported,
            EventPayload::OutputProduced(_) => EventType::OutputProduced,
            EventPayload::OutputSkipped(_) => EventType::OutputSkipped,
            EventPayload::RunFinished(_) => EventType::RunFinished,
            EventPayload::Declared(_) => EventType::Declared,
            EventPayload::Steered(_) => EventType::Steered,
            EventPayload::HttpExchanged(_) => EventType::HttpExchanged,
            EventPayload::ConnectionHandled(_) => EventType::ConnectionHandled,
            EventPayload::ProgramExited(_) => EventType::ProgramExited,
            EventPayload::ProcessRan(_) => EventType::ProcessRan,
            EventPayload::TrailRecorded(_) => EventType::TrailRecorded,
            EventPayload::FileChanged(_) => EventType::FileChanged,
            EventPayload::WorkspaceChanged(_) => EventType::WorkspaceChanged,
            EventPayload::ToolCallSeen(_) => EventType::ToolCallSeen,
            EventPayload::Unknown { .. } => return None,
        })
    }

    /// The event line's `type`, as written.
    pub fn type_name(&self) -> &str {
        match self {
            EventPayload::Unknown { kind, .. } => kind,
            known => known.event_type().map_or("", EventType::as_str),
        }
    }

    /// The `tool_called` payload, if this is one.
    pub fn as_tool_called(&self) -> Option<&ToolCalled> {
        match self {
            EventPayload::ToolCalled(t) => Some(t),
            _ => None,
        }
    }

    /// The `model_called` payload, if this is one.
    pub fn as_model_called(&self) -> Option<&ModelCalled> {
        match self {
            EventPayload::ModelCalled(m) => Some(m),
            _ => None,
        }
    }

    /// The `run_finished` payload, if this is one.
    pub fn as_run_finished(&self) -> Option<&RunFinished> {
        match self {
            EventPayload::RunFinished(f) => Some(f),
            _ => None,
        }
    }
}

impl Event {
    /// This event's payload as its type's struct. An event of [`crate::read_events`] has
    /// been checked against its type already, so this fails only for an event built or
    /// changed by hand ([`crate::EvidenceError::MalformedPayload`], naming the seq and
    /// the field).
    ///
    /// # Errors
    ///
    /// [`crate::EvidenceError::MalformedPayload`] when the payload does not fit its type's
    /// struct.
    pub fn typed(&self) -> crate::Result<EventPayload> {
        EventPayload::parse_known(self.seq, self.kind, &self.payload)
    }
}

/// One event of a log read with [`crate::read_typed_events`]: the envelope, the
/// payload as JSON, and the payload as its type's struct.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TypedEvent {
    /// The run this log belongs to.
    pub run_id: String,
    /// Position in the log, from 0.
    pub seq: u64,
    /// SHA-256 hex of the previous line's bytes (without its `\n`); `None` for seq 0.
    pub prev: Option<String>,
    /// RFC 3339 UTC time the event was recorded.
    pub ts: String,
    /// How the runtime knows.
    pub confidence: Confidence,
    /// The payload as written.
    pub payload: Value,
    /// The payload as its type's struct ([`EventPayload::Unknown`] for a type this
    /// version does not know).
    pub body: EventPayload,
}

impl TypedEvent {
    /// The event type, `None` for one this version does not know.
    pub fn kind(&self) -> Option<EventType> {
        self.body.event_type()
    }
}
