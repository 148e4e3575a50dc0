//! Resuming a paused run from its bundle with the caller's decisions.

use std::collections::HashMap;
use std::path::Path;

use provrun_evidence::{BundleLock, Durability, Recorder};
use provrun_sandbox::Sandbox;

use crate::control::RunControl;
use crate::error::AgentError;
use crate::spec::{AgentSpec, Decision, DeferReason, DeferredCall, ResumeSpec, RunResult};

use super::{Backend, PendingTurn, Prepared};
use crate::state::LoopState;

impl Backend {
    /// Continue a paused run (in this process or another) with decisions for the calls
    /// it waits on: every waiting call needs exactly one. A run that was granted a host
    /// folder needs [`Backend::resume_with`] to grant it again.
    ///
    /// # Errors
    ///
    /// As [`Backend::resume_with`].
    pub async fn resume(
        &self,
        control: &RunControl,
        bundle: &Path,
        decisions: &[Decision],
    ) -> Result<RunResult, AgentError> {
        self.resume_with(control, bundle, decisions, &ResumeSpec::default())
            .await
    }

    /// [`Backend::resume`] with options: `spec.host_dir` grants the host folder again.
    /// It is required when the run was granted one and refused when it was not (the
    /// evidence says whether a run had a host folder, and that must stay true).
    ///
    /// # Errors
    ///
    /// [`AgentError::Evidence`] when another writer holds the bundle or it cannot be read
    /// or written; otherwise as [`Backend::resume_locked`].
    pub async fn resume_with(
        &self,
        control: &RunControl,
        bundle: &Path,
        decisions: &[Decision],
        spec: &ResumeSpec,
    ) -> Result<RunResult, AgentError> {
        // One writer per bundle: the lock is taken before the paused state is read, so
        // two resumes of one run cannot both act on it (the second is refused here).
        let bundle_lock = BundleLock::acquire(bundle)?;
        self.resume_locked(control, bundle_lock, decisions, spec)
            .await
    }

    /// [`Backend::resume_with`] for a caller that already holds the bundle's lock (taken
    /// with [`BundleLock::acquire`], e.g. to look at the bundle first): the lock names
    /// the bundle, and is held until the run pauses again or ends.
    ///
    /// # Errors
    ///
    /// [`AgentError::Bundle`] when the bundle is not a paused run or needs its host folder
    /// again; [`AgentError::Input`] for a host folder it must not have or that is missing;
    /// [`AgentError::Decisions`] when `decisions` do not match the waiting calls;
    /// [`AgentError::Evidence`] when the log cannot be reopened or written.
    pub async fn resume_locked(
        &self,
        control: &RunControl,
        bundle_lock: BundleLock,
        decisions: &[Decision],
        spec: &ResumeSpec,
    ) -> Result<RunResult, AgentError> {
        let bundle = &bundle_lock.path().to_path_buf();
        let paused = crate::recorded::read_paused(bundle)?;
        let agent = paused.agent;
        match (&spec.host_dir, paused.host_dir_granted) {
            (Some(host), false) => {
                return Err(AgentError::Input {
                    path: host.clone(),
                    message: "the run was not granted a host folder when it started, so a \
                              resume cannot grant one"
                        .into(),
                });
            }
            (None, true) => {
                return Err(AgentError::Bundle {
                    path: bundle.to_path_buf(),
                    message: "the run was granted a host folder: grant it again to resume \
                              (--host-dir DIR)"
                        .into(),
                });
            }
            (Some(host), true) if !host.is_dir() => {
                return Err(AgentError::Input {
                    path: host.clone(),
                    message: "the host folder does not exist or is not a folder".into(),
                });
            }
            _ => {}
        }
        // The same rule as at the start: the roots must still be separate folders.
        let roots = provrun_sandbox::roots::run_roots(
            bundle,
            &std::env::temp_dir(),
            &[],
            spec.host_dir.as_deref(),
        );
        provrun_sandbox::roots::check_disjoint(&roots)?;
        let mut prepared = self.prepare(&agent, &paused.conversation.client_tools)?;
        let pending = check_decisions(&paused.pending, &paused.deferred, decisions)?;
        self.connect_remote(&agent, &mut prepared, (roots, Some(bundle.join("input"))))
            .await?;
        let result = self
            .resume_prepared(
                control,
                &agent,
                &prepared,
                (paused.state, pending),
                spec.host_dir.as_deref(),
                bundle_lock,
            )
            .await;
        prepared.remote.shutdown().await;
        result
    }

