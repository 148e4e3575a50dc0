//! The signals a wrapped run passes on to its program: Ctrl-C (`SIGINT`), `SIGTERM` and
//! `SIGHUP`, caught while the program runs.
//!
//! This is wrap's own small listener; `provrun run` and `batch` handle their signals in
//! the CLI. It is kept to one function so that the two can later share one.

use provrun_sandbox::ProgramSignal;
use tokio::signal::unix::{SignalKind, signal};

/// The signals caught while the program runs.
pub struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signals")
    }
}

/// The name the evidence records for `signal`.
pub fn name(signal: ProgramSignal) -> &'static str {
    match signal {
        ProgramSignal::Interrupt => "SIGINT",
        ProgramSignal::Terminate => "SIGTERM",
        ProgramSignal::Hangup => "SIGHUP",
    }
}

impl Signals {
    /// Starts catching them (inside a tokio runtime). From here on they no longer end the
    /// runtime's process: the caller decides what each means.
    pub fn catch() -> std::io::Result<Signals> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal that arrives.
    pub async fn next(&mut self) -> ProgramSignal {
        tokio::select! {
            _ = self.int.recv() => ProgramSignal::Interrupt,
            _ = self.term.recv() => ProgramSignal::Terminate,
            _ = self.hup.recv() => ProgramSignal::Hangup,
        }
    }
}
