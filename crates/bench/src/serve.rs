//! `serve_200`: 200 AG-UI runs at once through HTTP against a `provrun-serve` server in
//! this process (a scripted agent: a `write_file` call, a `read_file` call, an answer),
//! each request its own connection. Reports the time to first event of every request
//! (p50, p99: from the request's first byte written to the first `data:` frame read), the
//! whole run's time, the process's peak RSS (server and clients together) and how many
//! bundles verify.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use provrun_serve::{ServeConfig, Server};
use provrun_store::Store;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::figure::Figure;
use crate::harness::{discard_tree, runtime, work_dir};

/// The agent every run is: three model requests, two tool calls.
const SCRIPT: &str = r#"[
  {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "/output/n.txt", "content": "note"}}]},
  {"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": "/output/n.txt"}}]},
  {"text": "The note says note."}
]"#;

/// One request: (time to first event, whole time, whether it ended with a verified bundle).
async fn one(addr: SocketAddr, i: usize) -> Result<(f64, f64, bool), String> {
    let body = json!({
        "threadId": format!("t{i}"), "runId": format!("serve-{i}"),
        "messages": [{"id": "u", "role": "user", "content": "Write a note and read it."}],
    })
    .to_string();
    let request = format!(
        "POST /agents/bench HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let began = Instant::now();
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut seen = Vec::new();
    let mut first = None;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if first.is_none() && seen.windows(5).any(|w| w == b"data:") {
            first = Some(began.elapsed());
        }
    }
    let text = String::from_utf8_lossy(&seen);
    let ok = text.contains("\"type\":\"RUN_FINISHED\"") && text.contains("\"verified\":true");
    let first = first.ok_or_else(|| format!("no event in: {}", &text[..text.len().min(300)]))?;
    Ok((
        first.as_secs_f64() * 1000.0,
        began.elapsed().as_secs_f64() * 1000.0,
        ok,
    ))
}

/// `runs` requests at once against one server.
pub(crate) fn serve_concurrent(name: &str, runs: usize) -> Figure {
    let dir = work_dir();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).expect("agents folder");
    std::fs::write(
        agents.join("bench.toml"),
        "name = \"bench\"\nmodel = \"script:bench.json\"\ntools = [\"write_file\", \"read_file\"]\n",
    )
    .expect("agent");
    std::fs::write(agents.join("bench.json"), SCRIPT).expect("script");
    let store = dir.path().join("store");
    let rt = runtime();
    let figure = rt.block_on(async {
        let config = ServeConfig::new(
            &agents,
            Store::folder(&store),
            "127.0.0.1:0".parse().unwrap(),
        )
        .concurrency(runs);
        let server = Server::bind(config).await.expect("the server binds");
        let addr = server.local_addr();
        let stop = tokio_util::sync::CancellationToken::new();
        let serving = tokio::spawn(server.run(stop.clone()));
        let started = Instant::now();
        let tasks: Vec<_> = (0..runs).map(|i| tokio::spawn(one(addr, i))).collect();
        let mut firsts = Vec::new();
        let mut ended_ok = 0usize;
        for t in tasks {
            match t.await {
                Ok(Ok((first, _whole, ok))) => {
                    firsts.push(first);
                    ended_ok += usize::from(ok);
                }
                Ok(Err(e)) => eprintln!("{name}: a request failed: {e}"),
                Err(e) => eprintln!("{name}: a client task failed: {e}"),
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(60), serving).await;
        let mut f = Figure::new(name, runs as u64, seconds);
        f.latencies_ms = firsts;
        f.extra.push(("ended_verified", json!(ended_ok)));
        f
    });
    // Every bundle in the store verifies, checked again from the folders themselves.
    let store_arc = Arc::new(store);
    let verified = (0..runs)
        .filter(|i| {
            let report = provrun_evidence::verify(store_arc.join(format!("serve-{i}")));
            report.ok && report.complete
        })
        .count();
    let mut figure = figure;
    figure.extra.push(("bundles_verified", json!(verified)));
    figure.extra.push(("latency", json!("time to first event")));
    discard_tree(dir.path());
    figure
}
