//! What a server holds while it runs: its configuration, the threads (each conversation's
//! last run, and whether a run of it is in flight), the runs in flight (their controls, for
//! cancel and steer), the slots that bound them, the index, and the stop switch.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use provrun_agent::RunControl;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::ServeConfig;
use crate::error::{ApiError, ServeError};
use crate::index::{Entry, INDEX_FILE, Index};
use crate::metrics::Metrics;
use crate::shared::{LostTurn, Shared, ThreadState};

pub(crate) use crate::shared::LastRun;

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
    /// The bundle ids held by requests and runs in flight ([`State::claim_bundle`]).
    claims: Mutex<HashSet<String>>,
    /// Signalled whenever a run leaves `active`, or a connection closes.
    pub(crate) run_ended: Notify,
    /// Connection tasks alive (a stop waits for them to send their last events).
    open: std::sync::atomic::AtomicUsize,
    /// The connections the cap counts, and which of them wait for a header.
    pub(crate) connections: Arc<Connections>,
    /// The address served (the port picked, when `listen` asked for port 0).
    pub(crate) served: SocketAddr,
    /// Where runs execute: a runtime of their own, apart from the one that accepts and
    /// answers requests.
    pub(crate) runs: RunsRuntime,
    pub(crate) slots: Arc<Semaphore>,
    /// Cancelled when the server stops taking runs.
    pub(crate) stopping: CancellationToken,
    /// Cancelled when the runs still in flight are to be cancelled (after the grace).
    pub(crate) cancel_all: CancellationToken,
    /// The SHA-256 of the token, compared in constant time with a request's.
    pub(crate) token_digest: Option<[u8; 32]>,
    /// What `GET /metrics` shows.
    pub(crate) metrics: Metrics,
    /// The objects replicas share, when the store is a bucket (`None` for a folder).
    pub(crate) shared: Option<Shared>,
}

/// A thread held for one request ([`State::claim_thread`]): its name, the turn taken in
/// the store (a bucket store's), and its last run when it was taken.
#[derive(Debug, Clone)]
pub(crate) struct ThreadTurn {
    pub(crate) thread: String,
    turn: Option<u64>,
    pub(crate) last: Option<LastRun>,
}

impl ThreadTurn {
    /// The turn taken in the store (a bucket store's), if any.
    pub(crate) fn turn(&self) -> Option<u64> {
        self.turn
    }
}

/// What [`State::claim_turn`] found.
pub(crate) enum Claim {
    /// The thread is held for this request.
    Taken(ThreadTurn),
    /// The run of the thread's last turn was held by a replica whose lease ran out: it is
    /// to be taken over (`crate::lease::take_over`) before the thread takes a turn.
    Lost(LostTurn),
}

/// The refusal of a thread with a run in flight.
pub(crate) fn thread_busy(thread: &str) -> ApiError {
    ApiError::conflict(
        "thread_busy",
        format!("a run of thread `{thread}` is in flight; wait for its end"),
    )
}

/// A refusal for a store the shared objects cannot be read or written in.
pub(crate) fn store_unavailable(e: &ServeError) -> ApiError {
    tracing::error!("the store's shared objects cannot be used: {e}");
    ApiError::new(
        hyper::StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        "the store cannot be reached to take this run now; try again later",
    )
    .retry_after(crate::config::RETRY_AFTER_S)
}

impl State {
    /// The state for `config`: the build folder made, the index read, each thread's last
    /// run found.
    pub(crate) fn new(config: ServeConfig, served: SocketAddr) -> Result<Self, ServeError> {
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
        let shared = if config.store.is_bucket() {
            Some(Shared::open(
                &config.store.name(),
                served.to_string(),
                config.lease,
            )?)
        } else {
            None
        };
        let cap = connection_cap(config.max_connections);
        let runs = RunsRuntime::new().map_err(|source| ServeError::Io {
            action: "start the runtime for runs in",
            path: build_dir.clone(),
            source,
        })?;
        Ok(Self {
            slots: Arc::new(Semaphore::new(config.concurrency)),
            config,
            build_dir,
            _work: work,
            index,
            threads: Mutex::new(threads),
            active: Mutex::new(HashMap::new()),
            known: Mutex::new(known),
            claims: Mutex::new(HashSet::new()),
            run_ended: Notify::new(),
            open: std::sync::atomic::AtomicUsize::new(0),
            connections: Arc::new(Connections::new(cap)),
            served,
            runs,
            stopping: CancellationToken::new(),
            cancel_all: CancellationToken::new(),
            token_digest,
            metrics: Metrics::new(),
            shared,
        })
    }

    /// The folder bundles are built in.
    pub(crate) fn build_dir(&self) -> &std::path::Path {
        &self.build_dir
    }

    /// The folder the bundle `id` is built in (and a paused one kept in).
    pub(crate) fn folder_of(&self, id: &str) -> PathBuf {
        self.build_dir.join(id)
    }

