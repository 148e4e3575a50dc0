//! The recording reverse proxy: hyper's HTTP/1 server on three Unix sockets — the OpenAI
//! side, the Anthropic side and the CONNECT side — which the sandbox forwards to loopback
//! ports inside the program's network namespace.
//!
//! The parts: [`route`] (which API, generation or not, the upstream URL), [`headers`]
//! (what goes upstream, back, and into the record), [`redact`] (secrets taken out of a
//! streamed response), `api` (forwarding a request upstream and streaming the response
//! back while recording it) and `connect` (CONNECT tunnels to allowed hosts, refusals).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;

use crate::env::Secrets;
use crate::error::WrapError;
use crate::options::{AllowedHost, Upstreams};
use crate::record::Recording;

mod api;
mod connect;
pub mod headers;
pub mod redact;
pub mod route;

use route::Api;

/// The body of every response the proxy gives.
pub(crate) type ProxyBody = BoxBody<Bytes, std::io::Error>;

/// The socket file names in the proxy's folder.
pub const OPENAI_SOCKET: &str = "openai.sock";
/// See [`OPENAI_SOCKET`].
pub const ANTHROPIC_SOCKET: &str = "anthropic.sock";
/// See [`OPENAI_SOCKET`].
pub const CONNECT_SOCKET: &str = "connect.sock";

/// The largest request body the proxy accepts (a longer one is answered 413, and
/// recorded).
pub const MAX_REQUEST_BYTES: usize = 64 << 20;

/// The proxy's bounds against a program that asks too much of it at once; see
/// [`ProxyLimits::default`] for the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyLimits {
    /// Connections served at once across the three sockets: through the sandbox's
    /// forwarder or made to a socket directly. One beyond is answered 503, closed and
    /// recorded as a refused connection.
    pub max_connections: usize,
    /// Bytes of request bodies held at once, across every exchange in flight (a body is
    /// held until its exchange is recorded). A body that would pass it is answered 503
    /// (`retry-after: 1`) and its exchange recorded with an error.
    pub max_request_bytes_in_flight: usize,
    /// How long a request body may go without a byte before it is answered 408.
    pub body_idle: Duration,
    /// How long a whole request body may take to arrive before it is answered 408.
    pub body_total: Duration,
    /// Connections over the bound recorded one by one; the rest are counted (in
    /// `connections` and `refused_connections`) and named in one warning.
    pub max_recorded_refusals: u64,
}

impl Default for ProxyLimits {
    /// 256 connections; 256 MiB of request bodies in flight (four of the largest single
    /// body, [`MAX_REQUEST_BYTES`]); a body idle for 30 s or longer than 5 minutes in all;
    /// 100 refusals recorded one by one.
    fn default() -> Self {
        ProxyLimits {
            max_connections: 256,
            max_request_bytes_in_flight: 256 << 20,
            body_idle: Duration::from_secs(30),
            body_total: Duration::from_secs(300),
            max_recorded_refusals: 100,
        }
    }
}
/// The most of one response the record keeps; a longer one passes through whole and is
/// recorded without its body, with an error saying so.
pub const MAX_RECORDED_RESPONSE_BYTES: usize = 512 << 20;

/// What the proxy needs to know.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where each API's requests go.
    pub upstreams: Upstreams,
    /// The real credentials put on upstream requests.
    pub secrets: Secrets,
    /// Hosts CONNECT tunnels may reach.
    pub allow_hosts: Vec<AllowedHost>,
}

/// Everything a connection's handler shares.
pub(crate) struct Shared {
    pub config: ProxyConfig,
    /// For upstreams on this machine: never through a proxy of the caller's environment.
    pub loopback_client: reqwest::Client,
    /// For other upstreams: the caller's proxy variables apply.
    pub client: reqwest::Client,
    pub recording: Recording,
    /// Finds the secrets to keep out of what the program gets and the bundle keeps.
    pub masker: redact::Masker,
    pub in_flight: InFlight,
    pub limits: ProxyLimits,
    /// Bytes of request bodies held now (one permit a byte).
    pub request_bytes: Arc<tokio::sync::Semaphore>,
    /// Connections served now (one permit each).
    pub connections: Arc<tokio::sync::Semaphore>,
    /// Connections over the bound so far.
    pub refused_connections: AtomicU64,
}

