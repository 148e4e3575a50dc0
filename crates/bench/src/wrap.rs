//! `wrap_proxy`: what `provrun wrap`'s recording proxy costs an exchange. The same
//! requests go to a loopback upstream twice: directly over TCP (the baseline), and along
//! a wrapped program's whole path — a TCP connection to the sandbox's port forwarder
//! (the forwarder's own relay loop, run here outside a sandbox), its Unix socket, the
//! proxy (credential put on, response streamed back, every exchange recorded into a real
//! bundle) and the upstream. One kept-alive connection per path, as SDKs keep them.
//!
//! Figures: `wrap_proxy_exchange` (small non-streamed exchanges: the added time per
//! exchange, p50 and p99 of the difference), `wrap_proxy_stream` (a streamed response of
//! several MB in 16 KiB SSE events: the added time per MB and to the first byte while
//! the stream passes through, each stream started once the last one is recorded; and the
//! time recording such a stream takes once it has ended — parsed, chunked, compressed,
//! appended, off the program's path — per MB).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use provrun_capture::Capture;
use provrun_wrap::env::Secrets;
use provrun_wrap::options::Upstreams;
use provrun_wrap::proxy::route::{Api, Route};
use provrun_wrap::proxy::{OPENAI_SOCKET, Proxy, ProxyConfig};
use provrun_wrap::record::{Exchange, Recording};
use serde_json::json;

use crate::figure::{Figure, round};
use crate::harness::{discard_tree, work_dir};

/// Bytes of one SSE event of a streamed response.
const EVENT_BYTES: usize = 16 * 1024;
/// How long the upstream waits after a stream's first event.
const FIRST_EVENT_PAUSE: Duration = Duration::from_millis(20);

/// A loopback upstream: a small JSON answer, or (for a request whose body names
/// `"stream_mb": N`) N MB of SSE events written one by one.
fn upstream() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the upstream");
    let port = listener.local_addr().expect("its port").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve_upstream(stream));
        }
    });
    port
}

fn serve_upstream(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    while let Some(body) = read_message(&mut reader) {
        let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let mb = req["stream_mb"].as_u64().unwrap_or(0) as usize;
        if mb == 0 {
            let answer = json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "x".repeat(800)}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
            .to_string();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                answer.len()
            );
            let _ = writer.write_all(format!("{head}{answer}").as_bytes());
            continue;
        }
        let event = sse_event(EVENT_BYTES);
        let count = mb * 1024 * 1024 / EVENT_BYTES;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            event.len() * count
        );
        let _ = writer.write_all(head.as_bytes());
        for i in 0..count {
            if writer.write_all(&event).is_err() {
                return;
            }
            // The first event alone, as a model's first tokens come before the rest: the
            // time to the first byte is not the time to push megabytes through.
            if i == 0 {
                std::thread::sleep(FIRST_EVENT_PAUSE);
            }
        }
    }
}

/// One Chat Completions chunk event of `bytes` bytes.
fn sse_event(bytes: usize) -> Vec<u8> {
    sse_event_tagged(bytes, "")
}

/// [`sse_event`] whose text starts with `tag`.
fn sse_event_tagged(bytes: usize, tag: &str) -> Vec<u8> {
    let prefix = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"";
    let suffix = "\"}}]}\n\n";
    let fill = bytes - prefix.len() - suffix.len() - tag.len();
    format!("{prefix}{tag}{}{suffix}", "y".repeat(fill)).into_bytes()
}

/// Reads one HTTP/1.1 message (head and a `content-length` body); its body.
fn read_message(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut len = 0usize;
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

/// A client on one kept-alive connection.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let _ = s.set_nodelay(true);
        Client {
            reader: BufReader::with_capacity(64 * 1024, s.try_clone().expect("clone")),
            writer: s,
        }
    }

    /// One exchange: the time to the first byte of the body, and to its end.
    fn exchange(&mut self, body: &[u8]) -> (Duration, Duration) {
        let started = Instant::now();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer placeholder\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        self.writer.write_all(head.as_bytes()).expect("send");
        self.writer.write_all(body).expect("send");
        let mut len = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("a head");
            let l = line.trim_end();
            if l.is_empty() && len > 0 {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().expect("a length");
            }
        }
        let mut first = [0u8; 1];
        self.reader.read_exact(&mut first).expect("a body");
        let ttfb = started.elapsed();
        let mut rest = vec![0u8; len - 1];
        self.reader.read_exact(&mut rest).expect("the body");
        (ttfb, started.elapsed())
    }
}

