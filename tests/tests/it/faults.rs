//! Model-server faults end to end: whole agent runs against `OpenAiModel` pointed at a
//! loopback server that misbehaves on purpose (rate limits, 5xx bursts, refused and reset
//! connections, stalls, broken and malformed bodies, an enormous body). Every fault must
//! end as a success after retries or as a failed run with a clear message, and every
//! bundle must verify as complete with the matching status. Only 127.0.0.1 is used.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use provrun::agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::{ApiKey, OpenAiConfig, OpenAiModel, RetryPolicy, Timeouts};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------
// The fault-injecting server: each connection gets the next scripted reply.

/// How a reply is written.
#[derive(Clone, Debug)]
enum Mode {
    /// Status line, headers with Content-Length, the whole body.
    Full,
    /// Headers without Content-Length, the body, then close.
    CloseDelimited,
    /// Headers with the full Content-Length, the first `n` body bytes, then a TCP reset.
    ResetAfter(usize),
    /// Headers without Content-Length, the first `n` body bytes, then silence.
    StallAfter(usize),
    /// Read the request and answer nothing.
    Silent,
}

#[derive(Clone, Debug)]
struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    mode: Mode,
}

impl Reply {
    fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Reply {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
            mode: Mode::Full,
        }
    }
    fn json(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self::new(status, "application/json", body)
    }
    fn sse(body: impl Into<Vec<u8>>) -> Self {
        Self::new(200, "text/event-stream", body).mode(Mode::CloseDelimited)
    }
    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
    fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
}

struct Server {
    base_url: String,
    hits: Arc<Mutex<usize>>,
}

/// Serves the replies in order, one per connection, each on its own thread. The listener
/// thread lives until the test process ends; it only ever binds 127.0.0.1.
fn serve(replies: Vec<Reply>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
    let hits = Arc::new(Mutex::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(sock) = sock else { return };
            let next = queue.lock().unwrap().pop_front();
            *counter.lock().unwrap() += 1;
            let reply = next.unwrap_or_else(|| {
                Reply::new(500, "text/plain", "the fault server has no reply left")
            });
            std::thread::spawn(move || {
                let _ = answer(sock, reply);
            });
        }
    });
    Server {
        base_url: format!("http://{addr}/v1"),
        hits,
    }
}

/// Reads the request head and all but the last `keep` bytes of its body.
fn read_request(sock: &mut TcpStream, keep: usize) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut tmp)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let want = head_end + len.saturating_sub(keep);
    while buf.len() < want {
        let n = sock.read(&mut tmp[..(want - buf.len()).min(8192)])?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    Ok(())
}

fn answer(mut sock: TcpStream, reply: Reply) -> std::io::Result<()> {
    // For a reset, leave request bytes unread: closing a socket with unread data makes
    // the kernel answer with RST instead of FIN.
    let keep = if matches!(reply.mode, Mode::ResetAfter(_)) {
        1
    } else {
        0
    };
    read_request(&mut sock, keep)?;
    if matches!(reply.mode, Mode::Silent) {
        std::thread::sleep(Duration::from_secs(20));
        return Ok(());
    }
    let mut head = format!(
        "HTTP/1.1 {} Fault\r\nContent-Type: {}\r\nConnection: close\r\n",
        reply.status, reply.content_type
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if matches!(reply.mode, Mode::Full | Mode::ResetAfter(_)) {
        head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes())?;
    let body = &reply.body;
    match reply.mode {
        Mode::Full | Mode::CloseDelimited => sock.write_all(body)?,
        Mode::ResetAfter(n) => {
            sock.write_all(&body[..n.min(body.len())])?;
            sock.flush()?;
            std::thread::sleep(Duration::from_millis(50));
            drop(sock); // unread request bytes: RST
            return Ok(());
        }
        Mode::StallAfter(n) => {
            sock.write_all(&body[..n.min(body.len())])?;
            sock.flush()?;
            std::thread::sleep(Duration::from_secs(20));
        }
        Mode::Silent => {}
    }
    sock.flush()?;
    sock.shutdown(std::net::Shutdown::Write)?;
    // Let the client read to the end before the socket goes away.
    let mut rest = [0u8; 1024];
    while matches!(sock.read(&mut rest), Ok(n) if n > 0) {}
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Bodies.

const ANSWER: &str = "the answer is 42";

fn completion() -> String {
    format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion","created":0,"model":"m","choices":[{{"index":0,"message":{{"role":"assistant","content":"{ANSWER}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}}}"#
    )
}

