//! `provrun view` pages loaded in a real headless browser (Debian's `chromium`): pages made
//! from real bundles — a finished run, a failed run full of hostile text, a paused-then-
//! resumed run, an MCP run, a tampered bundle, a 300-step run, a wrapped program's run —
//! whose rendered DOM is
//! checked for what must be shown and for hostile content that must not have run. A
//! screenshot of each page is kept under `target/tmp/view-screenshots/`.
//!
//! Without `chromium` these tests skip loudly; under `CI=true` they fail instead
//! (`cargo xtask ci` installs the package there).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_mcp-test-server");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn cli(args: &[&str]) -> ExitCode {
    let mut all = vec!["provrun"];
    all.extend_from_slice(args);
    provrun_cli::main_with_args(all)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The browser, or `None` (with a loud note) when it is missing outside CI.
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromium"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(
            !ci,
            "CI must run the browser tests of `provrun view`, but `chromium` is not installed"
        );
        eprintln!(
            "\n##  SKIPPED: `chromium` is not installed; the `provrun view` browser tests did not run.\n\
             ##  Install Debian's `chromium` package to run them (CI=true fails here).\n"
        );
    }
    found
}

/// Runs the browser on `page#fragment` with `extra` flags and returns its stdout, killing
/// it if it hangs.
fn browse(browser: &Path, page: &Path, fragment: &str, extra: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}{fragment}", page.display());
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(&url)
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
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish with {url} in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The page's DOM after its script ran.
fn dom(browser: &Path, page: &Path, fragment: &str) -> String {
    let dom = browse(browser, page, fragment, &["--dump-dom".to_owned()]);
    assert!(
        dom.contains("data-rendered=\"yes\""),
        "the page's script did not finish: {}",
        &dom[..dom.len().min(2000)]
    );
    dom
}

