//! One line run (or found done by an earlier batch), and its [`Outcome`].

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use provrun_agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};

use super::check::Job;
use super::dest::{Dest, Existing, existing, existing_in_bucket, move_aside};
use crate::run::DurabilityArg;

/// How one line ended.
#[derive(Debug)]
pub(super) struct Outcome {
    pub(super) line: usize,
    pub(super) id: String,
    /// `finished`, `failed`, `cancelled`, `paused`, or `error` (it could not start, or
    /// its bundle does not verify).
    pub(super) status: &'static str,
    /// It had finished in an earlier batch and was not run again.
    pub(super) skipped: bool,
    pub(super) run_id: Option<String>,
    pub(super) error: Option<String>,
    pub(super) seconds: f64,
}

impl Outcome {
    pub(super) fn finished(&self) -> bool {
        self.status == "finished"
    }
}

fn status_word(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Finished => "finished",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
        RunStatus::Paused => "paused",
    }
}

/// What an earlier batch left for this line: with a bucket, only the bucket counts (a
/// folder left in a reused work folder is removed); else the bundle folder is looked at.
async fn look_for_earlier(
    dest: &Dest,
    id: &str,
    bundle: &Path,
) -> Result<Existing, tokio::task::JoinError> {
    match &dest.bucket {
        Some(bucket) => match existing_in_bucket(bucket, id).await {
            Ok(Existing::Redo | Existing::None) => {
                // A folder a killed batch left in a reused work folder is not evidence of
                // anything: only the bucket counts.
                let _ = std::fs::remove_dir_all(bundle);
                Ok(Existing::None)
            }
            Ok(found) => Ok(found),
            Err(e) => Ok(Existing::Held(e)),
        },
        None => {
            let bundle = bundle.to_path_buf();
            tokio::task::spawn_blocking(move || existing(&bundle)).await
        }
    }
}

/// Add a run's bundle to the batch's `--ledger`, if it has one; the error, if it fails.
async fn add_to_ledger(dest: &Dest, bundle: &Path) -> Option<String> {
    let ledger = dest.ledger.clone()?;
    let bundle = bundle.to_path_buf();
    let added = tokio::task::spawn_blocking(move || ledger.add_run(&bundle)).await;
    match added {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e),
        Err(e) => Some(format!("cannot add the bundle to the ledger: {e}")),
    }
}

/// The agent spec a line runs: the file's, or with the line's `model` in its place.
fn agent_for<'a>(agent: &'a AgentSpec, model: Option<&str>) -> Cow<'a, AgentSpec> {
    match model {
        None => Cow::Borrowed(agent),
        Some(model) => {
            let mut a = agent.clone();
            a.model = model.to_owned();
            // Evidence keeps the spec that ran: with the override, not the file's text.
            a.source = None;
            Cow::Owned(a)
        }
    }
}

/// Run one line (or find it done), and say how it ended. `control` is the run's, a child
/// of the batch's: a stop signal cancels it.
pub(super) async fn run_one(
    job: Job,
    dest: Arc<Dest>,
    (backend, control): (Arc<Backend>, RunControl),
    durability: DurabilityArg,
) -> Outcome {
    let started = Instant::now();
    let bundle = dest.local.join(&job.id);
    let mut outcome = Outcome {
        line: job.line,
        id: job.id.clone(),
        status: "error",
        skipped: false,
        run_id: None,
        error: None,
        seconds: 0.0,
    };
    let look = look_for_earlier(&dest, &job.id, &bundle).await;
    match look {
        Ok(Existing::None) => {}
        Ok(Existing::Done { status, run_id }) => {
            outcome.status = status;
            outcome.skipped = true;
            outcome.run_id = Some(run_id);
            // Killed between the end of this run and its add: added now (an add of a
            // bundle the ledger holds changes nothing). A bucket's bundles were added
            // before their upload.
            if dest.bucket.is_none()
                && let Some(e) = add_to_ledger(&dest, &bundle).await
            {
                outcome.status = "error";
                outcome.error = Some(e);
            }
            return outcome;
        }
        Ok(Existing::Redo) => match move_aside(&dest.local, &job.id, &bundle) {
            Ok(to) => tracing::info!(
                id = %job.id,
                aside = %to.display(),
                "moved an incomplete bundle aside; running again"
            ),
            Err(e) => {
                outcome.error = Some(e);
                return outcome;
            }
        },
        Ok(Existing::Held(e)) => {
            outcome.error = Some(e);
            return outcome;
        }
        Err(e) => {
            outcome.error = Some(format!("cannot look at the bundle: {e}"));
            return outcome;
        }
    }
    let agent = agent_for(&job.agent, job.model.as_deref());
    let mut spec = RunSpec::new(job.prompt, &bundle)
        .inputs(job.inputs)
        .durability(durability.into());
    if let Some(dir) = job.host_dir {
        spec = spec.host_dir(dir);
    }
    if control.is_cancelled() {
        // The batch was stopped before this run began: nothing of it is written, and a
        // restart runs it.
        outcome.status = "cancelled";
        outcome.error = Some("not started: the batch was stopped".to_string());
        return outcome;
    }
    match backend.execute(&control, &agent, &spec).await {
        Ok(result) => {
            outcome.status = status_word(result.status());
            outcome.run_id = Some(result.run_id.clone());
            outcome.error = result.error().map(str::to_string);
            // A bundle that does not verify is no result. The verdict and the run's
            // summary go to the run index, for a listing of DEST.
            let (check, id) = (bundle.clone(), job.id.clone());
            let entry = tokio::task::spawn_blocking(move || {
                provrun_view::IndexEntry::for_bundle(&check, &id, "", "", None)
            })
            .await;
            if let (Ok(entry), Some(index)) = (&entry, &dest.index)
                && let Err(e) = index.append(entry)
            {
                tracing::warn!(id = %job.id, "the run could not be written to the run index: {e}");
            }
            let fails = |e: &provrun_view::IndexEntry| {
                e.summary.as_ref().is_none_or(|s| s.verdict == "fails")
            };
            if !entry.as_ref().is_ok_and(|e| !fails(e)) {
                outcome.status = "error";
                outcome.error = Some("the bundle does not verify".to_string());
            } else if result.status() == RunStatus::Cancelled {
                // Stopped by a signal: a restart redoes it, so a bucket gets nothing.
                outcome.error = Some("the batch was stopped; a restart runs it again".into());
            } else if result.status() != RunStatus::Paused
                && let Some(e) = add_to_ledger(&dest, &bundle).await
            {
                outcome.status = "error";
                outcome.error = Some(e);
            } else if let Some(bucket) = &dest.bucket
                && let Err(e) = bucket.put(&job.id, &bundle).await
            {
                outcome.status = "error";
                outcome.error = Some(e.to_string());
            }
        }
        Err(e) => outcome.error = Some(e.to_string()),
    }
    if dest.bucket.is_some() {
        // Uploaded, or not worth keeping: the bucket is the only place that counts.
        let _ = std::fs::remove_dir_all(&bundle);
    }
    outcome.seconds = started.elapsed().as_secs_f64();
    outcome
}
