//! The crate's one error type.

use std::time::Duration;

/// What went wrong reading a bundle or sending its spans.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The bundle's evidence could not be read (missing, unreadable, a broken chain).
    #[error("cannot read the bundle's evidence: {0}")]
    Evidence(#[from] provrun_evidence::EvidenceError),
    /// The bundle's log has no `run_started` event to make the run's span from.
    #[error("the bundle's log does not start with a run_started event")]
    NoRun,
    /// The OTLP settings (variables or flags) are not usable.
    #[error("OpenTelemetry export is misconfigured: {0}")]
    Config(String),
    /// The collector refused the spans or could not be reached.
    #[error("the OTLP collector did not take the spans: {0}")]
    Export(String),
    /// The collector did not answer within the flush bound.
    #[error("the OTLP collector did not answer within {0:?}")]
    TimedOut(Duration),
}