    /// Mark `thread` busy and give its last run; 409 when a run of it is in flight (here
    /// or, with a bucket store, on any replica: the next turn is taken in the store);
    /// [`Claim::Lost`] (the thread not held) when that run's replica was lost.
    pub(crate) async fn claim_turn(&self, thread: &str) -> Result<Claim, ApiError> {
        let busy = || thread_busy(thread);
        let local_last = {
            let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
            let t = threads.entry(thread.to_string()).or_default();
            if t.busy {
                return Err(busy());
            }
            t.busy = true;
            t.last.clone()
        };
        let Some(shared) = &self.shared else {
            return Ok(Claim::Taken(ThreadTurn {
                thread: thread.to_string(),
                turn: None,
                last: local_last,
            }));
        };
        let taken = async {
            match shared.thread(thread).await? {
                ThreadState::Lost(lost) => Ok(Err(lost)),
                ThreadState::Busy => Ok(Ok(None)),
                ThreadState::Free { turn, last } => {
                    // A thread no replica took a turn of yet may have runs in this
                    // server's own index (written before turns were kept in the store).
                    let last = if turn == 0 { local_last } else { last };
                    Ok(Ok(shared
                        .take_turn(thread, turn + 1)
                        .await?
                        .then_some((turn + 1, last))))
                }
            }
        };
        let taken: Result<_, ServeError> = taken.await;
        match taken {
            Ok(Ok(Some((turn, last)))) => Ok(Claim::Taken(ThreadTurn {
                thread: thread.to_string(),
                turn: Some(turn),
                last,
            })),
            Ok(Err(lost)) => {
                self.release_local(thread, None);
                Ok(Claim::Lost(lost))
            }
            Ok(Ok(None)) => {
                self.release_local(thread, None);
                Err(busy())
            }
            Err(e) => {
                self.release_local(thread, None);
                Err(store_unavailable(&e))
            }
        }
    }

    /// Free the thread here only (its run was taken over by another replica, which ends
    /// its turn in the store).
    pub(crate) fn let_go(&self, turn: &ThreadTurn) {
        self.release_local(&turn.thread, None);
    }

    fn release_local(&self, thread: &str, last: Option<LastRun>) {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        let t = threads.entry(thread.to_string()).or_default();
        t.busy = false;
        if last.is_some() {
            t.last = last;
        }
    }

