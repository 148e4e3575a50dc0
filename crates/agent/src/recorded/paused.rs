//! A paused run read back from its bundle alone: the agent, the loop's state, the turn
//! it paused in and the calls it waits on.

use std::collections::HashMap;
use std::path::Path;

use provrun_evidence::{EventPayload, RunStatus, read_blob, read_events};
use provrun_model::{Message, ToolCall, Usage};
use provrun_tools::ToolOutput;

use crate::arguments::arguments_text;
use crate::error::AgentError;
use crate::spec::{AgentSpec, DeferReason, DeferredCall};
use crate::state::LoopState;

use super::bundle::{
    Conversation, bundle_err, calls_in, recorded_agent, recorded_conversation, run_started,
    tool_result, typed_log,
};

/// The calls of the turn a run paused in, and those of them already done.
#[derive(Debug, Clone, Default)]
pub(crate) struct PausedTurn {
    pub(crate) calls: Vec<ToolCall>,
    pub(crate) completed: HashMap<String, ToolOutput>,
}

/// Everything a paused run resumes from, read from its bundle alone.
pub(crate) struct PausedRun {
    pub(crate) agent: AgentSpec,
    pub(crate) state: LoopState,
    pub(crate) pending: PausedTurn,
    pub(crate) deferred: Vec<DeferredCall>,
    /// Whether `run_started` says the run was granted a host folder.
    pub(crate) host_dir_granted: bool,
    /// The tools its caller runs, and where it stood in a conversation.
    pub(crate) conversation: Conversation,
}

/// Read the state of a paused run.
pub(crate) fn read_paused(bundle: &Path) -> Result<PausedRun, AgentError> {
    let events = read_events(bundle)?;
    let log = typed_log(&events)?;
    let last = log
        .last()
        .ok_or_else(|| bundle_err(bundle, "the evidence log is empty"))?;
    if last
        .as_run_finished()
        .is_none_or(|f| f.status != RunStatus::Paused)
    {
        return Err(bundle_err(
            bundle,
            "the run is not paused: only a run that waits for decisions can be resumed",
        ));
    }
    let (agent, _prompt) = recorded_agent(bundle, &events)?;
    let started = run_started(bundle, &log)?;
    let host_dir_granted = started.details["host_dir_granted"] == true;
    let conversation = recorded_conversation(bundle, &started.details)?;
    let (messages, calls) = paused_trace(bundle, &log)?;
    let (mut state, last_model) = counts(&log);
    state.messages = messages;
    let (completed, deferred) = paused_calls(bundle, &log[last_model..], &calls, state.requests)?;
    if deferred.is_empty() {
        return Err(bundle_err(bundle, "the paused run waits on no call"));
    }
    Ok(PausedRun {
        agent,
        state,
        pending: PausedTurn { calls, completed },
        deferred,
        host_dir_granted,
        conversation,
    })
}

/// The history a paused run recorded (its last `trace_imported`), and the tool calls it
/// ends with: those of the turn the run paused in.
fn paused_trace(
    bundle: &Path,
    log: &[EventPayload],
) -> Result<(Vec<Message>, Vec<ToolCall>), AgentError> {
    let trace = log
        .iter()
        .rev()
        .find_map(|e| match e {
            EventPayload::TraceImported(t) => Some(t),
            _ => None,
        })
        .ok_or_else(|| bundle_err(bundle, "the paused run has no trace_imported"))?;
    let bytes = read_blob(bundle, &trace.trace)?;
    let messages: Vec<Message> = serde_json::from_slice(&bytes)
        .map_err(|e| bundle_err(bundle, format!("the trace does not parse: {e}")))?;
    let calls = match messages.last() {
        Some(Message::Assistant { tool_calls, .. }) if !tool_calls.is_empty() => tool_calls.clone(),
        _ => {
            return Err(bundle_err(
                bundle,
                "the trace does not end with the model's tool calls",
            ));
        }
    };
    Ok((messages, calls))
}

/// The loop's counts over a log (usage, model requests, tool calls run; no messages),
/// and the index of its last `model_called`: the turn the run paused in follows it.
fn counts(log: &[EventPayload]) -> (LoopState, usize) {
    let mut state = LoopState::default();
    let mut last_model = 0usize;
    for (i, e) in log.iter().enumerate() {
        match e {
            EventPayload::ModelCalled(m) => {
                state.requests += 1;
                last_model = i;
                if let Ok(u) = serde_json::from_value::<Usage>(m.usage.clone()) {
                    state.usage.add(&u);
                }
            }
            EventPayload::ToolCalled(t) if !t.deferred && !t.output_tool && !t.provider_run => {
                state.tool_calls += 1;
            }
            _ => {}
        }
    }
    (state, last_model)
}

/// The calls of the paused turn (`turn`: the log from its `model_called` on, `calls`: the
/// turn's calls, `requests`: the model requests made) that are done, by run-unique id,
/// and those that still wait for a decision.
fn paused_calls(
    bundle: &Path,
    turn: &[EventPayload],
    calls: &[ToolCall],
    requests: u64,
) -> Result<(HashMap<String, ToolOutput>, Vec<DeferredCall>), AgentError> {
    let mut completed = HashMap::new();
    let mut deferred = Vec::new();
    for p in calls_in(turn) {
        let call_id = p.call_id.clone();
        // The run-unique id; a log older than it names calls by the model's id, which
        // was unique in the turn there: the id of the turn's first call with it.
        let run_call_id = match &p.run_call_id {
            Some(id) => id.clone(),
            None => calls
                .iter()
                .position(|c| c.id == call_id)
                .map(|i| crate::state::call_uid(requests, i))
                .unwrap_or_else(|| call_id.clone()),
        };
        let name = p.name.clone();
        if p.deferred {
            let reason = if p.mode.as_deref() == Some("client_round_trip") {
                DeferReason::ClientRoundTrip
            } else {
                DeferReason::Approval
            };
            deferred.push(DeferredCall {
                call_id,
                run_call_id,
                name,
                arguments: arguments_text(&p.arguments),
                reason,
                confirm: p.confirm.clone(),
            });
        } else {
            completed.insert(
                run_call_id,
                ToolOutput {
                    content: tool_result(bundle, p)?,
                    ok: p.ok,
                    confinement: None,
                },
            );
        }
    }
    deferred.retain(|d| !completed.contains_key(&d.run_call_id));
    Ok((completed, deferred))
}

/// The calls a paused bundle waits on (for `provrun show` and scripts).
///
/// # Errors
///
/// [`AgentError::Evidence`] when the log cannot be read; [`AgentError::Bundle`] when the
/// bundle is not a paused run.
pub fn waiting_calls(bundle: &Path) -> Result<Vec<DeferredCall>, AgentError> {
    Ok(read_paused(bundle)?.deferred)
}
