//! A test-only record of the file operations an add makes, in order (feature
//! `sync-probe`), so a test can check that nothing a checkpoint names is left unsynced
//! when the checkpoint is renamed into place. Without the feature, [`note`] does nothing.

use std::path::PathBuf;

/// One file operation of an add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A file was written (not yet synced).
    Write(PathBuf),
    /// A file's data was synced.
    SyncFile(PathBuf),
    /// A folder was synced: the names in it are durable.
    SyncDir(PathBuf),
    /// A file was renamed.
    Rename {
        /// The old name.
        from: PathBuf,
        /// The new name.
        to: PathBuf,
    },
}

#[cfg(feature = "sync-probe")]
thread_local! {
    static OPS: std::cell::RefCell<Option<Vec<Op>>> = const { std::cell::RefCell::new(None) };
}

/// Run `f` and return what it returned with the operations it made on this thread.
#[cfg(feature = "sync-probe")]
pub fn record<T>(f: impl FnOnce() -> T) -> (T, Vec<Op>) {
    OPS.with(|o| *o.borrow_mut() = Some(Vec::new()));
    let out = f();
    let ops = OPS.with(|o| o.borrow_mut().take()).unwrap_or_default();
    (out, ops)
}

/// Note an operation (while [`record`] runs on this thread).
pub(crate) fn note(op: Op) {
    #[cfg(feature = "sync-probe")]
    OPS.with(|o| {
        if let Some(ops) = o.borrow_mut().as_mut() {
            ops.push(op);
        }
    });
    #[cfg(not(feature = "sync-probe"))]
    let _ = op;
}
