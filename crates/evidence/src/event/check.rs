//! Which confidence each event type may carry: a payload checked against its type when
//! a log is read, and the confidence a typed payload calls for.

use serde_json::Value;

use super::{
    Confidence, ConnectionHandled, Declared, EventPayload, EventType, FileChanged, HttpExchanged,
    InputStaged, ModelCalled, OutputProduced, OutputSkipped, Payload, ProcessRan, ProgramExited,
    RunFinished, RunStarted, Steered, ToolCallSeen, ToolCalled, TraceImported, TrailRecorded,
    WorkspaceChanged,
};

/// Check that `payload` has the fields its event type requires, and that `confidence`
/// is one the type may carry. Returns a description of the problem.
pub(crate) fn check_payload(
    kind: EventType,
    confidence: Confidence,
    payload: &Value,
) -> Result<(), String> {
    fn parse<T: serde::de::DeserializeOwned>(p: &Value) -> Result<T, String> {
        T::deserialize(p).map_err(|e| e.to_string())
    }
    let want = match kind {
        EventType::RunStarted => parse::<RunStarted>(payload).map(|p| p.confidence())?,
        EventType::InputStaged => parse::<InputStaged>(payload).map(|p| p.confidence())?,
        EventType::ModelCalled => parse::<ModelCalled>(payload).map(|p| p.confidence())?,
        EventType::ToolCalled => parse::<ToolCalled>(payload).map(|p| p.confidence())?,
        EventType::TraceImported => parse::<TraceImported>(payload).map(|p| p.confidence())?,
        EventType::OutputProduced => parse::<OutputProduced>(payload).map(|p| p.confidence())?,
        EventType::OutputSkipped => parse::<OutputSkipped>(payload).map(|p| p.confidence())?,
        EventType::RunFinished => parse::<RunFinished>(payload).map(|p| p.confidence())?,
        EventType::Declared => parse::<Declared>(payload).map(|p| p.confidence())?,
        EventType::Steered => parse::<Steered>(payload).map(|p| p.confidence())?,
        EventType::HttpExchanged => parse::<HttpExchanged>(payload).map(|p| p.confidence())?,
        EventType::ConnectionHandled => {
            parse::<ConnectionHandled>(payload).map(|p| p.confidence())?
        }
        EventType::ProgramExited => parse::<ProgramExited>(payload).map(|p| p.confidence())?,
        EventType::ProcessRan => parse::<ProcessRan>(payload).map(|p| p.confidence())?,
        EventType::TrailRecorded => parse::<TrailRecorded>(payload).map(|p| p.confidence())?,
        EventType::FileChanged => parse::<FileChanged>(payload).map(|p| p.confidence())?,
        EventType::WorkspaceChanged => {
            parse::<WorkspaceChanged>(payload).map(|p| p.confidence())?
        }
        EventType::ToolCallSeen => parse::<ToolCallSeen>(payload).map(|p| p.confidence())?,
    };
    check_confidence(kind, want, confidence)
}

/// Check that an event of type `kind` whose payload calls for confidence `want` may be
/// written with `confidence`. Returns a description of the problem.
pub(crate) fn check_confidence(
    kind: EventType,
    want: Confidence,
    confidence: Confidence,
) -> Result<(), String> {
    // A writer may always claim less than it could: a model exchange or a tool call that
    // the runtime did not see itself (integrated loops, imported traces) is `parsed`.
    let weaker_ok = confidence == Confidence::Parsed
        && want == Confidence::Observed
        && matches!(kind, EventType::ModelCalled | EventType::ToolCalled);
    if want != confidence && !weaker_ok {
        return Err(format!(
            "a {} event must have confidence {}, not {}",
            kind.as_str(),
            want.as_str(),
            confidence.as_str()
        ));
    }
    Ok(())
}

impl EventPayload {
    /// The confidence the payload calls for (`None` for an unknown type).
    pub(crate) fn wanted_confidence(&self) -> Option<Confidence> {
        Some(match self {
            EventPayload::RunStarted(p) => p.confidence(),
            EventPayload::InputStaged(p) => p.confidence(),
            EventPayload::ModelCalled(p) => p.confidence(),
            EventPayload::ToolCalled(p) => p.confidence(),
            EventPayload::TraceImported(p) => p.confidence(),
            EventPayload::OutputProduced(p) => p.confidence(),
            EventPayload::OutputSkipped(p) => p.confidence(),
            EventPayload::RunFinished(p) => p.confidence(),
            EventPayload::Declared(p) => p.confidence(),
            EventPayload::Steered(p) => p.confidence(),
            EventPayload::HttpExchanged(p) => p.confidence(),
            EventPayload::ConnectionHandled(p) => p.confidence(),
            EventPayload::ProgramExited(p) => p.confidence(),
            EventPayload::ProcessRan(p) => p.confidence(),
            EventPayload::TrailRecorded(p) => p.confidence(),
            EventPayload::FileChanged(p) => p.confidence(),
            EventPayload::WorkspaceChanged(p) => p.confidence(),
            EventPayload::ToolCallSeen(p) => p.confidence(),
            EventPayload::Unknown { .. } => return None,
        })
    }
}
