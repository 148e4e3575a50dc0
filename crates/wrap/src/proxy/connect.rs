//! The CONNECT side: the program's `HTTPS_PROXY`/`HTTP_PROXY`. A `CONNECT host:port` to an
//! allowed host becomes a tunnel, recorded with its byte counts and time; any other host
//! is refused (403) and recorded. A request for an absolute URL is passed on when it names
//! one of the proxy's own API ports (a program that sent its API traffic through the
//! proxy variables), and refused otherwise: plain HTTP does not leave the sandbox.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use provrun_evidence::ConnectionHandled;

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

/// Runs a tunnel between the program's upgraded connection and `stream` until either side
/// closes it; its record.
async fn run_tunnel(
    upgrade: hyper::upgrade::OnUpgrade,
    mut stream: tokio::net::TcpStream,
    host: String,
    port: u16,
    started: Instant,
) -> ConnectionHandled {
    let (sent, received, reason) = match upgrade.await {
        Ok(upgraded) => {
            let mut upgraded = TokioIo::new(upgraded);
            match tokio::io::copy_bidirectional(&mut upgraded, &mut stream).await {
                Ok((sent, received)) => (sent, received, None),
                Err(e) => (0, 0, Some(format!("the tunnel broke: {e}"))),
            }
        }
        Err(e) => (0, 0, Some(format!("the tunnel was never opened: {e}"))),
    };
    ConnectionHandled {
        host,
        port,
        via: "connect".to_owned(),
        outcome: "tunneled".to_owned(),
        reason,
        bytes_sent: sent,
        bytes_received: received,
        duration_ms: millis(started),
    }
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
        let record_of = run_tunnel(upgrade, stream, host, port, started).await;
        record(&shared, record_of).await;
    });
    let mut ok = Response::new(
        http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed(),
    );
    *ok.status_mut() = hyper::StatusCode::OK;
    ok
}
