//! The recorder: appends hash-chained event lines to `events.jsonl`, stores blobs,
//! stages inputs, finishes the bundle, and makes it all durable per a [`Durability`]
//! policy.

use std::fs::{self, File, OpenOptions};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::SystemTime;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::canonical::{to_canonical_string, write_canonical, write_canonical_str};
use crate::error::{EvidenceError, Result};
use crate::event::{
    BlobRef, Confidence, Declared, Digest, EventType, FORMAT_VERSION, FileRecord, InputStaged,
    OutputProduced, Payload, RunFinished, RunStarted, RunStatus,
};
use crate::fsutil::{self, sha256_hex, sync_dir, walk_files, write_atomic};
use crate::lock::BundleLock;
use crate::log::{parse_line, scan_log};
use crate::outputs::OutputPolicy;
use crate::pack::PackWriter;
use crate::statement::StatementFacts;

/// Canonical JSON of tool arguments or results longer than this (16 KiB) goes to a blob
/// when passed through [`Recorder::tool_value`].
pub const INLINE_LIMIT: usize = 16 * 1024;

/// File names inside a bundle.
pub(crate) const EVENTS_FILE: &str = "events.jsonl";
pub(crate) const STATEMENT_FILE: &str = "statement.json";

/// When the recorder forces evidence to stable storage (`fdatasync`).
///
/// Every policy writes each event line with one `write(2)` before `record` returns, so
/// a killed *process* (SIGKILL, panic) always leaves every recorded line in the file.
/// The policies differ in what survives a *machine* crash or power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Durability {
    /// Never fsync. Survives a process kill, not a power loss.
    Flush,
    /// fsync after every event before `record` returns: a returned event (and every blob
    /// it names) is on stable storage. One fsync per event.
    PerEvent,
    /// fsync when the caller calls [`Recorder::step`] and at [`Recorder::finish`]: after
    /// `step` returns, every earlier event and blob is durable; later ones may be lost
    /// (or torn) by a power loss.
    PerStep,
    /// One fsync at [`Recorder::finish`]; nothing is durable before it returns.
    #[default]
    AtEnd,
    /// Like `PerEvent` (a returned event is durable), but the process-wide sync thread
    /// performs the syncs, and one batch (one `syncfs(2)` per file system) covers every
    /// event and blob written before it started, however many tasks or runs wrote them.
    /// For many concurrent writers sharing a disk.
    GroupCommit,
}

impl Durability {
    fn syncs(self) -> bool {
        self != Durability::Flush
    }
    fn syncs_each_event(self) -> bool {
        matches!(self, Durability::PerEvent | Durability::GroupCommit)
    }
}

/// How a bundle stores its blobs. Readers take both; [`Recorder::create`] writes
/// [`BlobLayout::Pack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BlobLayout {
    /// Layout 1: one file per blob, `blobs/sha256/<hex>` (every bundle written before
    /// the pack existed). `run_started` has no `blob_store` member.
    Loose,
    /// Layout 2: one append-only pack, `blobs/pack`, whose blobs are cut into
    /// content-defined chunks, each stored once and compressed. `run_started` says
    /// `"blob_store": "pack"`.
    #[default]
    Pack,
}

/// The `run_started` payload member that names the blob layout.
pub(crate) const BLOB_STORE_KEY: &str = "blob_store";
/// The pack's path inside a bundle.
pub(crate) const PACK_FILE: &str = "blobs/pack";

impl BlobLayout {
    /// The layout's name as `run_started.blob_store` spells it (`loose` is never written:
    /// it is the meaning of an absent member).
    pub fn as_str(self) -> &'static str {
        match self {
            BlobLayout::Loose => "loose",
            BlobLayout::Pack => "pack",
        }
    }

    /// The layout a `run_started` payload declares: `Loose` without a `blob_store`
    /// member, `Pack` for `"pack"`; `None` for anything else.
    pub fn of_run_started(payload: &Value) -> Option<BlobLayout> {
        match payload.get(BLOB_STORE_KEY) {
            None => Some(BlobLayout::Loose),
            Some(Value::String(s)) if s == "pack" => Some(BlobLayout::Pack),
            Some(_) => None,
        }
    }
}

/// How a run ends, given to [`Recorder::finish`].
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// Status written in `run_finished`.
    pub status: RunStatus,
    /// Usage totals written in `run_finished`.
    pub usage: Value,
    /// Error message of a failed run.
    pub error: Option<String>,
}

impl RunEnd {
    /// A run that ended with `status`, no usage and no error.
    pub fn new(status: RunStatus) -> Self {
        RunEnd {
            status,
            usage: Value::Null,
            error: None,
        }
    }
}

/// What [`Recorder::finish`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The facts written into `statement.json`.
    pub facts: StatementFacts,
    /// Path of `statement.json`.
    pub statement_path: PathBuf,
}

// ---------------------------------------------------------------------------------------
// Sync machinery: one committer thread per process, shared by every recorder.
//
// A recorder that needs something durable takes a ticket and puts itself on the
// committer's queue (once, however many tickets it takes before the committer gets to
// it). The committer takes every queued recorder at once and makes the whole batch
// durable together: first every pending file (blobs, inputs, outputs) of every recorder,
// then every distinct pending directory, then every log. Under ext4's ordered mode the
// first `fdatasync` commits the journal transaction that holds all of them, so the rest
// are cheap: one commit covers many runs, which is what group commit is for.

/// A file (or directory) waiting to be made durable by the committer.
enum SyncItem {
    /// An open file (and its name, for messages and the sync probe): synced with
    /// `fdatasync`.
    File(File, PathBuf),
    /// A path, opened when synced (so that waiting items hold no descriptor).
    Path(PathBuf),
    /// The bundle's append-only pack (blob store v2), shared with its writer.
    Pack(Arc<File>, PathBuf),
}

impl SyncItem {
    /// The device (file system) the item is on.
    fn device(&self) -> std::io::Result<u64> {
        use std::os::unix::fs::MetadataExt as _;
        match self {
            SyncItem::File(f, _) => f.metadata().map(|m| m.dev()),
            SyncItem::Pack(f, _) => f.metadata().map(|m| m.dev()),
            SyncItem::Path(p) => fs::metadata(p).map(|m| m.dev()),
        }
    }

    fn sync(&self) -> std::io::Result<()> {
        match self {
            SyncItem::File(f, _) => f.sync_data(),
            SyncItem::Pack(f, _) => f.sync_data(),
            SyncItem::Path(p) => File::open(p)?.sync_data(),
        }
    }

    fn path(&self) -> &Path {
        match self {
            SyncItem::File(_, p) | SyncItem::Path(p) | SyncItem::Pack(_, p) => p,
        }
    }
}

#[derive(Default)]
struct SyncState {
    /// Highest ticket handed out.
    requested: u64,
    /// Every ticket up to this one is durable.
    completed: u64,
    /// A sync failed: sticky.
    error: Option<String>,
    /// Files (blobs, inputs, outputs) written but not yet synced.
    pending_files: Vec<SyncItem>,
    /// Directories whose new names are not yet synced.
    pending_dirs: Vec<PathBuf>,
    /// Async waiters: wake when `completed >= ticket`.
    wakers: Vec<(u64, Waker)>,
    /// On the committer's queue now.
    queued: bool,
    /// Something was written (a line, a blob, a file to sync) since the last ticket: a
    /// new request needs a new batch. When clear, a request reuses the last ticket.
    dirty: bool,
}

struct SyncShared {
    state: Mutex<SyncState>,
    done: Condvar,
    /// The log, synced last in every batch that includes this recorder.
    log: File,
    /// The device (file system) of the log.
    dev: u64,
    /// The log's path (for the sync probe).
    #[cfg(feature = "sync-probe")]
    path: PathBuf,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of our locks cannot leave the state half-updated in a
    // way that matters more than refusing to go on would; keep going with the data.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The process-wide committer: a queue of recorders with unsynced tickets.
struct Committer {
    queue: Mutex<Vec<Arc<SyncShared>>>,
    work: Condvar,
    /// Why the committer thread could not be started, if it could not.
    failed: Option<String>,
}

fn committer() -> &'static Committer {
    static COMMITTER: std::sync::OnceLock<&'static Committer> = std::sync::OnceLock::new();
    COMMITTER.get_or_init(|| {
        let mut c = Committer {
            queue: Mutex::new(Vec::new()),
            work: Condvar::new(),
            failed: None,
        };
        // Spawned before the committer is shared, so that a failure can be recorded.
        let (tx, rx) = std::sync::mpsc::channel::<&'static Committer>();
        let spawned = std::thread::Builder::new()
            .name("provrun-evidence-sync".into())
            .spawn(move || {
                if let Ok(c) = rx.recv() {
                    committer_loop(c);
                }
            });
        if let Err(e) = &spawned {
            c.failed = Some(format!("cannot start the evidence sync thread: {e}"));
        }
        let c: &'static Committer = Box::leak(Box::new(c));
        let _ = tx.send(c);
        c
    })
}

