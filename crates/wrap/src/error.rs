//! [`WrapError`]: what can go wrong when wrapping a program.

/// What went wrong. [`WrapError::SetUp`] comes before anything is written (the CLI exits
/// 2); the others come after the bundle was created.
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
}

impl WrapError {
    /// Whether nothing was written (a usage or set-up error).
    pub fn nothing_written(&self) -> bool {
        matches!(self, WrapError::SetUp(_))
    }
}