    /// Free the thread again, with `ended` as its last run when a run ended (with a bucket
    /// store, the turn's end is written there, so any replica may take the next).
    pub(crate) async fn release_thread(&self, turn: &ThreadTurn, ended: Option<LastRun>) {
        if let (Some(shared), Some(n)) = (&self.shared, turn.turn) {
            let last = ended.clone().or_else(|| turn.last.clone());
            let mut tries = 0;
            while let Err(e) = shared.end_turn(&turn.thread, n, last.clone()).await {
                tries += 1;
                if tries == 3 {
                    tracing::error!(
                        thread = %turn.thread,
                        turn = n,
                        "the thread's turn could not be ended in the store, so no replica \
                         takes its next turn until `threads/{}/{n:010}.end.json` is written: {e}",
                        turn.thread
                    );
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200 * tries)).await;
            }
        }
        self.release_local(&turn.thread, ended);
    }

    /// Every run's latest index entry: the shared index of a bucket store (every
    /// replica's runs), else this server's `index.jsonl`.
    pub(crate) async fn entries(&self) -> Result<Vec<Entry>, ServeError> {
        match &self.shared {
            Some(shared) => shared.entries().await,
            None => self.index.read(),
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

    /// Claim a bundle id for a new run, in one step no other request can come between:
    /// `preferred` when no run has it (none claimed it, the index does not know it, no
    /// folder of that name is in the build folder, and — with a bucket store — no replica
    /// made its claim object `claims/run/ID` first), else a fresh `run-UUID`. The id stays
    /// the claimant's until the [`BundleClaim`] is dropped: by then its run has ended (the
    /// index and the store know the bundle), or never started (nothing was written).
    pub(crate) async fn claim_bundle(
        self: &Arc<Self>,
        preferred: &str,
    ) -> Result<BundleClaim, ApiError> {
        let mut id = self.claim_local(preferred);
        let Some(shared) = &self.shared else {
            return Ok(BundleClaim {
                id,
                shared: false,
                state: Arc::clone(self),
            });
        };
        loop {
            match shared.claim_id(&id).await {
                Ok(true) => {
                    return Ok(BundleClaim {
                        id,
                        shared: true,
                        state: Arc::clone(self),
                    });
                }
                Ok(false) => {
                    self.unclaim_local(&id);
                    id = self.claim_local(&format!("run-{}", uuid::Uuid::new_v4()));
                }
                Err(e) => {
                    self.unclaim_local(&id);
                    return Err(store_unavailable(&e));
                }
            }
        }
    }

    /// The local half of [`State::claim_bundle`].
    fn claim_local(&self, preferred: &str) -> String {
        let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        let taken = |id: &str| {
            id == INDEX_FILE
                || claims.contains(id)
                || self
                    .known
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(id)
                || std::fs::symlink_metadata(self.folder_of(id)).is_ok()
        };
        let mut id = preferred.to_string();
        while taken(&id) {
            id = format!("run-{}", uuid::Uuid::new_v4());
        }
        claims.insert(id.clone());
        id
    }

    fn unclaim_local(&self, id: &str) {
        self.claims
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// A connection opens: its task holds the guard until the connection is done (its last
    /// response written), so a stop waits for the runs' last events to leave.
    pub(crate) fn open_connection(self: &Arc<Self>) -> ConnectionGuard {
        self.open.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ConnectionGuard(Arc::clone(self))
    }

    /// How many connections are open.
    pub(crate) fn open_connections(&self) -> usize {
        self.open.load(std::sync::atomic::Ordering::SeqCst)
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
            .open
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.run_ended.notify_waiters();
    }
}

/// A bundle id held for one new run ([`State::claim_bundle`]); the id is free again when
/// this is dropped, unless the run made its bundle.
#[derive(Debug)]
pub(crate) struct BundleClaim {
    id: String,
    /// Whether its claim object is in the store.
    shared: bool,
    state: Arc<State>,
}

impl BundleClaim {
    /// The id claimed.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Let the id go for good, its run never begun: the store's claim object too.
    pub(crate) async fn release(self) {
        if self.shared
            && let Some(shared) = &self.state.shared
            && let Err(e) = shared.release_id(&self.id).await
        {
            tracing::warn!(bundle = %self.id, "the id's claim could not be removed: {e}");
        }
    }
}

impl Drop for BundleClaim {
    fn drop(&mut self) {
        self.state.unclaim_local(&self.id);
    }
}

/// The soft open-files limit of the process, if it has one.
pub(crate) fn open_files_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// The connection cap: `wanted`, but at most half the process's open-files limit (the
/// rest is for the runs' bundles, the store and the index).
fn connection_cap(wanted: usize) -> usize {
    let limit = open_files_limit()
        .and_then(|n| usize::try_from(n / 2).ok())
        .unwrap_or(usize::MAX)
        .max(16);
    if wanted > limit {
        tracing::info!(
            wanted,
            cap = limit,
            "the open-files limit is low: at most {limit} connections are kept open"
        );
    }
    wanted.min(limit)
}

/// The open connections, oldest first, each with whether it is serving a request (from
/// its header read until its response's body is done). A connection not serving one is
/// waiting for a header: of those, the oldest is the one closed to make room at the cap.
#[derive(Debug)]
pub(crate) struct Connections {
    cap: usize,
    table: Mutex<ConnectionTable>,
}

#[derive(Debug, Default)]
struct ConnectionTable {
    next: u64,
    open: BTreeMap<u64, Arc<ConnectionSlot>>,
}

#[derive(Debug, Default)]
struct ConnectionSlot {
    /// Requests in service on it.
    busy: AtomicUsize,
    /// Cancelled to close it.
    evict: CancellationToken,
}

impl Connections {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            table: Mutex::new(ConnectionTable::default()),
        }
    }

    /// How many connections may be open.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Take in a new connection: under the cap at once; at it, by closing the oldest
    /// connection that waits for a header. `None` when every open connection is serving a
    /// request (the new one is then closed).
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if table.open.len() >= self.cap {
            let idle = table
                .open
                .iter()
                .find(|(_, c)| c.busy.load(Ordering::SeqCst) == 0)
                .map(|(id, _)| *id)?;
            if let Some(closed) = table.open.remove(&idle) {
                closed.evict.cancel();
            }
        }
        let id = table.next;
        table.next += 1;
        let slot = Arc::new(ConnectionSlot::default());
        table.open.insert(id, Arc::clone(&slot));
        Some(Admitted {
            id,
            slot,
            connections: Arc::clone(self),
        })
    }
}

/// A connection counted by [`Connections`]; it leaves the count when dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    id: u64,
    slot: Arc<ConnectionSlot>,
    connections: Arc<Connections>,
}

impl Admitted {
    /// Cancelled when the connection is closed to make room.
    pub(crate) fn evicted(&self) -> CancellationToken {
        self.slot.evict.clone()
    }

    /// Mark the connection busy until the guard is dropped.
    pub(crate) fn busy(&self) -> Busy {
        self.slot.busy.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(&self.slot))
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.connections
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .remove(&self.id);
    }
}

/// A request in service on a connection ([`Admitted::busy`]).
#[derive(Debug)]
pub(crate) struct Busy(Arc<ConnectionSlot>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The runtime runs execute on (one worker per core), apart from the runtime that serves
/// connections: under load the front's threads are free to accept a connection, read its
/// request and send its first event while every run's work is queued here. Dropped
/// without waiting (the server waits for its runs before it stops).
pub(crate) struct RunsRuntime(Option<tokio::runtime::Runtime>);

impl RunsRuntime {
    fn new() -> std::io::Result<Self> {
        let threads = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("provrun-serve-run")
            .enable_all()
            .build()?;
        Ok(Self(Some(runtime)))
    }

    /// Run `task` there.
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        if let Some(rt) = &self.0 {
            rt.spawn(task);
        }
    }
}

impl std::fmt::Debug for RunsRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunsRuntime")
    }
}

impl Drop for RunsRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}
