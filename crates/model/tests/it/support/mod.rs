//! A small loopback HTTP/1.1 server for the backend tests: it answers each request with the
//! next canned response and records what it received. It only ever binds 127.0.0.1.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use provrun_model::{ApiKey, OpenAiConfig, OpenAiModel, RetryPolicy, Timeouts};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The key the tests configure; it must never show up anywhere.
pub(crate) const SECRET_KEY: &str = "sk-test-DO-NOT-LEAK-4f2a9c";

/// How a canned response is written.
#[derive(Clone, Debug)]
pub(crate) enum Mode {
    /// Headers with Content-Length, then the whole body.
    Full,
    /// Headers without Content-Length, the first `n` body bytes, then silence (the
    /// connection stays open for up to 10 s).
    StallAfter(usize),
    /// Headers with the full Content-Length, the first `n` body bytes, then close.
    Truncate(usize),
    /// Headers without Content-Length, the whole body, then close (a close-delimited body).
    CloseDelimited,
    /// Read the request, then send nothing for up to 10 s.
    Silent,
}

/// One canned response.
#[derive(Clone, Debug)]
pub(crate) struct Canned {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub mode: Mode,
}

impl Canned {
    pub(crate) fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Canned {
            status,
            content_type: content_type.into(),
            headers: Vec::new(),
            body: body.into(),
            mode: Mode::Full,
        }
    }

    pub(crate) fn json(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self::new(status, "application/json", body)
    }

    pub(crate) fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub(crate) fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
}

/// One request as received.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub head: String,
    pub body: Vec<u8>,
}

pub(crate) struct TestServer {
    pub base_url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

pub(crate) async fn serve(canned: Vec<Canned>) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let queue = Arc::new(Mutex::new(VecDeque::from(canned)));
    let received = Arc::new(Mutex::new(Vec::new()));
    let rec = received.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let (queue, rec) = (queue.clone(), rec.clone());
            tokio::spawn(async move {
                let _ = handle(sock, queue, rec).await;
            });
        }
    });
    TestServer {
        base_url: format!("http://{addr}/v1"),
        received,
        task,
    }
}

async fn handle(
    mut sock: TcpStream,
    queue: Arc<Mutex<VecDeque<Canned>>>,
    rec: Arc<Mutex<Vec<Received>>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 4 << 20 {
            return Ok(());
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body = buf[head_end..].to_vec();
    rec.lock().unwrap().push(Received { head, body });
    let canned = queue.lock().unwrap().pop_front().unwrap_or_else(|| {
        Canned::new(
            500,
            "text/plain",
            "the test server has no canned response left",
        )
    });
    if matches!(canned.mode, Mode::Silent) {
        tokio::time::sleep(Duration::from_secs(10)).await;
        return Ok(());
    }
    let mut out = format!(
        "HTTP/1.1 {} X\r\nContent-Type: {}\r\nConnection: close\r\n",
        canned.status, canned.content_type
    );
    for (k, v) in &canned.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    match canned.mode {
        Mode::Full | Mode::Truncate(_) => {
            out.push_str(&format!("Content-Length: {}\r\n", canned.body.len()))
        }
        Mode::StallAfter(_) | Mode::CloseDelimited | Mode::Silent => {}
    }
    out.push_str("\r\n");
    sock.write_all(out.as_bytes()).await?;
    match canned.mode {
        Mode::Full | Mode::CloseDelimited | Mode::Silent => sock.write_all(&canned.body).await?,
        Mode::StallAfter(n) => {
            sock.write_all(&canned.body[..n.min(canned.body.len())])
                .await?;
            sock.flush().await?;
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        Mode::Truncate(n) => {
            sock.write_all(&canned.body[..n.min(canned.body.len())])
                .await?
        }
    }
    sock.flush().await?;
    sock.shutdown().await?;
    Ok(())
}

/// Retries fast enough for tests.
pub(crate) fn quick_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        max_elapsed: Duration::from_secs(5),
    }
}

pub(crate) fn model_for(base_url: &str, model: &str) -> OpenAiModel {
    OpenAiModel::new(config_for(base_url, model)).unwrap()
}

pub(crate) fn config_for(base_url: &str, model: &str) -> OpenAiConfig {
    let mut config = OpenAiConfig::new(model, base_url, Some(ApiKey::new(SECRET_KEY)));
    config.retry = quick_retry();
    config.timeouts = Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(5),
    };
    config
}

/// One recorded exchange of `tests/fixtures/<folder>`.
pub(crate) struct Recorded {
    pub meta: serde_json::Value,
    /// The request body as recorded, when there is one.
    pub request: Option<serde_json::Value>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub(crate) fn status(&self) -> u16 {
        self.meta["status"].as_u64().unwrap() as u16
    }

    pub(crate) fn content_type(&self) -> &str {
        self.meta["response_content_type"].as_str().unwrap()
    }

    /// The response as the loopback server sends it.
    pub(crate) fn canned(&self) -> Canned {
        Canned::new(self.status(), self.content_type(), self.body.clone())
    }
}

/// Loads the fixture of `folder` whose name starts with `prefix` (`"05"`).
pub(crate) fn recorded(folder: &str, prefix: &str) -> Recorded {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(folder);
    let meta_path = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&format!("{prefix}_")) && n.ends_with(".meta.json")
        })
        .unwrap_or_else(|| panic!("no fixture {folder}/{prefix}"));
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    // The copies must be the recorded bytes: each body's sha256 is in its meta.
    let body_file = meta["response_body"]["file"].as_str().unwrap();
    let body = std::fs::read(dir.join(body_file)).unwrap();
    let request = meta["request_body"]["file"]
        .as_str()
        .map(|f| serde_json::from_slice(&std::fs::read(dir.join(f)).unwrap()).unwrap());
    Recorded {
        meta,
        request,
        body,
    }
}

/// Splits an SSE body after each event (at each blank line), giving every proper prefix
/// that ends on an event boundary, the empty one included.
pub(crate) fn event_boundaries(body: &[u8]) -> Vec<usize> {
    let mut cuts = vec![0];
    let mut i = 0;
    while i + 1 < body.len() {
        if body[i] == b'\n' && body[i + 1] == b'\n' {
            cuts.push(i + 2);
            i += 2;
        } else {
            i += 1;
        }
    }
    cuts.retain(|c| *c < body.len());
    cuts
}
