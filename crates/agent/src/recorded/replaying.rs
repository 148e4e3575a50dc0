//! What a replay takes from the recording besides the model's responses: each call's
//! recorded result and what decided it, the decisions a resume gave, the batches calls
//! ran in, and where a cancelled run stopped.

use std::collections::HashMap;
use std::path::Path;

use provrun_evidence::{EventPayload, RunStatus, ToolCalled};
use provrun_tools::ToolOutput;
use serde_json::Value;

use crate::capability::DecidedBy;
use crate::error::AgentError;
use crate::spec::{Decision, DeferredCall, denial_message};

use super::bundle::{blob_of, bundle_err, key_of, legacy_ids, tool_result};
use super::order::order_batches;

/// A recorded call's rewritten arguments and who rewrote them (`rewritten_arguments`,
/// inline or in its blob, and `rewritten_by`), if a hook rewrote them.
fn rewritten_arguments(
    bundle: &Path,
    call: &ToolCalled,
) -> Result<Option<(Value, String)>, AgentError> {
    let Some(by) = &call.rewritten_by else {
        return Ok(None);
    };
    let arguments = match blob_of(bundle, call.rewritten_arguments_blob.as_ref())? {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            bundle_err(
                bundle,
                format!("a rewritten-arguments blob is not JSON: {e}"),
            )
        })?,
        None => call.rewritten_arguments.clone().unwrap_or(Value::Null),
    };
    Ok(Some((arguments, by.clone())))
}

/// A completed call as a recording holds it.
#[derive(Debug, Clone)]
pub(crate) struct RecordedCall {
    pub(crate) output: ToolOutput,
    pub(crate) decided_by: Option<DecidedBy>,
    /// How the resume that completed the call decided it, if it was one a run paused on.
    decision: RecordedDecision,
    /// The call was stopped at its time limit: replay answers it from the recording.
    pub(crate) timed_out: bool,
    /// The call was stopped (or not run) because the run was cancelled: replay answers
    /// it from the recording.
    pub(crate) cancelled: bool,
    /// The call was dispatched (it has a `start_order`); `false` for a call the recording
    /// answered without running it, or a log from before `start_order`.
    ran: bool,
    /// The arguments a before hook rewrote the model's to, and who did: the tool runs
    /// with them again.
    pub(crate) rewritten: Option<(Value, String)>,
}

/// The decision a resume gave a call, as the call's completion in the log shows it.
#[derive(Debug, Clone, PartialEq)]
enum RecordedDecision {
    /// The call ran (or was not one a resume decided).
    Approved,
    /// The call was denied; the model was told `message`.
    Denied {
        /// What the model was told, without the denial's prefix.
        message: String,
    },
    /// The caller gave the result.
    Result {
        /// The result the model saw.
        content: String,
        /// Whether it succeeded.
        ok: bool,
    },
}

impl RecordedDecision {
    /// Read from a completed call: what decided it, its mode, and what the model saw.
    fn of(decided_by: Option<DecidedBy>, mode: Option<&str>, output: &ToolOutput) -> Self {
        let result = || RecordedDecision::Result {
            content: output.content.clone(),
            ok: output.ok,
        };
        // A denial is recorded as the text the model was told (the file format); the
        // message is what follows the prefix the backend writes.
        let denied = denial_message(&output.content).map(|message| RecordedDecision::Denied {
            message: message.to_string(),
        });
        match (decided_by, denied) {
            (Some(DecidedBy::Approval), Some(denied)) => denied,
            (Some(DecidedBy::Caller | DecidedBy::Approval), _) => result(),
            // Logs older than `decided_by`: what the call's mode and result show.
            (None, _) if mode == Some("client_round_trip") => result(),
            (None, Some(denied)) if !output.ok => denied,
            _ => RecordedDecision::Approved,
        }
    }

    /// The decision to give the call `call_id` of a replay.
    fn to_decision(&self, call_id: String) -> Decision {
        match self {
            RecordedDecision::Approved => Decision::Approve(call_id),
            RecordedDecision::Denied { message } => Decision::Deny {
                call_id,
                message: message.clone(),
            },
            RecordedDecision::Result { content, ok } => Decision::Result {
                call_id,
                content: content.clone(),
                ok: *ok,
            },
        }
    }
}

/// What a replay takes from the recording besides the model's responses: the result of
/// every call that no tool decided (hooks, approvals, callers), and where a cancelled
/// run stopped.
#[derive(Debug, Default)]
pub(crate) struct Replaying {
    /// Completed calls by (the model request whose response asked for them, call id).
    calls: HashMap<(u64, String), RecordedCall>,
    /// A cancelled recording: the number of model requests it had made.
    cancel_at: Option<u64>,
    /// The recorded order of each turn's calls (by model request): which batch each call
    /// ran in (see [`order_batches`]).
    batches: HashMap<u64, HashMap<String, usize>>,
    /// The recording is older than run-unique call ids: its calls are known by the
    /// model's ids.
    legacy: bool,
    /// Its steering messages and the calls hooks held for a permit.
    pub(crate) recorded: crate::steer::Recorded,
}

