//! The one error type of the capture crate.

use std::path::PathBuf;

/// What went wrong while capturing a foreign loop's run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// Writing the bundle failed (its folder, its log, a blob).
    #[error("{0}")]
    Evidence(#[from] provrun_evidence::EvidenceError),
    /// An input could not be staged, or an output could not be written.
    #[error("{0}")]
    Sandbox(#[from] provrun_sandbox::SandboxError),
    /// An input could not be staged; the half-made bundle was removed.
    #[error("cannot stage input `{}`: {message}", path.display())]
    Input {
        /// The input the caller named (the first one when it is not known which).
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// An output was named by an absolute path outside `/output` (outputs are `/output/…`
    /// or relative to `output/`). Nothing was written.
    #[error(
        "`{path}` is not an output: name an output `/output/NAME` or `NAME` (relative to \
         output/); /input is read-only and /scratch is not kept in the bundle"
    )]
    NotAnOutput {
        /// The path given.
        path: String,
    },
    /// A value the caller handed over cannot be recorded (e.g. a tool schema or a parsed
    /// body that is not representable as canonical JSON).
    #[error("cannot record {what}: {message}")]
    Unrecordable {
        /// What was being recorded.
        what: String,
        /// Why.
        message: String,
    },
    /// An imported trace is not what its format says: not JSON, not the expected shape,
    /// or too large. Nothing was written.
    #[error("the {format} trace is invalid at {at}: {message}")]
    Trace {
        /// The trace format (e.g. `pydantic-ai`).
        format: &'static str,
        /// Where in the trace, as a JSON pointer (`/3/parts/0`; empty for the whole).
        at: String,
        /// What is wrong.
        message: String,
    },
}
