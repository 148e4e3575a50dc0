//! The crate's single error type.

use std::path::PathBuf;

/// Everything that can go wrong with a ledger, its notes and its proofs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// A file operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// There is no ledger at the path (no `ledger.json`).
    #[error("no ledger at {0} (no ledger.json; make one with `provrun ledger init`)")]
    NotALedger(PathBuf),
    /// `init` was given a folder that exists and is not empty.
    #[error("{0} exists and is not empty; give a new or empty folder")]
    NotEmpty(PathBuf),
    /// The ledger's `ledger.json` is not what `init` writes.
    #[error("{path}: {reason}")]
    BadConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A key or origin name that a note cannot carry.
    #[error(
        "`{0}` cannot name a log: it must be non-empty, at most 255 bytes, without spaces, \
         `+` or control characters (e.g. example.com/runs)"
    )]
    BadName(String),
    /// A key of an algorithm notes are not signed with here.
    #[error(
        "checkpoints are signed with Ed25519 keys, not {0} (make one with `provrun keygen FILE`)"
    )]
    KeyType(String),
    /// A key file could not be read.
    #[error("{0}")]
    Key(String),
    /// A verifier key that does not parse.
    #[error("bad verifier key: {0}")]
    BadVerifierKey(String),
    /// A note that is not a well-formed signed note.
    #[error("not a signed note: {0}")]
    BadNote(String),
    /// A note signature by the expected key that does not verify.
    #[error("the signature by {0} does not verify")]
    BadSignature(String),
    /// A note without a signature by the expected key.
    #[error("no signature by {0}")]
    NotSignedBy(String),
    /// A note text that is not a checkpoint.
    #[error("not a checkpoint: {0}")]
    BadCheckpoint(String),
    /// A tile or entry bundle that is missing, of the wrong size, or not what the tree
    /// holds.
    #[error("{0}")]
    BadTile(String),
    /// A bundle that may not be added (it does not verify, or never finished).
    #[error("{bundle}: {reason}")]
    BadBundle {
        /// The bundle as named.
        bundle: String,
        /// Why it is refused.
        reason: String,
    },
    /// The statement is not a leaf of the log.
    #[error("statement sha256:{0} is not in the ledger")]
    NotIncluded(String),
    /// A proof request or proof that does not fit the tree (`--from` out of range, an
    /// index past the end, a proof that does not verify).
    #[error("{0}")]
    BadProof(String),
    /// A ledger at a URL could not be read (or the URL cannot be used).
    #[error("{0}")]
    Remote(String),
    /// Another writer held the ledger for too long.
    #[error("the ledger {0} is held by another writer; gave up waiting")]
    Locked(PathBuf),
}

impl LedgerError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        LedgerError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
