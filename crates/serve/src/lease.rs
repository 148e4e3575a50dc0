//! Leases, with a bucket store (docs/serve.md, "Replicas"): a replica streaming a run holds
//! it by numbered lease objects (`threads/<THREAD>/<N>.lease/<K>.json`, made every third of
//! `--lease`) and puts the bundle in the store as its steps are recorded
//! (`live/<ID>/<K>.tar`, the latest kept). A replica that finds a thread's last turn with
//! an expired lease takes the run over by making the next lease: it reopens the latest
//! checkpoint as the evidence crate reopens a killed run's bundle (a torn last line cut,
//! blobs no event names removed), ends it `failed` naming the lost replica, stores, adds
//! to the ledger and indexes it as any ended run, and ends the turn.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use provrun_agent::{RunControl, RunStatus};
use provrun_evidence::{Durability, Recorder, RunEnd};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, ServeError};
use crate::shared::{LastRun, LostTurn, ThreadState};
use crate::state::{Claim, State, ThreadTurn, store_unavailable, thread_busy};

/// Mark `thread` busy and give its last run (as [`State::claim_turn`]), first taking over
/// the run of its last turn when that run's replica was lost: 409 when a run of it is in
/// flight, 503 when the store cannot be used.
pub(crate) async fn claim_thread(state: &State, thread: &str) -> Result<ThreadTurn, ApiError> {
    for _ in 0..2 {
        match state.claim_turn(thread).await? {
            Claim::Taken(turn) => return Ok(turn),
            Claim::Lost(lost) => match take_over(state, thread, lost).await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => return Err(store_unavailable(&e)),
            },
        }
    }
    Err(thread_busy(thread))
}

/// Every `--lease`, until `stop`: list the threads whose last turn has no end, and take
/// over the runs among them whose replica was lost, so a lost run ends although no
/// request of its thread comes.
pub(crate) async fn sweep(state: Arc<State>, stop: CancellationToken) {
    let Some(shared) = &state.shared else { return };
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(state.config.lease) => {}
        }
        let threads = match shared.unended_threads().await {
            Ok(threads) => threads,
            Err(e) => {
                tracing::warn!("the store's threads could not be listed for lost runs: {e}");
                continue;
            }
        };
        for thread in threads {
            if stop.is_cancelled() {
                return;
            }
            match shared.thread(&thread).await {
                Ok(ThreadState::Lost(lost)) => {
                    if let Err(e) = take_over(&state, &thread, lost).await {
                        tracing::warn!(thread, "a lost run could not be taken over: {e}");
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(thread, "a thread could not be read for lost runs: {e}"),
            }
        }
    }
}