fn chunk(delta: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_string(), |f| format!("\"{f}\""));
    format!(
        "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

fn stream_body() -> String {
    let mut s = chunk(r#"{"role":"assistant","content":"the answer "}"#, None);
    s.push_str(&chunk(r#"{"content":"is 42"}"#, None));
    s.push_str(&chunk("{}", Some("stop")));
    s.push_str("data: [DONE]\n\n");
    s
}

/// The first two chunks only: no finish reason, no `[DONE]`.
fn truncated_stream() -> String {
    let mut s = chunk(r#"{"role":"assistant","content":"the answer "}"#, None);
    s.push_str(&chunk(r#"{"content":"is"}"#, None));
    s
}

fn rate_limit() -> Reply {
    Reply::json(
        429,
        r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#,
    )
}

fn server_error(status: u16) -> Reply {
    Reply::json(
        status,
        r#"{"error":{"message":"The server had an error while processing your request"}}"#,
    )
}

// ---------------------------------------------------------------------------------------
// The runs.

const LIMIT: usize = 1024 * 1024;

fn config(base_url: &str) -> OpenAiConfig {
    let mut c = OpenAiConfig::new("m", base_url, Some(ApiKey::new("sk-fault-test")));
    c.timeouts = Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_millis(700),
        idle: Duration::from_millis(700),
    };
    c.retry = RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        max_elapsed: Duration::from_secs(5),
    };
    c.max_response_bytes = LIMIT;
    c
}

/// What a fault must end as.
#[derive(Debug)]
enum Expect {
    /// The run finishes with the answer after this many HTTP attempts.
    Recovers { attempts: usize },
    /// The run fails and its error mentions each of these.
    Fails(&'static [&'static str]),
}

struct Fault {
    name: &'static str,
    stream: bool,
    replies: Vec<Reply>,
    /// Point the model at a port nobody listens on.
    refused: bool,
    expect: Expect,
}

fn fault(name: &'static str, replies: Vec<Reply>, expect: Expect) -> Fault {
    Fault {
        name,
        stream: false,
        replies,
        refused: false,
        expect,
    }
}

fn streamed(mut f: Fault) -> Fault {
    f.stream = true;
    f
}

// One table: each fault beside what the client must do with it.
fn faults() -> Vec<Fault> {
    use Expect::{Fails, Recovers};
    let ok = || Reply::json(200, completion());
    let huge = {
        let mut b = completion().into_bytes();
        b.truncate(b.len() - 1);
        b.extend_from_slice(b",\"padding\":\"");
        b.resize(16 * LIMIT, b'x');
        b.extend_from_slice(b"\"}");
        b
    };
    vec![
        fault(
            "429 with Retry-After",
            vec![rate_limit().header("Retry-After", "1"), ok()],
            Recovers { attempts: 2 },
        ),
        fault(
            "429 without Retry-After",
            vec![rate_limit(), rate_limit(), ok()],
            Recovers { attempts: 3 },
        ),
        fault(
            "429 that never ends",
            vec![rate_limit(); 10],
            Fails(&["rate limited (HTTP 429", "Rate limit reached"]),
        ),
        fault(
            "500/502/503 burst",
            vec![
                server_error(500),
                server_error(502),
                server_error(503),
                ok(),
            ],
            Recovers { attempts: 4 },
        ),
        fault(
            "503 that never ends",
            vec![server_error(503); 10],
            Fails(&["server error (HTTP 503)"]),
        ),
        fault(
            "502 with an HTML body",
            vec![
                Reply::new(502, "text/html", "<html><body>Bad gateway</body></html>"),
                ok(),
            ],
            Recovers { attempts: 2 },
        ),
        Fault {
            refused: true,
            ..fault(
                "connection refused",
                Vec::new(),
                Fails(&["connection failed"]),
            )
        },
        fault(
            "reset mid-body",
            vec![Reply::json(200, completion()).mode(Mode::ResetAfter(40))],
            Fails(&["model request 1 failed"]),
        ),
        streamed(fault(
            "reset mid-stream",
            vec![Reply::sse(stream_body()).mode(Mode::ResetAfter(150))],
            Fails(&["model request 1 failed"]),
        )),
        fault(
            "stall before the first byte",
            vec![Reply::json(200, completion()).mode(Mode::Silent)],
            Fails(&["first byte timeout"]),
        ),
        streamed(fault(
            "stall in the middle of a stream",
            vec![Reply::sse(stream_body()).mode(Mode::StallAfter(200))],
            Fails(&["idle stream timeout"]),
        )),
        streamed(fault(
            "truncated SSE stream",
            vec![Reply::sse(truncated_stream())],
            Fails(&["incomplete stream", "neither [DONE] nor a finish reason"]),
        )),
        streamed(fault(
            "event: error inside a 200 stream",
            vec![Reply::sse(format!(
                "{}event: error\ndata: {{\"error\":{{\"message\":\"upstream model crashed\",\"code\":\"server_error\"}}}}\n\n",
                chunk(r#"{"role":"assistant","content":"the"}"#, None)
            ))],
            Fails(&["provider reported an error", "upstream model crashed"]),
        )),
        streamed(fault(
            "a streamed request that recovers after a 503",
            vec![server_error(503), Reply::sse(stream_body())],
            Recovers { attempts: 2 },
        )),
        fault(
            "invalid JSON",
            vec![Reply::json(200, r#"{"id":"chatcmpl-1","choices":[{"#)],
            Fails(&["malformed response", "not JSON"]),
        ),
        fault(
            "valid JSON of the wrong shape",
            vec![Reply::json(200, r#"{"id":"x","result":{"text":"hi"}}"#)],
            Fails(&["malformed response", "choices"]),
        ),
        fault(
            "a 200 with an HTML body",
            vec![Reply::new(
                200,
                "text/html",
                "<!doctype html><html><body>Sign in to continue</body></html>",
            )],
            Fails(&["malformed response"]),
        ),
        fault(
            "an enormous body",
            vec![Reply::json(200, huge)],
            Fails(&["malformed response", "larger than the limit"]),
        ),
    ]
}

/// Runs one fault; `Err` says how it was not survived.
// One fault's whole check, run to verify, as a list of promises each with its own `Err`.
async fn try_fault(f: Fault, root: &Path, index: usize) -> Result<(), String> {
    let server = serve(f.replies);
    let base_url = if f.refused {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        format!("http://{addr}/v1")
    } else {
        server.base_url.clone()
    };
    let model = OpenAiModel::new(config(&base_url)).map_err(|e| e.to_string())?;
    let mut agent = AgentSpec::new("faults", "test");
    agent.stream = f.stream;
    agent.max_steps = 3;
    let bundle = root.join(format!("bundle-{index}"));
    let started = Instant::now();
    let r = Backend::new()
        .with_model(Arc::new(model))
        .execute(
            &RunControl::new(),
            &agent,
            &RunSpec::new("What is the answer?", &bundle),
        )
        .await
        .map_err(|e| format!("the run did not start or lost its evidence: {e}"))?;
    let took = started.elapsed();
    if took > Duration::from_secs(10) {
        return Err(format!("took {took:?}"));
    }
    let events = read_events(&bundle).map_err(|e| format!("read_events: {e}"))?;
    let called: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventType::ModelCalled)
        .collect();
    if called.len() != 1 {
        return Err(format!(
            "{} model_called events, expected one",
            called.len()
        ));
    }
    let finished = events.last().ok_or("no events")?;
    if finished.kind != EventType::RunFinished || finished.payload["status"] != r.status().as_str()
    {
        return Err(format!(
            "last event {:?}: {}",
            finished.kind, finished.payload
        ));
    }
    match f.expect {
        Expect::Recovers { attempts } => {
            if r.status() != RunStatus::Finished || r.output() != ANSWER {
                return Err(format!(
                    "expected recovery, got {:?}: {:?}",
                    r.status(),
                    r.error()
                ));
            }
            // A single attempt is not listed.
            let recorded = called[0].payload["attempts"]
                .as_array()
                .filter(|a| !a.is_empty())
                .map_or(1, Vec::len);
            if recorded != attempts || *server.hits.lock().unwrap() != attempts {
                return Err(format!(
                    "expected {attempts} attempts, recorded {recorded}, server saw {}",
                    server.hits.lock().unwrap()
                ));
            }
        }
        Expect::Fails(needles) => {
            let error = r.error().unwrap_or_default();
            if r.status() != RunStatus::Failed {
                return Err(format!("expected failure, got {:?}", r.status()));
            }
            for n in needles {
                if !error.contains(n) {
                    return Err(format!("the error {error:?} does not mention {n:?}"));
                }
            }
            if !called[0].payload["error"].is_string() {
                return Err(format!("model_called has no error: {}", called[0].payload));
            }
            if finished.payload["error"].as_str() != Some(error) {
                return Err(format!("run_finished error: {}", finished.payload));
            }
        }
    }
    // Bounded memory: no recorded response is larger than the configured limit.
    let pack = provrun::evidence::pack::FileSource::open(&bundle.join("blobs/pack"))
        .map_err(|e| e.to_string())?;
    let index = provrun::evidence::pack::read_index(&pack).map_err(|e| e.to_string())?;
    for blob in &index.blobs {
        let len = blob.size;
        if len > (LIMIT as u64) * 2 {
            return Err(format!("a {len}-byte blob was recorded"));
        }
    }
    let report = verify(&bundle);
    if !report.ok || !report.complete {
        return Err(format!(
            "bundle: ok {} complete {}: {:?}",
            report.ok,
            report.complete,
            report.failures().collect::<Vec<_>>()
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_model_server_fault_ends_cleanly_with_a_verified_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let all = faults();
    let tried = all.len();
    let started = Instant::now();
    let mut lost = Vec::new();
    for (i, f) in all.into_iter().enumerate() {
        let name = f.name;
        let t0 = Instant::now();
        let outcome = try_fault(f, dir.path(), i).await;
        println!(
            "fault {name:<40} {} in {:.2}s",
            if outcome.is_ok() { "survived" } else { "LOST" },
            t0.elapsed().as_secs_f64()
        );
        if let Err(why) = outcome {
            lost.push(format!("{name}: {why}"));
        }
    }
    println!(
        "model-server faults tried: {tried}, survived: {}",
        tried - lost.len()
    );
    assert!(lost.is_empty(), "faults not survived:\n{}", lost.join("\n"));
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "{:?}",
        started.elapsed()
    );
}
