//! [`Server`]: bound to its address, then run until asked to stop — at which it takes no
//! new connections or runs, lets the runs in flight go on for the grace period, cancels
//! those still going (their bundles end `cancelled`), waits for every one of them to be
//! finished, stored and indexed, and for their streams' last events to reach their clients
//! (each connection is shut down gracefully: a response being written is finished first).
//!
//! Against slow and many clients: each request's header must arrive within
//! [`HEADER_TIMEOUT`] and its body within the body timeout (`http.rs`); at most
//! `max_connections` connections are open (half the open-files limit when that is
//! lower), and at the cap the oldest connection still waiting for a header is closed
//! to make room, so a flood of idle or trickling connections cannot lock clients out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{HEADER_TIMEOUT, ServeConfig};
use crate::error::ServeError;
use crate::http::Body;
use crate::state::{Admitted, State};

/// How long cancelled runs get to finish their bundles after the grace, before the server
/// stops waiting for them.
const CANCEL_WAIT: Duration = Duration::from_secs(60);
/// How long connections get to send the runs' last events to their clients.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// How a server stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stopped {
    /// Runs that ended on their own during the grace period.
    pub finished_in_grace: usize,
    /// Runs cancelled when the grace period ran out.
    pub cancelled: usize,
    /// Runs still not ended when the server stopped waiting (0 unless a run would not
    /// stop).
    pub abandoned: usize,
}

/// A server bound to its address. [`Server::local_addr`] says where (port 0 picks one).
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: Arc<State>,
}

impl Server {
    /// Check the configuration, make the store's folder (or the work folder), read the
    /// index, and listen.
    ///
    /// # Errors
    ///
    /// [`ServeError::Config`] when [`ServeConfig::check`] refuses the configuration;
    /// [`ServeError::Store`] when the store cannot be made or written to;
    /// [`ServeError::Io`] when the work folder or the run index cannot be made or read;
    /// [`ServeError::Listen`] when the address cannot be bound.
    pub async fn bind(config: ServeConfig) -> Result<Server, ServeError> {
        config.check()?;
        config.store.probe().await?;
        let addr = config.listen;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Listen { addr, source })?;
        let served = listener.local_addr().unwrap_or(addr);
        let state = Arc::new(State::new(config, served)?);
        Ok(Server { listener, state })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.state.served
    }

    /// The URL it serves at (`http://ADDR/`).
    pub fn url(&self) -> String {
        format!("http://{}/", self.local_addr())
    }

    /// Serve until `stop` is cancelled, then stop as the module docs say.
    ///
    /// # Errors
    ///
    /// None at present: a connection that cannot be accepted is logged (with a pause
    /// that grows while accepting keeps failing, so a lack of file descriptors does not
    /// spin) and serving goes on.
    pub async fn run(self, stop: CancellationToken) -> Result<Stopped, ServeError> {
        let Server { listener, state } = self;
        let mut failing = AcceptFailures::default();
        // With a bucket store: runs whose replica was lost are ended without waiting for a
        // request of their thread.
        let sweeping = stop.child_token();
        if state.shared.is_some() {
            tokio::spawn(crate::lease::sweep(Arc::clone(&state), sweeping.clone()));
        }
        let _sweeping = sweeping.drop_guard();
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        failing.reset();
                        match state.connections.admit() {
                            Some(admitted) => {
                                tokio::spawn(connection(Arc::clone(&state), stream, admitted));
                            }
                            None => failing.all_busy(state.connections.cap()),
                        }
                    }
                    Err(e) => {
                        let pause = failing.failed(&e);
                        tokio::select! {
                            () = stop.cancelled() => break,
                            () = tokio::time::sleep(pause) => {}
                        }
                    }
                }
            }
        }
        drop(listener);
        Ok(drain(&state).await)
    }
}

/// Failed accepts, logged at most once a second, with a pause before the next try that
/// doubles while they go on.
#[derive(Debug, Default)]
struct AcceptFailures {
    pause: Duration,
    unlogged: u64,
    logged: Option<Instant>,
}

impl AcceptFailures {
    const FIRST_PAUSE: Duration = Duration::from_millis(5);
    const LONGEST_PAUSE: Duration = Duration::from_secs(1);