impl Shared {
    /// The client for `url`.
    pub(crate) fn client_for(&self, url: &str) -> &reqwest::Client {
        let loopback = reqwest::Url::parse(url).is_ok_and(|u| match u.host() {
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            Some(url::Host::Domain(d)) => d == "localhost",
            None => false,
        });
        if loopback {
            &self.loopback_client
        } else {
            &self.client
        }
    }
}

/// How many exchanges are still being served or recorded, and whether wrap has stopped
/// waiting for them.
#[derive(Debug, Clone, Default)]
pub(crate) struct InFlight(Arc<InFlightState>);

#[derive(Debug, Default)]
struct InFlightState {
    count: AtomicUsize,
    changed: tokio::sync::Notify,
    cut: AtomicBool,
    cut_now: tokio::sync::Notify,
}

impl InFlight {
    /// Counts one until the guard is dropped.
    pub(crate) fn enter(&self) -> InFlightGuard {
        self.0.count.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(self.clone())
    }

    async fn idle(&self) {
        loop {
            let notified = self.0.changed.notified();
            if self.0.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Resolves once wrap stops waiting for the exchanges in flight: each then records
    /// itself as cut, with what it has, and ends.
    pub(crate) async fn cut(&self) {
        loop {
            let notified = self.0.cut_now.notified();
            if self.0.cut.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    fn cut_all(&self) {
        self.0.cut.store(true, Ordering::SeqCst);
        self.0.cut_now.notify_waiters();
    }
}

/// One exchange in flight.
pub(crate) struct InFlightGuard(InFlight);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.0.count.fetch_sub(1, Ordering::SeqCst);
        self.0.0.changed.notify_waiters();
    }
}

/// The `error` of an exchange (or the `reason` of a tunnel) still in flight when wrap
/// stopped waiting for it, [`Proxy::stop`]'s grace after the program ended.
pub(crate) fn cut_message(what: &str) -> String {
    format!(
        "the program left: wrap stopped waiting for this exchange after the program ended, \
         and records it as cut ({what})"
    )
}

/// How long exchanges that were cut have to record themselves.
const CUT_GRACE: Duration = Duration::from_secs(5);

/// A running proxy: its socket folder and its accepting tasks.
#[derive(Debug)]
pub struct Proxy {
    dir: PathBuf,
    accepting: Vec<tokio::task::JoinHandle<()>>,
    in_flight: InFlight,
}

fn client(loopback: bool) -> Result<reqwest::Client, WrapError> {
    // No redirects: a redirect would carry the request and its credential elsewhere.
    let mut b = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none());
    if loopback {
        b = b.no_proxy();
    }
    b.build()
        .map_err(|e| WrapError::SetUp(format!("cannot build the proxy's HTTP client: {e}")))
}

impl Proxy {
    /// Starts the proxy on three sockets in `dir` (which must exist and be private),
    /// recording into `recording`, with the default [`ProxyLimits`]. Call it inside a
    /// tokio runtime.
    ///
    /// # Errors
    ///
    /// [`WrapError::SetUp`] when the HTTP clients cannot be built or a socket in `dir` cannot be
    /// listened on.
    pub fn start(
        dir: &Path,
        config: ProxyConfig,
        recording: Recording,
    ) -> Result<Proxy, WrapError> {
        Proxy::start_with(dir, config, ProxyLimits::default(), recording)
    }

    /// [`Proxy::start`] with `limits`.
    ///
    /// # Errors
    ///
    /// As [`Proxy::start`].
    pub fn start_with(
        dir: &Path,
        config: ProxyConfig,
        limits: ProxyLimits,
        recording: Recording,
    ) -> Result<Proxy, WrapError> {
        let masker = redact::Masker::new(&config.secrets.values());
        recording.mask_with(masker.clone());
        let shared = Arc::new(Shared {
            masker,
            config,
            loopback_client: client(true)?,
            client: client(false)?,
            recording,
            in_flight: InFlight::default(),
            request_bytes: Arc::new(tokio::sync::Semaphore::new(
                limits.max_request_bytes_in_flight,
            )),
            connections: Arc::new(tokio::sync::Semaphore::new(limits.max_connections)),
            refused_connections: AtomicU64::new(0),
            limits,
        });
        let mut accepting = Vec::new();
        for (name, side) in [
            (OPENAI_SOCKET, Side::Api(Api::OpenAi)),
            (ANTHROPIC_SOCKET, Side::Api(Api::Anthropic)),
            (CONNECT_SOCKET, Side::Connect),
        ] {
            let path = dir.join(name);
            let listener = UnixListener::bind(&path).map_err(|e| {
                WrapError::SetUp(format!("cannot listen on `{}`: {e}", path.display()))
            })?;
            accepting.push(tokio::spawn(accept(listener, side, Arc::clone(&shared))));
        }
        Ok(Proxy {
            dir: dir.to_path_buf(),
            accepting,
            in_flight: shared.in_flight.clone(),
        })
    }

