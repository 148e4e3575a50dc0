//! Reading runs back from their bundles: the recorded responses a replay answers with,
//! the state a paused run resumes from, and what a replay takes from the recording
//! besides the model's responses. Below the backend (which resumes and replays with
//! these) and [`crate::replay`] (which drives the backend).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use provrun_evidence::{
    BlobRef, Event, EventPayload, EventType, RunStarted, RunStatus, ToolCalled, read_blob,
    read_events, verify,
};
use provrun_model::{Message, RecordedResponse, ReplayModel, ToolCall, Usage, WireApi};
use provrun_tools::ToolOutput;
use serde_json::Value;

use crate::arguments::arguments_text;
use crate::capability::DecidedBy;
use crate::error::AgentError;
use crate::spec::{AgentSpec, Decision, DeferReason, DeferredCall, denial_message};

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
fn run_started<'a>(bundle: &Path, log: &'a [EventPayload]) -> Result<&'a RunStarted, AgentError> {
    match log.first() {
        Some(EventPayload::RunStarted(s)) => Ok(s),
        _ => Err(bundle_err(bundle, "the log does not open with run_started")),
    }
}

/// The agent spec a bundle's `run_started` recorded, with relative paths resolving where
/// they did for the original run.
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

/// The recorded model responses of a bundle, in order, for a [`ReplayModel`].
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

/// The calls of the turn a run paused in, and those of them already done.
#[derive(Debug, Clone, Default)]
pub(crate) struct PausedTurn {
    pub(crate) calls: Vec<ToolCall>,
    pub(crate) completed: HashMap<String, ToolOutput>,
}

/// Everything a paused run resumes from, read from its bundle alone.
pub(crate) struct PausedRun {
    pub(crate) agent: AgentSpec,
    pub(crate) state: crate::state::LoopState,
    pub(crate) pending: PausedTurn,
    pub(crate) deferred: Vec<DeferredCall>,
    /// Whether `run_started` says the run was granted a host folder.
    pub(crate) host_dir_granted: bool,
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
    let host_dir_granted = run_started(bundle, &log)?.details["host_dir_granted"] == true;
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

