//! Steering a running agent ([`crate::RunControl::steer`]) and recording the in-process
//! permit waits of hooks: what the loop adds to the history between model requests, the
//! `steered` and waiting `tool_called` events it writes, and what a replay takes back
//! from them.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use provrun_evidence::{EventPayload, Recorder, Steered, read_blob};
use provrun_model::ToolCall;

use crate::arguments::arguments_value;
use crate::capability::{CallFlags, ToolEvidence};
use crate::control::{PermitWait, RunEvent};
use crate::error::AgentError;

/// The media type of a steering message's blob.
pub(crate) const STEER_MEDIA_TYPE: &str = "text/plain; charset=utf-8";

/// What `waits_for` records on a call a hook holds for a permit in the running process.
pub(crate) const WAITS_FOR_PERMIT: &str = "permit";

/// The [`PermitWait`] of one call: its `RunEvent::Deferred`, and its `tool_called` with
/// `deferred: true, waits_for: "permit"`. A failed write is logged: the run's next event
/// (this call's completion) fails the same way and ends the run.
pub(crate) fn permit_wait(
    evidence: &ToolEvidence,
    call: &ToolCall,
    run_call_id: &str,
    mode: Option<String>,
    confirm: Option<String>,
) -> PermitWait {
    let evidence = evidence.clone();
    let (recorded, uid) = (call.clone(), run_call_id.to_string());
    PermitWait {
        run_call_id: run_call_id.to_string(),
        call_id: call.id.clone(),
        event: RunEvent::Deferred {
            call_id: call.id.clone(),
            run_call_id: run_call_id.to_string(),
            name: call.name.clone(),
            confirm,
        },
        record: Box::pin(async move {
            if let Err(e) = record_permit_wait(&evidence, &recorded, &uid, mode).await {
                tracing::error!(call = %uid, "could not record the wait for a permit: {e}");
            }
        }),
    }
}

/// Write the `tool_called` of a call that waits for a permit in the running process.
pub(crate) async fn record_permit_wait(
    evidence: &ToolEvidence,
    call: &ToolCall,
    run_call_id: &str,
    mode: Option<String>,
) -> Result<u64, AgentError> {
    let flags = CallFlags {
        deferred: true,
        mode,
        run_call_id: Some(run_call_id.to_string()),
        waits_for: Some(WAITS_FOR_PERMIT.to_string()),
        ..CallFlags::default()
    };
    evidence
        .record(
            &call.name,
            &call.id,
            arguments_value(&call.arguments),
            None,
            0,
            flags,
        )
        .await
}

/// Record one steering message going with model request `before_request`: its text as
/// a blob, then the `steered` event naming it.
pub(crate) async fn record_steered(
    recorder: &Recorder,
    before_request: u64,
    text: &str,
) -> Result<(), AgentError> {
    let blob = recorder
        .put_blob_for_next_event(text.as_bytes(), STEER_MEDIA_TYPE)
        .await?;
    recorder
        .record_async(&Steered {
            text: blob,
            before_request,
        })
        .await?;
    Ok(())
}

/// What a replay takes from a recording's steering and permit waits.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// The steering messages by the number of model requests made before them.
    steering: HashMap<u64, Vec<String>>,
    /// The calls a hook held for a permit: (the model request whose response asked for
    /// them, the id the recording knows them by).
    permit_waits: HashSet<(u64, String)>,
}

/// The text of a `steered` event.
pub(crate) fn steered_text(bundle: &Path, event: &Steered) -> Result<String, AgentError> {
    let bytes = read_blob(bundle, &event.text)?;
    String::from_utf8(bytes).map_err(|_| AgentError::Bundle {
        path: bundle.to_path_buf(),
        message: format!(
            "the text of steered before request {} is not UTF-8",
            event.before_request
        ),
    })
}

impl Recorded {
    /// Read them from a recording's events; `legacy`: its calls are known by the
    /// model's ids.
    pub(crate) fn from_events(
        bundle: &Path,
        log: &[EventPayload],
        legacy: bool,
    ) -> Result<Self, AgentError> {
        let mut out = Self::default();
        let mut step = 0u64;
        for e in log {
            match e {
                EventPayload::ModelCalled(_) => step += 1,
                EventPayload::Steered(p) => out
                    .steering
                    .entry(step)
                    .or_default()
                    .push(steered_text(bundle, p)?),
                EventPayload::ToolCalled(p)
                    if p.deferred && p.waits_for.as_deref() == Some(WAITS_FOR_PERMIT) =>
                {
                    let key = if legacy {
                        Some(&p.call_id)
                    } else {
                        p.run_call_id.as_ref()
                    };
                    if let Some(key) = key {
                        out.permit_waits.insert((step, key.clone()));
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// The messages the recording added after `requests` model requests.
    pub(crate) fn steering(&self, requests: u64) -> Vec<String> {
        self.steering.get(&requests).cloned().unwrap_or_default()
    }

    /// Whether a hook held call `key` of the turn answering request `step` for a permit.
    pub(crate) fn waited_for_permit(&self, step: u64, key: &str) -> bool {
        self.permit_waits.contains(&(step, key.to_string()))
    }
}

/// The first difference between the steering of a recording and of its replay.
pub(crate) fn steering_difference(
    (old_bundle, old): (&Path, &[EventPayload]),
    (new_bundle, new): (&Path, &[EventPayload]),
) -> Result<Option<String>, AgentError> {
    let texts = |bundle: &Path, log: &[EventPayload]| -> Result<Vec<(u64, String)>, AgentError> {
        log.iter()
            .filter_map(|e| match e {
                EventPayload::Steered(p) => Some(p),
                _ => None,
            })
            .map(|p| Ok((p.before_request, steered_text(bundle, p)?)))
            .collect()
    };
    let (old, new) = (texts(old_bundle, old)?, texts(new_bundle, new)?);
    if old == new {
        return Ok(None);
    }
    Ok(Some(format!(
        "the recording was steered {} time(s) ({}), the replay {} ({})",
        old.len(),
        describe(&old),
        new.len(),
        describe(&new)
    )))
}

fn describe(steering: &[(u64, String)]) -> String {
    if steering.is_empty() {
        return "none".into();
    }
    steering
        .iter()
        .map(|(at, text)| {
            let short: String = text.chars().take(40).collect();
            format!("{short:?} before request {at}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}
