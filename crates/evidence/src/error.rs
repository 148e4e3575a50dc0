//! The crate's single error type.

use std::path::PathBuf;

/// Everything that can go wrong while recording evidence or reading a bundle.
///
/// `verify` does not return these for problems *in* a bundle: those become failed
/// checks in the [`crate::VerifyReport`]. These errors are for the recorder's own work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvidenceError {
    /// An I/O operation on a bundle file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done, e.g. "write".
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The bundle directory exists and is not empty.
    #[error("bundle directory {0} already exists and is not empty")]
    BundleNotEmpty(PathBuf),
    /// Another writer (a run or a resume, in this process or another) holds the bundle's
    /// lock; nothing was written.
    #[error(
        "bundle {} is in use by another writer{}; nothing was written",
        path.display(),
        holder.map(|p| format!(" (process {p})")).unwrap_or_default()
    )]
    BundleLocked {
        /// The bundle directory.
        path: PathBuf,
        /// The process holding the lock, where the system shows it.
        holder: Option<u32>,
    },
    /// A value could not be turned into canonical JSON (e.g. a non-finite number).
    #[error("cannot canonicalise JSON: {0}")]
    Canonical(String),
    /// A payload could not be serialised or deserialised.
    #[error("payload of a {kind} event: {source}")]
    Payload {
        /// The event type.
        kind: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// An event's payload does not fit its type: a field is missing or has the wrong
    /// type. Raised by the typed readers ([`crate::Event::typed`],
    /// [`crate::read_typed_events`]), never by a panic.
    #[error("event seq {seq}: {kind} payload, field `{field}`: {reason}")]
    MalformedPayload {
        /// The event's position in the log.
        seq: u64,
        /// The event type.
        kind: &'static str,
        /// The field at fault, as a path from the payload (`ok`, `tools[0].name`), or
        /// `(payload)` when the payload as a whole is wrong.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An event was recorded out of the order the format requires
    /// (e.g. a second `run_started`, or any event after `finish`).
    #[error("event out of order: {0}")]
    OutOfOrder(String),
    /// An earlier write or sync failed, so the log can no longer be trusted to be a
    /// valid chain; the recorder refuses all further appends.
    #[error("the evidence log is broken by an earlier failure: {0}")]
    LogBroken(String),
    /// A file in `input/` or `output/` cannot be recorded (a symlink, a device,
    /// a non-UTF-8 name, ...).
    #[error("cannot record {path}: {reason}")]
    UnsupportedFile {
        /// The offending path.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// A signing or verification key could not be read.
    #[error("bad key: {0}")]
    Key(String),
    /// The builder id an operator configured ([`crate::BUILDER_ID_ENV`]) is not an
    /// absolute URI.
    #[error(
        "PROVRUN_BUILDER_ID = `{0}` is not an absolute URI (e.g. a URL of your CI runner); \
         it names the builder in every new bundle's statement"
    )]
    BuilderId(String),
    /// A bundle does not hold the blob asked for.
    #[error("{path}: no blob {digest}")]
    BlobMissing {
        /// Where it was looked for (the pack, or the loose blob's path).
        path: PathBuf,
        /// The blob's SHA-256 hex.
        digest: String,
    },
    /// A redaction that cannot be made as asked (a selector that names nothing, text in
    /// a log chained by its bytes, a pattern that matches what must stay); nothing was
    /// written.
    #[error("cannot redact: {0}")]
    Redaction(String),
    /// An existing log to be reopened is not a valid chain.
    #[error("cannot reopen {path}: {reason}")]
    InvalidLog {
        /// The log file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl EvidenceError {
    /// Whether this is the process (`EMFILE`) or the system (`ENFILE`) running out of
    /// file descriptors: a file could not be opened, so nothing was written with it and
    /// the log (whose descriptor a writer keeps) is still whole; the run can end as
    /// failed with this as its error.
    pub fn is_out_of_descriptors(&self) -> bool {
        let EvidenceError::Io { source, .. } = self else {
            return false;
        };
        crate::fsutil::out_of_descriptors(source)
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        EvidenceError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = EvidenceError> = std::result::Result<T, E>;
