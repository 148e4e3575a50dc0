//! The recorder: appends hash-chained event lines to `events.jsonl`, stores blobs,
//! stages inputs, finishes the bundle, and makes it all durable per a [`Durability`]
//! policy.
//!
//! One concern per module: [`durability`] holds the policy and the [`Durable`] future,
//! `commit` the process-wide group-commit engine that makes writes durable, `create`
//! the making of a new bundle, `append` the writing of event lines, `blobs` the blob
//! store, `files` the digesting of inputs and outputs, `finish` the end of a run,
//! `recover` reopening a bundle after a pause or a crash, and `declare` the tools'
//! restricted handle. This module holds the recorder's state and its accessors.

mod append;
mod blobs;
mod commit;
mod create;
mod declare;
pub(crate) mod durability;
mod files;
mod finish;
mod guard;
mod layout;
mod observe;
mod pending;
mod recover;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::Value;
use sha2::Sha256;

use crate::error::{EvidenceError, Result};
use crate::event::{FileRecord, Payload};
use crate::pack::PackWriter;

use commit::SyncShared;
pub use create::CreateOptions;
pub use declare::Declarer;
pub use durability::{Durability, Durable};
pub use finish::{Finished, RunEnd};
use guard::lock;
pub use layout::BlobLayout;
pub(crate) use layout::{BLOB_STORE_KEY, PACK_FILE};
pub use observe::RecordObserver;
pub use pending::PendingBundle;

/// Canonical JSON of tool arguments or results longer than this (16 KiB) goes to a blob
/// when passed through [`Recorder::tool_value`].
pub const INLINE_LIMIT: usize = 16 * 1024;

pub(crate) use crate::names::{EVENTS_FILE, STATEMENT_FILE};

// ---------------------------------------------------------------------------------------
// The recorder.

/// Facts gathered while recording, for the statement.
#[derive(Debug, Clone, Default)]
struct Facts {
    /// The statement format `run_started` declares (see [`crate::statement`]).
    statement_format: u64,
    /// The chain scheme `run_started` declares (see [`crate::chain`]).
    chain: u64,
    /// The run's secret, which chain 3 salts each string's commitment from
    /// ([`crate::salt`]); `None` for a log of an earlier chain.
    secret: Option<crate::salt::Salt>,
    builder: String,
    agent_spec_digest: String,
    started_on: String,
    inputs: Vec<FileRecord>,
}

struct LogState {
    /// The log, open for appending and locked ([`crate::BundleLock`]); shared with the
    /// committer (which syncs it), so a run holds one descriptor for it, not two.
    file: Arc<File>,
    next_seq: u64,
    head: Option<String>,
    hasher: Sha256,
    bytes: u64,
    closed: Option<&'static str>,
    broken: Option<String>,
    last_ts: String,
    /// The time events are stamped with instead of the system clock (an importer's), when
    /// set.
    clock: Option<SystemTime>,
    facts: Facts,
}

struct Inner {
    root: PathBuf,
    run_id: String,
    durability: Durability,
    layout: BlobLayout,
    /// The pack's writer (layout 2).
    pack: Option<Mutex<PackWriter>>,
    log: Mutex<LogState>,
    /// Sync bookkeeping; `None` under `Flush`, which never syncs.
    sync: Option<Arc<SyncShared>>,
    /// Told of each blob and event written, when set ([`Recorder::observe`]).
    observer: std::sync::OnceLock<Arc<dyn RecordObserver>>,
}

impl Drop for Inner {
    /// The last clone of a recorder is gone, finished or not: the writer is done, so its
    /// lock goes now. Closing the descriptor alone would not do: a child process forked
    /// by another thread holds a copy of it until it execs, and the lock lives as long as
    /// any copy, so a `reopen` right after would be refused as if another writer held it.
    fn drop(&mut self) {
        let log = self.log.get_mut().unwrap_or_else(|e| e.into_inner());
        crate::lock::release(&log.file);
    }
}

/// Appends evidence to one bundle. Cheap to clone (an `Arc`); clones share one log, and
/// concurrent appends from any number of threads or tasks get one total order.
///
/// The log is append-only: a line, once written, is never rewritten.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("root", &self.inner.root)
            .field("run_id", &self.inner.run_id)
            .field("durability", &self.inner.durability)
            .finish()
    }
}

pub(crate) fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// A time as an event's `ts`: RFC 3339, UTC, milliseconds.
fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

fn payload_value<P: Payload>(p: &P) -> Result<Value> {
    serde_json::to_value(p).map_err(|source| EvidenceError::Payload {
        kind: P::TYPE.as_str(),
        source,
    })
}

