//! The second pass: this shard's lines handed to at most `--concurrency` runs at once,
//! each outcome counted (and printed as a JSON line with `--json`), then the summary.

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use provrun_agent::{Backend, RunControl};
use serde_json::json;

use super::args::BatchArgs;
use super::check::{Checked, Line, resolve};
use super::dest::Dest;
use super::progress::{Progress, Tally};
use super::run::{Outcome, run_one};
use super::shard::Shard;
use crate::inert::inert;
use crate::signals::StopSignal;

/// How many failed runs the summary names (the rest are counted).
const FAILURES_NAMED: usize = 20;
/// What the summary needs, kept small whatever the number of runs.
#[derive(Default)]
pub(super) struct Summary {
    pub(super) finished: u64,
    pub(super) not_finished: u64,
    pub(super) skipped: u64,
    /// The first failures, for the table.
    pub(super) named: Vec<(String, String)>,
    /// This shard's lines.
    pub(super) ours: u64,
    /// The signal that stopped the batch before every line ran, if one did.
    pub(super) stopped_by: Option<StopSignal>,
    /// What the `--json` summary line names: the shard, the time taken, the destination.
    pub(super) shard: Option<Shard>,
    pub(super) seconds: f64,
    pub(super) out: String,
}

impl Summary {
    /// This shard's lines that did not run because the batch was stopped.
    pub(super) fn not_started(&self) -> u64 {
        self.ours.saturating_sub(self.finished + self.not_finished)
    }
}

fn json_line(o: &Outcome, dest: &Dest) -> serde_json::Value {
    json!({
        "type": "run",
        "line": o.line,
        "id": o.id,
        "status": o.status,
        "skipped": o.skipped,
        "bundle": dest.bundle_name(&o.id),
        "run_id": o.run_id,
        "error": o.error,
        "seconds": (o.seconds * 1000.0).round() / 1000.0,
    })
}

/// Where the lines come from and which of them are ours.
pub(super) struct Source<'a> {
    pub(super) runs: &'a Path,
    pub(super) base: &'a Path,
    pub(super) shard: Shard,
}

/// The second pass: hand this shard's lines to at most `--concurrency` runs at once.
pub(super) async fn drive(
    args: &BatchArgs,
    source: Source<'_>,
    checked: Checked,
    dest: &Arc<Dest>,
    (backend, stop): (&Arc<Backend>, &RunControl),
    registry: &provrun_tools::ToolRegistry,
) -> Result<Summary, String> {
    let Checked { mut agents, ours } = checked;
    let Source { runs, base, shard } = source;
    let started = Instant::now();
    let tally = Arc::new(Tally::default());
    let progress = Arc::new(Progress::start(&tally, ours, started));
    let summary = Arc::new(Mutex::new(Summary::default()));
    let concurrency = args.concurrency as usize;
    let slots = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let json = args.json;
    let durability = args.durability;

    let file =
        std::fs::File::open(runs).map_err(|e| format!("cannot read `{}`: {e}", runs.display()))?;
    for (i, text) in BufReader::new(file).lines().enumerate() {
        let number = i + 1;
        let text = text.map_err(|e| format!("{}: line {number}: {e}", runs.display()))?;
        if text.trim().is_empty() || !shard.owns(number) {
            continue;
        }
        // Checked in the first pass; a file changed since is refused here, line named.
        let job = serde_json::from_str::<Line>(&text)
            .map_err(|e| e.to_string())
            .and_then(|line| resolve(line, number, (base, &args.set), &mut agents, registry))
            .map_err(|e| {
                format!(
                    "{}: line {number} changed while the batch ran: {e}",
                    runs.display()
                )
            })?;
        // A stop signal: no more lines; the running runs are cancelled through `stop`.
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot,
            () = stop.cancelled() => break,
        };
        let Ok(slot) = slot else {
            break;
        };
        let control = RunControl::with_cancellation(&stop.cancellation_token());
        tally.running.fetch_add(1, Ordering::Relaxed);
        progress.update(&tally);
        let (dest, backend, tally, progress, summary) = (
            Arc::clone(dest),
            Arc::clone(backend),
            Arc::clone(&tally),
            Arc::clone(&progress),
            Arc::clone(&summary),
        );
        tokio::spawn(async move {
            let outcome = run_one(job, Arc::clone(&dest), (backend, control), durability).await;
            record(
                &outcome,
                &tally,
                &progress,
                &summary,
                json.then_some(&*dest),
            );
            drop(slot);
        });
    }
    // Every slot back: every run has ended.
    let _all = slots
        .acquire_many(u32::try_from(concurrency).unwrap_or(u32::MAX))
        .await
        .map_err(|e| e.to_string())?;
    progress.stop(&tally, ours, started);
    // The tasks may still hold their clones a moment after giving their slot back: take
    // the summary out rather than unwrap the Arc.
    let mut summary = std::mem::take(&mut *summary.lock().unwrap_or_else(|p| p.into_inner()));
    summary.ours = ours;
    summary.shard = Some(shard);
    summary.seconds = started.elapsed().as_secs_f64();
    summary.out = dest.name();
    Ok(summary)
}

