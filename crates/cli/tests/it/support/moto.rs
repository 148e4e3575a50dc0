//! moto's S3 server on loopback, from a throwaway virtualenv under target/ (its version
//! takes the conditional writes `If-None-Match` and `If-Match`, 5.2 or newer): what the
//! tests of buckets start, and the environment `provrun` needs to reach it.

#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::venv;

/// A virtualenv with moto's S3 server, made once under target/.
pub(crate) fn virtualenv() -> Result<PathBuf, String> {
    venv::virtualenv(
        "moto-venv",
        "tests/interop/moto-requirements.txt",
        "import moto.server, flask, flask_cors, moto; \
         assert tuple(map(int, moto.__version__.split('.')[:2])) >= (5, 2)",
    )
}

/// Skip loudly, or fail under CI.
pub(crate) fn unavailable(what: &str, why: &str) {
    assert!(!venv::in_ci(), "CI=true: the {what} test cannot run: {why}");
    eprintln!(
        "\n*** SKIPPED {what}: {why}.\n*** It is NOT tested on this machine (CI=true makes \
         this a failure).\n"
    );
}

/// moto's S3 server, one request at a time. moto's own `moto.server` answers each request
/// on a thread of its own and checks `If-None-Match: *` / `If-Match` before it writes,
/// with no lock between the two, so two creates of one key at the same moment can both
/// succeed — which real S3 never allows. The tests of conditional writes need the store's
/// promise, not that race, so every request is handled under one lock (connections still
/// each have a thread).
const SERIAL_SERVER: &str = "\
import os, sys, threading
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication, MotoRequestHandler, create_backend_app)
app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def serial(environ, start_response):
    with lock:
        return list(app(environ, start_response))
run_simple(sys.argv[1], int(sys.argv[2]), serial, threaded=True,
           request_handler=MotoRequestHandler)
";

/// moto's server on a free loopback port; stopped when dropped.
pub(crate) struct Moto {
    child: Child,
    /// Its port.
    pub(crate) port: u16,
    python: PathBuf,
}

impl Moto {
    /// Start it with the virtualenv's `python`.
    pub(crate) fn start(python: &Path) -> Moto {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(python)
            .args(["-c", SERIAL_SERVER, "127.0.0.1", &port.to_string()])
            .env("MOTO_PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto's server starts");
        let moto = Moto {
            child,
            port,
            python: python.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto's server did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a `provrun` (or any S3 client) needs to reach it.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_DEFAULT_REGION", "us-east-1".into()),
        ]
    }

    /// Run a Python snippet with boto3 (which moto brings) against the server; its stdout.
    pub(crate) fn python(&self, code: &str) -> String {
        let out = Command::new(&self.python)
            .args(["-c", code])
            .envs(self.env())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One unsigned request (moto takes them for buckets); the status code.
    pub(crate) fn request(&self, method: &str, path: &str, body: &[u8]) -> u16 {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )
        .unwrap();
        stream.write_all(body).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
