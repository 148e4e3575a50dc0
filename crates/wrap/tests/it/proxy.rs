//! The recording proxy on its own, over its Unix socket: a streamed response reaches the
//! program before the upstream has finished it; a key the upstream echoes is masked for
//! the program and in the record alike; the record holds what the program received.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use provrun_capture::Capture;
use provrun_evidence::{EventType, RunEnd, RunStatus, read_blob, read_events, verify};
use provrun_wrap::env::Secrets;
use provrun_wrap::options::Upstreams;
use provrun_wrap::proxy::{OPENAI_SOCKET, Proxy, ProxyConfig, ProxyLimits};
use provrun_wrap::record::Recording;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY: &str = "sk-real-key-that-must-not-leak";

/// An upstream that writes a stream's first event, waits for `gate`, then writes the
/// rest, which echoes the key split across two writes. Returns its port.
fn gated_upstream(gate: mpsc::Receiver<()>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim_end().is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).unwrap();
        let (key_a, key_b) = KEY.split_at(9);
        let parts = [
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"first\"}}]}\n\n".to_owned(),
            format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"echo {key_a}"),
            format!("{key_b}\"}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"),
        ];
        let total: usize = parts.iter().map(String::len).sum();
        let mut w = stream;
        write!(w, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {total}\r\n\r\n{}", parts[0]).unwrap();
        w.flush().unwrap();
        gate.recv().unwrap();
        for p in &parts[1..] {
            w.write_all(p.as_bytes()).unwrap();
            w.flush().unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    port
}

/// Reads from `s` into `got` until it holds `needle`, within `within`.
async fn read_until(
    s: &mut tokio::net::UnixStream,
    got: &mut Vec<u8>,
    needle: &[u8],
    within: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    while !got.windows(needle.len()).any(|w| w == needle) {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => return false,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => panic!("{e}"),
        }
    }
    true
}

/// A proxy recording into a fresh bundle under `dir`, for the upstream on `port`, and a
/// connection to its OpenAI socket that has sent a streamed Chat Completions request.
async fn proxy_and_request(
    dir: &std::path::Path,
    port: u16,
) -> (Proxy, Capture, tokio::net::UnixStream) {
    let capture = Capture::builder(dir.join("bundle")).open().unwrap();
    let sockets = dir.join("sockets");
    std::fs::create_dir(&sockets).unwrap();
    let config = ProxyConfig {
        upstreams: Upstreams {
            openai: format!("http://127.0.0.1:{port}/v1"),
            anthropic: format!("http://127.0.0.1:{port}"),
        },
        secrets: Secrets {
            openai_key: Some(KEY.into()),
            ..Secrets::default()
        },
        allow_hosts: Vec::new(),
    };
    let proxy = Proxy::start(&sockets, config, Recording::new(capture.clone())).unwrap();

    let mut s = tokio::net::UnixStream::connect(sockets.join(OPENAI_SOCKET))
        .await
        .unwrap();
    let body = br#"{"model":"gpt-test","stream":true,"messages":[]}"#;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer placeholder\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    (proxy, capture, s)
}

