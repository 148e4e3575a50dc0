//! `provrun ledger witness init|serve` and `provrun ledger cosign`: a witness of other
//! ledgers (C2SP tlog-witness over HTTP, cosignature/v1) and the client that asks
//! witnesses to cosign a ledger's checkpoint. The checks and the state are the ledger
//! crate's (`provrun_ledger::witness`); this file is the HTTP on both sides.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use provrun_ledger::witness::WitnessKey;
use provrun_ledger::witness::{Witness, add_checkpoint_body, add_cosignatures, init_witness};
use provrun_ledger::{Ledger, LedgerError, VerifierKey, decode_hashes};

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// The largest request body a witness reads (a checkpoint with 63 proof lines is far
/// smaller).
const MAX_BODY: usize = 128 * 1024;
/// How long the client waits for one witness.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `ledger witness init`.
pub(crate) fn init(dir: &Path, key: &Path, name: &str) -> u8 {
    match init_witness(dir, key, name) {
        Ok(wkey) => {
            out!("witness:  {}", dir.display());
            out!("name:     {name}");
            out!("{}", wkey.to_text());
            EXIT_OK
        }
        Err(e) => fail(
            match e {
                LedgerError::Io { .. } => EXIT_FAILED,
                _ => EXIT_USAGE,
            },
            format!("ledger witness init: {e}"),
        ),
    }
}

