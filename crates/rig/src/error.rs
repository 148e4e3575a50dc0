//! The one error type of this crate.

use provrun_capture::CaptureError;

/// What went wrong while recording a rig run.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
    /// The capture underneath refused or failed to write (the bundle, a blob, an event).
    #[error("recording rig evidence failed: {0}")]
    Capture(#[from] CaptureError),
    /// A rig value could not be turned into JSON for the record.
    #[error("recording rig evidence failed: {what} is not representable as JSON: {message}")]
    Unrecordable {
        /// What could not be recorded.
        what: String,
        /// The serialiser's message.
        message: String,
    },
}
