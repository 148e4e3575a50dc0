//! What goes wrong: [`ServeError`], why a server could not start or stopped, and
//! [`ApiError`], the typed refusal of one request (an HTTP status, a code a client can
//! match, a message a person can read), sent as `{"error": {"code", "message"}}`.

use std::path::PathBuf;

use hyper::StatusCode;

/// Why a server could not start, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration cannot work (no token on a public address, no agents folder …).
    #[error("{0}")]
    Config(String),
    /// The address could not be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The store cannot be used.
    #[error("the store: {0}")]
    Store(#[from] provrun_store::StoreError),
    /// An object replicas share in a bucket store (docs/serve.md, "Replicas") is not one a
    /// server writes.
    #[error("{0}")]
    Shared(String),
    /// A file the server keeps (its work folder, the index) cannot be read or written.
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// A request refused: the status, a stable code, and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A short code that names the refusal (`bad_json`, `unknown_agent`, …); stable.
    pub code: &'static str,
    /// What a person reads.
    pub message: String,
    /// Seconds after which to try again (429 and 503 only).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A refusal with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 409.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 413.
    pub fn too_large(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
    }

    /// 500: the server's own failure (logged; the message says what failed).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// Ask the client to try again after `seconds`.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The body: `{"error": {"code", "message"}}`.
    pub fn body(&self) -> String {
        serde_json::json!({"error": {"code": self.code, "message": self.message}}).to_string()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}
