//! A test-only view of every sync the recorder makes (feature `sync-probe`), so that a
//! test can rebuild what a power loss would leave at any instant: the bytes of the log
//! and the files that had reached stable storage by then.
//!
//! Without the feature this module is absent and the recorder's sync calls report to
//! nothing: the hot path is the same code either way.

use std::path::PathBuf;
use std::sync::OnceLock;

/// One completed sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncPoint {
    /// `fdatasync` of a bundle's `events.jsonl` returned; its first `len` bytes (every
    /// byte written before the sync began) are on stable storage.
    Log {
        /// Path of the log.
        path: PathBuf,
        /// Bytes written to the log before the sync began.
        len: u64,
    },
    /// `fdatasync` of a file's data returned: its content is durable, its name only
    /// once its directory has been synced after this.
    File {
        /// The file's final path (for an atomic write: the name it is renamed to).
        path: PathBuf,
    },
    /// `fsync` of a directory returned: the names in it are durable.
    Dir {
        /// The directory.
        path: PathBuf,
    },
}

type Observer = Box<dyn Fn(SyncPoint) + Send + Sync>;

static OBSERVER: OnceLock<Observer> = OnceLock::new();

/// Install the process-wide observer, called on the syncing thread right after each
/// sync returns successfully. Returns `false` (and changes nothing) if one is installed.
pub fn set_observer(f: impl Fn(SyncPoint) + Send + Sync + 'static) -> bool {
    OBSERVER.set(Box::new(f)).is_ok()
}

/// Report a sync to the observer, if any.
pub(crate) fn report(point: SyncPoint) {
    if let Some(f) = OBSERVER.get() {
        f(point);
    }
}
