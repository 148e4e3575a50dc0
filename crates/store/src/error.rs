//! The one error type of the store crate.

/// What went wrong finding, opening, listing or writing a bundle.
///
/// Every message names the bundle or place as the user gave it (a path or a URL).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Nothing is at the named path or URL.
    #[error("no bundle at `{0}`")]
    NotFound(String),
    /// The source exists but is not a bundle (a folder without `events.jsonl`).
    #[error("`{0}` is not a bundle: it has no events.jsonl")]
    NotABundle(String),
    /// A command that changes a bundle was given one it cannot change in place.
    #[error("`{name}` cannot be changed in place: {reason}")]
    ReadOnly {
        /// The bundle as the user named it.
        name: String,
        /// Why, and what to do instead.
        reason: &'static str,
    },
    /// A URL that is not one, names a scheme this build does not speak, or has a path
    /// that is no object path.
    #[error("`{url}`: {message}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// A bundle id that is not a plain name (ids become file and object names).
    #[error(
        "id `{0}` is not a safe name: use 1 to 128 of A-Z a-z 0-9 . _ - (not starting with . or -)"
    )]
    BadId(String),
    /// A local file or folder could not be read or written.
    #[error("cannot {action} `{name}`: {source}")]
    Io {
        /// What was being done (`read`, `write`, `make`, ...).
        action: &'static str,
        /// The path, as a person reads it.
        name: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Object storage refused or failed a request.
    #[error("cannot {action} `{name}`: {source}")]
    Object {
        /// What was being done (`read`, `write to`, `upload`, `list`, ...).
        action: &'static str,
        /// The object or prefix, as a URL.
        name: String,
        /// The cause.
        source: Box<object_store::Error>,
    },
    /// A tar that is not one, or whose entry would land outside its bundle.
    #[error("`{name}`: {message}")]
    Tar {
        /// The tar as the user named it.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A background task of the async API ended without an answer (it panicked or the
    /// runtime is shutting down).
    #[error("{0}")]
    Task(String),
}

impl StoreError {
    /// An I/O error while doing `action` on `name`.
    pub(crate) fn io(
        action: &'static str,
        name: impl Into<String>,
        source: std::io::Error,
    ) -> Self {
        StoreError::Io {
            action,
            name: name.into(),
            source,
        }
    }

    /// An object storage error while doing `action` on `name`.
    pub(crate) fn object(
        action: &'static str,
        name: impl Into<String>,
        source: object_store::Error,
    ) -> Self {
        StoreError::Object {
            action,
            name: name.into(),
            source: Box::new(source),
        }
    }

    /// Whether the error means nothing is there (rather than that it could not be read).
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound(_))
    }
}

/// `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