    pub(super) async fn resume_prepared(
        &self,
        control: &RunControl,
        agent: &AgentSpec,
        prepared: &Prepared,
        (state, pending): (LoopState, PendingTurn),
        host_dir: Option<&Path>,
        bundle_lock: BundleLock,
    ) -> Result<RunResult, AgentError> {
        let recorder = Recorder::reopen_locked(bundle_lock, Durability::AtEnd)?;
        // Before anything new is written: the log so far is the part already sent.
        let live = self.watch(&recorder);
        let result = self
            .resume_reopened(
                control,
                agent,
                prepared,
                (state, pending),
                host_dir,
                recorder,
            )
            .await;
        self.finish_live(live, result).await
    }

    async fn resume_reopened(
        &self,
        control: &RunControl,
        agent: &AgentSpec,
        prepared: &Prepared,
        (state, pending): (LoopState, PendingTurn),
        host_dir: Option<&Path>,
        recorder: Recorder,
    ) -> Result<RunResult, AgentError> {
        let mut sandbox = Sandbox::with_temp_scratch(
            recorder.input_dir(),
            recorder.output_dir(),
            agent.limits.clone(),
        )?
        .allow_degraded_commands(agent.allow_degraded_sandbox);
        if let Some(host) = host_dir {
            sandbox = sandbox.with_host_dir(host)?;
        }
        let run_id = recorder.run_id().to_string();
        let requests = state.requests;
        let active = self.start(
            control,
            agent,
            prepared,
            recorder,
            sandbox,
            (run_id, requests),
        );
        active.drive(state, Some(pending)).await
    }
}

/// Match the caller's decisions to the calls that wait, refusing missing, unknown,
/// duplicate and ill-fitting ones.
pub(super) fn check_decisions(
    turn: &crate::recorded::PausedTurn,
    deferred: &[DeferredCall],
    decisions: &[Decision],
) -> Result<PendingTurn, AgentError> {
    let mut by_id: HashMap<String, Decision> = HashMap::new();
    for d in decisions {
        let named = d.call_id();
        // The run-unique id; or the model's id, while it names one waiting call only.
        let waiting = match deferred.iter().find(|c| c.run_call_id == named) {
            Some(w) => w,
            None => {
                let by_model: Vec<&DeferredCall> =
                    deferred.iter().filter(|c| c.call_id == named).collect();
                match by_model[..] {
                    [one] => one,
                    [] => {
                        return Err(AgentError::Decisions(format!(
                            "no call `{named}` waits; the waiting calls are: {}",
                            list_ids(deferred)
                        )));
                    }
                    _ => {
                        return Err(AgentError::Decisions(format!(
                            "the model gave {} waiting calls the id `{named}`: name them by \
                             their run ids ({})",
                            by_model.len(),
                            by_model
                                .iter()
                                .map(|c| c.run_call_id.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                }
            }
        };
        let id = waiting.run_call_id.clone();
        if waiting.reason == DeferReason::ClientRoundTrip && matches!(d, Decision::Approve(_)) {
            return Err(AgentError::Decisions(format!(
                "call `{id}` ({}) is run by the caller: give its result, not an approval",
                waiting.name
            )));
        }
        if by_id.insert(id.clone(), d.clone()).is_some() {
            return Err(AgentError::Decisions(format!(
                "call `{id}` has two decisions"
            )));
        }
    }
    let missing: Vec<&DeferredCall> = deferred
        .iter()
        .filter(|c| !by_id.contains_key(&c.run_call_id))
        .collect();
    if !missing.is_empty() {
        return Err(AgentError::Decisions(format!(
            "these calls still wait for a decision: {}",
            missing
                .iter()
                .map(|c| if c.call_id == c.run_call_id {
                    format!("{} ({})", c.run_call_id, c.name)
                } else {
                    format!("{} ({}, model id {:?})", c.run_call_id, c.name, c.call_id)
                })
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(PendingTurn {
        calls: turn.calls.clone(),
        completed: turn.completed.clone(),
        decisions: by_id,
    })
}

pub(super) fn list_ids(calls: &[DeferredCall]) -> String {
    if calls.is_empty() {
        return "none".into();
    }
    calls
        .iter()
        .map(|c| {
            if c.call_id == c.run_call_id {
                c.run_call_id.clone()
            } else {
                format!("{} (model id {:?})", c.run_call_id, c.call_id)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