/// The proxy on a fresh bundle, recording exchanges for the upstream on `upstream_port`,
/// reached through the forwarder's relay on a TCP port (returned).
fn start_proxy(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    upstream_port: u16,
) -> (Proxy, Capture, Recording, u16) {
    let capture = Capture::builder(dir.join("bundle"))
        .builder("provrun-bench")
        .open()
        .expect("open a bundle");
    let sockets = dir.join("sockets");
    std::fs::create_dir(&sockets).expect("sockets folder");
    let config = ProxyConfig {
        upstreams: Upstreams {
            openai: format!("http://127.0.0.1:{upstream_port}/v1"),
            anthropic: format!("http://127.0.0.1:{upstream_port}"),
        },
        secrets: Secrets {
            openai_key: Some("sk-bench-real-key".into()),
            ..Secrets::default()
        },
        allow_hosts: Vec::new(),
    };
    let recording = Recording::new(capture.clone());
    let proxy = rt
        .block_on(async { Proxy::start(&sockets, config, recording.clone()) })
        .expect("start the proxy");
    let relay = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
    let port = relay.local_addr().expect("its port").port();
    let socket = sockets.join(OPENAI_SOCKET);
    std::thread::spawn(move || provrun_sandbox::forward::serve(&relay, &socket));
    (proxy, capture, recording, port)
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The time [`Recording::exchange`] takes for a streamed response of `mb` MB (the
/// request `request`), per MB: the median of `times` recordings.
fn record_cost(
    rt: &tokio::runtime::Runtime,
    recording: &Recording,
    request: &[u8],
    mb: usize,
    times: usize,
) -> Vec<f64> {
    let count = mb * 1024 * 1024 / EVENT_BYTES;
    (0..times)
        .map(|i| {
            // A distinct body each time (the pack would store a repeat once).
            let mut body = Vec::with_capacity(EVENT_BYTES * count);
            for j in 0..count {
                body.extend(sse_event_tagged(EVENT_BYTES, &format!("{i:03}-{j:06}")));
            }
            let ex = Exchange {
                api: Api::OpenAi,
                route: Route::Generation(provrun_model::WireApi::ChatCompletions),
                request: bytes::Bytes::copy_from_slice(request),
                request_type: "application/json".into(),
                response: bytes::Bytes::from(body),
                response_type: Some("text/event-stream".into()),
                status: Some(200),
                http: json!({"method": "POST", "path": "/v1/chat/completions", "status": 200}),
                duration_ms: 0,
                error: None,
            };
            let t = Instant::now();
            rt.block_on(recording.exchange(ex)).expect("record");
            ms(t.elapsed()) / mb as f64
        })
        .collect()
}

/// The p50/p99 (or p50 only) of `values` rounded, as extra figures named `name_p50`, …
fn push_percentiles(fig: &mut Figure, name: &'static [&'static str], values: &[f64]) {
    for (key, p) in name.iter().zip([0.5, 0.99]) {
        fig.extra
            .push((key, json!(round(percentile(values.to_vec(), p), 3))));
    }
}

/// The small exchanges, each sent directly and then through the proxy.
fn small_exchanges(direct: &mut Client, wrapped: &mut Client, exchanges: usize) -> Figure {
    let small = json!({"model": "m", "messages": [{"role": "user", "content": "z".repeat(2000)}]})
        .to_string()
        .into_bytes();
    let mut added = Vec::with_capacity(exchanges);
    let mut through = Vec::with_capacity(exchanges);
    let started = Instant::now();
    for _ in 0..exchanges {
        let (_, d) = direct.exchange(&small);
        let (_, w) = wrapped.exchange(&small);
        added.push(ms(w) - ms(d));
        through.push(ms(w));
    }
    let mut fig = Figure::new(
        "wrap_proxy_exchange",
        exchanges as u64,
        started.elapsed().as_secs_f64(),
    );
    fig.latencies_ms = through;
    push_percentiles(&mut fig, &["added_ms_p50", "added_ms_p99"], &added);
    fig
}

/// `wrap_proxy`: both figures.
pub(crate) fn wrap_proxy(exchanges: usize, streams: usize, stream_mb: usize) -> Vec<Figure> {
    let dir = work_dir();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let up = upstream();
    let (proxy, capture, recording, relay) = start_proxy(&rt, dir.path(), up);
    let recorded_by = |n: u64| {
        while rt.block_on(recording.totals()).requests < n {
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    let mut direct = Client::connect(up);
    let mut wrapped = Client::connect(relay);
    // Warm both paths (connections, the pack's first chunk).
    let warm = br#"{"model":"m","messages":[]}"#;
    direct.exchange(warm);
    wrapped.exchange(warm);
    let mut fig = small_exchanges(&mut direct, &mut wrapped, exchanges);

    let big = json!({"model": "m", "stream": true, "stream_mb": stream_mb, "messages": []})
        .to_string()
        .into_bytes();
    let (mut per_mb, mut ttfb_added) = (Vec::new(), Vec::new());
    let done = 1 + exchanges as u64;
    recorded_by(done);
    let started = Instant::now();
    for i in 0..streams {
        let (dt, d) = direct.exchange(&big);
        let (wt, w) = wrapped.exchange(&big);
        per_mb.push((ms(w) - ms(d)) / stream_mb as f64);
        ttfb_added.push(ms(wt) - ms(dt));
        recorded_by(done + 1 + i as u64);
    }
    let record_per_mb = record_cost(&rt, &recording, &big, stream_mb, streams.min(5));
    let mut stream_fig = Figure::new(
        "wrap_proxy_stream",
        streams as u64,
        started.elapsed().as_secs_f64(),
    );
    stream_fig.extra.push(("stream_mb", json!(stream_mb)));
    push_percentiles(&mut stream_fig, &["added_ms_per_mb_p50"], &per_mb);
    push_percentiles(
        &mut stream_fig,
        &["added_ttfb_ms_p50", "added_ttfb_ms_p99"],
        &ttfb_added,
    );
    push_percentiles(&mut stream_fig, &["record_ms_per_mb_p50"], &record_per_mb);

    // Every exchange through the proxy was recorded (its warm-up too).
    rt.block_on(proxy.stop(Duration::from_secs(60)));
    let recorded = provrun_evidence::read_events(capture.bundle_dir())
        .expect("the log")
        .iter()
        .filter(|e| e.kind == provrun_evidence::EventType::ModelCalled)
        .count();
    let synthetic = streams.min(5);
    assert_eq!(
        recorded,
        1 + exchanges + streams + synthetic,
        "every exchange is recorded"
    );
    fig.extra.push(("recorded", json!(recorded)));
    drop(capture);
    discard_tree(dir.path());
    vec![fig, stream_fig]
}