impl SyncShared {
    fn new(log: File, #[allow(unused_variables)] path: &Path) -> std::io::Result<Arc<Self>> {
        use std::os::unix::fs::MetadataExt as _;
        let dev = log.metadata()?.dev();
        Ok(Arc::new(SyncShared {
            state: Mutex::new(SyncState::default()),
            done: Condvar::new(),
            log,
            dev,
            #[cfg(feature = "sync-probe")]
            path: path.to_path_buf(),
        }))
    }

    /// Ask for a sync covering everything written so far; returns the ticket to wait for.
    fn request(self: &Arc<Self>) -> u64 {
        let mut st = lock(&self.state);
        self.request_locked(&mut st)
    }

    /// [`SyncShared::request`] with the state already locked.
    fn request_locked(self: &Arc<Self>, st: &mut SyncState) -> u64 {
        if !st.dirty {
            // Nothing new since the last ticket: it covers this request too.
            return st.requested;
        }
        st.dirty = false;
        st.requested += 1;
        let t = st.requested;
        if !st.queued {
            let c = committer();
            if let Some(e) = &c.failed {
                st.error.get_or_insert_with(|| e.clone());
                return t;
            }
            st.queued = true;
            lock(&c.queue).push(Arc::clone(self));
            c.work.notify_one();
        }
        t
    }