/// Counts a run's outcome in the tally (and the progress line) and the summary, and with
/// `--json` (`json_to`) prints its line.
fn record(
    outcome: &Outcome,
    tally: &Tally,
    progress: &Progress,
    summary: &Mutex<Summary>,
    json_to: Option<&Dest>,
) {
    tally.running.fetch_sub(1, Ordering::Relaxed);
    tally.done.fetch_add(1, Ordering::Relaxed);
    if !outcome.finished() {
        tally.failed.fetch_add(1, Ordering::Relaxed);
    }
    if outcome.skipped {
        tally.skipped.fetch_add(1, Ordering::Relaxed);
    }
    progress.update(tally);
    let mut s = summary.lock().unwrap_or_else(|p| p.into_inner());
    if outcome.finished() {
        s.finished += 1;
    } else {
        s.not_finished += 1;
        if s.named.len() < FAILURES_NAMED {
            let why = outcome.error.clone().unwrap_or_default();
            s.named.push((
                outcome.id.clone(),
                format!(
                    "{}{}{why}",
                    outcome.status,
                    if why.is_empty() { "" } else { ": " }
                ),
            ));
        }
    }
    s.skipped += u64::from(outcome.skipped);
    if let Some(dest) = json_to {
        let line = json_line(outcome, dest);
        // One line per write, under the summary's lock: lines never interleave.
        let _ = writeln!(std::io::stdout().lock(), "{line}");
    }
}

/// Prints the `--json` summary line of this shard's runs.
pub(super) fn print_summary_line(summary: &Summary) {
    let secs = summary.seconds;
    let ran = summary.finished + summary.not_finished - summary.skipped;
    let mut line = json!({
        "type": "summary",
        "shard": summary.shard.map(|s| s.to_string()),
        "runs": summary.finished + summary.not_finished,
        "finished": summary.finished,
        "not_finished": summary.not_finished,
        "skipped": summary.skipped,
        "ran": ran,
        "seconds": (secs * 1000.0).round() / 1000.0,
        "runs_per_second": if secs > 0.0 { ((ran as f64 / secs) * 10.0).round() / 10.0 } else { 0.0 },
        "out": summary.out,
    });
    if let Some(signal) = summary.stopped_by {
        // Added with stop signals: present only when one stopped the batch.
        line["stopped_by"] = json!(signal.name());
        line["not_started"] = json!(summary.not_started());
    }
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

pub(super) fn print_table(s: &Summary, runs: &Path, dest: &Dest, shard: Shard) {
    let total = s.finished + s.not_finished;
    out!(
        "batch {} -> {} (shard {shard})",
        inert(&runs.display().to_string()),
        inert(&dest.name())
    );
    out!("  {:<34} {:>8}", "finished", s.finished);
    out!("  {:<34} {:>8}", "not finished", s.not_finished);
    out!("  {:<34} {:>8}", "total", total);
    out!(
        "  {:<34} {:>8}",
        "of these, done before (not rerun)",
        s.skipped
    );
    if let Some(signal) = s.stopped_by {
        out!(
            "  {:<34} {:>8}",
            format!("not started ({} stopped it)", signal.name()),
            s.not_started()
        );
    }
    if !s.named.is_empty() {
        out!("not finished:");
        for (id, why) in &s.named {
            out!("  {}  {}", inert(id), inert(why));
        }
        if s.not_finished > s.named.len() as u64 {
            out!("  … and {} more", s.not_finished - s.named.len() as u64);
        }
    }
}
