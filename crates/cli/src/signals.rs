//! Stopping cleanly on a signal: SIGINT (Ctrl-C), SIGTERM (what Kubernetes, Docker and
//! systemd send to stop a process) and SIGHUP (a closed terminal) all ask provrun to stop
//! the way Ctrl-C always has: the run is cancelled at its next step, its bundle finished as
//! `cancelled`, and the process exits with 128 + the signal's number (130, 143, 129). A
//! second signal stops the process at once, with the same code.
//!
//! [`StopSignals`] is the one place that listens: `run`, `resume`, `replay` and `batch`
//! use [`StopSignals::watch`]; `wrap`, which passes the signals on to the program it runs
//! and exits with the same 128 + the signal, uses [`StopSignals::forward`], which hands it
//! every signal instead of ending the process at the second. Either registers the handlers
//! when called (inside a Tokio runtime), so no signal between that call and the work it
//! guards is lost.

use std::sync::{Arc, OnceLock};

use tokio::signal::unix::{SignalKind, signal};

/// A signal that asks provrun to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (2): Ctrl-C.
    Interrupt,
    /// SIGTERM (15): a service manager or container runtime stopping the process.
    Terminate,
    /// SIGHUP (1): the terminal went away.
    Hangup,
}

impl StopSignal {
    /// Every stop signal, in the order they are listened for.
    pub const ALL: [StopSignal; 3] = [
        StopSignal::Interrupt,
        StopSignal::Terminate,
        StopSignal::Hangup,
    ];

    /// The signal's number (the same on every Unix).
    pub fn number(self) -> i32 {
        match self {
            StopSignal::Interrupt => 2,
            StopSignal::Terminate => 15,
            StopSignal::Hangup => 1,
        }
    }

    /// Its name, `SIGINT`, `SIGTERM` or `SIGHUP`.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        }
    }

    /// The exit code of a command it stopped: 128 + its number (130, 143, 129), as a
    /// shell reports a process the signal killed.
    pub fn exit_code(self) -> u8 {
        u8::try_from(128 + self.number()).unwrap_or(crate::EXIT_CANCELLED)
    }

    fn kind(self) -> SignalKind {
        match self {
            StopSignal::Interrupt => SignalKind::interrupt(),
            StopSignal::Terminate => SignalKind::terminate(),
            StopSignal::Hangup => SignalKind::hangup(),
        }
    }
}

/// Listens for SIGINT, SIGTERM and SIGHUP from the moment it is made until it is dropped.
/// The first one calls the `on_stop` given to [`StopSignals::watch`] once; any later one
/// ends the process at once (exit 128 + its number) after one line on stderr.
pub struct StopSignals {
    first: Arc<OnceLock<StopSignal>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopSignals")
            .field("received", &self.received())
            .finish_non_exhaustive()
    }
}

impl StopSignals {
    /// Starts listening; must be called inside a Tokio runtime (with its I/O driver). The
    /// handlers are registered before it returns. At the first signal `on_stop` runs (on
    /// the runtime; it should only ask the work to stop, e.g. cancel a token); at a second
    /// one the process prints `provrun: stopped by SIGNAME; {if_again}` and exits with
    /// that signal's code, whatever is still running.
    ///
    /// # Errors
    ///
    /// The `io::Error` of registering a signal handler (e.g. outside a Tokio runtime with
    /// its I/O driver).
    pub fn watch<F>(on_stop: F, if_again: &'static str) -> std::io::Result<StopSignals>
    where
        F: FnOnce(StopSignal) + Send + 'static,
    {
        let on_stop = std::sync::Mutex::new(Some(on_stop));
        Self::listen(Arc::new(move |which: StopSignal, first: bool| {
            if !first {
                eprintln!("\nprovrun: stopped by {}; {if_again}", which.name());
                std::process::exit(i32::from(which.exit_code()));
            }
            let taken = on_stop.lock().ok().and_then(|mut f| f.take());
            if let Some(f) = taken {
                f(which);
            }
        }))
    }

    /// Listens as [`StopSignals::watch`] does, but hands every signal to `on_signal` —
    /// the first (`first` true) and each later one — and never ends the process itself:
    /// for a command that passes the signals on to a program it runs (`wrap`), which
    /// decides what a second one means. [`StopSignals::received`] is still the first.
    ///
    /// # Errors
    ///
    /// As [`StopSignals::watch`].
    pub fn forward<F>(on_signal: F) -> std::io::Result<StopSignals>
    where
        F: Fn(StopSignal, bool) + Send + Sync + 'static,
    {
        Self::listen(Arc::new(on_signal))
    }

    /// Registers the handlers, each on a task of its own that calls `handle` with the
    /// signal and whether it is the first one received.
    fn listen(handle: Arc<dyn Fn(StopSignal, bool) + Send + Sync>) -> std::io::Result<StopSignals> {
        let first: Arc<OnceLock<StopSignal>> = Arc::new(OnceLock::new());
        let mut tasks = Vec::new();
        for which in StopSignal::ALL {
            let mut stream = signal(which.kind())?;
            let first = Arc::clone(&first);
            let handle = Arc::clone(&handle);
            tasks.push(tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    let is_first = first.set(which).is_ok();
                    handle(which, is_first);
                }
            }));
        }
        Ok(StopSignals { first, tasks })
    }

    /// The first stop signal received, if any.
    pub fn received(&self) -> Option<StopSignal> {
        self.first.get().copied()
    }

    /// The exit code of work these signals cancelled: the first signal's (130 for
    /// SIGINT, 143 for SIGTERM, 129 for SIGHUP), or 130 when none was received (the work
    /// was cancelled some other way).
    pub fn cancelled_exit_code(&self) -> u8 {
        self.received()
            .map_or(crate::EXIT_CANCELLED, StopSignal::exit_code)
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_128_plus_the_signal() {
        let codes: Vec<(&str, u8)> = StopSignal::ALL
            .iter()
            .map(|s| (s.name(), s.exit_code()))
            .collect();
        assert_eq!(codes, [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)]);
    }
}
