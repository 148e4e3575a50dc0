//! One run, from `RUN_STARTED` to `RUN_FINISHED`: the agent runs (or resumes) with a
//! [`RunControl`] the server can cancel and steer, its progress goes out as AG-UI events,
//! and when it ends the bundle is verified, added to the ledger (with one), put in the
//! store and written to the index before the stream's last events name it.
//!
//! A client that goes away cancels its run (docs/serve.md): the run stops at its next step,
//! its bundle ends `cancelled`, is stored and indexed like any other, and a line is logged.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use provrun_agent::{DeferReason, RunControl, RunOutcome, RunResult};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};

use crate::events::{BUNDLE_EVENT, Mapper, call_wire_id, event, frame};
use crate::index::Entry;
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
        // With a bucket store, the run is held by a lease and checkpointed as it goes.
        let keeper =
            crate::lease::keep(&state, &turn, &bundle, &planned.agent_name, &control).await;
        let (last, tail) = drive(
            &state,
            planned,
            control,
            (&tx, written),
            received,
            keeper.as_ref(),
        )
        .await;
        // The thread, the run and its slot are free before the stream's last events go
        // out: a client that sends its next turn as soon as it reads RUN_FINISHED finds
        // the thread ready. A run another replica took over is that replica's to end.
        match last {
            Ended::Run(last) => state.release_thread(&turn, last).await,
            Ended::Lost => state.let_go(&turn),
        }
        // Its lease was renewed until its turn's end was written.
        if let Some(keeper) = keeper {
            keeper.stop().await;
        }
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

/// How a run's drive ended.
enum Ended {
    /// The thread's new last run when a segment ended.
    Run(Option<LastRun>),
    /// Another replica took the run over (this one's lease ran out): it ends it.
    Lost,
}

/// Run it; give back the thread's new last run when a segment ended, and the stream's
/// last events when the client is still there to read them.
async fn drive(
    state: &Arc<State>,
    planned: Planned,
    control: RunControl,
    (tx, written): (&mpsc::Sender<Bytes>, oneshot::Receiver<()>),
    received: Instant,
    keeper: Option<&crate::lease::Keeper>,
) -> (Ended, Option<Vec<Value>>) {
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
                if let Some(keeper) = keeper
                    && !matches!(ev, provrun_agent::RunEvent::ModelDelta(_))
                {
                    keeper.recorded();
                }
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
    if let Some(keeper) = keeper
        && keeper.recorded_all().await
    {
        tracing::error!(bundle = %bundle, "the run was taken over by another replica: not ended here");
        tail.push(event(
            "RUN_ERROR",
            json!({"message": "the server lost its hold on this run; another replica ended it",
                   "code": "run_lost"}),
        ));
        state.metrics.run_left();
        return (Ended::Lost, connected.then_some(tail));
    }
    let ids = (thread.as_str(), agui_run_id.as_str(), bundle.as_str());
    let last = match result {
        Ok(result) => {
            let entry = crate::ended::end_segment(
                state,
                &agent_name,
                &thread,
                &result.run_id,
                &result.bundle,
                result.status(),
            )
            .await;
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
    (Ended::Run(last), connected.then_some(tail))
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
