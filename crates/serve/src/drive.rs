//! One run, from `RUN_STARTED` to `RUN_FINISHED`: the agent runs (or resumes) with a
//! [`RunControl`] the server can cancel and steer, its progress goes out as AG-UI events,
//! and when it ends the bundle is verified, added to the ledger (with one), put in the
//! store and written to the index before the stream's last events name it.
//!
//! A client that goes away cancels its run (docs/serve.md): the run stops at its next step,
//! its bundle ends `cancelled`, is stored and indexed like any other, and a line is logged.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use provrun_agent::{DeferReason, RunControl, RunOutcome, RunResult};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};

use crate::events::{BUNDLE_EVENT, Mapper, call_wire_id, event, frame};
use crate::index::Entry;
use crate::metrics::StoreOp;
use crate::runs::{Planned, Work};
use crate::state::{Active, LastRun, State};

/// The AG-UI version the events follow, declared in `RUN_STARTED`.
const PROTOCOL_VERSION: &str = "1.0";

/// How often an idle stream gets an SSE comment, so proxies and clients see it alive (and
/// a client that left is noticed).
const KEEPALIVE: Duration = Duration::from_secs(10);

/// How long a run waits for its first event to be handed to the connection before it
/// starts anyway.
const FIRST_EVENT_WAIT: Duration = Duration::from_secs(2);

/// Start the run `planned` (whose request arrived at `received`) on its own task; its
/// events go to `tx`, and `written` fires when the first of them is handed to the
/// connection.
pub(crate) fn spawn(
    state: Arc<State>,
    planned: Planned,
    slot: OwnedSemaphorePermit,
    (tx, written): (mpsc::Sender<Bytes>, oneshot::Receiver<()>),
    received: Instant,
) {
    let control = RunControl::with_cancellation(&state.cancel_all);
    // The first event is made here, on the thread that answers the request, so that it
    // is ready to go out with the response's head: it waits for no run's work.
    let started = event(
        "RUN_STARTED",
        json!({"threadId": planned.thread, "runId": planned.agui_run_id,
               "protocolVersion": PROTOCOL_VERSION, "metadata": {"bundle": planned.bundle}}),
    );
    // The channel is new and empty: there is room.
    let _ = tx.try_send(frame(&started));
    state.add_active(
        &planned.bundle,
        Active {
            control: control.clone(),
            agui_run_id: planned.agui_run_id.clone(),
        },
    );
    // On the runs' own threads: a run's work (its bundle's files, its tools, its end's
    // verify) never delays the threads that accept and answer requests.
    let runs = Arc::clone(&state);
    state.metrics.run_began();
    runs.runs.spawn(async move {
        let bundle = planned.bundle.clone();
        let turn = planned.turn.clone();
        let (last, tail) = drive(&state, planned, control, (&tx, written), received).await;
        // The thread, the run and its slot are free before the stream's last events go
        // out: a client that sends its next turn as soon as it reads RUN_FINISHED finds
        // the thread ready.
        state.release_thread(&turn, last).await;
        state.remove_active(&bundle);
        drop(slot);
        if let Some(tail) = tail {
            send(&tx, tail).await;
        }
    });
}

/// Send one frame; `false` once the client is gone.
async fn send(tx: &mpsc::Sender<Bytes>, events: Vec<Value>) -> bool {
    for e in events {
        if tx.send(frame(&e)).await.is_err() {
            return false;
        }
    }
    true
}