    fn wait(&self, ticket: u64) -> Result<()> {
        let mut st = lock(&self.state);
        loop {
            if let Some(e) = &st.error {
                return Err(EvidenceError::LogBroken(e.clone()));
            }
            if st.completed >= ticket {
                return Ok(());
            }
            st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn poll_ticket(&self, ticket: u64, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut st = lock(&self.state);
        if let Some(e) = &st.error {
            return Poll::Ready(Err(EvidenceError::LogBroken(e.clone())));
        }
        if st.completed >= ticket {
            return Poll::Ready(Ok(()));
        }
        if let Some(slot) = st
            .wakers
            .iter_mut()
            .find(|(t, w)| *t == ticket && w.will_wake(cx.waker()))
        {
            slot.1 = cx.waker().clone();
        } else {
            st.wakers.push((ticket, cx.waker().clone()));
        }
        Poll::Pending
    }
}

/// One recorder's part of a batch.
struct BatchPart {
    shared: Arc<SyncShared>,
    target: u64,
    files: Vec<SyncItem>,
    error: Option<String>,
}

/// Make a batch durable with one `syncfs(2)` per file system it touches (in practice
/// one): that writes back and commits every file, directory and log of the batch
/// together, where one `fdatasync` per file would each force its own journal commit
/// (delayed allocation puts each file's blocks in a new transaction when it is written
/// back). Returns `false` where `syncfs` is not available or reports an error (which may
/// be another program's): the caller then syncs the batch file by file.
fn sync_batch_by_fs(parts: &mut [BatchPart], dirs: &[(PathBuf, usize)]) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // Every file system of the batch: (device, the parts on it, a descriptor on it).
    let mut systems: Vec<(u64, Vec<usize>, Option<File>)> = Vec::new();
    let note =
        |dev: u64, owner: usize, systems: &mut Vec<(u64, Vec<usize>, Option<File>)>| match systems
            .iter_mut()
            .find(|s| s.0 == dev)
        {
            Some(s) => s.1.push(owner),
            None => systems.push((dev, vec![owner], None)),
        };
    for (i, part) in parts.iter_mut().enumerate() {
        note(part.shared.dev, i, &mut systems);
        for f in &part.files {
            match f.device() {
                Ok(dev) => note(dev, i, &mut systems),
                Err(e) => {
                    part.error
                        .get_or_insert_with(|| format!("fsync failed: {e}"));
                }
            }
        }
    }
    for (d, owner) in dirs {
        match fs::metadata(d) {
            Ok(m) => note(m.dev(), *owner, &mut systems),
            Err(e) => {
                parts[*owner]
                    .error
                    .get_or_insert_with(|| format!("fsync failed: {e}"));
            }
        }
    }
    for (dev, owners, fd) in &mut systems {
        // A descriptor on this file system: the first log on it, else any file of it.
        let log = owners
            .iter()
            .map(|&i| &parts[i].shared)
            .find(|s| s.dev == *dev)
            .map(|s| &s.log);
        let synced = match log {
            Some(log) => rustix::fs::syncfs(log),
            None => {
                let path = dirs
                    .iter()
                    .find(|(d, _)| fs::metadata(d).is_ok_and(|m| m.dev() == *dev))
                    .map(|(d, _)| d.clone());
                match path.map(File::open) {
                    Some(Ok(f)) => {
                        let r = rustix::fs::syncfs(&f);
                        *fd = Some(f);
                        r
                    }
                    _ => Err(rustix::io::Errno::NOSYS),
                }
            }
        };
        match synced {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::NOSYS => return false,
            Err(e) => {
                // `syncfs` reports a write-back error of any file on the file system,
                // another program's too: it does not say whose. Sync this batch file by
                // file instead, which fails only a recorder whose own files failed.
                let e = std::io::Error::from_raw_os_error(e.raw_os_error());
                tracing::warn!(error = %e, "syncfs failed; syncing the batch file by file");
                return false;
            }
        }
    }
    true
}

/// Make a batch durable one file at a time: files first, then the directories naming
/// them, then the logs naming both.
fn sync_batch_each(parts: &mut [BatchPart], dirs: &mut [(PathBuf, usize)]) {
    for part in parts.iter_mut() {
        for f in &part.files {
            if let Err(e) = f.sync() {
                part.error
                    .get_or_insert_with(|| format!("fsync of {} failed: {e}", f.path().display()));
            }
        }
    }
    dirs.sort();
    let mut i = 0;
    while i < dirs.len() {
        let mut j = i + 1;
        while j < dirs.len() && dirs[j].0 == dirs[i].0 {
            j += 1;
        }
        if let Err(e) = sync_dir(&dirs[i].0) {
            for (_, owner) in &dirs[i..j] {
                parts[*owner]
                    .error
                    .get_or_insert_with(|| format!("fsync failed: {e}"));
            }
        }
        i = j;
    }
    for part in parts.iter_mut() {
        if part.error.is_none()
            && let Err(e) = part.shared.log.sync_data()
        {
            part.error = Some(format!("fsync failed: {e}"));
        }
    }
}

/// Tell the sync probe what a batch made durable: for each recorder whose part
/// succeeded, its files, then the directories naming them, then its log up to the length
/// it had when the sync began.
#[cfg(feature = "sync-probe")]
fn report_batch(
    parts: &[BatchPart],
    dirs: &[(PathBuf, usize)],
    written: &[u64],
    pack_lens: &[Vec<Option<u64>>],
) {
    for (i, part) in parts.iter().enumerate() {
        if part.error.is_some() {
            continue;
        }
        for (f, len) in part.files.iter().zip(&pack_lens[i]) {
            match len {
                Some(len) => fsutil::synced_log(f.path(), *len),
                None => fsutil::synced_file(f.path()),
            }
        }
        for (d, owner) in dirs {
            if *owner == i {
                fsutil::synced_dir(d);
            }
        }
        fsutil::synced_log(&part.shared.path, written[i]);
    }
}

fn committer_loop(c: &'static Committer) {
    loop {
        let queued = {
            let mut q = lock(&c.queue);
            while q.is_empty() {
                q = c.work.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::take(&mut *q)
        };
        // Snapshot what each recorder has asked for; later requests queue it again.
        let mut parts = Vec::with_capacity(queued.len());
        let mut dirs: Vec<(PathBuf, usize)> = Vec::new();
        for shared in queued {
            let (target, files) = {
                let mut st = lock(&shared.state);
                st.queued = false;
                for d in std::mem::take(&mut st.pending_dirs) {
                    dirs.push((d, parts.len()));
                }
                (st.requested, std::mem::take(&mut st.pending_files))
            };
            parts.push(BatchPart {
                shared,
                target,
                files,
                error: None,
            });
        }
        // A batch of one or two things (a lone run's log line) is cheaper to sync on its
        // own than with a `syncfs`, which also waits for other programs' dirty data.
        let items = parts.len() + dirs.len() + parts.iter().map(|p| p.files.len()).sum::<usize>();
        // Every log byte written before the sync begins is covered by it.
        #[cfg(feature = "sync-probe")]
        let written: Vec<u64> = parts
            .iter()
            .map(|p| p.shared.log.metadata().map_or(0, |m| m.len()))
            .collect();
        // Likewise the pack's bytes written before the sync begins.
        #[cfg(feature = "sync-probe")]
        let pack_lens: Vec<Vec<Option<u64>>> = parts
            .iter()
            .map(|p| {
                p.files
                    .iter()
                    .map(|f| match f {
                        SyncItem::Pack(f, _) => Some(f.metadata().map_or(0, |m| m.len())),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        if items <= 2 || !sync_batch_by_fs(&mut parts, &dirs) {
            sync_batch_each(&mut parts, &mut dirs);
        }
        #[cfg(feature = "sync-probe")]
        report_batch(&parts, &dirs, &written, &pack_lens);
        for part in parts {
            let wake: Vec<Waker> = {
                let mut st = lock(&part.shared.state);
                if let Some(e) = part.error {
                    tracing::error!(error = %e, "evidence fsync failed");
                    st.error.get_or_insert(e);
                }
                st.completed = st.completed.max(part.target);
                let completed = st.completed;
                let failed = st.error.is_some();
                let (ready, waiting): (Vec<_>, Vec<_>) = st
                    .wakers
                    .drain(..)
                    .partition(|(t, _)| failed || *t <= completed);
                st.wakers = waiting;
                ready.into_iter().map(|(_, w)| w).collect()
            };
            part.shared.done.notify_all();
            for w in wake {
                w.wake();
            }
        }
    }
}

/// A write that has happened (its place in the log is fixed) and that resolves when it
/// is as durable as the recorder's [`Durability`] promises. Await it from async code, or
/// call [`Durable::wait`] to block.
#[must_use = "the event is written, but not yet durable until this resolves"]
pub struct Durable<T> {
    state: DurableState<T>,
}

enum DurableState<T> {
    Ready(Option<Result<T>>),
    Waiting {
        shared: Arc<SyncShared>,
        ticket: u64,
        value: Option<T>,
    },
}

impl<T> Durable<T> {
    fn ready(r: Result<T>) -> Self {
        Durable {
            state: DurableState::Ready(Some(r)),
        }
    }

    /// Block the calling thread until the write is durable.
    pub fn wait(self) -> Result<T> {
        match self.state {
            DurableState::Ready(Some(r)) => r,
            DurableState::Ready(None) => Err(EvidenceError::OutOfOrder(
                "Durable polled after completion".into(),
            )),
            DurableState::Waiting {
                shared,
                ticket,
                value,
            } => {
                shared.wait(ticket)?;
                value.ok_or_else(|| {
                    EvidenceError::OutOfOrder("Durable polled after completion".into())
                })
            }
        }
    }
}

impl<T: Unpin> Future for Durable<T> {
    type Output = Result<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = self.get_mut();
        let done = || {
            Err(EvidenceError::OutOfOrder(
                "Durable polled after completion".into(),
            ))
        };
        match &mut this.state {
            DurableState::Ready(r) => Poll::Ready(r.take().unwrap_or_else(done)),
            DurableState::Waiting {
                shared,
                ticket,
                value,
            } => match shared.poll_ticket(*ticket, cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => Poll::Ready(value.take().ok_or_else(|| {
                    EvidenceError::OutOfOrder("Durable polled after completion".into())
                })),
            },
        }
    }
}

// ---------------------------------------------------------------------------------------
// The recorder.

/// Facts gathered while recording, for the statement.
#[derive(Debug, Clone, Default)]
struct Facts {
    /// The statement format `run_started` declares (see [`crate::statement`]).
    statement_format: u64,
    builder: String,
    agent_spec_digest: String,
    started_on: String,
    inputs: Vec<FileRecord>,
}

struct LogState {
    file: File,
    next_seq: u64,
    head: Option<String>,
    hasher: Sha256,
    bytes: u64,
    closed: Option<&'static str>,
    broken: Option<String>,
    last_ts: String,
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

/// Where a bundle at `root` is built before it appears: its parent folder and its name.
fn staging_place(root: &Path) -> Result<(PathBuf, String)> {
    let name = root.file_name().ok_or_else(|| {
        EvidenceError::io(
            "create",
            root,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a bundle needs a folder name of its own (not `.`, `..` or `/`)",
            ),
        )
    })?;
    let parent = root
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok((parent, name.to_string_lossy().into_owned()))
}

/// The hidden folder beside it that the bundle called `name` is built in.
fn staging_name(name: &str) -> String {
    format!(".{name}.provrun-creating")
}

/// Make room for building the bundle at `root` in `staging`: a folder a killed `create`
/// left there is removed; one that a live `create` holds means another writer is creating
/// this very bundle, and is refused.
fn clear_staging(root: &Path, staging: &Path) -> Result<()> {
    match fs::symlink_metadata(staging) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(EvidenceError::io("stat", staging, e)),
        Ok(meta) if !meta.is_dir() => return Err(EvidenceError::BundleNotEmpty(root.into())),
        Ok(_) => {}
    }
    // A live `create` locks its log first thing; no log, or a log nobody holds, is what a
    // killed one left.
    let held = match BundleLock::acquire(staging) {
        Err(EvidenceError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        other => other.map(Some),
    };
    match held {
        Ok(held) => {
            tracing::debug!(path = %staging.display(), "removing a bundle a killed process began");
            fs::remove_dir_all(staging).map_err(|e| EvidenceError::io("remove", staging, e))?;
            drop(held);
            Ok(())
        }
        Err(EvidenceError::BundleLocked { holder, .. }) => Err(EvidenceError::BundleLocked {
            path: root.into(),
            holder,
        }),
        Err(e) => Err(e),
    }
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn payload_value<P: Payload>(p: &P) -> Result<Value> {
    serde_json::to_value(p).map_err(|source| EvidenceError::Payload {
        kind: P::TYPE.as_str(),
        source,
    })
}

impl Recorder {
    /// Create a new bundle at `dir` (refusing an existing non-empty directory) with
    /// `input/`, `output/`, `blobs/sha256/` and `events.jsonl`, and record `started` as
    /// the `run_started` event (seq 0). The recorder holds the bundle's [`BundleLock`]
    /// for its life.
    ///
    /// The bundle appears whole or not at all: it is built in a hidden folder next to
    /// `dir` (`.NAME.provrun-creating`), locked there, given its `run_started` line, and
    /// only then renamed to `dir` (replacing an empty folder of that name). A process
    /// killed before the rename leaves no bundle, only that hidden folder, which the
    /// next `create` of the same bundle removes; one killed after leaves a bundle that
    /// verifies as incomplete. Another `create` of the same bundle at the same moment is
    /// refused ([`EvidenceError::BundleLocked`] or [`EvidenceError::BundleNotEmpty`]).
    ///
    /// Blobs go to a pack ([`BlobLayout::Pack`]); [`Recorder::create_with_layout`]
    /// chooses.
    pub fn create(
        dir: impl AsRef<Path>,
        run_id: impl Into<String>,
        durability: Durability,
        started: &RunStarted,
    ) -> Result<Recorder> {
        Recorder::create_with_layout(dir, run_id, durability, started, BlobLayout::default())
    }

    /// [`Recorder::create`] with the blob layout chosen: [`BlobLayout::Loose`] writes
    /// bundles as versions before the pack did (e.g. for tools that read only those).
    pub fn create_with_layout(
        dir: impl AsRef<Path>,
        run_id: impl Into<String>,
        durability: Durability,
        started: &RunStarted,
        layout: BlobLayout,
    ) -> Result<Recorder> {
        let root = dir.as_ref().to_path_buf();
        let run_id = run_id.into();
        let existed = match fs::symlink_metadata(&root) {
            Ok(meta) if meta.is_dir() => {
                let mut entries =
                    fs::read_dir(&root).map_err(|e| EvidenceError::io("list", &root, e))?;
                if entries.next().is_some() {
                    return Err(EvidenceError::BundleNotEmpty(root));
                }
                true
            }
            Ok(_) => return Err(EvidenceError::BundleNotEmpty(root)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(EvidenceError::io("stat", &root, e)),
        };
        let rec = match Self::create_aside(&root, run_id.clone(), durability, started, layout) {
            Ok(rec) => rec,
            Err(e @ (EvidenceError::BundleNotEmpty(_) | EvidenceError::BundleLocked { .. })) => {
                return Err(e);
            }
            // An empty folder that cannot be replaced (a mount point, a parent folder
            // this process may not write): the bundle is built in it, in place. Only
            // there can a kill during creation leave the empty folders without a log.
            Err(e) if existed => {
                tracing::debug!(root = %root.display(), error = %e, "building the bundle in place");
                Self::build_staged(&root, root.clone(), run_id, durability, started, layout)?
            }
            Err(e) => return Err(e),
        };
        if durability.syncs() {
            // The new folders' names (the rename included), synced by the committer with
            // the next sync: the next line under `GroupCommit`, the next step or the end
            // under `PerStep` and `AtEnd`, right now under `PerEvent`. Until then a power
            // loss may lose the bundle whole, never leave half of one.
            let root = &rec.inner.root;
            let mut dirs = vec![root.join("blobs"), root.clone()];
            dirs.extend(
                root.parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(Path::to_path_buf),
            );
            // The pack's header, with the folder naming it.
            let pack_item = rec.inner.pack.as_ref().map(|p| {
                let w = lock(p);
                SyncItem::Pack(Arc::clone(&w.file), w.path.clone())
            });
            rec.defer_sync(pack_item.into_iter().collect(), dirs);
            if durability == Durability::PerEvent {
                rec.sync_all().wait()?;
            }
        }
        tracing::debug!(root = %rec.inner.root.display(), run_id = %rec.inner.run_id, "evidence bundle created");
        Ok(rec)
    }

    /// Build the bundle in its hidden folder beside `root` and rename it into place.
    fn create_aside(
        root: &Path,
        run_id: String,
        durability: Durability,
        started: &RunStarted,
        layout: BlobLayout,
    ) -> Result<Recorder> {
        let (parent, name) = staging_place(root)?;
        fs::create_dir_all(&parent).map_err(|e| EvidenceError::io("create", &parent, e))?;
        let staging = parent.join(staging_name(&name));
        clear_staging(root, &staging)?;
        fs::create_dir(&staging).map_err(|e| match e.kind() {
            // Another `create` of this bundle got there first.
            std::io::ErrorKind::AlreadyExists => EvidenceError::BundleLocked {
                path: root.to_path_buf(),
                holder: None,
            },
            _ => EvidenceError::io("create", &staging, e),
        })?;
        let built = Self::build_staged(
            &staging,
            root.to_path_buf(),
            run_id,
            durability,
            started,
            layout,
        );
        let rec = match built {
            Ok(done) => done,
            Err(e) => {
                let _ = fs::remove_dir_all(&staging);
                return Err(e);
            }
        };
        // The bundle appears: replaces an empty folder of its name, refused over a
        // non-empty one (another writer got there first).
        if let Err(e) = fs::rename(&staging, root) {
            drop(rec);
            let _ = fs::remove_dir_all(&staging);
            return Err(match e.raw_os_error() {
                Some(libc::ENOTEMPTY | libc::EEXIST | libc::ENOTDIR) => {
                    EvidenceError::BundleNotEmpty(root.to_path_buf())
                }
                _ => EvidenceError::io("rename", root, e),
            });
        }
        Ok(rec)
    }

    /// The bundle's content in `staging`, locked, with its `run_started` line written;
    /// the recorder already knows the bundle by its final path `root`.
    fn build_staged(
        staging: &Path,
        root: PathBuf,
        run_id: String,
        durability: Durability,
        started: &RunStarted,
        layout: BlobLayout,
    ) -> Result<Recorder> {
        // The log first: locked at once, it is the lock of the bundle being built (and
        // then of the bundle) for as long as the recorder appends to it.
        let log_path = staging.join(EVENTS_FILE);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&log_path)
            .map_err(|e| EvidenceError::io("create", &log_path, e))?;
        let file = BundleLock::lock(file, staging.to_path_buf())?.into_log();
        let subs: &[&str] = match layout {
            BlobLayout::Loose => &["input", "output", "blobs", "blobs/sha256"],
            BlobLayout::Pack => &["input", "output", "blobs"],
        };
        for sub in subs {
            let p = staging.join(sub);
            fs::create_dir(&p).map_err(|e| EvidenceError::io("create", &p, e))?;
        }
        let pack = match layout {
            BlobLayout::Loose => None,
            BlobLayout::Pack => {
                let path = staging.join(PACK_FILE);
                let mut w =
                    PackWriter::create(&path).map_err(|e| EvidenceError::io("create", &path, e))?;
                // Known by its place in the bundle once renamed, as the log is.
                w.path = root.join(PACK_FILE);
                Some(w)
            }
        };
        let rec = Recorder::with_state(
            root,
            run_id,
            durability,
            file,
            0,
            None,
            Sha256::new(),
            0,
            Facts::default(),
            layout,
            pack,
        )?;
        let mut payload = payload_value(started)?;
        if let Some(obj) = payload.as_object_mut() {
            if layout == BlobLayout::Pack {
                obj.insert(BLOB_STORE_KEY.into(), json!(layout.as_str()));
            }
            obj.insert(
                crate::statement::STATEMENT_FORMAT_KEY.into(),
                json!(crate::statement::STATEMENT_FORMAT),
            );
        }
        rec.append(EventType::RunStarted, started.confidence(), payload, true)?
            .wait()?;
        Ok(rec)
    }

    /// Reopen the log of a bundle whose run paused (or whose process died) to continue
    /// the same chain, e.g. in another process that resumes the run.
    ///
    /// The existing log is validated first (every line parses, the chain and the
    /// sequence hold); a torn last line, which was never reported durable, is cut off,
    /// and blobs no event names (stored just before a crash) are removed.
    /// A log whose last event is a `run_finished` with a status other than `paused` is
    /// refused. An existing `statement.json` (and its signature) is removed: it no longer describes
    /// the log.
    ///
    /// The bundle's [`BundleLock`] is taken first and held for the recorder's life: a
    /// bundle another writer holds is refused ([`EvidenceError::BundleLocked`]) before
    /// anything is read or changed.
    pub fn reopen(dir: impl AsRef<Path>, durability: Durability) -> Result<Recorder> {
        Self::reopen_locked(BundleLock::acquire(dir)?, durability)
    }

    /// [`Recorder::reopen`] with the bundle's lock already taken (by a caller that read
    /// the bundle before deciding to write to it, under the same lock).
    pub fn reopen_locked(bundle_lock: BundleLock, durability: Durability) -> Result<Recorder> {
        let root = bundle_lock.path().to_path_buf();
        if !bundle_lock.is_current() {
            return Err(EvidenceError::io(
                "lock",
                root.join(EVENTS_FILE),
                std::io::Error::other("the log was moved or replaced while locked"),
            ));
        }
        let log_path = root.join(EVENTS_FILE);
        let invalid = |reason: String| EvidenceError::InvalidLog {
            path: log_path.clone(),
            reason,
        };
        let scan = scan_log(&log_path).map_err(|e| EvidenceError::io("read", &log_path, e))?;
        let mut hasher = Sha256::new();
        let mut head: Option<String> = None;
        let mut run_id = String::new();
        let mut facts = Facts::default();
        let mut last = None;
        let mut layout = BlobLayout::Loose;
        let mut referenced = std::collections::BTreeSet::new();
        for (i, raw) in scan.lines.iter().enumerate() {
            let ev = parse_line(raw).map_err(|e| invalid(format!("line {}: {e}", i + 1)))?;
            if ev.seq != i as u64 {
                return Err(invalid(format!("line {} has seq {}", i + 1, ev.seq)));
            }
            if ev.prev != head {
                return Err(invalid(format!(
                    "line {} does not chain to the line before",
                    i + 1
                )));
            }
            if i == 0 {
                if ev.kind != EventType::RunStarted {
                    return Err(invalid("first event is not run_started".into()));
                }
                let p: RunStarted = serde_json::from_value(ev.payload.clone())
                    .map_err(|e| invalid(e.to_string()))?;
                facts.statement_format = crate::statement::format_of(&ev.payload);
                facts.builder = p.builder;
                facts.agent_spec_digest = p.agent_spec_digest;
                facts.started_on = ev.ts.clone();
                run_id = ev.run_id.clone();
                layout = BlobLayout::of_run_started(&ev.payload)
                    .ok_or_else(|| invalid("run_started names an unknown blob_store".into()))?;
            } else if ev.run_id != run_id {
                return Err(invalid(format!("line {} belongs to another run", i + 1)));
            }
            if ev.kind == EventType::InputStaged {
                let p: InputStaged = serde_json::from_value(ev.payload.clone())
                    .map_err(|e| invalid(e.to_string()))?;
                facts.inputs.push(p.0);
            }
            if let Some(bytes) = &raw.bytes {
                hasher.update(bytes);
                hasher.update(b"\n");
            }
            let mut refs = Vec::new();
            crate::event::collect_refs(&ev.payload, &mut refs);
            referenced.extend(refs.into_iter().map(|b| b.digest.sha256));
            head = Some(raw.hash.clone());
            last = Some(ev);
        }
        let Some(last) = last else {
            return Err(invalid("the log has no events".into()));
        };
        if last.kind == EventType::RunFinished {
            let p: RunFinished =
                serde_json::from_value(last.payload).map_err(|e| invalid(e.to_string()))?;
            if p.status != RunStatus::Paused {
                return Err(EvidenceError::OutOfOrder(format!(
                    "the run already ended with status {}",
                    p.status.as_str()
                )));
            }
        }
        // The locked descriptor is the one the recorder appends with.
        let file = bundle_lock.into_log();
        if let Some(torn) = scan.torn_len {
            tracing::warn!(
                bytes = torn,
                "cutting a torn last line off the evidence log"
            );
            file.set_len(scan.good_len)
                .map_err(|e| EvidenceError::io("truncate", &log_path, e))?;
            if durability.syncs() {
                file.sync_data()
                    .map_err(|e| EvidenceError::io("sync", &log_path, e))?;
                #[cfg(feature = "sync-probe")]
                fsutil::synced_log(&log_path, scan.good_len);
            }
        }
        remove_leftovers(&root, &referenced, durability.syncs())?;
        let pack = match layout {
            BlobLayout::Loose => None,
            BlobLayout::Pack => Some(reopen_pack(&root, &referenced, durability.syncs())?),
        };
        // The signature first: a crash between the two leaves an unsigned statement,
        // never a signature without its statement.
        for name in [crate::dsse::DSSE_FILE, STATEMENT_FILE] {
            let path = root.join(name);
            match fs::remove_file(&path) {
                Ok(()) => {
                    if durability.syncs() {
                        sync_dir(&root).map_err(|e| EvidenceError::io("sync", &root, e))?;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(EvidenceError::io("remove", &path, e)),
            }
        }
        let n = scan.lines.len() as u64;
        tracing::debug!(root = %root.display(), events = n, "evidence log reopened");
        Recorder::with_state(
            root,
            run_id,
            durability,
            file,
            n,
            head,
            hasher,
            scan.good_len,
            facts,
            layout,
            pack,
        )
    }

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
        let sync = if durability.syncs() {
            let log_path = root.join(EVENTS_FILE);
            let clone = file
                .try_clone()
                .map_err(|e| EvidenceError::io("dup", &log_path, e))?;
            Some(
                SyncShared::new(clone, &log_path)
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
                    facts,
                }),
                sync,
            }),
        })
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

    /// A handle that can append `declared` events and nothing else; give it to tools.
    pub fn declarer(&self) -> Declarer {
        Declarer {
            recorder: self.clone(),
            source: None,
        }
    }

    /// Like [`Recorder::declarer`], with every event naming `source` (e.g. the tool).
    pub fn declarer_for(&self, source: impl Into<String>) -> Declarer {
        Declarer {
            recorder: self.clone(),
            source: Some(source.into()),
        }
    }

    /// Record an event and return its seq once it is as durable as the policy promises
    /// (`PerEvent`, `GroupCommit`: on stable storage; others: written to the file).
    ///
    /// This blocks for the fsync under `PerEvent` and `GroupCommit`; from async code use
    /// [`Recorder::record_async`]. `run_started`, `output_produced` and `run_finished`
    /// are written only by [`Recorder::create`] and [`Recorder::finish`].
    pub fn record<P: Payload>(&self, payload: &P) -> Result<u64> {
        self.record_inner(payload, true)?.wait()
    }

    /// Record an event without blocking on fsync: the line is written (its place in
    /// the order fixed) before this returns; the returned future resolves with its seq
    /// once it is durable, the fsync running on the process's sync thread.
    pub fn record_async<P: Payload>(&self, payload: &P) -> Durable<u64> {
        match self.record_inner(payload, false) {
            Ok(d) => d,
            Err(e) => Durable::ready(Err(e)),
        }
    }

    /// [`Recorder::record_async`] with confidence `parsed` instead of what the payload
    /// would claim: for a `model_called` or `tool_called` the runtime did not see itself
    /// (a foreign loop handed over its parsed request, or a trace was imported), and for
    /// `trace_imported`. Any other type is refused ([`EvidenceError::OutOfOrder`]).
    pub fn record_parsed_async<P: Payload>(&self, payload: &P) -> Durable<u64> {
        let run = || -> Result<Durable<u64>> {
            match P::TYPE {
                EventType::ModelCalled | EventType::ToolCalled | EventType::TraceImported => {}
                other => {
                    return Err(EvidenceError::OutOfOrder(format!(
                        "{} cannot be recorded as parsed",
                        other.as_str()
                    )));
                }
            }
            self.append(P::TYPE, Confidence::Parsed, payload_value(payload)?, false)
        };
        match run() {
            Ok(d) => d,
            Err(e) => Durable::ready(Err(e)),
        }
    }

    fn record_inner<P: Payload>(&self, payload: &P, blocking: bool) -> Result<Durable<u64>> {
        match P::TYPE {
            EventType::RunStarted
            | EventType::RunFinished
            | EventType::OutputProduced
            | EventType::OutputSkipped => {
                return Err(EvidenceError::OutOfOrder(format!(
                    "{} is written by the recorder itself",
                    P::TYPE.as_str()
                )));
            }
            _ => {}
        }
        self.append(
            P::TYPE,
            payload.confidence(),
            payload_value(payload)?,
            blocking,
        )
    }

    /// Append one line. `blocking` selects an inline fsync for `PerEvent`.
    fn append(
        &self,
        kind: EventType,
        confidence: Confidence,
        payload: Value,
        blocking: bool,
    ) -> Result<Durable<u64>> {
        let inner = &*self.inner;
        let mut st = self.lock_open()?;
        let seq = self.write_locked(&mut st, kind, confidence, payload)?;
        if !inner.durability.syncs_each_event() {
            return Ok(Durable::ready(Ok(seq)));
        }
        if blocking && inner.durability == Durability::PerEvent {
            if let Err(e) = st.file.sync_data() {
                let log_path = inner.root.join(EVENTS_FILE);
                st.broken = Some(format!("fsync {}: {e}", log_path.display()));
                return Err(EvidenceError::io("sync", log_path, e));
            }
            #[cfg(feature = "sync-probe")]
            fsutil::synced_log(&inner.root.join(EVENTS_FILE), st.bytes);
            return Ok(Durable::ready(Ok(seq)));
        }
        drop(st);
        Ok(self.durable_after_sync(seq))
    }

    /// Lock the log, refusing if it is broken or closed.
    fn lock_open(&self) -> Result<MutexGuard<'_, LogState>> {
        let inner = &*self.inner;
        let st = lock(&inner.log);
        if let Some(e) = &st.broken {
            return Err(EvidenceError::LogBroken(e.clone()));
        }
        if let Some(sync) = &inner.sync
            && let Some(e) = &lock(&sync.state).error
        {
            return Err(EvidenceError::LogBroken(e.clone()));
        }
        if let Some(why) = st.closed {
            return Err(EvidenceError::OutOfOrder(format!(
                "the recorder is closed: {why}"
            )));
        }
        Ok(st)
    }

    /// Write one line with the log locked; no sync. Returns its seq.
    fn write_locked(
        &self,
        st: &mut LogState,
        kind: EventType,
        confidence: Confidence,
        mut payload: Value,
    ) -> Result<u64> {
        let inner = &*self.inner;
        let seq = st.next_seq;
        if kind == EventType::RunFinished
            && let Some(obj) = payload.as_object_mut()
        {
            obj.insert("event_count".into(), json!(seq + 1));
        }
        let ts = now_rfc3339();
        // The envelope's canonical JSON written directly (its keys in RFC 8785 order),
        // instead of building a `Value` around the payload and sorting it again.
        let mut text = String::with_capacity(256);
        text.push_str("{\"confidence\":");
        write_canonical_str(confidence.as_str(), &mut text);
        text.push_str(",\"payload\":");
        write_canonical(&payload, &mut text)?;
        text.push_str(",\"prev\":");
        match &st.head {
            Some(h) => write_canonical_str(h, &mut text),
            None => text.push_str("null"),
        }
        text.push_str(",\"run_id\":");
        write_canonical_str(&inner.run_id, &mut text);
        text.push_str(",\"seq\":");
        text.push_str(&seq.to_string());
        text.push_str(",\"ts\":");
        write_canonical_str(&ts, &mut text);
        text.push_str(",\"type\":");
        write_canonical_str(kind.as_str(), &mut text);
        text.push_str(",\"v\":");
        text.push_str(&FORMAT_VERSION.to_string());
        text.push('}');
        let mut line = text.into_bytes();
        let head = sha256_hex(&line);
        line.push(b'\n');
        if let Err(e) = st.file.write_all(&line) {
            let log_path = inner.root.join(EVENTS_FILE);
            // Try to cut a partial line so the file stays a valid prefix.
            let _ = st.file.set_len(st.bytes);
            st.broken = Some(format!("write {}: {e}", log_path.display()));
            tracing::error!(error = %e, "evidence write failed");
            return Err(EvidenceError::io("write", log_path, e));
        }
        if let Some(sync) = &inner.sync {
            lock(&sync.state).dirty = true;
        }
        st.hasher.update(&line);
        st.bytes += line.len() as u64;
        st.head = Some(head);
        st.next_seq += 1;
        match kind {
            EventType::RunStarted => {
                st.facts.statement_format = crate::statement::format_of(&payload);
                if let Ok(p) = serde_json::from_value::<RunStarted>(payload) {
                    st.facts.builder = p.builder;
                    st.facts.agent_spec_digest = p.agent_spec_digest;
                }
                st.facts.started_on = ts.clone();
            }
            EventType::InputStaged => {
                if let Ok(p) = serde_json::from_value::<FileRecord>(payload) {
                    st.facts.inputs.push(p);
                }
            }
            EventType::RunFinished => st.closed = Some("the run has ended (or paused)"),
            _ => {}
        }
        st.last_ts = ts;
        Ok(seq)
    }

    /// Store `bytes` as a content-addressed blob (in the pack, or at
    /// `blobs/sha256/<hex>` in a [`BlobLayout::Loose`] bundle) and return its ref. The blob is written completely (and, under `PerEvent`/`GroupCommit`, synced)
    /// before this returns, so before any event that names it.
    pub fn put_blob(&self, bytes: &[u8], media_type: &str) -> Result<BlobRef> {
        self.put_blob_async(bytes, media_type).wait()
    }

    /// Like [`Recorder::put_blob`], the sync (if any) running on the sync thread.
    pub fn put_blob_async(&self, bytes: &[u8], media_type: &str) -> Durable<BlobRef> {
        match self.put_blob_inner(bytes, media_type, true) {
            Ok(d) => d,
            Err(e) => Durable::ready(Err(e)),
        }
    }

    /// Store a blob that the next event recorded will name: like
    /// [`Recorder::put_blob_async`], but under `GroupCommit` it does not ask for a sync of
    /// its own: the blob is synced in the same batch as (and before) the log line of the
    /// next event, whose [`Durable`] therefore covers both (the returned one resolves at
    /// once). Under the other policies it is
    /// [`Recorder::put_blob_async`] (under `PerEvent` it resolves once the blob is synced).
    pub fn put_blob_for_next_event(&self, bytes: &[u8], media_type: &str) -> Durable<BlobRef> {
        let wait = self.inner.durability != Durability::GroupCommit;
        match self.put_blob_inner(bytes, media_type, wait) {
            Ok(d) => d,
            Err(e) => Durable::ready(Err(e)),
        }
    }

    fn put_blob_inner(
        &self,
        bytes: &[u8],
        media_type: &str,
        wait: bool,
    ) -> Result<Durable<BlobRef>> {
        if let Some(pack) = &self.inner.pack {
            return self.put_packed(pack, bytes, media_type, wait);
        }
        let hex = sha256_hex(bytes);
        let blob = BlobRef {
            digest: Digest {
                sha256: hex.clone(),
            },
            size: bytes.len() as u64,
            media_type: media_type.to_owned(),
        };
        let dir = self.inner.root.join("blobs/sha256");
        let written = fsutil::store_new(&dir, &hex, bytes)
            .map_err(|e| EvidenceError::io("write blob", dir.join(&hex), e))?;
        let durability = self.inner.durability;
        let Some(shared) = self.inner.sync.as_ref().filter(|_| durability.syncs()) else {
            return Ok(Durable::ready(Ok(blob)));
        };
        // The blob's data and its name in `blobs/sha256/` are synced before the log.
        let item = match written {
            // Per-event policies sync it soon: keep the descriptor instead of reopening.
            Some(f) if durability.syncs_each_event() => SyncItem::File(f, dir.join(&hex)),
            _ => SyncItem::Path(dir.join(&hex)),
        };
        let mut st = lock(&shared.state);
        st.pending_files.push(item);
        st.pending_dirs.push(dir);
        st.dirty = true;
        if !durability.syncs_each_event() || !wait {
            return Ok(Durable::ready(Ok(blob)));
        }
        let ticket = shared.request_locked(&mut st);
        drop(st);
        Ok(Durable {
            state: DurableState::Waiting {
                shared: Arc::clone(shared),
                ticket,
                value: Some(blob),
            },
        })
    }

    /// [`Recorder::put_blob_inner`] for a pack: append the blob's new chunks and its
    /// index record, then have the pack synced as the policy says (before any event
    /// naming the blob, under the per-event policies).
    fn put_packed(
        &self,
        pack: &Mutex<PackWriter>,
        bytes: &[u8],
        media_type: &str,
        wait: bool,
    ) -> Result<Durable<BlobRef>> {
        let (digest, file) = {
            let mut w = lock(pack);
            let (digest, _) = w
                .put(bytes)
                .map_err(|e| EvidenceError::io("write blob", &w.path, e))?;
            tracing::trace!(pack_len = w.len(), "blob packed");
            (digest, SyncItem::Pack(Arc::clone(&w.file), w.path.clone()))
        };
        let blob = BlobRef {
            digest: Digest {
                sha256: hex::encode(digest),
            },
            size: bytes.len() as u64,
            media_type: media_type.to_owned(),
        };
        let durability = self.inner.durability;
        let Some(shared) = self.inner.sync.as_ref().filter(|_| durability.syncs()) else {
            return Ok(Durable::ready(Ok(blob)));
        };
        let mut st = lock(&shared.state);
        if !st
            .pending_files
            .iter()
            .any(|f| matches!(f, SyncItem::Pack(..)))
        {
            st.pending_files.push(file);
        }
        st.dirty = true;
        if !durability.syncs_each_event() || !wait {
            return Ok(Durable::ready(Ok(blob)));
        }
        let ticket = shared.request_locked(&mut st);
        drop(st);
        Ok(Durable {
            state: DurableState::Waiting {
                shared: Arc::clone(shared),
                ticket,
                value: Some(blob),
            },
        })
    }

    /// Prepare a tool argument or result for a [`crate::ToolCalled`] payload: returns
    /// `(value, None)` when its canonical JSON is at most [`INLINE_LIMIT`] bytes, else
    /// stores it as an `application/json` blob and returns `(null, Some(blob))`.
    pub fn tool_value(&self, value: Value) -> Result<(Value, Option<BlobRef>)> {
        let text = to_canonical_string(&value)?;
        if text.len() <= INLINE_LIMIT {
            return Ok((value, None));
        }
        let blob = self.put_blob(text.as_bytes(), "application/json")?;
        Ok((Value::Null, Some(blob)))
    }

    /// Mark a step boundary: under `PerStep` (and the per-event policies) every event
    /// and blob recorded so far is on stable storage when this returns. A no-op under
    /// `Flush` and `AtEnd`.
    pub fn step(&self) -> Result<()> {
        self.step_async().wait()
    }

    /// Like [`Recorder::step`], waiting without blocking the thread.
    pub fn step_async(&self) -> Durable<()> {
        match self.inner.durability {
            Durability::Flush | Durability::AtEnd => Durable::ready(Ok(())),
            _ => self.sync_all(),
        }
    }

    fn sync_all(&self) -> Durable<()> {
        self.durable_after_sync(())
    }

    /// `value`, once a sync requested now (covering everything written so far) is done;
    /// at once under `Flush`.
    fn durable_after_sync<T>(&self, value: T) -> Durable<T> {
        let Some(shared) = &self.inner.sync else {
            return Durable::ready(Ok(value));
        };
        let ticket = shared.request();
        Durable {
            state: DurableState::Waiting {
                shared: Arc::clone(shared),
                ticket,
                value: Some(value),
            },
        }
    }

    /// Hand files and directories to the committer, to be synced with the next batch
    /// (and before the log data of that batch).
    fn defer_sync(&self, files: Vec<SyncItem>, dirs: Vec<PathBuf>) {
        if let Some(shared) = &self.inner.sync {
            let mut st = lock(&shared.state);
            st.pending_files.extend(files);
            st.pending_dirs.extend(dirs);
            st.dirty = true;
        }
    }

    /// Record an `input_staged` event for every regular file under `input/`, in path
    /// order, as one uninterrupted block. Call it once, after staging. Symlinks and
    /// special files are refused, never followed.
    pub fn record_inputs(&self) -> Result<Vec<FileRecord>> {
        let records = self.digest_tree("input")?;
        let payloads = records
            .iter()
            .map(|r| payload_value(&InputStaged(r.clone())))
            .collect::<Result<Vec<_>>>()?;
        {
            // One block, and (under the per-event policies) one sync for all of it.
            let mut st = self.lock_open()?;
            for p in payloads {
                self.write_locked(&mut st, EventType::InputStaged, Confidence::Observed, p)?;
            }
        }
        if self.inner.durability.syncs_each_event() {
            self.sync_all().wait()?;
        }
        Ok(records)
    }

    fn digest_tree(&self, sub: &str) -> Result<Vec<FileRecord>> {
        let dir = self.inner.root.join(sub);
        let walk = walk_files(&dir);
        if let Some(problem) = walk.problems.first() {
            return Err(EvidenceError::UnsupportedFile {
                path: dir,
                reason: problem.clone(),
            });
        }
        let files = walk.files.into_iter().map(|f| (f, None)).collect();
        self.digest_files(dir, files)
    }

    /// Digest `files` (each read to at most its bound, when it has one) and hand them
    /// and their folders to the committer as the durability policy asks.
    fn digest_files(
        &self,
        dir: PathBuf,
        files: Vec<(fsutil::FoundFile, Option<u64>)>,
    ) -> Result<Vec<FileRecord>> {
        let durability = self.inner.durability;
        let sync = durability.syncs();
        // Synced now (per-event policies) and few: keep them open for the committer
        // instead of reopening them.
        let keep_open = durability.syncs_each_event() && files.len() <= 256;
        let mut items = Vec::new();
        let mut records = Vec::with_capacity(files.len());
        for (f, bound) in &files {
            let (sha256, size, file) = fsutil::hash_open_bounded(&f.path, *bound)
                .map_err(|e| EvidenceError::io("hash", &f.path, e))?;
            if sync {
                items.push(if keep_open {
                    SyncItem::File(file, f.path.clone())
                } else {
                    SyncItem::Path(f.path.clone())
                });
            }
            records.push(FileRecord {
                path: f.rel.clone(),
                sha256,
                size,
            });
        }
        if sync {
            // The files and their names must be as durable as the digests that the log
            // records. Per-event policies: one batch of the committer syncs them all
            // before any line naming them is written. `PerStep` and `AtEnd`: they are
            // synced with (before) the log at the next step or at the end, which is
            // when those lines become durable.
            let mut dirs: Vec<PathBuf> = files
                .iter()
                .filter_map(|(f, _)| f.path.parent().map(Path::to_path_buf))
                .collect();
            dirs.push(dir.clone());
            dirs.sort();
            dirs.dedup();
            self.defer_sync(items, dirs);
            if durability.syncs_each_event() {
                self.sync_all().wait()?;
            }
        }
        Ok(records)
    }

    /// Finish the bundle (or a paused segment of it): record `output_produced` for every
    /// file under `output/` in path order, then `run_finished`, make the log durable (for
    /// every policy but `Flush`), and write `statement.json` atomically. The recorder
    /// (and every clone) refuses further events afterwards and gives up the bundle's
    /// [`BundleLock`]; a paused run continues with [`Recorder::reopen`].
    ///
    /// Whatever is under `output/`, the bundle finishes: see [`Recorder::finish_with`],
    /// here with no output quota.
    pub fn finish(&self, end: RunEnd) -> Result<Finished> {
        self.finish_with(end, &OutputPolicy::default())
    }

    /// [`Recorder::finish`] with an output quota. Entries under `output/` that are not
    /// regular files or folders (symlinks, FIFOs, sockets, device nodes), names that are
    /// not UTF-8, entries nested too deeply and files that do not fit in the quota (by
    /// apparent size, in path order) are removed from the bundle and each recorded by an
    /// `output_skipped` event, written just before the `output_produced` block; set-uid,
    /// set-gid and sticky bits are cleared. No more than the quota is ever read.
    pub fn finish_with(&self, end: RunEnd, policy: &OutputPolicy) -> Result<Finished> {
        let out_dir = self.inner.root.join("output");
        let collected = crate::outputs::collect(&out_dir, policy)
            .map_err(|e| EvidenceError::io("collect the outputs in", &out_dir, e))?;
        for s in &collected.skipped {
            tracing::warn!(path = %s.path, kind = %s.kind, reason = %s.reason, "an entry in the outputs is left out");
        }
        let skipped_json = collected
            .skipped
            .iter()
            .map(payload_value)
            .collect::<Result<Vec<_>>>()?;
        let files = collected
            .files
            .into_iter()
            .map(|a| {
                (
                    fsutil::FoundFile {
                        rel: a.rel,
                        path: a.path,
                    },
                    Some(a.size),
                )
            })
            .collect();
        let outputs = self.digest_files(out_dir, files)?;
        let finished = RunFinished {
            status: end.status,
            event_count: 0, // set to seq + 1 when written
            outputs: outputs.len() as u64,
            usage: end.usage,
            error: end.error,
        };
        let finished = payload_value(&finished)?;
        let outputs_json = outputs
            .iter()
            .map(|r| payload_value(&OutputProduced(r.clone())))
            .collect::<Result<Vec<_>>>()?;
        // The outputs and run_finished go in as one block: nothing can slip in between
        // or after them.
        let facts = {
            let mut st = self.lock_open()?;
            for p in skipped_json {
                self.write_locked(&mut st, EventType::OutputSkipped, Confidence::Observed, p)?;
            }
            for p in outputs_json {
                self.write_locked(&mut st, EventType::OutputProduced, Confidence::Observed, p)?;
            }
            self.write_locked(
                &mut st,
                EventType::RunFinished,
                Confidence::Observed,
                finished,
            )?;
            StatementFacts {
                format: st.facts.statement_format,
                run_id: self.inner.run_id.clone(),
                builder: st.facts.builder.clone(),
                agent_spec_digest: st.facts.agent_spec_digest.clone(),
                started_on: st.facts.started_on.clone(),
                finished_on: st.last_ts.clone(),
                status: end.status,
                inputs: st.facts.inputs.clone(),
                outputs,
                events_sha256: hex::encode(st.hasher.clone().finalize()),
                event_count: st.next_seq,
                head: st.head.clone().unwrap_or_default(),
            }
        };
        let bytes = facts.to_bytes()?;
        let root = &self.inner.root;
        let statement_err = |e| EvidenceError::io("write", root.join(STATEMENT_FILE), e);
        if self.inner.durability.syncs() {
            // The statement's bytes go to a temporary file synced in the same batch as
            // the log (so one sync, not two, before the rename); the rename, and the
            // folder's sync that makes it durable, come after the log is durable.
            let (tmp, file) =
                fsutil::write_temp(root, STATEMENT_FILE, &bytes).map_err(statement_err)?;
            // Named by its final name: that is the name its content is durable under.
            self.defer_sync(
                vec![SyncItem::File(file, root.join(STATEMENT_FILE))],
                Vec::new(),
            );
            let synced = self.sync_all().wait();
            let renamed = synced.and_then(|()| {
                fs::rename(&tmp, root.join(STATEMENT_FILE))
                    .and_then(|()| sync_dir(root))
                    .map_err(statement_err)
            });
            if let Err(e) = renamed {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        } else {
            write_atomic(root, STATEMENT_FILE, &bytes, false).map_err(statement_err)?;
        }
        // The writer is done with the bundle: its lock goes now, not when the last clone
        // of the recorder (or the committer's copy of the log descriptor) goes, so a
        // paused run can be resumed at once, in this process or another.
        crate::lock::release(&lock(&self.inner.log).file);
        tracing::debug!(root = %root.display(), events = facts.event_count, status = end.status.as_str(), "evidence bundle finished");
        Ok(Finished {
            facts,
            statement_path: root.join(STATEMENT_FILE),
        })
    }
}

/// Remove what an interrupted run leaves besides its log: blobs that no event names
/// (a blob is stored before the event naming it) and temporary files of unfinished
/// writes. The log itself is untouched.
fn remove_leftovers(
    root: &Path,
    referenced: &std::collections::BTreeSet<String>,
    sync: bool,
) -> Result<()> {
    let blob_dir = root.join("blobs/sha256");
    let mut removed = 0usize;
    for f in walk_files(&blob_dir).files {
        let temp = f.rel.starts_with('.') && f.rel.contains(".tmp-");
        let orphan = crate::log::is_sha256_hex(&f.rel) && !referenced.contains(&f.rel);
        if temp || orphan {
            fs::remove_file(&f.path).map_err(|e| EvidenceError::io("remove", &f.path, e))?;
            removed += 1;
        }
    }
    if removed > 0 && sync {
        sync_dir(&blob_dir).map_err(|e| EvidenceError::io("sync", &blob_dir, e))?;
    }
    // A pack being rewritten when the run was interrupted.
    if let Ok(entries) = fs::read_dir(root.join("blobs")) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with(".pack.tmp-")
                && entry.file_type().is_ok_and(|t| t.is_file())
            {
                let path = entry.path();
                fs::remove_file(&path).map_err(|e| EvidenceError::io("remove", &path, e))?;
            }
        }
    }
    let entries = fs::read_dir(root).map_err(|e| EvidenceError::io("list", root, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_temp = [STATEMENT_FILE, crate::dsse::DSSE_FILE]
            .iter()
            .any(|f| name.starts_with(&format!(".{f}.tmp-")));
        if is_temp && entry.file_type().is_ok_and(|t| t.is_file()) {
            let path = entry.path();
            fs::remove_file(&path).map_err(|e| EvidenceError::io("remove", &path, e))?;
        }
    }
    if removed > 0 {
        tracing::info!(
            removed,
            "removed blobs left unreferenced by an interrupted run"
        );
    }
    Ok(())
}

/// Make a reopened bundle's pack hold exactly what its log names, and open it to append:
/// a torn tail is cut, and blobs no event names (stored just before a crash), with the
/// chunks only they used, are removed: by cutting the pack when they are all at its end
/// (the usual case), else by rewriting it to a temporary file renamed into place.
fn reopen_pack(
    root: &Path,
    referenced: &std::collections::BTreeSet<String>,
    sync: bool,
) -> Result<PackWriter> {
    use crate::pack::{BlobReader, FileSource};
    let path = root.join(PACK_FILE);
    let dir = root.join("blobs");
    let bad = |reason: String| EvidenceError::UnsupportedFile {
        path: path.clone(),
        reason,
    };
    if matches!(fs::symlink_metadata(&path), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
        // Lost before it was ever synced (no event names a blob in it, or the log would
        // not have been durable): start an empty one.
        let w = PackWriter::create(&path).map_err(|e| EvidenceError::io("create", &path, e))?;
        if sync {
            w.file
                .sync_data()
                .and_then(|()| sync_dir(&dir))
                .map_err(|e| EvidenceError::io("sync", &path, e))?;
        }
        return Ok(w);
    }
    let src = FileSource::open(&path).map_err(|e| EvidenceError::io("open", &path, e))?;
    let reader = BlobReader::new(src).map_err(|e| bad(e.to_string()))?;
    let index = reader.index();
    let mut needed: Vec<u32> = referenced
        .iter()
        .filter_map(|hex| index.find_hex(hex))
        .collect();
    needed.sort_unstable();
    let mut used = vec![false; index.chunks.len()];
    for &b in &needed {
        for c in index.chunk_list(b) {
            used[c as usize] = true;
        }
    }
    let cut = needed
        .last()
        .map_or(crate::pack::HEADER.len() as u64, |&b| {
            index.blobs[b as usize].end
        });
    let clean = index.blobs.len() == needed.len()
        && used.iter().all(|u| *u)
        && index.torn.is_none()
        && index.good_len > 0;
    if !clean {
        let prefix_whole = index.good_len > 0
            && index
                .blobs
                .iter()
                .enumerate()
                .filter(|(_, b)| b.end <= cut)
                .all(|(i, _)| needed.binary_search(&(i as u32)).is_ok())
            && index
                .chunks
                .iter()
                .zip(&used)
                .filter(|(c, _)| c.offset < cut)
                .all(|(_, u)| *u);
        if prefix_whole {
            // Everything past `cut` is unneeded: cut it off (append-only otherwise).
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| EvidenceError::io("open", &path, e))?;
            f.set_len(cut)
                .map_err(|e| EvidenceError::io("truncate", &path, e))?;
            if sync {
                f.sync_data()
                    .map_err(|e| EvidenceError::io("sync", &path, e))?;
                #[cfg(feature = "sync-probe")]
                fsutil::synced_log(&path, cut);
            }
        } else {
            let tmp = crate::pack::rewrite(&reader, &needed, &dir, sync)
                .map_err(|e| EvidenceError::io("rewrite", &path, e))?;
            fs::rename(&tmp, &path).map_err(|e| EvidenceError::io("rename", &tmp, e))?;
            if sync {
                sync_dir(&dir).map_err(|e| EvidenceError::io("sync", &dir, e))?;
            }
        }
        tracing::info!(
            kept = needed.len(),
            indexed = index.blobs.len(),
            "pack trimmed to the blobs its log names"
        );
    }
    let src = FileSource::open(&path).map_err(|e| EvidenceError::io("open", &path, e))?;
    let index = crate::pack::read_index(&src).map_err(|e| bad(e.to_string()))?;
    PackWriter::resume(&path, &index).map_err(|e| EvidenceError::io("open", &path, e))
}

/// A handle that can append `declared` events and nothing else. Tools get this, never
/// the [`Recorder`]: they can add claims (with confidence `declared`) but cannot write
/// any other event type or confidence, nor rewrite anything.
#[derive(Clone)]
pub struct Declarer {
    recorder: Recorder,
    source: Option<String>,
}

impl std::fmt::Debug for Declarer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Declarer")
            .field("source", &self.source)
            .finish()
    }
}

impl Declarer {
    fn payload(&self, kind: &str, data: Value) -> Declared {
        Declared {
            source: self.source.clone(),
            kind: kind.to_owned(),
            data,
        }
    }

    /// Append a `declared` event of `kind` with `data`; returns its seq.
    pub fn declare(&self, kind: &str, data: Value) -> Result<u64> {
        self.recorder.record(&self.payload(kind, data))
    }

    /// Like [`Declarer::declare`], without blocking on fsync.
    pub fn declare_async(&self, kind: &str, data: Value) -> Durable<u64> {
        self.recorder.record_async(&self.payload(kind, data))
    }
}
