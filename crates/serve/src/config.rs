//! [`ServeConfig`]: what a server serves (the agents folder), where its bundles go (a
//! [`Store`]), where it listens, and its limits, with the defaults docs/serve.md gives.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use provrun_agent::Backend;
use provrun_store::Store;

use crate::error::ServeError;

/// The largest request body taken by default (1 MiB): an AG-UI input carries the client's
/// copy of the conversation, and the server reads only its last turn.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// Runs in flight by default.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Messages one input may hold by default.
pub const DEFAULT_MAX_MESSAGES: usize = 1000;
/// Tools one input may offer by default.
pub const DEFAULT_MAX_TOOLS: usize = 64;
/// How long runs in flight may go on after a stop is asked for, by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// How long a replica's hold on a run it streams lasts unless renewed (a bucket store's
/// lease, docs/serve.md "Replicas").
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// What a 429 asks a client to wait before trying again, in seconds.
pub const RETRY_AFTER_S: u64 = 2;
/// Connections open at once by default (fewer when the open-files limit is low: at most
/// half of it). At the cap, the oldest connection still waiting for a request's header is
/// closed to make room for a new one.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// How long a client has to send a request's whole header (from the connection's start,
/// or the end of its previous request) before its connection is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// A server's configuration. Build it with [`ServeConfig::new`] and the setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeConfig {
    /// The folder of agents: each `NAME.toml` in it is served at `POST /agents/NAME`.
    pub agents: PathBuf,
    /// Where bundles go.
    pub store: Store,
    /// The address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// The bearer token every request must carry; `None` serves without one, which is
    /// allowed on a loopback address only.
    pub token: Option<String>,
    /// Runs in flight at most; a request past it is answered 429 with `Retry-After`.
    pub concurrency: usize,
    /// The one origin browsers may call from (CORS); `None`: no CORS headers at all.
    pub cors_origin: Option<String>,
    /// Host names requests may be addressed to besides the address served (and
    /// `localhost` for a loopback address), e.g. a reverse proxy's; checked only without a
    /// token, against DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Connections open at once at most (see [`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// The largest request body, in bytes (413 past it).
    pub body_limit: usize,
    /// Messages one input may hold (413 past it).
    pub max_messages: usize,
    /// Tools one input may offer (413 past it).
    pub max_tools: usize,
    /// How long runs may go on after a stop is asked for before they are cancelled.
    pub grace: Duration,
    /// Where runs are built and paused runs kept when the store is a bucket (a temporary
    /// folder when `None`); a folder store builds its bundles in place.
    pub work_dir: Option<PathBuf>,
    /// What runs the agents (its tool registry, a model for tests, the builder id).
    pub backend: Backend,
    /// The transparency log of runs (`provrun ledger init`) each run's bundle is appended
    /// to when the run ends (a paused run when a resume ends it); `None`: no ledger.
    pub ledger: Option<PathBuf>,
    /// A ledger opened for adding ([`provrun_ledger::LedgerWriter`]: a bucket, a
    /// `file://` folder, or a folder with its signing key given) each run's bundle is
    /// appended to when the run ends, with its location as the log names it; used instead
    /// of [`ServeConfig::ledger`] when set.
    pub ledger_writer: Option<(String, Arc<provrun_ledger::LedgerWriter>)>,
    /// With a bucket store: how long this replica's lease on a run it streams lasts unless
    /// renewed (it is renewed every third of it); another replica ends a run whose lease
    /// expired as `failed`.
    pub lease: Duration,
}

