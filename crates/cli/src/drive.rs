//! Running one run's work (`run`, `resume`, `replay`) on a runtime of its own, with the
//! progress display on a terminal and SIGINT, SIGTERM and SIGHUP cancelling it cleanly
//! ([`crate::signals::StopSignals`]).

use std::future::Future;

use provrun_agent::RunControl;

use crate::progress::Progress;
use crate::{EXIT_CANCELLED, EXIT_FAILED, fail};

/// What [`drive`] hands back: the work's result, and the exit code of a cancelled run —
/// 128 + the first stop signal's number (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
pub(crate) struct Driven<T> {
    pub(crate) out: T,
    pub(crate) cancelled_code: u8,
}

/// Run `fut` on a fresh runtime, cancelling `control` on SIGINT, SIGTERM or SIGHUP (a
/// second one stops at once), with progress on a terminal.
pub(crate) fn drive<T>(
    control: &RunControl,
    fut: impl Future<Output = T>,
) -> Result<Driven<T>, u8> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(EXIT_FAILED, format!("cannot start the runtime: {e}")))?;
    let out = runtime.block_on(async {
        let progress = Progress::start(control);
        let watcher = control.clone();
        // The first stop signal cancels the run cleanly; a second one stops at once. The
        // handlers are registered here, before the run starts.
        let signals = crate::signals::StopSignals::watch(
            move |_| watcher.cancel(),
            "the bundle may be unfinished",
        );
        let out = fut.await;
        progress.stop();
        let cancelled_code = signals.as_ref().map_or(
            EXIT_CANCELLED,
            crate::signals::StopSignals::cancelled_exit_code,
        );
        Driven {
            out,
            cancelled_code,
        }
    });
    // The bundle is finished by now. A sync tool that timed out may still be running on
    // the blocking pool; do not let it keep the process alive (dropping the runtime
    // would wait for it).
    runtime.shutdown_background();
    Ok(out)
}
