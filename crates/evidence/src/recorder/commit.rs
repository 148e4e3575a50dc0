//! The group-commit engine: one committer thread per process, shared by every
//! recorder, that makes batches of writes durable together.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

use super::guard::lock;
use crate::error::{EvidenceError, Result};
#[cfg(feature = "sync-probe")]
use crate::fsutil;
use crate::fsutil::sync_dir;

// ---------------------------------------------------------------------------------------
// Sync machinery: one committer thread per process, shared by every recorder.
//
// A recorder that needs something durable takes a ticket and puts itself on the
// committer's queue (once, however many tickets it takes before the committer gets to
// it). The committer takes every queued recorder at once and makes the whole batch
// durable together: write-back of every file and log started at once, then every pending
// file (blobs, inputs, outputs) of every recorder synced, then every distinct pending
// directory, then every log. Under ext4's ordered mode the first `fdatasync` commits the
// journal transaction that holds all of them, so the rest are cheap: one commit covers
// many runs, which is what group commit is for.

/// A file (or directory) waiting to be made durable by the committer.
pub(super) enum SyncItem {
    /// An open file (and its name, for messages and the sync probe): synced with
    /// `fdatasync`.
    File(File, PathBuf),
    /// A path, opened when synced (so that waiting items hold no descriptor).
    Path(PathBuf),
    /// The bundle's append-only pack (blob store v2), shared with its writer.
    Pack(Arc<File>, PathBuf),
}

impl SyncItem {
    pub(super) fn sync(&self) -> std::io::Result<()> {
        match self {
            SyncItem::File(f, _) => f.sync_data(),
            SyncItem::Pack(f, _) => f.sync_data(),
            SyncItem::Path(p) => File::open(p)?.sync_data(),
        }
    }

    pub(super) fn path(&self) -> &Path {
        match self {
            SyncItem::File(_, p) | SyncItem::Path(p) | SyncItem::Pack(_, p) => p,
        }
    }
}

#[derive(Default)]
pub(super) struct SyncState {
    /// Highest ticket handed out.
    pub(super) requested: u64,
    /// Every ticket up to this one is durable.
    pub(super) completed: u64,
    /// A sync failed: sticky.
    pub(super) error: Option<String>,
    /// Files (blobs, inputs, outputs) written but not yet synced.
    pub(super) pending_files: Vec<SyncItem>,
    /// Directories whose new names are not yet synced.
    pub(super) pending_dirs: Vec<PathBuf>,
    /// Async waiters: wake when `completed >= ticket`.
    pub(super) wakers: Vec<(u64, Waker)>,
    /// On the committer's queue now.
    pub(super) queued: bool,
    /// Something was written (a line, a blob, a file to sync) since the last ticket: a
    /// new request needs a new batch. When clear, a request reuses the last ticket.
    pub(super) dirty: bool,
}

pub(super) struct SyncShared {
    pub(super) state: Mutex<SyncState>,
    pub(super) done: Condvar,
    /// The log (the recorder's own descriptor, shared), synced last in every batch that
    /// includes this recorder.
    pub(super) log: Arc<File>,
    /// The log's path (for the sync probe).
    #[cfg(feature = "sync-probe")]
    pub(super) path: PathBuf,
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
    pub(super) fn new(
        log: Arc<File>,
        #[allow(unused_variables)] path: &Path,
    ) -> std::io::Result<Arc<Self>> {
        Ok(Arc::new(SyncShared {
            state: Mutex::new(SyncState::default()),
            done: Condvar::new(),
            log,
            #[cfg(feature = "sync-probe")]
            path: path.to_path_buf(),
        }))
    }

    /// Ask for a sync covering everything written so far; returns the ticket to wait for.
    pub(super) fn request(self: &Arc<Self>) -> u64 {
        let mut st = lock(&self.state);
        self.request_locked(&mut st)
    }

