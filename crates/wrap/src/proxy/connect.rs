//! The CONNECT side: the program's `HTTPS_PROXY`/`HTTP_PROXY`. A `CONNECT host:port` to an
//! allowed host becomes a tunnel, recorded with its byte counts and time; any other host
//! is refused (403) and recorded. A request for an absolute URL is passed on when it names
//! one of the proxy's own API ports (a program that sent its API traffic through the
//! proxy variables), and refused otherwise: plain HTTP does not leave the sandbox.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use provrun_evidence::ConnectionHandled;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::route::Api;
use super::{ProxyBody, Shared, plain};
use crate::env::{ANTHROPIC_PORT, OPENAI_PORT};

/// How long reaching an allowed host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A refused or failed connection's record.
fn refusal(
    host: &str,
    port: u16,
    via: &str,
    outcome: &str,
    reason: String,
    started: Instant,
) -> ConnectionHandled {
    ConnectionHandled {
        host: host.to_owned(),
        port,
        via: via.to_owned(),
        outcome: outcome.to_owned(),
        reason: Some(reason),
        bytes_sent: 0,
        bytes_received: 0,
        duration_ms: millis(started),
    }
}

async fn record(shared: &Shared, c: ConnectionHandled) {
    if let Err(e) = shared.recording.connection(c).await {
        tracing::error!("a connection could not be recorded: {e}");
    }
}

/// Serves one request on the CONNECT side.
pub(super) async fn handle(req: Request<Incoming>, shared: &Arc<Shared>) -> Response<ProxyBody> {
    if req.method() == Method::CONNECT {
        return tunnel(req, shared).await;
    }
    let _guard = shared.in_flight.enter();
    let started = Instant::now();
    let uri = req.uri().clone();
    let Some(host) = uri.host().map(str::to_owned) else {
        let host = req
            .headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let reason = "a request for a path, not a URL, on the proxy port".to_owned();
        record(
            shared,
            refusal(&host, 0, "http", "refused", reason.clone(), started),
        )
        .await;
        return plain(400, format!("provrun wrap: {reason}\n"));
    };
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let loopback = matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]" | "::1");
    let own = match port {
        OPENAI_PORT if loopback => Some(Api::OpenAi),
        ANTHROPIC_PORT if loopback => Some(Api::Anthropic),
        _ => None,
    };
    if let Some(api) = own {
        let path = uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
        return super::api::serve(req, api, path, shared).await;
    }
    let reason = if shared
        .config
        .allow_hosts
        .iter()
        .any(|a| a.matches(&host, port))
    {
        "plain HTTP through the proxy is not passed on (use https, which tunnels)".to_owned()
    } else {
        format!("{host}:{port} is not an allowed host (--allow-host)")
    };
    record(
        shared,
        refusal(&host, port, "http", "refused", reason.clone(), started),
    )
    .await;
    plain(403, format!("provrun wrap: {reason}\n"))
}

/// A TCP connection to an allowed `host:port`, within [`CONNECT_TIMEOUT`]; or the status
/// to answer and why.
async fn reach(host: &str, port: u16) -> Result<tokio::net::TcpStream, (u16, String)> {
    let target = (host.trim_start_matches('[').trim_end_matches(']'), port);
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(target)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => Err((502, format!("{host}:{port} cannot be reached: {e}"))),
        Err(_) => Err((
            504,
            format!(
                "{host}:{port} did not answer within {}s",
                CONNECT_TIMEOUT.as_secs()
            ),
        )),
    }
}

/// A stream that counts the bytes read from it (what one side of a tunnel sent), so
/// that a tunnel cut before it closed still has its counts.
struct Counted<T> {
    inner: T,
    read: Arc<AtomicU64>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Runs a tunnel between the program's upgraded connection and `stream` until either side
/// closes it, or wrap stops waiting for it after the program ended (it is then cut); its
/// record, and whether it was cut.
async fn run_tunnel(
    upgrade: hyper::upgrade::OnUpgrade,
    stream: tokio::net::TcpStream,
    host: String,
    port: u16,
    started: Instant,
    shared: &Shared,
) -> (ConnectionHandled, bool) {
    let (sent, received) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut cut = false;
    let reason = match upgrade.await {
        Ok(upgraded) => {
            let mut program = Counted {
                inner: TokioIo::new(upgraded),
                read: Arc::clone(&sent),
            };
            let mut remote = Counted {
                inner: stream,
                read: Arc::clone(&received),
            };
            tokio::select! {
                copied = tokio::io::copy_bidirectional(&mut program, &mut remote) => match copied {
                    Ok(_) => None,
                    Err(e) => Some(format!("the tunnel broke: {e}")),
                },
                () = shared.in_flight.cut() => {
                    cut = true;
                    Some(super::cut_message("the tunnel was still open"))
                }
            }
        }
        Err(e) => Some(format!("the tunnel was never opened: {e}")),
    };
    let record = ConnectionHandled {
        host,
        port,
        via: "connect".to_owned(),
        outcome: "tunneled".to_owned(),
        reason,
        bytes_sent: sent.load(Ordering::Relaxed),
        bytes_received: received.load(Ordering::Relaxed),
        duration_ms: millis(started),
    };
    (record, cut)
}

/// `CONNECT host:port`: a tunnel to an allowed host, or a refusal.
async fn tunnel(mut req: Request<Incoming>, shared: &Arc<Shared>) -> Response<ProxyBody> {
    let started = Instant::now();
    let guard = shared.in_flight.enter();
    let authority = req.uri().authority().cloned();
    let (host, port) = match &authority {
        Some(a) => (a.host().to_owned(), a.port_u16().unwrap_or(443)),
        None => {
            let reason = "CONNECT without a host:port".to_owned();
            record(
                shared,
                refusal("", 0, "connect", "refused", reason.clone(), started),
            )
            .await;
            return plain(400, format!("provrun wrap: {reason}\n"));
        }
    };
    if !shared
        .config
        .allow_hosts
        .iter()
        .any(|a| a.matches(&host, port))
    {
        let reason = format!("{host}:{port} is not an allowed host (--allow-host)");
        record(
            shared,
            refusal(&host, port, "connect", "refused", reason.clone(), started),
        )
        .await;
        return plain(403, format!("provrun wrap: {reason}\n"));
    }
    let stream = match reach(&host, port).await {
        Ok(s) => s,
        Err((status, reason)) => {
            record(
                shared,
                refusal(&host, port, "connect", "failed", reason.clone(), started),
            )
            .await;
            return plain(status, format!("provrun wrap: {reason}\n"));
        }
    };
    let upgrade = hyper::upgrade::on(&mut req);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let _guard = guard;
        let (record_of, cut) = run_tunnel(upgrade, stream, host, port, started, &shared).await;
        record(&shared, record_of).await;
        if cut {
            shared.recording.count_cut().await;
        }
    });
    let mut ok = Response::new(
        http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed(),
    );
    *ok.status_mut() = hyper::StatusCode::OK;
    ok
}