    let mut usage = Usage::default();
    let mut requests = 0u64;
    let mut tool_calls = 0u64;
    let mut last_model = 0usize;
    for (i, e) in log.iter().enumerate() {
        match e {
            EventPayload::ModelCalled(m) => {
                requests += 1;
                last_model = i;
                if let Ok(u) = serde_json::from_value::<Usage>(m.usage.clone()) {
                    usage.add(&u);
                }
            }
            EventPayload::ToolCalled(t) if !t.deferred && !t.output_tool && !t.provider_run => {
                tool_calls += 1;
            }
            _ => {}
        }
    }
    let mut completed = HashMap::new();
    let mut deferred = Vec::new();
    for p in calls_in(&log[last_model..]) {
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
    if deferred.is_empty() {
        return Err(bundle_err(bundle, "the paused run waits on no call"));
    }
    Ok(PausedRun {
        agent,
        state: crate::state::LoopState {
            messages,
            usage,
            requests,
            tool_calls,
        },
        pending: PausedTurn { calls, completed },
        deferred,
        host_dir_granted,
    })
}

/// The calls a paused bundle waits on (for `provrun show` and scripts).
pub fn waiting_calls(bundle: &Path) -> Result<Vec<DeferredCall>, AgentError> {
    Ok(read_paused(bundle)?.deferred)
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

/// Whether a log is older than run-unique call ids (a `tool_called` without
/// `run_call_id`): its calls are then known by the model's `call_id`.
pub(crate) fn legacy_ids(log: &[EventPayload]) -> bool {
    calls_in(log).any(|t| t.run_call_id.is_none())
}

/// The id a call is known by in a log: its `run_call_id`, or in a legacy log (see
/// [`legacy_ids`]) its `call_id`.
fn key_of(call: &ToolCalled, legacy: bool) -> Option<&str> {
    if legacy {
        Some(&call.call_id)
    } else {
        call.run_call_id.as_deref()
    }
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

/// The order a log's turns ran their calls in: for each turn (by the model request whose
/// response asked for the calls), its batches in order, each the ids of calls that ran
/// together. Calls without `start_order`/`end_order` (older logs, deferred calls, calls the
/// runtime answered without running) are left out. A call joins the batch before it when
/// it started before any call of that batch ended.
pub(crate) fn order_batches(log: &[EventPayload], legacy: bool) -> HashMap<u64, Vec<Vec<String>>> {
    let mut spans: HashMap<u64, Vec<(u64, u64, String)>> = HashMap::new();
    let mut step = 0u64;
    for e in log {
        match e {
            EventPayload::ModelCalled(_) => step += 1,
            EventPayload::ToolCalled(p) => {
                if let (Some(start), Some(end), Some(id)) =
                    (p.start_order, p.end_order, key_of(p, legacy))
                {
                    spans
                        .entry(step)
                        .or_default()
                        .push((start, end, id.to_string()));
                }
            }
            _ => {}
        }
    }
    spans
        .into_iter()
        .map(|(step, mut calls)| {
            calls.sort();
            let mut batches: Vec<Vec<String>> = Vec::new();
            let mut first_end = u64::MAX;
            for (start, end, id) in calls {
                match batches.last_mut() {
                    Some(last) if start < first_end => {
                        last.push(id);
                        first_end = first_end.min(end);
                    }
                    _ => {
                        batches.push(vec![id]);
                        first_end = end;
                    }
                }
            }
            (step, batches)
        })
        .collect()
}

/// The first turn whose calls ran in a different order in the replay than in the
/// recording (only calls the recording gives an order count).
pub(crate) fn order_difference(old: &[EventPayload], new: &[EventPayload]) -> Option<String> {
    // Both logs name calls the way the recording does.
    let legacy = legacy_ids(old);
    let (old, new) = (order_batches(old, legacy), order_batches(new, legacy));
    let mut steps: Vec<&u64> = old.keys().collect();
    steps.sort();
    for step in steps {
        let recorded = &old[step];
        let known: std::collections::HashSet<&String> = recorded.iter().flatten().collect();
        let replayed: Vec<Vec<String>> = new
            .get(step)
            .into_iter()
            .flatten()
            .map(|b| b.iter().filter(|id| known.contains(id)).cloned().collect())
            .filter(|b: &Vec<String>| !b.is_empty())
            .collect();
        if *recorded != replayed {
            let show = |batches: &[Vec<String>]| {
                batches
                    .iter()
                    .map(|b| format!("[{}]", b.join(", ")))
                    .collect::<Vec<_>>()
                    .join(" then ")
            };
            return Some(format!(
                "the calls of model response {step} ran in a different order: recorded {}, \
                 replayed {}",
                show(recorded),
                show(&replayed)
            ));
        }
    }
    None
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::denial_text;
    use serde_json::json;

    /// A `model_called` payload; only its place in the log matters here.
    fn model_called() -> EventPayload {
        EventPayload::ModelCalled(provrun_evidence::ModelCalled {
            model: "m".into(),
            stream: false,
            request: None,
            response: None,
            usage: json!(null),
            finish_reason: None,
            duration_ms: 0,
            error: None,
            attempts: Vec::new(),
            response_rendered: false,
        })
    }

    /// A `tool_called` payload of call `id`, with its start and end on the turn's clock
    /// when given.
    fn tool_called(id: &str, span: Option<(u64, u64)>) -> EventPayload {
        EventPayload::ToolCalled(ToolCalled {
            call_id: id.into(),
            start_order: span.map(|s| s.0),
            end_order: span.map(|s| s.1),
            ..ToolCalled::default()
        })
    }

    /// A log of one model response whose calls ran with these (id, start, end) spans.
    fn log(spans: &[(&str, u64, u64)]) -> Vec<EventPayload> {
        let mut events = vec![model_called()];
        for (id, start, end) in spans {
            events.push(tool_called(id, Some((*start, *end))));
        }
        events
    }

    #[test]
    fn batches_are_read_back_from_the_spans_whatever_order_calls_ended_in() {
        // w alone, then r1 r2 r3 together (ending 3, 1, 2), then w2 alone.
        let events = log(&[
            ("w", 1, 2),
            ("r1", 3, 8),
            ("r2", 4, 7),
            ("r3", 5, 6),
            ("w2", 9, 10),
        ]);
        let batches = order_batches(&events, true);
        assert_eq!(
            batches[&1],
            vec![vec!["w"], vec!["r1", "r2", "r3"], vec!["w2"]]
        );
        // A log from before the order fields has no batches.
        let old = vec![model_called(), tool_called("x", None)];
        assert!(order_batches(&old, true).is_empty());
    }

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

    #[test]
    fn a_replay_that_ran_calls_in_other_groups_differs() {
        let recorded = log(&[("a", 1, 2), ("b", 3, 4)]);
        assert_eq!(order_difference(&recorded, &recorded), None);
        // Overlapping where the recording ran them one after the other.
        let replayed = log(&[("a", 1, 3), ("b", 2, 4)]);
        let diff = order_difference(&recorded, &replayed).unwrap();
        assert!(diff.contains("model response 1"), "{diff}");
        assert!(
            diff.contains("recorded [a] then [b], replayed [a, b]"),
            "{diff}"
        );
        // The other way round too.
        assert!(order_difference(&replayed, &recorded).is_some());
    }
}