impl ServeConfig {
    /// Serve the agents of `agents` into `store`, on `listen`, with the default limits,
    /// no token and no CORS.
    pub fn new(agents: impl Into<PathBuf>, store: Store, listen: SocketAddr) -> Self {
        Self {
            agents: agents.into(),
            store,
            listen,
            token: None,
            concurrency: DEFAULT_CONCURRENCY,
            cors_origin: None,
            allowed_hosts: Vec::new(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            body_limit: DEFAULT_BODY_LIMIT,
            max_messages: DEFAULT_MAX_MESSAGES,
            max_tools: DEFAULT_MAX_TOOLS,
            grace: DEFAULT_GRACE,
            work_dir: None,
            backend: Backend::new(),
            ledger: None,
            ledger_writer: None,
            lease: DEFAULT_LEASE,
        }
    }

    /// Require this bearer token on every request.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// At most this many runs in flight (at least 1).
    pub fn concurrency(mut self, runs: usize) -> Self {
        self.concurrency = runs.max(1);
        self
    }

    /// Let browsers on this origin call the server.
    pub fn cors_origin(mut self, origin: impl Into<String>) -> Self {
        self.cors_origin = Some(origin.into());
        self
    }

    /// Take requests addressed to this host name too (without a token, `Host` must name
    /// the address served, `localhost`, or a name given here).
    pub fn allow_host(mut self, name: impl Into<String>) -> Self {
        self.allowed_hosts.push(name.into());
        self
    }

    /// Keep at most this many connections open (at least 1).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// The largest request body, in bytes.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// Messages one input may hold.
    pub fn max_messages(mut self, messages: usize) -> Self {
        self.max_messages = messages;
        self
    }

    /// How long runs may go on after a stop is asked for.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// With a bucket store, hold each run for `lease` (at least one second), renewed while
    /// it goes on.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// Build bucket stores' runs in this folder.
    pub fn work_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.work_dir = Some(dir.into());
        self
    }

    /// Append each run's bundle to the ledger in `dir` when the run ends
    /// ([`provrun_ledger::append_bundle`]).
    pub fn ledger(mut self, dir: impl Into<PathBuf>) -> Self {
        self.ledger = Some(dir.into());
        self
    }

    /// Append each run's bundle to this ledger, at `location` (for the log), when the run
    /// ends: a bucket (`s3://`) or any ledger opened with its signing key
    /// ([`provrun_ledger::LedgerWriter::open`]). Takes the place of [`ServeConfig::ledger`].
    pub fn ledger_writer(
        mut self,
        location: impl Into<String>,
        writer: provrun_ledger::LedgerWriter,
    ) -> Self {
        self.ledger_writer = Some((location.into(), Arc::new(writer)));
        self
    }

    /// Run the agents with this backend.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Refuse what cannot work: serving without a token on an address other than
    /// loopback, an empty token, a missing agents folder, a CORS origin that is not an
    /// `http(s)://host[:port]` origin, an allowed host that is not a host name.
    ///
    /// # Errors
    ///
    /// [`ServeError::Config`], saying which, for each of the cases above.
    pub fn check(&self) -> Result<(), ServeError> {
        if self.token.is_none() && !self.listen.ip().is_loopback() {
            return Err(ServeError::Config(format!(
                "refusing to serve on {} without a token: set PROVRUN_SERVE_TOKEN or give \
                 --token-file, or listen on a loopback address",
                self.listen
            )));
        }
        if self.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ServeError::Config("the token is empty".into()));
        }
        if !self.agents.is_dir() {
            return Err(ServeError::Config(format!(
                "the agents folder `{}` does not exist or is not a folder",
                self.agents.display()
            )));
        }
        for name in &self.allowed_hosts {
            let plain = !name.is_empty()
                && name.len() <= 253
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b));
            if !plain {
                return Err(ServeError::Config(format!(
                    "--allow-host `{name}` is not a host name (letters, digits, `.`, `-`; no port)"
                )));
            }
        }
        if let Some(origin) = &self.cors_origin {
            let rest = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            let plain = rest.is_some_and(|r| {
                !r.is_empty()
                    && r.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
            });
            if !plain {
                return Err(ServeError::Config(format!(
                    "--cors `{origin}` is not an origin (scheme://host[:port], no path)"
                )));
            }
        }
        Ok(())
    }
}
