//! The wrapped program's process trail in the bundle: each process its sandbox starts,
//! as the sandbox's tracer saw it, recorded as a `process_ran` event shortly after it
//! ends (a task drains the trail while the program runs), and the trail's end as
//! `trail_recorded` once the program has exited.

use std::time::Duration;

use provrun_capture::Capture;
use provrun_capture::processes::{program_owner, record_processes, trail_recorded};
use provrun_sandbox::{ProgramChild, TrailFeed};
use tokio::sync::watch;

use crate::error::WrapError;

/// How often the ended processes are recorded while the program runs.
const DRAIN_EVERY: Duration = Duration::from_millis(200);

/// The task recording a running program's ended processes.
#[derive(Debug)]
pub(crate) struct Streamer {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), WrapError>>,
}

impl Streamer {
    /// Starts recording `child`'s trail into `capture` as its processes end; `None` when
    /// it has no trail.
    pub(crate) fn start(capture: &Capture, child: &ProgramChild) -> Option<Streamer> {
        let feed = child.trail_feed()?;
        let (stop, mut stopped) = watch::channel(false);
        let capture = capture.clone();
        let task = tokio::spawn(async move {
            loop {
                let last = tokio::select! {
                    _ = stopped.changed() => true,
                    () = tokio::time::sleep(DRAIN_EVERY) => false,
                };
                drain(&capture, &feed).await?;
                if last {
                    return Ok(());
                }
            }
        });
        Some(Streamer { stop, task })
    }

    /// Stops it once the program has ended, after a last drain.
    pub(crate) async fn stop(self) -> Result<(), WrapError> {
        let _ = self.stop.send(true);
        self.task
            .await
            .map_err(|e| WrapError::Program(format!("recording the process trail: {e}")))?
    }
}

async fn drain(capture: &Capture, feed: &TrailFeed) -> Result<(), WrapError> {
    let ended = feed.take_finished();
    if !ended.is_empty() {
        record_processes(capture.recorder(), &program_owner(), &ended).await?;
    }
    Ok(())
}

/// Once the program has ended: the trail's last processes (those killed with the
/// sandbox, or still running when the tracer gave up) and `trail_recorded`.
pub(crate) async fn finish(
    capture: &Capture,
    child: &mut ProgramChild,
    streamer: Option<Streamer>,
) -> Result<(), WrapError> {
    if let Some(s) = streamer {
        s.stop().await?;
    }
    let Some(trail) = child.finish_trail() else {
        return Ok(());
    };
    let owner = program_owner();
    record_processes(capture.recorder(), &owner, &trail.processes).await?;
    capture
        .recorder()
        .record_async(&trail_recorded(&owner, &trail.summary))
        .await?;
    if !trail.summary.complete {
        tracing::warn!(
            error = trail.summary.error.as_deref().unwrap_or(""),
            "the program's process trail is incomplete"
        );
    }
    Ok(())
}