/// Keeps a screenshot of the page as a test artifact.
fn screenshot(browser: &Path, page: &Path, name: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("view-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&file);
    browse(
        browser,
        page,
        "",
        &[
            format!("--screenshot={}", file.display()),
            "--window-size=1280,1800".to_owned(),
        ],
    );
    assert!(
        std::fs::metadata(&file).is_ok_and(|m| m.len() > 1000),
        "no screenshot at {}",
        file.display()
    );
}

/// `provrun view BUNDLE -o page.html`, checked to succeed.
fn page(bundle: &Path, dir: &Path, name: &str) -> PathBuf {
    let page = dir.join(format!("{name}.html"));
    assert_eq!(cli(&["view", s(bundle), "-o", s(&page)]), ExitCode::SUCCESS);
    page
}

/// How many times `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// What every page must hold whatever the bundle said: its own two scripts and nothing
/// that a hostile string could have turned into markup or script.
fn assert_inert(dom: &str) {
    assert_eq!(count(dom, "<script"), 2, "a script element appeared");
    assert!(!dom.contains("<img"), "an img element appeared");
    assert!(!dom.contains("<a "), "a link appeared");
    assert!(!dom.contains("data-pwned=\""), "hostile script ran");
    assert!(!dom.contains("<title>PWNED"), "hostile script ran");
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// An agent of a script; returns the spec's path.
fn agent(dir: &Path, spec: &str, script: &serde_json::Value) -> PathBuf {
    write(&dir.join("script.json"), &script.to_string());
    let path = dir.join("agent.toml");
    write(&path, spec);
    path
}

#[test]
fn a_finished_run_shows_its_header_verdict_steps_and_files() {
    let Some(browser) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let ex = root().join("examples/scripted");
    assert_eq!(
        cli(&[
            "run",
            s(&ex.join("agent.toml")),
            "--input",
            s(&ex.join("input")),
            "--out",
            s(&bundle)
        ]),
        ExitCode::SUCCESS
    );
    let page = page(&bundle, tmp.path(), "finished");
    let html = std::fs::read_to_string(&page).unwrap();
    // Nothing is loaded from elsewhere: no linked resources, and a policy that forbids them.
    assert!(!html.contains("<link") && !html.contains(" src="));
    assert!(html.contains("default-src &#x27;none&#x27;"));
    let dom = dom(&browser, &page, "");
    assert_inert(&dom);
    assert!(dom.contains("<title>provrun view · scripted</title>"));
    for shown in [
        "agent scripted",
        "status</b>finished",
        "model requests</b>3",
        "tool calls</b>3",
        "The bundle verifies: every check passes.",
        ">chain<",
        ">statement<",
        "step 3",
        "You read /input/report.txt and write a short summary to /output/summary.md.",
        "Wrote /output/summary.md: revenue up 12%",
        "decided by tool",
        "raw request bytes",
        "report.txt",
        "summary.md",
        "# Summary of report.txt",
    ] {
        assert!(dom.contains(shown), "missing {shown:?}");
    }
    // A short run opens expanded: each of the three steps shows its body.
    assert_eq!(count(&dom, "class=\"body\""), 3);
    screenshot(&browser, &page, "finished");
}

/// Strings a hostile model, tool or input might carry.
const HOSTILE: &str = "<script>document.title='PWNED'</script>\
     <img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">\
     </script><script>document.body.setAttribute('data-pwned','2')</script>\
     <a href=\"javascript:document.body.setAttribute('data-pwned','3')\">click me</a>";

#[test]
fn a_failed_run_full_of_hostile_text_shows_it_as_text_and_runs_none_of_it() {
    let Some(browser) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agent");
    write(&dir.join("input/notes.txt"), HOSTILE);
    // One response with hostile text and calls; the script then ends, which fails the run.
    let script = serde_json::json!([{
        "text": HOSTILE,
        "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": format!("/input/{HOSTILE}")}},
            {"id": "c2", "name": "write_file", "arguments": {"path": "/output/evil.html", "content": HOSTILE}}
        ]
    }]);
    let spec = agent(
        &dir,
        "name = \"hostile\"\nmodel = \"script:script.json\"\ntools = [\"read_file\", \"write_file\"]\n",
        &script,
    );
    let bundle = tmp.path().join("bundle");
    assert_eq!(
        cli(&[
            "run",
            s(&spec),
            "--input",
            s(&dir.join("input")),
            "--out",
            s(&bundle)
        ]),
        ExitCode::from(1)
    );
    let page = page(&bundle, tmp.path(), "failed-hostile");
    let html = std::fs::read_to_string(&page).unwrap();
    // In the file, the data cannot close its element: no `</script>` but the page's two.
    assert_eq!(count(&html, "</script>"), 2);
    let dom = dom(&browser, &page, "");
    assert_inert(&dom);
    assert!(dom.contains("<title>provrun view · hostile</title>"));
    assert!(dom.contains("status</b>failed"));
    assert!(dom.contains("run failed"));
    // The hostile text is there, as text: the model's answer, the failed call's
    // arguments, the written file, the input.
    let as_text = "&lt;script&gt;document.title='PWNED'&lt;/script&gt;";
    assert!(count(&dom, as_text) >= 4, "{}", count(&dom, as_text));
    assert!(dom.contains("javascript:document.body.setAttribute"));
    assert!(dom.contains("1 failed"));
    assert!(dom.contains("evil.html"));
    // Jumping to the failed call opens its step and marks the call.
    let dom = self::dom(&browser, &page, "#failed");
    assert_inert(&dom);
    assert!(
        dom.contains("class=\"entry bad focus\""),
        "the failed call is not focused"
    );
    screenshot(&browser, &page, "failed-hostile");
}

#[test]
fn a_paused_then_resumed_run_links_the_deferred_call_to_its_completion() {
    let Some(browser) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let spec = root().join("examples/approve/agent.toml");
    assert_eq!(
        cli(&["run", s(&spec), "--out", s(&bundle)]),
        ExitCode::from(4)
    );
    assert_eq!(
        cli(&["resume", s(&bundle), "--approve", "greet"]),
        ExitCode::SUCCESS
    );
    let events = provrun::evidence::read_events(&bundle).unwrap();
    let deferred = events
        .iter()
        .find(|e| e.payload["deferred"] == true)
        .unwrap()
        .seq;
    let completed = events
        .iter()
        .find(|e| e.payload["call_id"] == "greet" && e.payload["deferred"] == false)
        .unwrap()
        .seq;
    let page = page(&bundle, tmp.path(), "resumed");
    let dom = dom(&browser, &page, "");
    assert_inert(&dom);
    for shown in [
        "run paused",
        "run finished",
        "resumed here",
        ">waits<",
        &format!("→ completed at event {completed}"),
        &format!("← deferred at event {deferred}"),
        "decided by tool",
        "Hello, world.",
    ] {
        assert!(dom.contains(shown), "missing {shown:?}");
    }
    // A link to the deferred event opens its step and marks it.
    let dom = self::dom(&browser, &page, &format!("#ev-{deferred}"));
    assert!(
        dom.contains(&format!(
            "class=\"entry deferred focus\" id=\"ev-{deferred}\""
        )),
        "the deferred call is not focused"
    );
    screenshot(&browser, &page, "resumed");
}

