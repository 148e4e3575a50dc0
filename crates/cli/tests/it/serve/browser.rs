//! `GET /runs/ID` opened in headless chromium: the page the server sends (with its
//! Content-Security-Policy header) renders the run — its verdict, its tool call and its
//! answer — with the page's one script allowed and nothing else loaded. Without
//! `chromium` the test skips loudly; under `CI=true` it fails (`cargo xtask ci` installs
//! it there).

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
