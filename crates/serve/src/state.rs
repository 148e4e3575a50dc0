//! What a server holds while it runs: its configuration, the threads (each conversation's
//! last run, and whether a run of it is in flight), the runs in flight (their controls, for
//! cancel and steer), the slots that bound them, the index, and the stop switch.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use provrun_agent::RunControl;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::ServeConfig;
use crate::error::{ApiError, ServeError};
use crate::index::{Entry, INDEX_FILE, Index};

/// A thread's last ended run, as the index or the run's end says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LastRun {
    pub(crate) id: String,
    pub(crate) agent: String,
    pub(crate) status: String,
    pub(crate) statement_sha256: String,
}

impl From<&Entry> for LastRun {
    fn from(e: &Entry) -> Self {
        Self {
            id: e.id.clone(),
            agent: e.agent.clone(),
            status: e.status.clone(),
            statement_sha256: e.statement_sha256.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct Thread {
    /// A run of this thread is in flight.
    busy: bool,
    last: Option<LastRun>,
}

/// A run in flight.
#[derive(Debug, Clone)]
pub(crate) struct Active {
    pub(crate) control: RunControl,
    /// The client's id for the request that runs it.
    pub(crate) agui_run_id: String,
}

/// The server's shared state.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: ServeConfig,
    /// Where bundles are built (the store's folder, or the work folder of a bucket store).
    pub(crate) build_dir: PathBuf,
    /// A bucket store's temporary work folder, kept as long as the server.
    _work: Option<tempfile::TempDir>,
    pub(crate) index: Index,
    threads: Mutex<HashMap<String, Thread>>,
    active: Mutex<HashMap<String, Active>>,
    /// The ids of every bundle the index knows.
    known: Mutex<HashSet<String>>,
    /// Signalled whenever a run leaves `active`, or a connection closes.
    pub(crate) run_ended: Notify,
    /// Connections open.
    connections: std::sync::atomic::AtomicUsize,
    pub(crate) slots: Arc<Semaphore>,
    /// Cancelled when the server stops taking runs.
    pub(crate) stopping: CancellationToken,
    /// Cancelled when the runs still in flight are to be cancelled (after the grace).
    pub(crate) cancel_all: CancellationToken,
    /// The SHA-256 of the token, compared in constant time with a request's.
    pub(crate) token_digest: Option<[u8; 32]>,
}

impl State {
    /// The state for `config`: the build folder made, the index read, each thread's last
    /// run found.
    pub(crate) fn new(config: ServeConfig) -> Result<Self, ServeError> {
        let (build_dir, work) = match (config.store.folder_path(), &config.work_dir) {
            (Some(folder), _) => (folder.to_path_buf(), None),
            (None, Some(dir)) => (dir.clone(), None),
            (None, None) => {
                let dir = tempfile::Builder::new()
                    .prefix("provrun-serve-")
                    .tempdir()
                    .map_err(|source| ServeError::Io {
                        action: "make a work folder in",
                        path: std::env::temp_dir(),
                        source,
                    })?;
                (dir.path().to_path_buf(), Some(dir))
            }
        };
        std::fs::create_dir_all(&build_dir).map_err(|source| ServeError::Io {
            action: "make",
            path: build_dir.clone(),
            source,
        })?;
        let index = Index::at(build_dir.join(INDEX_FILE));
        let mut threads: HashMap<String, Thread> = HashMap::new();
        let mut known = HashSet::new();
        for entry in index.read()? {
            known.insert(entry.id.clone());
            threads.entry(entry.thread.clone()).or_default().last = Some(LastRun::from(&entry));
        }
        let token_digest = config.token.as_deref().map(crate::digest::digest);
        Ok(Self {
            slots: Arc::new(Semaphore::new(config.concurrency)),
            config,
            build_dir,
            _work: work,
            index,
            threads: Mutex::new(threads),
            active: Mutex::new(HashMap::new()),
            known: Mutex::new(known),
            run_ended: Notify::new(),
            connections: std::sync::atomic::AtomicUsize::new(0),
            stopping: CancellationToken::new(),
            cancel_all: CancellationToken::new(),
            token_digest,
        })
    }

    /// The folder the bundle `id` is built in (and a paused one kept in).
    pub(crate) fn folder_of(&self, id: &str) -> PathBuf {
        self.build_dir.join(id)
    }

    /// Mark `thread` busy and give its last run; 409 when a run of it is in flight.
    pub(crate) fn claim_thread(&self, thread: &str) -> Result<Option<LastRun>, ApiError> {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        let t = threads.entry(thread.to_string()).or_default();
        if t.busy {
            return Err(ApiError::conflict(
                "thread_busy",
                format!("a run of thread `{thread}` is in flight; wait for its end"),
            ));
        }
        t.busy = true;
        Ok(t.last.clone())
    }

    /// Free `thread` again, with `last` as its last run when a run ended.
    pub(crate) fn release_thread(&self, thread: &str, last: Option<LastRun>) {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        let t = threads.entry(thread.to_string()).or_default();
        t.busy = false;
        if last.is_some() {
            t.last = last;
        }
    }

    /// Note a run in flight.
    pub(crate) fn add_active(&self, bundle: &str, active: Active) {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(bundle.to_string(), active);
    }

    /// The run in flight that `id` names: its bundle id, or the client's run id.
    pub(crate) fn find_active(&self, id: &str) -> Option<(String, Active)> {
        let active = self.active.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(a) = active.get(id) {
            return Some((id.to_string(), a.clone()));
        }
        active
            .iter()
            .find(|(_, a)| a.agui_run_id == id)
            .map(|(b, a)| (b.clone(), a.clone()))
    }

    /// A run ended: forget it.
    pub(crate) fn remove_active(&self, bundle: &str) {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(bundle);
        self.run_ended.notify_waiters();
    }

    /// How many runs are in flight.
    pub(crate) fn active_count(&self) -> usize {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether a bundle of this id is in flight, built here, or in the index (so a
    /// client's run id never replaces another run's bundle).
    pub(crate) fn id_taken(&self, id: &str) -> bool {
        id == INDEX_FILE
            || self
                .active
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(id)
            || self
                .known
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(id)
            || std::fs::symlink_metadata(self.folder_of(id)).is_ok()
    }

    /// A connection opens: its task holds the guard until the connection is done (its last
    /// response written), so a stop waits for the runs' last events to leave.
    pub(crate) fn open_connection(self: &Arc<Self>) -> ConnectionGuard {
        self.connections
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ConnectionGuard(Arc::clone(self))
    }

    /// How many connections are open.
    pub(crate) fn open_connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Note that the index now knows the bundle `id`.
    pub(crate) fn add_known(&self, id: &str) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_string());
    }
}

/// An open connection (see [`State::open_connection`]).
pub(crate) struct ConnectionGuard(Arc<State>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0
            .connections
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.run_ended.notify_waiters();
    }
}