/// `ledger witness serve`.
pub(crate) fn serve(dir: &Path, listen: &str, logs: &[String]) -> u8 {
    let mut keys = Vec::new();
    for l in logs {
        match read_verifier_key(l) {
            Ok(k) => keys.push(k),
            Err(e) => return fail(EXIT_USAGE, format!("ledger witness serve: --log: {e}")),
        }
    }
    let witness = match Witness::open(dir, &keys) {
        Ok(w) => Arc::new(w),
        Err(e) => return fail(EXIT_USAGE, format!("ledger witness serve: {e}")),
    };
    let addr: std::net::SocketAddr = match listen.parse() {
        Ok(a) => a,
        Err(e) => {
            return fail(
                EXIT_USAGE,
                format!("ledger witness serve: --listen `{listen}`: {e}"),
            );
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(EXIT_FAILED, format!("ledger witness serve: {e}")),
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                return fail(
                    EXIT_FAILED,
                    format!("ledger witness serve: cannot listen on {addr}: {e}"),
                );
            }
        };
        let bound = listener.local_addr().unwrap_or(addr);
        out!("http://{bound}");
        tracing::info!(witness = %dir.display(), "witness serving add-checkpoint at http://{bound}/add-checkpoint");
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => return fail(EXIT_FAILED, format!("ledger witness serve: {e}")),
        };
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            tokio::select! {
                _ = &mut ctrl_c => return EXIT_OK,
                _ = term.recv() => return EXIT_OK,
                accepted = listener.accept() => {
                    let (stream, _) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            tracing::warn!("witness: accept failed: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let witness = Arc::clone(&witness);
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let witness = Arc::clone(&witness);
                            async move { Ok::<_, Infallible>(answer(&witness, req).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(Duration::from_secs(30))
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        }
    })
}

fn reply(status: u16, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

async fn answer(
    witness: &Arc<Witness>,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    if req.uri().path() != "/add-checkpoint" {
        return reply(404, "text/plain; charset=utf-8", "not found\n".into());
    }
    if req.method() != Method::POST {
        return reply(
            405,
            "text/plain; charset=utf-8",
            "POST add-checkpoint\n".into(),
        );
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return reply(
                400,
                "text/plain; charset=utf-8",
                "the body is too large or broken\n".into(),
            );
        }
    };
    let witness = Arc::clone(witness);
    let answered = tokio::task::spawn_blocking(move || witness.add_checkpoint(&body, now())).await;
    match answered {
        Ok(Ok(lines)) => reply(200, "text/plain; charset=utf-8", lines),
        Ok(Err(refusal)) => {
            tracing::info!(
                status = refusal.status,
                "witness refused a checkpoint: {}",
                refusal.body.trim_end()
            );
            let kind = if refusal.status == 409 {
                "text/x.tlog.size"
            } else {
                "text/plain; charset=utf-8"
            };
            let mut body = refusal.body;
            if !body.ends_with('\n') {
                body.push('\n');
            }
            reply(refusal.status, kind, body)
        }
        Err(e) => reply(500, "text/plain; charset=utf-8", format!("{e}\n")),
    }
}

/// What one witness answered the client.
enum Answer {
    Cosigned(Vec<String>),
    /// It holds another size (409): try again from there.
    Holds(u64),
    Refused(String),
}

fn ask(client: &reqwest::blocking::Client, url: &str, body: Vec<u8>) -> Answer {
    let endpoint = format!("{}/add-checkpoint", url.trim_end_matches('/'));
    let sent = client.post(&endpoint).body(body).send();
    let resp = match sent {
        Ok(r) => r,
        Err(e) => return Answer::Refused(format!("cannot reach it: {e}")),
    };
    let status = resp.status().as_u16();
    let text = resp.text().unwrap_or_default();
    match status {
        200 => Answer::Cosigned(
            text.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        409 => match text.trim().parse() {
            Ok(size) => Answer::Holds(size),
            Err(_) => Answer::Refused(format!(
                "409 with a body that is not a size: {}",
                text.trim()
            )),
        },
        other => Answer::Refused(format!("{other}: {}", crate::inert::inert(text.trim()))),
    }
}

/// `ledger cosign`.
pub(crate) fn cosign(dir: &Path, witnesses: &[String]) -> u8 {
    let ledger = match Ledger::open(dir, None) {
        Ok(l) => l,
        Err(e @ LedgerError::NotALedger(_)) => {
            return fail(EXIT_USAGE, format!("ledger cosign: {e}"));
        }
        Err(e) => return fail(EXIT_FAILED, format!("ledger cosign: {e}")),
    };
    let note = ledger.checkpoint_note().to_vec();
    let size = ledger.checkpoint().size;
    let client = match reqwest::blocking::Client::builder()
        .timeout(CLIENT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => return fail(EXIT_FAILED, format!("ledger cosign: {e}")),
    };
    let mut lines = Vec::new();
    for url in witnesses {
        // Tell it the size it holds, when it says; start from nothing.
        let mut old = 0u64;
        let mut answer;
        let mut tries = 0;
        loop {
            tries += 1;
            let proof = if old > 0 && old < size {
                match ledger
                    .consistency_proof(old)
                    .and_then(|p| decode_hashes(&p.hashes))
                {
                    Ok(p) => p,
                    Err(e) => return fail(EXIT_FAILED, format!("ledger cosign: {url}: {e}")),
                }
            } else {
                Vec::new()
            };
            answer = ask(&client, url, add_checkpoint_body(old, &proof, &note));
            match answer {
                Answer::Holds(n) if n != old && n <= size && tries < 3 => old = n,
                _ => break,
            }
        }
        match answer {
            Answer::Cosigned(l) => {
                out!("cosigned by {url}");
                lines.extend(l);
            }
            Answer::Holds(n) => {
                return fail(
                    EXIT_FAILED,
                    format!(
                        "ledger cosign: the witness {url} refused: it holds a checkpoint of {n} \
                         leaves of this log, and this one has {size}"
                    ),
                );
            }
            Answer::Refused(why) => {
                return fail(
                    EXIT_FAILED,
                    format!("ledger cosign: the witness {url} refused: {why}"),
                );
            }
        }
    }
    drop(ledger);
    match add_cosignatures(dir, &note, &lines) {
        Ok(_) => {
            out!(
                "the checkpoint of {size} leaves carries {} cosignature(s)",
                lines.len()
            );
            EXIT_OK
        }
        Err(e) => fail(EXIT_FAILED, format!("ledger cosign: {e}")),
    }
}

/// A verifier key given as its text, or as a file holding it.
pub(crate) fn read_verifier_key(given: &str) -> Result<VerifierKey, String> {
    let path = Path::new(given);
    let text = if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() < 4096) {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read `{given}`: {e}"))?
    } else {
        given.to_owned()
    };
    VerifierKey::parse(text.trim()).map_err(|e| e.to_string())
}

/// A witness verifier key given as its text, or as a file holding it.
pub(crate) fn read_witness_key(given: &str) -> Result<WitnessKey, String> {
    let path = Path::new(given);
    let text = if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() < 4096) {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read `{given}`: {e}"))?
    } else {
        given.to_owned()
    };
    WitnessKey::parse(text.trim()).map_err(|e| e.to_string())
}