#[test]
fn an_mcp_run_marks_the_servers_calls_and_their_claims_confidence() {
    let Some(browser) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mcp");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(SERVER, dir.join("mcp-test-server")).unwrap();
    let example = std::fs::read_to_string(root().join("examples/mcp/agent.toml")).unwrap();
    let spec = example.replace("../../target/debug/mcp-test-server", "./mcp-test-server");
    let (head, tail) = spec.split_once("[[mcp]]").unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!("{head}allow_degraded_sandbox = true\n\n[[mcp]]{tail}"),
    )
    .unwrap();
    std::fs::copy(
        root().join("examples/mcp/script.json"),
        dir.join("script.json"),
    )
    .unwrap();
    let bundle = tmp.path().join("bundle");
    assert_eq!(
        cli(&["run", s(&dir.join("agent.toml")), "--out", s(&bundle)]),
        ExitCode::SUCCESS
    );
    let page = page(&bundle, tmp.path(), "mcp");
    let dom = dom(&browser, &page, "");
    assert_inert(&dom);
    assert!(dom.contains("MCP server demo"), "no MCP badge");
    assert!(dom.contains("remote_mcp"));
    assert!(dom.contains("the server's claims: confidence parsed"));
    assert!(dom.contains("demo_"));
    screenshot(&browser, &page, "mcp");
}

#[test]
fn a_tampered_bundle_is_shown_as_not_verifying_and_names_the_failed_check() {
    let Some(browser) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let ex = root().join("examples/scripted");
    assert_eq!(
        cli(&[
            "run",
            s(&ex.join("agent.toml")),
            "--input",
            s(&ex.join("input")),
            "--out",
            s(&bundle)
        ]),
        ExitCode::SUCCESS
    );
    let out = bundle.join("output/summary.md");
    let mut bytes = std::fs::read(&out).unwrap();
    bytes[2] ^= 0x20;
    std::fs::write(&out, bytes).unwrap();
    let page = page(&bundle, tmp.path(), "tampered");
    let dom = dom(&browser, &page, "");
    assert_inert(&dom);
    assert!(dom.contains("class=\"verdict fails\""));
    assert!(dom.contains("THE BUNDLE DOES NOT VERIFY"));
    assert!(dom.contains("<td class=\"fail\">fail</td><td class=\"mono\">outputs</td>"));
    assert!(dom.contains("the file's bytes do not match this digest"));
    screenshot(&browser, &page, "tampered");
}