/// Run it; give back the thread's new last run when a segment ended, and the stream's
/// last events when the client is still there to read them.
async fn drive(
    state: &Arc<State>,
    planned: Planned,
    control: RunControl,
    (tx, written): (&mpsc::Sender<Bytes>, oneshot::Receiver<()>),
    received: Instant,
) -> (Option<LastRun>, Option<Vec<Value>>) {
    let Planned {
        agent_name,
        agent,
        thread,
        turn: _,
        agui_run_id,
        bundle,
        claim: _claim,
        work,
    } = planned;
    // `_claim` holds the bundle id until this function returns: by then the run has ended
    // and the index knows its bundle (or it never started and wrote nothing).
    let mut progress = control.subscribe();
    // RUN_STARTED is already in the stream (put there by `spawn`). The response head and
    // it go out before the run takes a worker: under load, a client sees its run begin
    // without waiting for the others' work.
    let mut connected = !tx.is_closed();
    // The first event's time is taken when it goes out, however long the run waits here.
    let first_out = {
        let state = Arc::clone(state);
        let mut written = written;
        async move {
            if (&mut written).await.is_ok() {
                state.metrics.first_event(received.elapsed());
            }
        }
    };
    let mut first_out = tokio::spawn(first_out);
    let _ = tokio::time::timeout(FIRST_EVENT_WAIT, &mut first_out).await;
    let (mut mapper, backend) = (mapper_for(&bundle, &work), state.config.backend.clone());
    let folder = state.folder_of(&bundle);
    let run = async {
        match work {
            Work::New(spec) => backend.execute(&control, &agent, &spec).await,
            Work::Resume { decisions, .. } => backend.resume(&control, &folder, &decisions).await,
        }
    };
    tokio::pin!(run);
    let mut keepalive = tokio::time::interval(KEEPALIVE);
    keepalive.tick().await;
    let result = loop {
        tokio::select! {
            result = &mut run => break result,
            Some(ev) = progress.recv() => {
                if connected && !send(tx, mapper.on(ev)).await {
                    connected = false;
                    gone(&control, &bundle);
                }
            }
            () = tx.closed(), if connected => {
                connected = false;
                gone(&control, &bundle);
            }
            _ = keepalive.tick(), if connected => {
                if tx.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                    connected = false;
                    gone(&control, &bundle);
                }
            }
        }
    };
    let mut tail = Vec::new();
    while let Ok(ev) = progress.try_recv() {
        tail.extend(mapper.on(ev));
    }
    tail.extend(mapper.close());
    let ids = (thread.as_str(), agui_run_id.as_str(), bundle.as_str());
    let last = match result {
        Ok(result) => {
            let entry = end_segment(state, &agent_name, &thread, &result).await;
            state.metrics.run_ended(result.status().as_str());
            tail.extend(ending(ids, &result, entry.as_ref()));
            entry.map(|e| LastRun::from(&e))
        }
        Err(e) => {
            tracing::warn!(bundle = %bundle, "the run could not start: {e}");
            state.metrics.run_ended("not_started");
            // The reason may name the server's files or settings: it goes to the log only.
            tail.push(event(
                "RUN_ERROR",
                json!({"message": "the run could not start; the server's log says why",
                       "code": "run_not_started"}),
            ));
            None
        }
    };
    (last, connected.then_some(tail))
}

fn gone(control: &RunControl, bundle: &str) {
    tracing::info!(bundle, "the client went away: the run is cancelled");
    control.cancel();
}

fn mapper_for(bundle: &str, work: &Work) -> Mapper {
    match work {
        Work::New(_) => Mapper::new(bundle, HashSet::new(), HashSet::new()),
        Work::Resume {
            announced,
            client_results,
            ..
        } => Mapper::new(bundle, announced.clone(), client_results.clone()),
    }
}

/// The events that end the stream: the bundle's `CUSTOM` event, then `RUN_FINISHED`
/// (finished, paused, cancelled) or `RUN_ERROR` (failed).
fn ending(
    (thread, run_id, bundle): (&str, &str, &str),
    result: &RunResult,
    entry: Option<&Entry>,
) -> Vec<Value> {
    let status = result.status().as_str();
    let verified = entry.is_some_and(|e| e.verified);
    let about = json!({
        "bundle": bundle,
        "status": status,
        "verified": verified,
        "statementSha256": entry.map(|e| e.statement_sha256.clone()),
    });
    let mut out = vec![event(
        "CUSTOM",
        json!({"name": BUNDLE_EVENT, "value": about.clone()}),
    )];
    let finished = |outcome: Value| {
        let mut result_value = about.clone();
        if !result.output().is_empty() {
            result_value["output"] = Value::String(result.output().to_string());
        }
        event(
            "RUN_FINISHED",
            json!({"threadId": thread, "runId": run_id, "outcome": outcome, "result": result_value}),
        )
    };
    out.push(match &result.outcome {
        RunOutcome::Failed { error } => {
            event("RUN_ERROR", json!({"message": error, "code": "run_failed"}))
        }
        RunOutcome::Cancelled { .. } => finished(json!({"type": "cancelled"})),
        RunOutcome::Paused { deferred } => {
            let interrupts: Vec<Value> = deferred
                .iter()
                .filter(|d| d.reason == DeferReason::Approval)
                .map(|d| interrupt(bundle, d))
                .collect();
            if interrupts.is_empty() {
                let pending: Vec<String> = deferred
                    .iter()
                    .map(|d| call_wire_id(bundle, &d.run_call_id))
                    .collect();
                finished(json!({"type": "success", "pendingToolCallIds": pending}))
            } else {
                finished(json!({"type": "interrupt", "interrupts": interrupts}))
            }
        }
        _ => finished(json!({"type": "success"})),
    });
    out
}