    fn reset(&mut self) {
        self.pause = Duration::ZERO;
    }

    fn due(&mut self) -> Option<u64> {
        self.unlogged += 1;
        if self
            .logged
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return None;
        }
        self.logged = Some(Instant::now());
        Some(std::mem::take(&mut self.unlogged))
    }

    /// An accept failed: log it (when due) and say how long to pause.
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        self.pause = (self.pause * 2).clamp(Self::FIRST_PAUSE, Self::LONGEST_PAUSE);
        if let Some(failures) = self.due() {
            let pause_ms = u64::try_from(self.pause.as_millis()).unwrap_or(u64::MAX);
            if crate::runs::is_out_of_descriptors(e) {
                tracing::error!(
                    failures,
                    pause_ms,
                    open_files_limit = crate::state::open_files_limit().unwrap_or(0),
                    "cannot accept a connection: the process has no file descriptors left \
                     (EMFILE, too many open files); new connections wait until some close"
                );
            } else {
                tracing::error!(failures, pause_ms, "cannot accept a connection: {e}");
            }
        }
        self.pause
    }

    /// At the connection cap with no connection to close: the new one was closed.
    fn all_busy(&mut self, cap: usize) {
        if let Some(refused) = self.due() {
            tracing::warn!(
                refused,
                cap,
                "at the connection cap with every connection serving a request: new \
                 connections are closed"
            );
        }
    }
}

/// Serve one connection. At a stop it is shut down gracefully: a response being written
/// (a run's stream) is finished, then the connection closes; an idle one closes at once.
/// A client has [`HEADER_TIMEOUT`] to send each request's header; a connection closed to
/// make room at the cap (only while it waits for a header) ends at once.
async fn connection(state: Arc<State>, stream: tokio::net::TcpStream, admitted: Admitted) {
    let _open = state.open_connection();
    let stopping = state.stopping.clone();
    let evicted = admitted.evicted();
    let service = hyper::service::service_fn(move |req| {
        let busy = admitted.busy();
        let state = Arc::clone(&state);
        async move {
            let response = crate::front::handle(state, req).await?;
            // The connection counts as busy until the response's body is done with.
            Ok::<_, std::convert::Infallible>(response.map(|body| hold(body, busy)))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        () = evicted.cancelled() => {
            tracing::debug!("a connection waiting for a header was closed to make room");
            return;
        }
        () = stopping.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        tracing::debug!("a connection ended with an error: {e}");
    }
}

/// `body`, holding `guard` until it is dropped.
fn hold<G: Send + 'static>(body: Body, guard: G) -> Body {
    body.map_frame(move |frame| {
        let _ = &guard;
        frame
    })
    .boxed_unsync()
}

/// Stop taking runs, wait out the grace, cancel the rest, wait for their bundles.
async fn drain(state: &Arc<State>) -> Stopped {
    state.stopping.cancel();
    let at_stop = state.active_count();
    tracing::info!(
        runs = at_stop,
        grace_s = state.config.grace.as_secs(),
        "stopping: no new runs; runs in flight get the grace period"
    );
    let _ = tokio::time::timeout(state.config.grace, all_ended(state)).await;
    let cancelled = state.active_count();
    if cancelled > 0 {
        tracing::info!(runs = cancelled, "the grace period is over: cancelling");
        state.cancel_all.cancel();
    }
    let _ = tokio::time::timeout(CANCEL_WAIT, all_ended(state)).await;
    let abandoned = state.active_count();
    if abandoned > 0 {
        tracing::error!(runs = abandoned, "runs did not end after being cancelled");
    }
    // The runs' last events (the bundle, RUN_FINISHED) still have to reach their clients.
    let _ = tokio::time::timeout(FLUSH_WAIT, connections_closed(state)).await;
    Stopped {
        finished_in_grace: at_stop - cancelled,
        cancelled,
        abandoned,
    }
}

async fn connections_closed(state: &State) {
    loop {
        let notified = state.run_ended.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if state.open_connections() == 0 {
            return;
        }
        notified.await;
    }
}

async fn all_ended(state: &State) {
    loop {
        let notified = state.run_ended.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if state.active_count() == 0 {
            return;
        }
        notified.await;
    }
}