/// A wrapped program's bundle, written through wrap's own recording steps (no sandbox
/// needed): a generation, a model listing, a refused connection whose host is hostile
/// text, the program's exit and an imported session log.
fn wrapped_bundle(dir: &Path) -> PathBuf {
    use provrun_evidence::{ConnectionHandled, ProgramExited, StreamRecord, TraceImported};
    use provrun_wrap::proxy::route::{Api, Route};
    use provrun_wrap::record::{Exchange, Recording};
    let bundle = dir.join("wrapped");
    let capture = provrun_capture::Capture::builder(&bundle)
        .builder("provrun-wrap/0.1.0")
        .agent("codex")
        .model("wrapped")
        .open()
        .unwrap();
    let recording = Recording::new(capture.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let http = |path: &str| serde_json::json!({"api": "openai", "method": "POST", "path": path, "status": 200});
    let exchange = |route, path: &str, response: &str| Exchange {
        api: Api::OpenAi,
        route,
        request: bytes::Bytes::from_static(br#"{"model":"gpt-test","messages":[]}"#),
        request_type: "application/json".into(),
        response: bytes::Bytes::from(response.to_owned()),
        response_type: Some("application/json".into()),
        status: Some(200),
        http: http(path),
        duration_ms: 12,
        error: None,
    };
    let answer = r#"{"id":"c","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"wrapped answer"}}]}"#;
    rt.block_on(async {
        let chat = provrun_model::WireApi::ChatCompletions;
        recording
            .exchange(exchange(
                Route::Generation(chat),
                "/v1/chat/completions",
                answer,
            ))
            .await
            .unwrap();
        recording
            .exchange(exchange(
                Route::Other("models"),
                "/v1/models",
                r#"{"data":[]}"#,
            ))
            .await
            .unwrap();
        recording
            .connection(ConnectionHandled {
                host: "<img src=x onerror=\"document.body.dataset.pwned=1\">".into(),
                port: 443,
                via: "connect".into(),
                outcome: "refused".into(),
                reason: Some("not an allowed host".into()),
                bytes_sent: 0,
                bytes_received: 0,
                duration_ms: 0,
            })
            .await
            .unwrap();
        let rec = capture.recorder();
        let stream = StreamRecord {
            sha256: "0".repeat(64),
            size: 0,
            blob: None,
        };
        rec.record_async(&ProgramExited {
            argv: vec!["codex".into(), "exec".into()],
            exit_code: Some(0),
            signal: None,
            forwarded_signal: None,
            stdout: stream.clone(),
            stderr: stream,
            duration_ms: 900,
            confinement: Some(serde_json::json!({"mode": "full"})),
        })
        .await
        .unwrap();
        let trace = rec
            .put_blob_for_next_event(b"{}\n", "application/x-ndjson")
            .await
            .unwrap();
        rec.record_async(&TraceImported {
            trace,
            format: "codex-rollout/1".into(),
            messages: 1,
            source: Some(".codex/sessions/rollout-x.jsonl".into()),
        })
        .await
        .unwrap();
    });
    capture
        .recorder()
        .finish(provrun_evidence::RunEnd::new(
            provrun_evidence::RunStatus::Finished,
        ))
        .unwrap();
    bundle
}

#[test]
fn a_wrapped_runs_exchanges_connections_and_exit_are_shown_as_text() {
    let Some(browser) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bundle = wrapped_bundle(tmp.path());
    let page = page(&bundle, tmp.path(), "wrapped");
    let dom = dom(&browser, &page, "");
    assert_inert(&dom);
    assert!(
        dom.contains("The bundle verifies: every check passes."),
        "{}",
        &dom[..dom.len().min(3000)]
    );
    for shown in [
        "wrapped answer",
        "http models",
        "/v1/models",
        "connection refused",
        "&lt;img src=x",
        "program exited",
        "codex exec",
        "confinement it ran under",
        "the program's session log .codex/sessions/rollout-x.jsonl imported",
    ] {
        assert!(dom.contains(shown), "the page does not show {shown:?}");
    }
    screenshot(&browser, &page, "wrapped");
}

#[test]
fn a_300_step_run_opens_collapsed_and_can_be_searched_and_jumped_through() {
    let Some(browser) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agent");
    write(&dir.join("input/a.txt"), "a\n");
    let mut steps: Vec<serde_json::Value> = (0..300)
        .map(|i| {
            let call = if i == 150 {
                serde_json::json!({"id": "c150", "name": "read_file", "arguments": {"path": "/input/missing.txt"}})
            } else {
                serde_json::json!({"id": format!("c{i}"), "name": "list_dir", "arguments": {"path": "/input"}})
            };
            serde_json::json!({"text": format!("looking again: needle-{i:03}"), "tool_calls": [call]})
        })
        .collect();
    steps.push(serde_json::json!({"text": "done"}));
    let spec = agent(
        &dir,
        "name = \"long\"\nmodel = \"script:script.json\"\nmax_steps = 400\ntools = [\"list_dir\", \"read_file\"]\n",
        &serde_json::Value::Array(steps),
    );
    let bundle = tmp.path().join("bundle");
    let code = cli(&[
        "run",
        s(&spec),
        "--input",
        s(&dir.join("input")),
        "--out",
        s(&bundle),
    ]);
    assert_eq!(code, ExitCode::SUCCESS);
    let page = page(&bundle, tmp.path(), "long");
    let size = std::fs::metadata(&page).unwrap().len();
    let start = Instant::now();
    let dom = dom(&browser, &page, "");
    eprintln!(
        "view: a 301-step page of {} KiB loaded and rendered in {:.1} s",
        size / 1024,
        start.elapsed().as_secs_f64()
    );
    assert_inert(&dom);
    assert_eq!(count(&dom, "class=\"step"), 301);
    assert_eq!(count(&dom, "class=\"step failed"), 1);
    // Collapsed: no step body is built until it is opened.
    assert_eq!(count(&dom, "class=\"body\""), 0);
    // The failed call: one jump opens its step and only that one.
    let dom = self::dom(&browser, &page, "#failed");
    assert_eq!(count(&dom, "class=\"body\""), 1);
    assert!(dom.contains("class=\"entry bad focus\""));
    assert!(dom.contains("/input/missing.txt"));
    // Search: one step mentions needle-042.
    let dom = self::dom(&browser, &page, "#search=needle-042");
    assert_eq!(count(&dom, " hidden\""), 300);
    assert!(dom.contains("1 of 301 steps match"));
    // Jump to a tool: the first read_file call.
    let dom = self::dom(&browser, &page, "#tool=read_file");
    assert!(dom.contains("class=\"entry bad focus\""));
    screenshot(&browser, &page, "long");
}
