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
use provrun_wrap::proxy::{OPENAI_SOCKET, Proxy, ProxyConfig};
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
