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
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// How many exchanges are still being served or recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct InFlight(Arc<(AtomicUsize, tokio::sync::Notify)>);

impl InFlight {
    /// Counts one until the guard is dropped.
    pub(crate) fn enter(&self) -> InFlightGuard {
        self.0.0.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(self.clone())
    }

    async fn idle(&self) {
        loop {
            let notified = self.0.1.notified();
            if self.0.0.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One exchange in flight.
pub(crate) struct InFlightGuard(InFlight);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.0.0.fetch_sub(1, Ordering::SeqCst);
        self.0.0.1.notify_waiters();
    }
}

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
    /// recording into `recording`. Call it inside a tokio runtime.
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
        let masker = redact::Masker::new(&config.secrets.values());
        recording.mask_with(masker.clone());
        let shared = Arc::new(Shared {
            masker,
            config,
            loopback_client: client(true)?,
            client: client(false)?,
            recording,
            in_flight: InFlight::default(),
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
    /// recorded.
    pub async fn stop(self, grace: Duration) {
        for task in &self.accepting {
            task.abort();
        }
        if tokio::time::timeout(grace, self.in_flight.idle())
            .await
            .is_err()
        {
            tracing::warn!("exchanges were still in flight when the proxy stopped");
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
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
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
