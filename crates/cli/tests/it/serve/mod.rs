//! `provrun serve` as its clients meet it: the built binary started on a loopback port
//! with a folder of scripted agents, and driven over HTTP — by the official AG-UI client
//! (`agui`), by hand-made requests (`http`: tokens, hostile input, the store's routes,
//! cancel and steer), by headless chromium (`browser`), and stopped by SIGTERM mid-run
//! (`stop`); its `/healthz` and `/metrics` are read with Prometheus' own Python parser
//! (`metrics`). This module holds what they share: the agents, the server process and a
//! small HTTP/1.1 client (requests are plain and bodies small, so a socket and a chunked
//! decoder do; nothing here is what the server itself uses).

mod agui;
mod browser;
mod hostile;
mod http;
mod metrics;
mod replicas;
mod stop;

pub(crate) use crate::support::venv::in_ci;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The agents every serve test uses, written into `dir`: scripted models only.
pub(crate) fn write_agents(dir: &Path) {
    let agents: &[(&str, &str, &str)] = &[
        (
            "chat",
            "",
            r#"[{"text": "Hello."}, {"text": "Second answer."}]"#,
        ),
        (
            "stream",
            "stream = true\n",
            r#"[{"reasoning": "The person wants words.", "text": "Streamed words."}]"#,
        ),
        (
            "tools",
            "tools = [\"write_file\", \"read_file\"]\n",
            r#"[{"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "/output/note.txt", "content": "remember"}}]},
                {"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": "/output/note.txt"}}]},
                {"text": "The note says remember."}]"#,
        ),
        (
            "approve",
            "tools = [\"write_file\"]\napprove = \"destructive\"\n",
            r#"[{"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "/output/ok.txt", "content": "approved"}}]},
                {"text": "Written after approval."}]"#,
        ),
        (
            "frontend",
            "",
            r#"[{"tool_calls": [{"id": "p", "name": "pick_colour", "arguments": {"hint": "calm"}}]},
                {"text": "You picked a colour."}]"#,
        ),
        ("slow", "", r#"[{"text": "too late", "delay_ms": 60000}]"#),
        (
            "steer",
            "tools = [\"write_file\"]\n",
            r#"[{"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "/output/a.txt", "content": "a"}}], "delay_ms": 1500},
                {"text": "Done, and blue."}]"#,
        ),
    ];
    std::fs::create_dir_all(dir).unwrap();
    for (name, extra, script) in agents {
        std::fs::write(
            dir.join(format!("{name}.toml")),
            format!("name = \"{name}\"\nmodel = \"script:{name}.json\"\n{extra}"),
        )
        .unwrap();
        std::fs::write(dir.join(format!("{name}.json")), script).unwrap();
    }
}

/// A `provrun serve` process; killed when dropped.
pub(crate) struct Served {
    child: Child,
    /// The server's stderr, read as it comes (a server logs a line per request: a pipe
    /// nobody read would fill and stop it).
    stderr: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    pub url: String,
    pub addr: SocketAddr,
}

impl Served {
    /// Start `provrun serve` on a free loopback port over `agents`, bundles into `store`,
    /// with these extra flags and environment; waits for the URL line.
    pub(crate) fn start(
        agents: &Path,
        store: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Served {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_provrun"));
        cmd.args(["serve", "--agents"])
            .arg(agents)
            .arg("--out")
            .arg(store)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .env_remove("PROVRUN_SERVE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Served::from_command(cmd)
    }

    /// Start a command that runs `provrun serve` (stdout piped); waits for the URL line.
    pub(crate) fn from_command(mut cmd: Command) -> Served {
        let mut child = cmd.spawn().expect("provrun serve starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("serve printed its URL within 60 s");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = std::sync::Arc::clone(&stderr);
        let stderr_reader = Some(std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        }));
        let url = line.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "first line: {line:?}");
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .unwrap();
        Served {
            child,
            stderr,
            stderr_reader,
            url,
            addr,
        }
    }

    /// The child process (to signal it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for the process to end (at most `limit`); its exit code and stderr.
    pub(crate) fn wait(mut self, limit: Duration) -> (Option<i32>, String) {
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Some(reader) = self.stderr_reader.take() {
                    let _ = reader.join();
                }
                let err = String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned();
                return (status.code(), err);
            }
            assert!(
                started.elapsed() < limit,
                "serve did not stop within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// A header's value (names compared without case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The `error.code` of a refusal.
    pub(crate) fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// The SSE `data:` events of a streamed body.
    pub(crate) fn events(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.body)
            .split("\n\n")
            .filter_map(|frame| frame.strip_prefix("data: "))
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    }
}

/// One request over a new connection (`Connection: close`), the whole response read.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    // The address served is the Host, unless a test names another.
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    // Bodies are JSON here, and said to be, unless a test names another type.
    if !body.is_empty()
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) before reading a large body, and close.
    let _ = stream.write_all(body);
    // Read until the response is whole: by its Content-Length, its last chunk, or the end
    // of the connection (a peer may keep it open whatever `Connection: close` asked).
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
        if complete(&raw) {
            break;
        }
    }
    parse(&raw)
}

/// Whether `raw` holds a whole response.
fn complete(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let body = &raw[end + 4..];
    if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        return body.len() >= len;
    }
    head.contains("transfer-encoding: chunked") && body.ends_with(b"0\r\n\r\n")
}

fn parse(raw: &[u8]) -> Reply {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&rest[start..(start + size).min(rest.len())]);
        rest = &rest[(start + size + 2).min(rest.len())..];
    }
    out
}

/// A minimal AG-UI input: one user message on `thread`.
pub(crate) fn input(thread: &str, run: &str, text: &str) -> Vec<u8> {
    serde_json::json!({
        "threadId": thread, "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": text}],
        "tools": [], "context": [],
    })
    .to_string()
    .into_bytes()
}

/// `provrun verify` on `bundle` (a folder or a .tar): its exit code and output.
pub(crate) fn verify(bundle: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .arg("verify")
        .arg(bundle)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Fetch `/runs/ID/bundle` into `dir/ID.tar` and check that `provrun verify` accepts it.
pub(crate) fn fetch_and_verify(addr: SocketAddr, headers: &[(&str, &str)], id: &str, dir: &Path) {
    let r = request(addr, "GET", &format!("/runs/{id}/bundle"), headers, b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/x-tar"));
    let tar = dir.join(format!("{id}.tar"));
    std::fs::write(&tar, &r.body).unwrap();
    let (code, text) = verify(&tar);
    assert_eq!(code, 0, "{id}: {text}");
}
