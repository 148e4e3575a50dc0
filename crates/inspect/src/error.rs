//! The one error type of the inspect crate: writing a log, or reading one back.

/// What went wrong writing an Inspect log, or reading one into bundles.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The log file cannot be written.
    #[error("cannot write `{path}`: {message}")]
    Write {
        /// The log's path.
        path: String,
        /// Why.
        message: String,
    },
    /// No bundle was given.
    #[error("no bundle to export")]
    Empty,
    /// The log cannot be read (it does not exist, or reading it failed).
    #[error("cannot read `{path}`: {message}")]
    Read {
        /// The log's path.
        path: String,
        /// Why.
        message: String,
    },
    /// The file is not an Inspect log: not a zip, no samples, a member too large, or a
    /// sample that is not the JSON object Inspect writes. Nothing was imported.
    #[error("not an Inspect log: {0}")]
    NotInspect(String),
    /// Writing a bundle failed.
    #[error("{0}")]
    Capture(#[from] provrun_capture::CaptureError),
}
