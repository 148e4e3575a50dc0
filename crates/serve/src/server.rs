//! [`Server`]: bound to its address, then run until asked to stop — at which it takes no
//! new connections or runs, lets the runs in flight go on for the grace period, cancels
//! those still going (their bundles end `cancelled`), waits for every one of them to be
//! finished, stored and indexed, and for their streams' last events to reach their clients
//! (each connection is shut down gracefully: a response being written is finished first).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::ServeConfig;
use crate::error::ServeError;
use crate::state::State;

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
        let state = Arc::new(State::new(config)?);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Listen { addr, source })?;
        Ok(Server { listener, state })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or(self.state.config.listen)
    }

    /// The URL it serves at (`http://ADDR/`).
    pub fn url(&self) -> String {
        format!("http://{}/", self.local_addr())
    }

    /// Serve until `stop` is cancelled, then stop as the module docs say.
    ///
    /// # Errors
    ///
    /// None at present: a connection that cannot be accepted is skipped and serving goes
    /// on.
    pub async fn run(self, stop: CancellationToken) -> Result<Stopped, ServeError> {
        let Server { listener, state } = self;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    tokio::spawn(connection(Arc::clone(&state), stream));
                }
            }
        }
        drop(listener);
        Ok(drain(&state).await)
    }
}

/// Serve one connection. At a stop it is shut down gracefully: a response being written
/// (a run's stream) is finished, then the connection closes; an idle one closes at once.
async fn connection(state: Arc<State>, stream: tokio::net::TcpStream) {
    let _open = state.open_connection();
    let stopping = state.stopping.clone();
    let service =
        hyper::service::service_fn(move |req| crate::front::handle(Arc::clone(&state), req));
    let conn =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        () = stopping.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        tracing::debug!("a connection ended with an error: {e}");
    }
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
