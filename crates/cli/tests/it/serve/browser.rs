//! `provrun serve` in headless chromium: `GET /runs/ID` — the page the server sends (with
//! its Content-Security-Policy header) renders the run, its verdict, its tool calls and
//! its answer — and the browser example of docs/serve.md (`examples/serve/index.html`)
//! served from another origin (`--cors`), talking to the server through an approval.
//! Without `chromium` (or `chromedriver`) the tests skip loudly; under `CI=true` they fail
//! (`cargo xtask ci` installs both there).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Served, in_ci, input, request, write_agents};

fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromium"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            !in_ci(),
            "CI=true: `chromium` is not installed for the serve page test"
        );
        eprintln!(
            "\n*** SKIPPED: `chromium` is not installed; /runs/ID was not opened in a browser.\n"
        );
    }
    found
}

/// The DOM of `url` after its script ran.
fn dom(browser: &PathBuf, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=3000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
        out
    });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish with {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

#[test]
fn a_runs_page_from_the_server_renders_in_chromium() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let served = Served::start(
        &dir.path().join("agents"),
        &dir.path().join("store"),
        &[],
        &[],
    );
    let r = request(
        served.addr,
        "POST",
        "/agents/tools",
        &[],
        &input("t", "page-run", "go"),
    );
    assert_eq!(r.events().last().unwrap()["type"], "RUN_FINISHED");
    let dom = dom(&browser, &format!("{}runs/page-run", served.url));
    assert!(
        dom.contains("data-rendered=\"yes\""),
        "the page's script did not run: {}",
        &dom[..dom.len().min(1500)]
    );
    for shown in [
        "page-run",
        "write_file",
        "read_file",
        "The note says remember.",
    ] {
        assert!(dom.contains(shown), "{shown} is not on the page");
    }
    assert!(
        dom.contains("verifies") || dom.contains("verified"),
        "no verdict on the page"
    );
}

#[test]
fn a_models_control_and_bidi_characters_show_inert_on_the_runs_page() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    // A model that answers with an ANSI colour, a right-to-left override and a zero-width
    // space, and names a tool call with an ESC.
    std::fs::write(
        agents.join("hostile.json"),
        serde_json::json!([
            {"tool_calls": [{"id": "c\u{1b}]0;x\u{7}", "name": "read_file",
                             "arguments": {"path": "/input/\u{202e}txt.exe"}}]},
            {"text": "\u{1b}[31mred\u{1b}[0m and \u{202e}desrever\u{200b}."}
        ])
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        agents.join("hostile.toml"),
        "name = \"hostile\"\nmodel = \"script:hostile.json\"\ntools = [\"read_file\"]\n",
    )
    .unwrap();
    let served = Served::start(&agents, &dir.path().join("store"), &[], &[]);
    let r = request(
        served.addr,
        "POST",
        "/agents/hostile",
        &[],
        &input("h", "hostile-run", "go"),
    );
    assert_eq!(r.events().last().unwrap()["type"], "RUN_FINISHED");
    let dom = dom(&browser, &format!("{}runs/hostile-run", served.url));
    assert!(
        dom.contains("data-rendered=\"yes\""),
        "the page's script did not run"
    );
    // The page's own text (not the embedded data) shows each character as an escape.
    let body = &dom[..dom.find("bundle-data").unwrap_or(dom.len())];
    let shown = dom.replace("&amp;", "&");
    for escaped in [
        "\\x1b[31mred\\x1b[0m and \\u{202e}desrever\\u{200b}.",
        "/input/\\u{202e}txt.exe",
        "c\\x1b]0;x\\x07",
    ] {
        assert!(
            shown.contains(escaped),
            "{escaped} is not shown on the page"
        );
    }
    for raw in ['\u{1b}', '\u{202e}', '\u{200b}', '\u{7}'] {
        assert!(
            !body.contains(raw),
            "{raw:?} reached the page's text raw: {}",
            &body[..body.len().min(2000)]
        );
    }
}

/// Serves `page` for every request on a loopback port (a stand-in for any static web
/// server); its origin.
fn static_page(page: Vec<u8>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut head = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut head);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                page.len()
            );
            let _ = std::io::Write::write_all(&mut stream, reply.as_bytes());
            let _ = std::io::Write::write_all(&mut stream, &page);
        }
    });
    origin
}

/// A WebDriver session on headless chromium through `chromedriver` (Debian's
/// `chromium-driver`), spoken to over plain HTTP: the example page streams, so a DOM
/// dumped at a fixed moment would race it; WebDriver polls the page until it is done.
struct Driver {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    session: String,
}

impl Driver {
    fn start(browser: &std::path::Path) -> Option<Driver> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = match Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                assert!(!in_ci(), "CI=true: chromedriver does not start: {e}");
                eprintln!("\n*** SKIPPED: chromedriver (chromium-driver) is not installed: {e}\n");
                return None;
            }
        };
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "chromedriver did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let caps = serde_json::json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": browser, "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]}
        }}});
        let r = request(
            addr,
            "POST",
            "/session",
            &[("Content-Type", "application/json")],
            caps.to_string().as_bytes(),
        );
        let session = r.json()["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", r.json()))
            .to_string();
        Some(Driver {
            child,
            addr,
            session,
        })
    }

    fn call(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        let path = format!("/session/{}{path}", self.session);
        let r = request(
            self.addr,
            method,
            &path,
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        );
        r.json()["value"].clone()
    }

    /// The text of the element `id` once it holds every one of `wanted` (or after 60 s).
    fn wait_for_text(&self, id: &str, wanted: &[&str]) -> String {
        let script = format!("return document.getElementById('{id}').innerText");
        let started = Instant::now();
        loop {
            let text = self.call(
                "POST",
                "/execute/sync",
                serde_json::json!({"script": script, "args": []}),
            );
            let text = text.as_str().unwrap_or("").to_string();
            if wanted.iter().all(|w| text.contains(w))
                || started.elapsed() > Duration::from_secs(60)
            {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = request(
            self.addr,
            "DELETE",
            &format!("/session/{}", self.session),
            &[],
            b"",
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_browser_example_talks_to_the_server_through_an_approval() {
    let Some(browser) = chromium() else { return };
    let Some(driver) = Driver::start(&browser) else {
        return;
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/serve");
    let origin = static_page(std::fs::read(root.join("index.html")).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let served = Served::start(&root.join("agents"), &store, &["--cors", &origin], &[]);
    let url = format!("{origin}/#server={}&say=Keep%20a%20note", served.url);
    driver.call("POST", "/url", serde_json::json!({"url": url}));
    let wanted = [
        "Keep a note",
        "writing a file needs their approval",
        "write_file",
        "Done: the note is in /output/note.txt",
        "finished, verifies",
    ];
    let text = driver.wait_for_text("log", &wanted);
    for shown in wanted {
        assert!(text.contains(shown), "{shown:?} is not on the page: {text}");
    }
    let index = std::fs::read_to_string(store.join("index.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(index.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["status"].as_str(), last["verified"].as_bool()),
        (Some("finished"), Some(true))
    );
    let note = store
        .join(last["id"].as_str().unwrap())
        .join("output/note.txt");
    assert_eq!(std::fs::read_to_string(note).unwrap(), "Remember the milk.");
}
