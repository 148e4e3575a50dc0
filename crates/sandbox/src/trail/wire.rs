//! The records the tracer writes to the runtime, one JSON object a line on its stdout:
//! `attached` (or `failed`) once, then `start` and `end` of each image, and `done` last.
//! Only the tracer writes them and only the runtime reads them; neither end is reachable
//! from inside the sandbox.

use serde::{Deserialize, Serialize};

/// One line from the tracer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub(crate) enum Record {
    /// The tracer holds the command; it may go on.
    Attached,
    /// The tracer could not attach: the command must not run untraced.
    Failed {
        /// Why.
        error: String,
    },
    /// An image began.
    Start(Start),
    /// An image ended.
    End {
        /// The image.
        id: u64,
        /// When, in microseconds since the epoch.
        t: u64,
        /// Its exit code, when it exited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        /// The signal that killed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        /// Replaced by an exec in the same process.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replaced: bool,
    },
    /// The digest of an image's executable, made after its `start` (which said
    /// `hash_pending`).
    Hash {
        /// The image.
        id: u64,
        /// SHA-256 hex of its executable's bytes.
        #[serde(default)]
        sha256: Option<String>,
        /// Its size.
        #[serde(default)]
        size: Option<u64>,
        /// Why it could not be hashed.
        #[serde(default)]
        error: Option<String>,
    },
    /// What has been counted so far (written when the tracer is idle and the counts
    /// changed, so that a trail read before its end knows them).
    Counts {
        /// Images not recorded (over the cap).
        not_recorded: u64,
        /// Execs in the trail.
        execs: u64,
        /// Processes forked in the trail.
        forks: u64,
    },
    /// The tracer's last line: every process it followed has ended (or it stopped).
    Done {
        /// Images not recorded (over the cap).
        not_recorded: u64,
        /// Execs in the trail.
        execs: u64,
        /// Processes forked in the trail.
        forks: u64,
        /// Why it stopped early, if it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The CPU time the tracer itself used, user and system, in milliseconds.
        #[serde(default)]
        cpu_ms: u64,
    },
}

/// The start of an image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Start {
    /// Its number in the trail.
    pub id: u64,
    /// The image that started it.
    #[serde(default)]
    pub parent: Option<u64>,
    /// The host's process id.
    pub pid: u32,
    /// Loaded by an exec (false: a fork that never execed).
    pub exec: bool,
    /// When, in microseconds since the epoch.
    pub t: u64,
    /// The arguments read (each already escaped, cut at the tracer's read limits).
    pub argv: Vec<String>,
    /// Arguments in all.
    pub argc: u64,
    /// Bytes of arguments in all.
    pub argv_bytes: u64,
    /// The executable's path.
    pub exe: String,
    /// SHA-256 hex of its bytes.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Its size.
    #[serde(default)]
    pub size: Option<u64>,
    /// Why it could not be hashed.
    #[serde(default)]
    pub exe_error: Option<String>,
    /// The working folder.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The host uid.
    #[serde(default)]
    pub uid: Option<u32>,
    /// Its digest comes later, in a `hash` record.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hash_pending: bool,
}