/// The one `model_called` of the finished bundle under `dir`.
fn the_exchange(
    dir: &std::path::Path,
    capture: Capture,
) -> (std::path::PathBuf, provrun_evidence::ModelCalled) {
    capture
        .recorder()
        .finish(RunEnd::new(RunStatus::Finished))
        .unwrap();
    let bundle = dir.join("bundle");
    assert!(verify(&bundle).ok);
    let events = read_events(&bundle).unwrap();
    let called: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventType::ModelCalled)
        .collect();
    assert_eq!(called.len(), 1);
    let m = called[0]
        .typed()
        .unwrap()
        .as_model_called()
        .unwrap()
        .clone();
    (bundle, m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_passes_through_as_it_arrives_and_an_echoed_key_is_masked_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let (gate_tx, gate_rx) = mpsc::channel();
    let port = gated_upstream(gate_rx);
    let (proxy, capture, mut s) = proxy_and_request(tmp.path(), port).await;
    let mut got = Vec::new();
    // The first event arrives while the upstream still holds the rest back.
    assert!(
        read_until(&mut s, &mut got, b"first", Duration::from_secs(10)).await,
        "the first event did not pass through before the stream ended: {}",
        String::from_utf8_lossy(&got)
    );
    gate_tx.send(()).unwrap();
    assert!(read_until(&mut s, &mut got, b"[DONE]", Duration::from_secs(10)).await);
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(!text.contains(KEY), "{text}");
    assert!(
        text.contains(&format!("echo {}", "*".repeat(KEY.len()))),
        "{text}"
    );
    let body_start = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let received = got[body_start..].to_vec();

    proxy.stop(Duration::from_secs(10)).await;
    let (bundle, m) = the_exchange(tmp.path(), capture);
    assert_eq!(
        read_blob(&bundle, m.response.as_ref().unwrap()).unwrap(),
        received
    );
    assert_eq!(m.http.as_ref().unwrap()["redacted"], true);
    assert_eq!(m.finish_reason.as_deref(), Some("stop"));
    assert_eq!(m.error, None);
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    assert!(!log.contains(KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_leaves_mid_stream_still_gets_the_upstreams_answer_recorded_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (gate_tx, gate_rx) = mpsc::channel();
    let port = gated_upstream(gate_rx);
    let (proxy, capture, mut s) = proxy_and_request(tmp.path(), port).await;
    let mut got = Vec::new();
    assert!(read_until(&mut s, &mut got, b"first", Duration::from_secs(10)).await);
    drop(s);
    gate_tx.send(()).unwrap();
    proxy.stop(Duration::from_secs(10)).await;
    let (bundle, m) = the_exchange(tmp.path(), capture);
    let recorded = read_blob(&bundle, m.response.as_ref().unwrap()).unwrap();
    assert!(
        recorded.ends_with(b"data: [DONE]\n\n"),
        "{}",
        String::from_utf8_lossy(&recorded)
    );
    assert!(
        m.error
            .as_deref()
            .unwrap_or("")
            .contains("closed the connection"),
        "{:?}",
        m.error
    );
    assert_eq!(m.finish_reason.as_deref(), Some("stop"));
}

/// An upstream that answers every request `{}` at once, counting them.
fn counting_upstream() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = std::sync::Arc::clone(&counted);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut len = 0usize;
                    let mut first = true;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim_end().is_empty() && !first {
                            break;
                        }
                        first = false;
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0u8; len];
                    reader.read_exact(&mut body).unwrap();
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let mut w = &stream;
                    w.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}").unwrap();
                }
            });
        }
    });
    (port, seen)
}

/// A proxy with `limits` recording into a fresh bundle under `dir`, for the upstream on
/// `port`; its sockets' folder.
fn limited_proxy(
    dir: &std::path::Path,
    port: u16,
    limits: ProxyLimits,
) -> (Proxy, Capture, std::path::PathBuf) {
    let (proxy, capture, sockets, _) = limited_proxy_recording(dir, port, limits);
    (proxy, capture, sockets)
}

/// [`limited_proxy`], and its recording.
fn limited_proxy_recording(
    dir: &std::path::Path,
    port: u16,
    limits: ProxyLimits,
) -> (Proxy, Capture, std::path::PathBuf, Recording) {
    let capture = Capture::builder(dir.join("bundle")).open().unwrap();
    let sockets = dir.join("sockets");
    std::fs::create_dir(&sockets).unwrap();
    let config = ProxyConfig {
        upstreams: Upstreams {
            openai: format!("http://127.0.0.1:{port}/v1"),
            anthropic: format!("http://127.0.0.1:{port}"),
        },
        secrets: Secrets::default(),
        allow_hosts: Vec::new(),
    };
    let recording = Recording::new(capture.clone());
    let proxy = Proxy::start_with(&sockets, config, limits, recording.clone()).unwrap();
    (proxy, capture, sockets, recording)
}

/// Sends `head` (and `body`) on a new connection to the OpenAI socket; the answer's
/// status line and the whole answer (read to its end, or for at most 10 s).
async fn ask(sockets: &std::path::Path, head: &str, body: &[u8]) -> String {
    let mut s = tokio::net::UnixStream::connect(sockets.join(OPENAI_SOCKET))
        .await
        .unwrap();
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(body).await;
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got).into_owned()
}

