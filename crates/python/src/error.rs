//! The crate's one error type, [`BindingError`], and the Python exceptions it becomes.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::{PyErr, create_exception};

create_exception!(
    _core,
    EvidenceError,
    PyRuntimeError,
    "The evidence could not be written: the bundle's folder, its log, a blob or the statement."
);
create_exception!(
    _core,
    SandboxError,
    PyValueError,
    "The sandbox refused a request: a path outside /input, /output and /scratch, a write to \
     /input, a link, a limit. The message names the path and the rule."
);

/// What went wrong in a call from Python.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// Writing the bundle failed.
    #[error("{0}")]
    Capture(#[from] provrun_capture::CaptureError),
    /// Writing the bundle failed below the capture API (a `declared` event).
    #[error("{0}")]
    Evidence(#[from] provrun_evidence::EvidenceError),
    /// The sandbox refused the request.
    #[error("{0}")]
    Sandbox(#[from] provrun_sandbox::SandboxError),
    /// A value handed over as JSON text is not JSON, or not of the expected shape.
    #[error("{what} is not valid JSON of the expected shape: {message}")]
    Json {
        /// Which argument.
        what: &'static str,
        /// serde's message.
        message: String,
    },
    /// An argument that is not one of the values it may take.
    #[error("{0}")]
    Argument(String),
    /// The run was finished; nothing more can be recorded into it.
    #[error("the run `{0}` is finished: nothing more can be recorded into its bundle")]
    Finished(String),
}

impl From<BindingError> for PyErr {
    fn from(e: BindingError) -> PyErr {
        use provrun_capture::CaptureError as C;
        let message = e.to_string();
        match e {
            BindingError::Sandbox(_)
            | BindingError::Capture(C::Sandbox(_) | C::Input { .. } | C::NotAnOutput { .. }) => {
                SandboxError::new_err(message)
            }
            BindingError::Json { .. } | BindingError::Argument(_) => PyValueError::new_err(message),
            _ => EvidenceError::new_err(message),
        }
    }
}

/// Parse `text`, the JSON of argument `what`.
pub(crate) fn json(what: &'static str, text: &str) -> Result<serde_json::Value, BindingError> {
    serde_json::from_str(text).map_err(|e| BindingError::Json {
        what,
        message: e.to_string(),
    })
}

/// `value` as JSON text.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}