    /// The folder of its sockets.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops accepting, and waits (at most `grace`) for the exchanges in flight to be
    /// recorded. Those still in flight then are cut: each is recorded with what it has
    /// (the request; the response's head and the part of its body that arrived) and an
    /// `error` saying the program left, and counted (`Recording::cut`).
    pub async fn stop(self, grace: Duration) {
        for task in &self.accepting {
            task.abort();
        }
        if tokio::time::timeout(grace, self.in_flight.idle())
            .await
            .is_ok()
        {
            return;
        }
        tracing::warn!(
            grace_s = grace.as_secs(),
            "exchanges were still in flight after the program ended: they are recorded as cut"
        );
        self.in_flight.cut_all();
        if tokio::time::timeout(CUT_GRACE, self.in_flight.idle())
            .await
            .is_err()
        {
            tracing::error!("exchanges that were cut could not be recorded in time");
        }
    }
}

/// Which side of the proxy a socket serves.
#[derive(Debug, Clone, Copy)]
enum Side {
    Api(Api),
    Connect,
}

async fn accept(listener: UnixListener, side: Side, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, say: wait rather than spin.
                tracing::warn!("the proxy cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Every connection counts, through the forwarder or made to a socket directly.
        let Ok(permit) = Arc::clone(&shared.connections).try_acquire_owned() else {
            tokio::spawn(refuse_connection(stream, side, Arc::clone(&shared)));
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let shared = Arc::clone(&shared);
                async move {
                    Ok::<_, std::convert::Infallible>(match side {
                        Side::Api(api) => api::handle(req, api, &shared).await,
                        Side::Connect => connect::handle(req, &shared).await,
                    })
                }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
            if let Err(e) = served {
                tracing::debug!("a proxy connection ended: {e}");
            }
        });
    }
}

/// A connection over [`ProxyLimits::max_connections`]: answered 503 and closed, and
/// recorded as a refused connection (the first [`ProxyLimits::max_recorded_refusals`]
/// one by one; the rest counted).
async fn refuse_connection(mut stream: tokio::net::UnixStream, side: Side, shared: Arc<Shared>) {
    use tokio::io::AsyncWriteExt as _;
    let bound = shared.limits.max_connections;
    let reason = format!(
        "over the proxy's bound of {bound} connections at once (through the forwarder or to \
         its sockets directly)"
    );
    let body = format!("provrun wrap: {reason}\n");
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(answer.as_bytes())).await;
    drop(stream);
    let n = shared.refused_connections.fetch_add(1, Ordering::SeqCst) + 1;
    tracing::warn!(
        bound,
        "a connection to the proxy over its bound was refused"
    );
    let refusal = provrun_evidence::ConnectionHandled {
        host: String::new(),
        port: 0,
        via: match side {
            Side::Api(api) => format!("socket:{}", api.as_str()),
            Side::Connect => "socket:connect".to_owned(),
        },
        outcome: "refused".to_owned(),
        reason: Some(reason),
        bytes_sent: 0,
        bytes_received: 0,
        duration_ms: 0,
    };
    let result = if n <= shared.limits.max_recorded_refusals {
        shared.recording.connection(refusal).await
    } else {
        shared.recording.refused_unrecorded().await;
        Ok(())
    };
    if let Err(e) = result {
        tracing::error!("a refused connection could not be recorded: {e}");
    }
}

/// A whole response with `status` and a plain-text `message` (the proxy's own word).
pub(crate) fn plain(status: u16, message: String) -> Response<ProxyBody> {
    let body = http_body_util::Full::new(Bytes::from(message))
        .map_err(|never| match never {})
        .boxed();
    let mut r = Response::new(body);
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_GATEWAY);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A JSON error body the SDKs read (`{"error": {"type", "message"}}`).
pub(crate) fn json_error(status: u16, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": "provrun_wrap_error", "message": message},
    });
    let mut r = plain(status, body.to_string());
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