impl Recorder {
    #[allow(clippy::too_many_arguments)]
    fn with_state(
        root: PathBuf,
        run_id: String,
        durability: Durability,
        file: File,
        next_seq: u64,
        head: Option<String>,
        hasher: Sha256,
        bytes: u64,
        facts: Facts,
        layout: BlobLayout,
        pack: Option<PackWriter>,
    ) -> Result<Recorder> {
        let file = Arc::new(file);
        let sync = if durability.syncs() {
            let log_path = root.join(EVENTS_FILE);
            Some(
                SyncShared::new(Arc::clone(&file), &log_path)
                    .map_err(|e| EvidenceError::io("stat", &log_path, e))?,
            )
        } else {
            None
        };
        Ok(Recorder {
            inner: Arc::new(Inner {
                root,
                run_id,
                durability,
                layout,
                pack: pack.map(Mutex::new),
                log: Mutex::new(LogState {
                    file,
                    next_seq,
                    head,
                    hasher,
                    bytes,
                    closed: None,
                    broken: None,
                    last_ts: String::new(),
                    clock: None,
                    facts,
                }),
                sync,
                observer: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Tell `observer` of every blob and event written from now on, by this recorder and
    /// its clones. A recorder takes one observer; a second is refused (returned).
    ///
    /// # Errors
    ///
    /// Gives `observer` back when the recorder already has one.
    pub fn observe(
        &self,
        observer: Arc<dyn RecordObserver>,
    ) -> std::result::Result<(), Arc<dyn RecordObserver>> {
        self.inner.observer.set(observer)
    }

    pub(super) fn observer(&self) -> Option<&Arc<dyn RecordObserver>> {
        self.inner.observer.get()
    }

    /// The bundle directory.
    pub fn bundle_dir(&self) -> &Path {
        &self.inner.root
    }

    /// Where staged inputs go: `<bundle>/input`.
    pub fn input_dir(&self) -> PathBuf {
        self.inner.root.join("input")
    }

    /// Where outputs go: `<bundle>/output`.
    pub fn output_dir(&self) -> PathBuf {
        self.inner.root.join("output")
    }

    /// The run id written in every event.
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// The durability policy.
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }

    /// How this bundle stores its blobs.
    pub fn blob_layout(&self) -> BlobLayout {
        self.inner.layout
    }

    /// Number of events written so far (the next event's seq).
    pub fn event_count(&self) -> u64 {
        lock(&self.inner.log).next_seq
    }

    /// Give back the descriptors the recorder can do without while the run waits (its
    /// pack's; the next blob written opens it again): a waiting run then holds one, its
    /// locked log. Cheap; call it before waiting on something slow (a model).
    pub fn release_handles(&self) {
        if let Some(pack) = &self.inner.pack {
            lock(pack).park();
        }
    }

    /// Stamp the events written from now on with `at` instead of the system clock
    /// (`None`: the clock again). For an importer whose run happened earlier and whose
    /// record says when: each event's `ts` then says when the run did it, not when the
    /// line was written. The statement's `startedOn` and `finishedOn` follow, since they
    /// are the `ts` of `run_started` and `run_finished`.
    pub fn set_clock(&self, at: Option<SystemTime>) {
        lock(&self.inner.log).clock = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BundleLock, RunStarted};

    /// A copy of the log's descriptor that outlives the recorder (what a child forked by
    /// another thread holds until it execs) does not keep the bundle locked.
    #[test]
    fn the_last_recorder_gone_frees_the_bundle_whoever_holds_a_copy_of_its_log() {
        let (parent, dir, started) = fresh("drop");
        let rec = Recorder::create(&dir, "r", Durability::PerEvent, &started).unwrap();
        let copy = lock(&rec.inner.log).file.try_clone().unwrap();
        let again = rec.clone();
        drop(rec);
        // A clone still writes: the bundle is still held.
        assert!(BundleLock::acquire(&dir).is_err());
        drop(again);
        let held = BundleLock::acquire(&dir).expect("the writer is gone");
        drop((held, copy));
        std::fs::remove_dir_all(&parent).unwrap();
    }

    /// An empty folder for one test (named by `tag`, this process and thread), the
    /// bundle path inside it, and a `run_started` to create the bundle with.
    fn fresh(tag: &str) -> (PathBuf, PathBuf, RunStarted) {
        let parent = std::env::temp_dir().join(format!(
            "provrun-recorder-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&parent);
        std::fs::create_dir_all(&parent).unwrap();
        let dir = parent.join("bundle");
        let started = RunStarted {
            builder: "provrun/test".into(),
            agent_spec_digest: "a".repeat(64),
            agent: "a".into(),
            model: "test".into(),
            tools: Vec::new(),
            limits: serde_json::json!({}),
            details: Value::Null,
        };
        (parent, dir, started)
    }

    /// The descriptors of this process open on files under `dir`.
    fn descriptors_under(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter(|t| t.starts_with(dir))
            .collect()
    }

    /// Between two writes, once its handles are released, a recorder holds one
    /// descriptor: its locked log. The next blob opens the pack again.
    #[test]
    fn a_released_recorder_holds_only_its_log() {
        let (parent, dir, started) = fresh("release");
        let rec = Recorder::create(&dir, "r", Durability::Flush, &started).unwrap();
        rec.put_blob(b"first", "text/plain").unwrap();
        assert_eq!(descriptors_under(&dir).len(), 2, "the log and the pack");
        rec.release_handles();
        assert_eq!(
            descriptors_under(&dir),
            vec![dir.join(EVENTS_FILE)],
            "only the locked log"
        );
        assert!(BundleLock::acquire(&dir).is_err(), "still held");
        let blob = rec.put_blob(b"second", "text/plain").unwrap();
        assert_eq!(blob.size, 6);
        drop(rec);
        std::fs::remove_dir_all(&parent).unwrap();
    }
}
