//! [`WrapError`]: what can go wrong when wrapping a program.

/// What went wrong. [`WrapError::SetUp`] (the CLI exits 2) and [`WrapError::Stopped`]
/// (128 + the signal) come before anything is written; the others come after the bundle
/// was created.
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    /// The command line or the machine does not allow the run (a missing program, a path
    /// the sandbox cannot show, overlapping folders, a missing confinement layer, a bad
    /// host or URL): nothing was written.
    #[error("{0}")]
    SetUp(String),
    /// The bundle could not be written.
    #[error("the evidence cannot be written: {0}")]
    Capture(#[from] provrun_capture::CaptureError),
    /// The bundle could not be finished.
    #[error("the evidence cannot be finished: {0}")]
    Evidence(#[from] provrun_evidence::EvidenceError),
    /// The program could not be started or watched.
    #[error("the program: {0}")]
    Program(String),
    /// A stop signal arrived while the run was being set up: the program was not started
    /// and nothing was written.
    #[error("stopped by {} before the program started; nothing was written", .0.name())]
    Stopped(provrun_sandbox::ProgramSignal),
}

impl WrapError {
    /// Whether nothing was written (a usage or set-up error, or a stop before the start).
    pub fn nothing_written(&self) -> bool {
        matches!(self, WrapError::SetUp(_) | WrapError::Stopped(_))
    }
}
