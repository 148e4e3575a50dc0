//! The model's side of a recording: its responses, in order, and the [`ReplayModel`]
//! that answers with them.

use std::path::Path;

use provrun_evidence::{Event, EventPayload, EventType, read_events, verify};
use provrun_model::{RecordedResponse, ReplayModel, WireApi};

use crate::error::AgentError;

use super::bundle::{blob_of, bundle_err, typed_log};

/// The recorded model responses of a bundle, in order, for a [`ReplayModel`].
///
/// # Errors
///
/// [`AgentError::Bundle`] when a model call recorded no response; [`AgentError::Evidence`]
/// for a malformed `model_called` payload or a blob that cannot be read.
pub fn recorded_responses(
    bundle: &Path,
    events: &[Event],
) -> Result<Vec<RecordedResponse>, AgentError> {
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e.kind == EventType::ModelCalled) {
        let EventPayload::ModelCalled(m) = e.typed()? else {
            continue;
        };
        if m.response.is_none() && m.error.is_none() {
            return Err(bundle_err(
                bundle,
                format!(
                    "model_called (seq {}) recorded no response: the model answered without \
                     wire bytes (a hand-written `Model` whose `ModelResponse` had an empty \
                     `raw.response_body`, recorded before provrun rendered such responses), \
                     so there is nothing to replay. Record the run again with this version, \
                     or give the response its bytes (`ModelResponse::with_raw`)",
                    e.seq
                ),
            ));
        }
        let response = blob_of(bundle, m.response.as_ref())?.unwrap_or_default();
        let request = blob_of(bundle, m.request.as_ref())?;
        let media_type = m.response.as_ref().map(|r| r.media_type.clone());
        out.push(RecordedResponse {
            response_body: response.into(),
            response_media_type: media_type,
            status: None,
            request_body: request.map(Into::into),
        });
    }
    Ok(out)
}

/// A [`ReplayModel`] over a bundle's recorded responses (the bundle must verify).
///
/// # Errors
///
/// [`AgentError::Bundle`] when the bundle does not verify or its responses cannot be
/// replayed; [`AgentError::Evidence`] when its log cannot be read.
pub fn replay_model(bundle: &Path) -> Result<ReplayModel, AgentError> {
    let report = verify(bundle);
    if !report.ok {
        return Err(bundle_err(
            bundle,
            format!(
                "refusing to replay a bundle that does not verify: {}",
                first_failure(&report)
            ),
        ));
    }
    let events = read_events(bundle)?;
    let recorded = recorded_responses(bundle, &events)?;
    let api = recorded_api(&typed_log(&events)?, &recorded);
    Ok(ReplayModel::new(recorded)
        .with_api(api)
        .with_name(format!("replay:{}", bundle.display())))
}

/// The wire API a recording was made with: the model's name says it (`anthropic:…`,
/// `openai-responses:…`); a replay's recording (`replay:…`) is known by its first
/// response's shape.
fn recorded_api(log: &[EventPayload], recorded: &[RecordedResponse]) -> WireApi {
    let name = log
        .iter()
        .find_map(EventPayload::as_model_called)
        .map(|m| m.model.as_str())
        .unwrap_or_default();
    match WireApi::of_model(name) {
        WireApi::ChatCompletions if name.starts_with("replay:") => recorded
            .iter()
            .find(|r| !r.response_body.is_empty())
            .map_or(WireApi::ChatCompletions, |r| {
                WireApi::of_response_body(&r.response_body)
            }),
        api => api,
    }
}

fn first_failure(report: &provrun_evidence::VerifyReport) -> String {
    report
        .failures()
        .next()
        .map(|c| format!("{}: {}", c.code.as_str(), c.detail))
        .unwrap_or_else(|| "the run never finished".to_string())
}