/// A run's keeper: renews its lease and checkpoints its bundle while it goes on.
pub(crate) struct Keeper {
    stop: CancellationToken,
    lost: Arc<AtomicBool>,
    recorded: Arc<Notify>,
    /// Whether the run still records (checkpoints are made); held while one is made.
    recording: Arc<tokio::sync::Mutex<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Keeper {
    /// A step was recorded: checkpoint the bundle soon (coalesced with any pending one).
    pub(crate) fn recorded(&self) {
        self.recorded.notify_one();
    }

    /// The run recorded its last step: no checkpoint is made from now on (one being made
    /// is waited for), while the lease is still renewed until [`Keeper::stop`] — through
    /// the run's end (its verify, ledger, tar and index). `true` when the run was lost
    /// meanwhile (another replica made the next lease: this replica must not end it).
    pub(crate) async fn recorded_all(&self) -> bool {
        *self.recording.lock().await = false;
        self.lost.load(Ordering::SeqCst)
    }

    /// Stop renewing (the run's end is written, its turn ended).
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Take lease 1 on the run `bundle` of `turn` and keep it while the run goes on: `None`
/// without a bucket store. A lease another replica made first cancels the run (the keeper
/// then says it was lost).
pub(crate) async fn keep(
    state: &Arc<State>,
    turn: &ThreadTurn,
    bundle: &str,
    agent: &str,
    control: &RunControl,
) -> Option<Keeper> {
    let (Some(shared), Some(n)) = (&state.shared, turn.turn()) else {
        return None;
    };
    let lost = Arc::new(AtomicBool::new(false));
    let mut k = 1u64;
    match shared.make_lease(&turn.thread, n, k, bundle, agent).await {
        Ok(true) => {}
        Ok(false) => {
            lost.store(true, Ordering::SeqCst);
            control.cancel();
        }
        Err(e) => tracing::warn!(bundle, "the run's first lease could not be made: {e}"),
    }
    let stop = CancellationToken::new();
    let recorded = Arc::new(Notify::new());
    let recording = Arc::new(tokio::sync::Mutex::new(true));
    let task = {
        let (state, stop, recorded, lost, recording) = (
            Arc::clone(state),
            stop.clone(),
            Arc::clone(&recorded),
            Arc::clone(&lost),
            Arc::clone(&recording),
        );
        let (thread, bundle, agent, control) = (
            turn.thread.clone(),
            bundle.to_string(),
            agent.to_string(),
            control.clone(),
        );
        tokio::spawn(async move {
            let Some(shared) = &state.shared else { return };
            let every = state.config.lease / 3;
            let mut renew = Instant::now() + every;
            let mut checkpoint = match shared.next_checkpoint(&bundle).await {
                Ok(k) => k,
                Err(e) => {
                    tracing::warn!(bundle, "the run's checkpoints could not be listed: {e}");
                    1
                }
            };
            let mut logged = 0u64;
            let folder = state.folder_of(&bundle);
            while !lost.load(Ordering::SeqCst) {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = recorded.notified() => {}
                    () = tokio::time::sleep_until(renew.into()) => {}
                }
                if Instant::now() >= renew {
                    match shared.make_lease(&thread, n, k + 1, &bundle, &agent).await {
                        Ok(true) => {
                            k += 1;
                            renew = Instant::now() + every;
                            // The latest lease is the one that counts: the listing of
                            // the thread stays short however long the run.
                            if let Err(e) = shared.drop_lease(&thread, n, k - 1).await {
                                tracing::debug!(bundle, "an old lease stays: {e}");
                            }
                        }
                        Ok(false) => {
                            tracing::error!(
                                bundle,
                                thread,
                                "another replica took this run over (its lease ran out): \
                                 it is cancelled here and left to that replica"
                            );
                            lost.store(true, Ordering::SeqCst);
                            control.cancel();
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(bundle, "the run's lease could not be renewed: {e}");
                            renew = Instant::now() + Duration::from_secs(1);
                        }
                    }
                }
                let still = recording.lock().await;
                if !*still {
                    continue;
                }
                let len = std::fs::metadata(folder.join("events.jsonl")).map_or(0, |m| m.len());
                if len == logged {
                    continue;
                }
                let (from, work) = (folder.clone(), state.build_dir().to_path_buf());
                let tar = tokio::task::spawn_blocking(move || snapshot(&from, &work)).await;
                match tar {
                    Ok(Ok(tar)) => match shared.checkpoint(&bundle, checkpoint, tar).await {
                        Ok(()) => {
                            checkpoint += 1;
                            logged = len;
                        }
                        Err(e) => {
                            // Whether or not that number was made, the next try takes the
                            // next one (the greatest is the latest).
                            checkpoint += 1;
                            tracing::warn!(bundle, "the run could not be checkpointed: {e}");
                        }
                    },
                    Ok(Err(e)) => tracing::warn!(bundle, "the run could not be checkpointed: {e}"),
                    Err(e) => tracing::warn!(bundle, "the run could not be checkpointed: {e}"),
                }
            }
        })
    };
    Some(Keeper {
        stop,
        lost,
        recorded,
        recording,
        task,
    })
}

/// A tar of the bundle in `folder` as it stands, consistent although its run writes on:
/// the log is read first, then the other files (blobs are stored before the events naming
/// them, so every blob the log read names is there), copied into a hidden folder of
/// `work` and packed with that log. What a reopen cuts (a torn last line, blobs no event
/// names) may be in it.
fn snapshot(folder: &Path, work: &Path) -> Result<Vec<u8>, String> {
    let log = std::fs::read(folder.join("events.jsonl")).map_err(|e| e.to_string())?;
    let tmp = tempfile::Builder::new()
        .prefix(".checkpoint-")
        .tempdir_in(work)
        .map_err(|e| e.to_string())?;
    copy_tree(folder, tmp.path(), true).map_err(|e| e.to_string())?;
    std::fs::write(tmp.path().join("events.jsonl"), log).map_err(|e| e.to_string())?;
    provrun_store::tar_folder(tmp.path()).map_err(|e| e.to_string())
}

/// Copy `from`'s files (not the log) into `to`; a file gone meanwhile is skipped.
fn copy_tree(from: &Path, to: &Path, top: bool) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (path, name) = (entry.path(), entry.file_name());
        if top && name == "events.jsonl" {
            continue;
        }
        let target: PathBuf = to.join(&name);
        let kind = entry.file_type()?;
        let done = if kind.is_dir() {
            std::fs::create_dir_all(&target).and_then(|()| copy_tree(&path, &target, false))
        } else if kind.is_symlink() {
            std::fs::read_link(&path).and_then(|link| std::os::unix::fs::symlink(link, &target))
        } else {
            std::fs::copy(&path, &target).map(|_| ())
        };
        match done {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(())
}

/// Take over the run of `lost`, a turn of `thread` whose replica's lease ran out: make its
/// next lease (`Ok(None)` when another replica made it first: the thread is busy), end
/// the run `failed` from its latest checkpoint (or its paused tar), and end the turn.
/// Gives the thread's last run after it.
pub(crate) async fn take_over(
    state: &State,
    thread: &str,
    lost: LostTurn,
) -> Result<Option<Option<LastRun>>, ServeError> {
    let Some(shared) = &state.shared else {
        return Ok(None);
    };
    let Some(lease) = lost.lease else {
        // The replica was lost before its run began: the turn ends with the thread's
        // last run as it was (whoever makes the end first; both would write the same).
        let last = shared.last_before(thread, lost.turn).await?;
        shared.end_turn(thread, lost.turn, last.clone()).await?;
        tracing::warn!(
            thread,
            turn = lost.turn,
            lost = %lost.server,
            "a turn whose replica was lost before its run began was ended"
        );
        return Ok(Some(last));
    };
    let taken = shared
        .make_lease(
            thread,
            lost.turn,
            lost.lease_no + 1,
            &lease.run,
            &lease.agent,
        )
        .await?;
    if !taken {
        return Ok(None);
    }
    let at = Instant::now();
    let reason = format!(
        "the replica {} running this run was lost (its lease ran out at {}); replica {} ended it",
        lost.server,
        lease.until,
        shared.server()
    );
    let id = lease.run.clone();
    let tar = match shared.latest_checkpoint(&id).await? {
        Some(tar) => Some(tar),
        None => shared.bundle_tar(&id).await?,
    };
    let mut last = None;
    if let Some(tar) = tar {
        let folder = state.folder_of(&id);
        let (into, why) = (folder.clone(), reason.clone());
        let ended = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let _ = std::fs::remove_dir_all(&into);
            provrun_store::untar(&tar, &into, "checkpoint").map_err(|e| e.to_string())?;
            let recorder = Recorder::reopen(&into, Durability::AtEnd).map_err(|e| e.to_string())?;
            recorder
                .finish(RunEnd {
                    status: RunStatus::Failed,
                    usage: serde_json::Value::Null,
                    error: Some(why),
                })
                .map_err(|e| e.to_string())?;
            Ok(())
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        match ended {
            Ok(()) => {
                let entry = crate::ended::end_segment(
                    state,
                    &lease.agent,
                    thread,
                    &id,
                    &folder,
                    RunStatus::Failed,
                )
                .await;
                state
                    .metrics
                    .run_ended_for_another(RunStatus::Failed.as_str());
                last = entry.map(|e| LastRun::from(&e));
            }
            Err(e) => tracing::error!(
                bundle = %id,
                "the lost run's bundle could not be ended: {e}"
            ),
        }
    } else {
        tracing::error!(bundle = %id, "the lost run has no checkpoint in the store");
    }
    let last = match last {
        Some(last) => Some(last),
        None => shared.last_before(thread, lost.turn).await?,
    };
    shared.end_turn(thread, lost.turn, last.clone()).await?;
    tracing::warn!(
        bundle = %id,
        thread,
        lost = %lost.server,
        took_ms = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX),
        "a run whose replica was lost was ended as failed"
    );
    Ok(Some(last))
}