    /// [`SyncShared::request`] with the state already locked.
    pub(super) fn request_locked(self: &Arc<Self>, st: &mut SyncState) -> u64 {
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

    pub(super) fn wait(&self, ticket: u64) -> Result<()> {
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

    pub(super) fn poll_ticket(&self, ticket: u64, cx: &mut Context<'_>) -> Poll<Result<()>> {
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

/// Start writing back `file`'s dirty pages without waiting (`sync_file_range(2)` with
/// `SYNC_FILE_RANGE_WRITE`): done for every file of a batch before the first `fdatasync`,
/// so that their blocks are allocated in the same journal transaction and the first
/// `fdatasync`'s commit covers them all (the later ones then wait only for their own data,
/// already on its way). Best effort: an error here is found again by the `fdatasync`.
#[allow(unsafe_code)]
fn start_writeback(file: &File) {
    use std::os::fd::AsRawFd as _;
    // SAFETY: a plain syscall on a descriptor `file` keeps open for the call.
    let _ = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
}

/// At most this many syncs of a batch's phase run at once. A file system joins syncs
/// that wait together into one journal commit, where syncs made one after another (the
/// directories of many runs, say) each wait for a commit of their own.
const SYNC_THREADS: usize = 8;

/// Run `sync` on every item, several at once (up to [`SYNC_THREADS`], on scoped threads
/// and this one); each item's error, in item order. A thread that cannot be started
/// leaves its share to the others.
fn sync_each<T: Sync>(
    items: &[T],
    sync: impl Fn(&T) -> std::io::Result<()> + Sync,
) -> Vec<Option<std::io::Error>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    if items.len() <= 1 {
        return items.iter().map(|i| sync(i).err()).collect();
    }
    let next = AtomicUsize::new(0);
    let errors: Vec<Mutex<Option<std::io::Error>>> =
        items.iter().map(|_| Mutex::new(None)).collect();
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            if let Err(e) = sync(item) {
                *lock(&errors[i]) = Some(e);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..SYNC_THREADS.min(items.len()) {
            if std::thread::Builder::new()
                .name("provrun-evidence-sync".into())
                .spawn_scoped(scope, work)
                .is_err()
            {
                break;
            }
        }
        work();
    });
    errors
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect()
}

/// Make a batch durable with one `fdatasync` per file: write-back of every file and log
/// started first (see [`start_writeback`]), then the files synced, then the directories
/// naming them, then the logs naming both; within each of the three, several syncs wait
/// at once (see [`sync_each`]). Only this batch's own files are written back (a `syncfs`
/// would also wait for every other program's dirty data on the file system), and an error
/// fails only the recorder whose file it was.
fn sync_batch_each(parts: &mut [BatchPart], dirs: &mut [(PathBuf, usize)]) {
    for part in parts.iter() {
        for f in &part.files {
            match f {
                SyncItem::File(f, _) => start_writeback(f),
                SyncItem::Pack(f, _) => start_writeback(f),
                SyncItem::Path(_) => {}
            }
        }
        start_writeback(&part.shared.log);
    }
    // Files, in part order (the first error of a part is the one it reports).
    let files: Vec<(usize, &SyncItem)> = parts
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.files.iter().map(move |f| (i, f)))
        .collect();
    let failed: Vec<(usize, String)> = sync_each(&files, |(_, f)| f.sync())
        .into_iter()
        .zip(&files)
        .filter_map(|(e, (i, f))| {
            e.map(|e| (*i, format!("fsync of {} failed: {e}", f.path().display())))
        })
        .collect();
    for (i, why) in failed {
        parts[i].error.get_or_insert(why);
    }
    // Each distinct directory once; its error goes to every part that named it.
    dirs.sort();
    let mut groups: Vec<(&Path, Vec<usize>)> = Vec::new();
    for (dir, owner) in dirs.iter() {
        match groups.last_mut() {
            Some((d, owners)) if *d == dir.as_path() => owners.push(*owner),
            _ => groups.push((dir.as_path(), vec![*owner])),
        }
    }
    for (e, (_, owners)) in sync_each(&groups, |(d, _)| sync_dir(d))
        .into_iter()
        .zip(&groups)
    {
        if let Some(e) = e {
            for owner in owners {
                parts[*owner]
                    .error
                    .get_or_insert_with(|| format!("fsync failed: {e}"));
            }
        }
    }
    // The logs of the parts whose files and directories are durable.
    let ready: Vec<usize> = (0..parts.len())
        .filter(|i| parts[*i].error.is_none())
        .collect();
    let logs: Vec<&File> = ready.iter().map(|i| &*parts[*i].shared.log).collect();
    let failed: Vec<(usize, std::io::Error)> = sync_each(&logs, |f| f.sync_data())
        .into_iter()
        .zip(&ready)
        .filter_map(|(e, i)| e.map(|e| (*i, e)))
        .collect();
    for (i, e) in failed {
        parts[i].error = Some(format!("fsync failed: {e}"));
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
        sync_batch_each(&mut parts, &mut dirs);
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