/// Every event of the finished bundle under `dir`, as JSON.
fn finished_events(dir: &std::path::Path, capture: Capture) -> Vec<serde_json::Value> {
    capture
        .recorder()
        .finish(RunEnd::new(RunStatus::Finished))
        .unwrap();
    let bundle = dir.join("bundle");
    assert!(verify(&bundle).ok);
    std::fs::read_to_string(bundle.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_that_leave_the_base_never_go_upstream_and_are_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let (port, seen) = counting_upstream();
    let (proxy, capture, sockets) = limited_proxy(tmp.path(), port, ProxyLimits::default());
    for path in [
        "/v1/../admin",
        "/v1/%2e%2e/admin",
        "/v1/..%2f..%2fadmin/x/../y",
    ] {
        let answer = ask(
            &sockets,
            &format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"),
            b"",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
    }
    let fine = ask(
        &sockets,
        "GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        b"",
    )
    .await;
    assert!(fine.starts_with("HTTP/1.1 200"), "{fine}");
    proxy.stop(Duration::from_secs(10)).await;
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    let events = finished_events(tmp.path(), capture);
    let refused: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "http_exchanged" && e["payload"]["error"].is_string())
        .collect();
    assert_eq!(refused.len(), 3, "{events:?}");
    assert!(
        refused[0]["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("`..`")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_beyond_the_bytes_in_flight_and_bodies_that_stall_are_refused_and_recorded()
{
    let tmp = tempfile::tempdir().unwrap();
    let (port, seen) = counting_upstream();
    let limits = ProxyLimits {
        max_request_bytes_in_flight: 100_000,
        body_idle: Duration::from_millis(500),
        ..ProxyLimits::default()
    };
    let (proxy, capture, sockets) = limited_proxy(tmp.path(), port, limits);
    // A body of 60 000 bytes that stalls half-way holds its 60 000 bytes of the budget
    // (taken whole, before a byte was read) until it times out.
    let stalled = {
        let sockets = sockets.clone();
        tokio::spawn(async move {
            let mut s = tokio::net::UnixStream::connect(sockets.join(OPENAI_SOCKET))
                .await
                .unwrap();
            s.write_all(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 60000\r\n\r\n",
            )
            .await
            .unwrap();
            s.write_all(&[b'a'; 30_000]).await.unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got).await;
            String::from_utf8_lossy(&got).into_owned()
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    // Meanwhile 60 000 more would pass the 100 000 in flight: refused, try again.
    let body = vec![b'b'; 60_000];
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let refused = ask(&sockets, &head, &body).await;
    // The answer, not a reset: the refused body was read and thrown away.
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused}"
    );
    let timed_out = stalled.await.unwrap();
    assert!(timed_out.starts_with("HTTP/1.1 408"), "{timed_out}");
    // The budget is whole again: the same body goes through.
    let ok = ask(&sockets, &head, &body).await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    proxy.stop(Duration::from_secs(10)).await;
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    let events = finished_events(tmp.path(), capture);
    let errors: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "model_called")
        .filter_map(|e| e["payload"]["error"].as_str().map(str::to_owned))
        .filter(|e| e.starts_with("provrun wrap:"))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("as many request bytes as it may")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("sent nothing for")),
        "{errors:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_made_to_the_sockets_directly_count_against_the_bound_and_refusals_are_recorded()
 {
    let tmp = tempfile::tempdir().unwrap();
    let (port, _) = counting_upstream();
    let limits = ProxyLimits {
        max_connections: 4,
        max_recorded_refusals: 2,
        ..ProxyLimits::default()
    };
    let (proxy, capture, sockets, recording) = limited_proxy_recording(tmp.path(), port, limits);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(
            tokio::net::UnixStream::connect(sockets.join(OPENAI_SOCKET))
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..3 {
        let answer = ask(
            &sockets,
            "GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
            b"",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    }
    drop(held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer = ask(
        &sockets,
        "GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        b"",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    proxy.stop(Duration::from_secs(10)).await;
    let totals = recording.totals().await;
    assert_eq!((totals.connections, totals.refused), (3, 3));
    assert_eq!(recording.unrecorded_refusals().await, 1);
    let events = finished_events(tmp.path(), capture);
    let refusals: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "connection_handled")
        .collect();
    // Two recorded one by one; the third only counted.
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    assert_eq!(refusals[0]["payload"]["outcome"], "refused");
    assert_eq!(refusals[0]["payload"]["via"], "socket:openai");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_in_an_encoding_the_proxy_did_not_ask_for_is_refused_and_recorded_without_it() {
    let tmp = tempfile::tempdir().unwrap();
    // An upstream that compresses although it was asked for identity.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut asked = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim_end().is_empty() {
                break;
            }
            asked.push_str(&line.to_ascii_lowercase());
        }
        assert!(asked.contains("accept-encoding: identity"), "{asked}");
        let body = b"\x1f\x8b\x08\x00compressed-bytes";
        let mut w = &stream;
        write!(
            w,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        w.write_all(body).unwrap();
    });
    let (proxy, capture, sockets) = limited_proxy(tmp.path(), port, ProxyLimits::default());
    let answer = ask(
        &sockets,
        "GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        b"",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(!answer.contains("compressed-bytes"), "{answer}");
    proxy.stop(Duration::from_secs(10)).await;
    let events = finished_events(tmp.path(), capture);
    let ex = events
        .iter()
        .find(|e| e["type"] == "http_exchanged")
        .unwrap();
    assert_eq!(ex["payload"]["http"]["status"], 200);
    assert!(ex["payload"]["response"].is_null(), "{ex}");
    assert!(
        ex["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("Content-Encoding: gzip")
    );
}