/// The interrupt of a call waiting for approval: its id is the call's wire id, its reason
/// the tool's confirmation text.
fn interrupt(bundle: &str, call: &provrun_agent::DeferredCall) -> Value {
    let id = call_wire_id(bundle, &call.run_call_id);
    let reason = call
        .confirm
        .clone()
        .unwrap_or_else(|| format!("Approve the call of `{}`?", call.name));
    json!({
        "id": id,
        "reason": reason,
        "message": reason,
        "toolCallId": id,
        "responseSchema": {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "reason": {"type": "string"}
            }
        },
        "metadata": {"tool": call.name, "arguments": call.arguments},
    })
}

/// Where an ended run's bundle is appended: the config's ledger writer, else its ledger
/// folder.
enum LedgerTarget {
    Folder(std::path::PathBuf),
    Writer(String, Arc<provrun_ledger::LedgerWriter>),
}

impl LedgerTarget {
    fn of(config: &crate::config::ServeConfig) -> Option<LedgerTarget> {
        match (&config.ledger_writer, &config.ledger) {
            (Some((at, w)), _) => Some(LedgerTarget::Writer(at.clone(), Arc::clone(w))),
            (None, Some(dir)) => Some(LedgerTarget::Folder(dir.clone())),
            (None, None) => None,
        }
    }
}

/// Append an ended run's bundle to the ledger (before a bucket gets it), and log where it
/// went, or why it could not go (the run is stored and indexed either way).
fn add_to_ledger(ledger: &LedgerTarget, folder: &std::path::Path, id: &str) {
    let (added, at) = match ledger {
        LedgerTarget::Folder(dir) => (
            provrun_ledger::append_bundle(dir, folder),
            dir.display().to_string(),
        ),
        LedgerTarget::Writer(at, writer) => (writer.add_bundles(&[folder]), at.clone()),
    };
    match added {
        Ok(outcome) => {
            let index = outcome.added.first().map(|a| a.index).unwrap_or_default();
            tracing::info!(
                bundle = %id,
                ledger = %at,
                ledger_index = index,
                tree_size = outcome.checkpoint.size,
                "run added to the ledger"
            );
        }
        Err(e) => tracing::error!(
            bundle = %id,
            ledger = %at,
            "the bundle could not be added to the ledger: {e}"
        ),
    }
}

/// A segment ended: verify the bundle, put it in the store (a bucket gets its tar; a
/// finished bundle's work folder is then removed), append the index entry.
async fn end_segment(
    state: &Arc<State>,
    agent_name: &str,
    thread: &str,
    result: &RunResult,
) -> Option<Entry> {
    let id = result.run_id.clone();
    let folder = result.bundle.clone();
    let ended = SystemTime::now();
    let (agent, thread_name, bundle_id) = (agent_name.to_owned(), thread.to_owned(), id.clone());
    let ended_text = humantime::format_rfc3339_millis(ended).to_string();
    let ledger = LedgerTarget::of(&state.config);
    let paused = result.status() == provrun_agent::RunStatus::Paused;
    let measured = tokio::task::spawn_blocking(move || {
        if let Some(ledger) = ledger.filter(|_| !paused) {
            add_to_ledger(&ledger, &folder, &bundle_id);
        }
        Entry::for_bundle(&folder, &bundle_id, &agent, &thread_name, Some(ended_text))
    })
    .await;
    let Ok(mut entry) = measured else {
        tracing::error!(bundle = %id, "the bundle's end could not be checked");
        return None;
    };
    if state.config.store.is_bucket() {
        if let Err(e) = state.config.store.put(&id, &result.bundle).await {
            tracing::error!(bundle = %id, "the bundle could not be put in the store: {e}");
            state.metrics.store_error(StoreOp::Put);
        } else if result.status() != provrun_agent::RunStatus::Paused {
            let _ = std::fs::remove_dir_all(&result.bundle);
        }
    }
    // The status as the run ended it (a log cut short still ended for the server).
    entry.status = result.status().as_str().to_string();
    let (verified, duration_ms) = (entry.verified, entry.duration_ms);
    if let Err(e) = state.index.append(&entry) {
        tracing::error!(bundle = %id, "the run could not be written to the index: {e}");
    }
    state.add_known(&id);
    if let Some(shared) = &state.shared
        && let Err(e) = shared.add_entry(&entry).await
    {
        tracing::error!(bundle = %id, "the run could not be written to the store's index: {e}");
        state.metrics.store_error(StoreOp::Put);
    }
    tracing::info!(
        bundle = %id,
        status = %entry.status,
        verified,
        duration_ms,
        "run ended"
    );
    Some(entry)
}