impl Replaying {
    pub(crate) fn from_events(bundle: &Path, log: &[EventPayload]) -> Result<Self, AgentError> {
        let legacy = legacy_ids(log);
        let mut calls = HashMap::new();
        let mut step = 0u64;
        for e in log {
            match e {
                EventPayload::ModelCalled(_) => step += 1,
                EventPayload::ToolCalled(p) if !p.deferred && !p.output_tool && !p.provider_run => {
                    let output = ToolOutput {
                        content: tool_result(bundle, p)?,
                        ok: p.ok,
                        confinement: None,
                    };
                    let decided_by = p.decided_by.as_deref().and_then(DecidedBy::parse);
                    let call = RecordedCall {
                        decision: RecordedDecision::of(decided_by, p.mode.as_deref(), &output),
                        output,
                        decided_by,
                        timed_out: p.timed_out,
                        cancelled: p.cancelled,
                        ran: p.start_order.is_some(),
                        rewritten: rewritten_arguments(bundle, p)?,
                    };
                    let id = key_of(p, legacy).unwrap_or_default().to_string();
                    calls.insert((step, id), call);
                }
                _ => {}
            }
        }
        let finished = log.iter().rev().find_map(EventPayload::as_run_finished);
        let cancel_at = finished
            .filter(|f| f.status == RunStatus::Cancelled)
            .map(|f| f.usage["requests"].as_u64().unwrap_or(step));
        let batches = order_batches(log, legacy)
            .into_iter()
            .map(|(step, batches)| {
                let by_id = batches
                    .into_iter()
                    .enumerate()
                    .flat_map(|(i, ids)| ids.into_iter().map(move |id| (id, i)))
                    .collect();
                (step, by_id)
            })
            .collect();
        Ok(Self {
            calls,
            cancel_at,
            batches,
            legacy,
            recorded: crate::steer::Recorded::from_events(bundle, log, legacy)?,
        })
    }

    /// The id the recording knows a call by: `uid`, its run-unique id, or in a legacy
    /// recording the model's id.
    pub(crate) fn key<'a>(&self, uid: &'a str, model_id: &'a str) -> &'a str {
        if self.legacy { model_id } else { uid }
    }

    /// The batch each call of the turn answering model request `step` ran in, by call id,
    /// when the recording says (logs from before `start_order` do not).
    pub(crate) fn batches(&self, step: u64) -> Option<&HashMap<String, usize>> {
        self.batches.get(&step)
    }

    /// Whether the recording did not run call `call_id` of the turn answering model
    /// request `step` because the run was cancelled before it started.
    pub(crate) fn not_run_cancelled(&self, step: u64, call_id: &str) -> bool {
        self.call(step, call_id)
            .is_some_and(|c| c.cancelled && !c.ran)
    }

    /// How many calls the replay answers from the recording because the recording
    /// stopped them (a time limit, a cancellation) instead of running them again.
    pub(crate) fn answered_from_recording(&self) -> usize {
        self.calls
            .values()
            .filter(|c| c.timed_out || c.cancelled)
            .count()
    }

    /// The recorded call `call_id` of the turn answering model request `step`.
    pub(crate) fn call(&self, step: u64, call_id: &str) -> Option<&RecordedCall> {
        self.calls.get(&(step, call_id.to_string()))
    }

    /// Whether a replay that has made `requests` model requests has reached the point
    /// where the recording was cancelled.
    pub(crate) fn cancels_at(&self, requests: u64) -> bool {
        self.cancel_at.is_some_and(|at| requests >= at)
    }

    /// The decisions the recording gave the calls a replay now waits on (in the turn of
    /// model request `step`), or `None` when the recording never decided them (it ended
    /// paused there).
    pub(crate) fn decisions(&self, step: u64, waiting: &[DeferredCall]) -> Option<Vec<Decision>> {
        waiting
            .iter()
            .map(|w| {
                let r = self.call(step, self.key(&w.run_call_id, &w.call_id))?;
                Some(r.decision.to_decision(w.run_call_id.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::denial_text;

    #[test]
    fn a_resumes_decision_is_read_back_as_a_value() {
        let out = |content: &str, ok| ToolOutput {
            content: content.into(),
            ok,
            confinement: None,
        };
        let denied = out(&denial_text("not today"), false);
        let given = out("42", true);
        let of = RecordedDecision::of;
        let deny = RecordedDecision::Denied {
            message: "not today".into(),
        };
        assert_eq!(of(Some(DecidedBy::Approval), None, &denied), deny);
        // A result the caller gave that merely looks like a denial stays a result.
        assert_eq!(
            of(Some(DecidedBy::Caller), None, &denied),
            RecordedDecision::Result {
                content: denial_text("not today"),
                ok: false
            }
        );
        assert_eq!(
            of(Some(DecidedBy::Approval), None, &given),
            RecordedDecision::Result {
                content: "42".into(),
                ok: true
            }
        );
        assert_eq!(
            of(Some(DecidedBy::Tool), None, &given),
            RecordedDecision::Approved
        );
        // Logs older than `decided_by`.
        assert_eq!(of(None, None, &denied), deny);
        assert_eq!(
            of(None, Some("client_round_trip"), &given),
            RecordedDecision::Result {
                content: "42".into(),
                ok: true
            }
        );
        assert_eq!(
            of(None, None, &out(&denial_text("x"), true)),
            RecordedDecision::Approved
        );
        assert_eq!(
            deny.to_decision("1.1".into()),
            Decision::Deny {
                call_id: "1.1".into(),
                message: "not today".into()
            }
        );
    }
}
