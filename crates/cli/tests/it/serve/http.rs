//! `provrun serve` over plain HTTP: the token (401 without it or with a wrong one),
//! hostile input (each a typed 4xx, nothing written), the store's routes and the index,
//! 429 past `--concurrency`, CORS, and what the command refuses to start with.

use std::path::Path;
use std::process::Command;

use super::{Served, fetch_and_verify, input, request, write_agents};

const TOKEN: &str = "s3cret-token";

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// The store's entries besides the index (what a refused request must not add).
fn written(store: &Path) -> Vec<String> {
    std::fs::read_dir(store)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "index.jsonl")
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn no_token_or_a_wrong_one_is_401_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let store = dir.path().join("store");
    let served = Served::start(
        &dir.path().join("agents"),
        &store,
        &[],
        &[("PROVRUN_SERVE_TOKEN", TOKEN)],
    );
    let body = input("t", "r", "hi");
    for headers in [
        vec![],
        vec![("Authorization", "Bearer wrong")],
        vec![("Authorization", TOKEN)],
    ] {
        for (method, path) in [
            ("POST", "/agents/chat"),
            ("GET", "/runs"),
            ("GET", "/runs/x"),
            ("POST", "/runs/x/cancel"),
        ] {
            let r = request(served.addr, method, path, &headers, &body);
            assert_eq!(
                (r.status, r.code().as_str()),
                (401, "unauthorized"),
                "{method} {path} {headers:?}"
            );
            assert!(r.header("www-authenticate").is_some());
        }
    }
    assert!(written(&store).is_empty());
    let auth = bearer();
    let ok = request(
        served.addr,
        "POST",
        "/agents/chat",
        &[("Authorization", &auth)],
        &body,
    );
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("content-type"), Some("text/event-stream"));
}

#[test]
fn hostile_requests_get_typed_refusals_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    // A spec outside the agents folder that a path-like name would reach.
    std::fs::write(
        dir.path().join("outside.toml"),
        "name = \"x\"\nmodel = \"test\"\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let served = Served::start(&agents, &store, &[], &[]);
    let post = |path: &str, body: &[u8]| {
        request(
            served.addr,
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body,
        )
    };

    // Past the default limit (1 MiB); 10,000 messages stay under it.
    let big = vec![b' '; 1_500_000];
    let many: Vec<serde_json::Value> = (0..10_000)
        .map(|i| serde_json::json!({"id": format!("m{i}"), "role": "user", "content": "x"}))
        .collect();
    let many = serde_json::json!({"threadId": "t", "runId": "r", "messages": many}).to_string();
    let bad_tool = serde_json::json!({"threadId": "t", "runId": "r", "tools": [{"name": "../x", "description": ""}],
                                      "messages": [{"id": "u", "role": "user", "content": "hi"}]});
    let resume_nothing = serde_json::json!({"threadId": "t2", "runId": "r", "resume": [{"interruptId": "x.1.1", "status": "resolved"}],
                                            "messages": [{"id": "u", "role": "user", "content": "hi"}]});
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("/agents/chat", big, 413, "body_too_large"),
        ("/agents/chat", b"{not json".to_vec(), 400, "bad_json"),
        ("/agents/chat", b"[1,2]".to_vec(), 400, "bad_input"),
        ("/agents/chat", many.into_bytes(), 413, "too_many_messages"),
        ("/agents/chat", input("../../etc", "r", "hi"), 400, "bad_id"),
        (
            "/agents/chat",
            bad_tool.to_string().into_bytes(),
            400,
            "bad_tool",
        ),
        (
            "/agents/chat",
            resume_nothing.to_string().into_bytes(),
            400,
            "bad_resume",
        ),
        ("/agents/chat", input("t", "r", "  "), 400, "no_prompt"),
        ("/agents/nope", input("t", "r", "hi"), 404, "unknown_agent"),
        (
            "/agents/..%2Foutside",
            input("t", "r", "hi"),
            404,
            "unknown_agent",
        ),
        ("/agents/.chat", input("t", "r", "hi"), 404, "unknown_agent"),
        (
            "/agents/chat.json",
            input("t", "r", "hi"),
            404,
            "unknown_agent",
        ),
    ];
    for (path, body, status, code) in cases {
        let r = post(path, &body);
        assert_eq!(
            (r.status, r.code().as_str()),
            (status, code),
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    for (method, path, status, code) in [
        ("GET", "/runs/..%2Fagents", 400, "bad_id"),
        ("GET", "/runs/.hidden/bundle", 400, "bad_id"),
        ("GET", "/runs/none", 404, "unknown_run"),
        ("GET", "/runs/none/verify", 404, "unknown_run"),
        ("GET", "/runs?after=none", 400, "bad_cursor"),
        ("GET", "/runs?limit=0", 400, "bad_limit"),
        ("POST", "/runs/none/cancel", 404, "not_running"),
        ("GET", "/agents/chat", 405, "method_not_allowed"),
        ("GET", "/elsewhere", 404, "not_found"),
    ] {
        let r = request(served.addr, method, path, &[], b"");
        assert_eq!(
            (r.status, r.code().as_str()),
            (status, code),
            "{method} {path}"
        );
    }
    assert!(written(&store).is_empty(), "{:?}", written(&store));
}

#[test]
fn the_store_routes_list_show_and_hand_out_verifiable_bundles() {
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let store = dir.path().join("store");
    let served = Served::start(&dir.path().join("agents"), &store, &[], &[]);
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = request(
            served.addr,
            "POST",
            "/agents/chat",
            &[],
            &input(&format!("t{i}"), &format!("run-{i}"), "hi"),
        );
        let events = r.events();
        assert_eq!(events[0]["runId"], format!("run-{i}"));
        let end = events.last().unwrap();
        assert_eq!(end["type"], "RUN_FINISHED", "{events:?}");
        ids.push(end["result"]["bundle"].as_str().unwrap().to_string());
    }
    // The input's runId, being a safe id, names the bundle; a reused one gets a new id.
    assert_eq!(ids, ["run-0", "run-1", "run-2"]);
    let again = request(
        served.addr,
        "POST",
        "/agents/chat",
        &[],
        &input("t9", "run-0", "hi"),
    )
    .events();
    assert_eq!(again[0]["runId"], "run-0");
    assert_ne!(again.last().unwrap()["result"]["bundle"], "run-0");

    let page = request(served.addr, "GET", "/runs?limit=2", &[], b"").json();
    let runs = page["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for key in [
        "id",
        "agent",
        "thread",
        "status",
        "started",
        "duration_ms",
        "verified",
    ] {
        assert!(runs[0].get(key).is_some(), "{key} in {}", runs[0]);
    }
    let next = page["next"].as_str().unwrap().to_string();
    let rest = request(served.addr, "GET", &format!("/runs?after={next}"), &[], b"").json();
    assert_eq!(rest["runs"].as_array().unwrap().len(), 2);
    assert!(rest["next"].is_null());

    let report = request(served.addr, "GET", "/runs/run-1/verify", &[], b"").json();
    assert_eq!(
        (report["ok"].as_bool(), report["status"].as_str()),
        (Some(true), Some("finished"))
    );
    let html = request(served.addr, "GET", "/runs/run-1", &[], b"");
    assert_eq!(html.status, 200);
    assert!(
        html.header("content-security-policy")
            .unwrap()
            .contains("default-src 'none'")
    );
    fetch_and_verify(served.addr, &[], "run-2", dir.path());
    // The index has one line per ended run.
    let index = std::fs::read_to_string(store.join("index.jsonl")).unwrap();
    assert_eq!(index.lines().count(), 4);
}

#[test]
fn past_the_concurrency_a_run_is_refused_with_429_and_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let store = dir.path().join("store");
    let served = Served::start(
        &dir.path().join("agents"),
        &store,
        &["--concurrency", "2"],
        &[],
    );
    let addr = served.addr;
    let started = |id: &str| {
        let began = std::time::Instant::now();
        while !store.join(format!("{id}/events.jsonl")).exists() {
            assert!(
                began.elapsed() < std::time::Duration::from_secs(30),
                "the slow run {id} did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    // Two slow runs hold the two slots (once their bundles exist); the cancel route frees
    // them.
    let slow = |thread: &'static str, id: &'static str| {
        std::thread::spawn(move || {
            request(addr, "POST", "/agents/slow", &[], &input(thread, id, "hi"))
        })
    };
    let first = slow("a", "slow-1");
    started("slow-1");
    // A second request on a thread whose run is in flight is a conflict.
    let same = request(
        addr,
        "POST",
        "/agents/slow",
        &[],
        &input("a", "slow-2", "hi"),
    );
    assert_eq!((same.status, same.code().as_str()), (409, "thread_busy"));
    let second = slow("c", "slow-3");
    started("slow-3");
    // Past the concurrency, a request is refused before its body is read.
    let busy = request(
        addr,
        "POST",
        "/agents/chat",
        &[],
        &input("b", "quick", "hi"),
    );
    assert_eq!(busy.status, 429, "{}", String::from_utf8_lossy(&busy.body));
    assert_eq!(busy.code(), "busy");
    assert_eq!(busy.header("retry-after"), Some("2"));
    for (id, run) in [("slow-1", first), ("slow-3", second)] {
        let cancelled = request(addr, "POST", &format!("/runs/{id}/cancel"), &[], b"");
        assert_eq!(cancelled.status, 202);
        let events = run.join().unwrap().events();
        assert_eq!(events.last().unwrap()["outcome"]["type"], "cancelled");
    }
    let after = request(
        addr,
        "POST",
        "/agents/chat",
        &[],
        &input("b", "quick", "hi"),
    );
    assert_eq!(after.status, 200);
}

#[test]
fn cors_headers_are_sent_only_for_the_named_origin() {
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let store = dir.path().join("store");
    let plain = Served::start(&dir.path().join("agents"), &store, &[], &[]);
    let r = request(
        plain.addr,
        "GET",
        "/runs",
        &[("Origin", "http://app.example")],
        b"",
    );
    assert!(r.header("access-control-allow-origin").is_none());
    drop(plain);
    let served = Served::start(
        &dir.path().join("agents"),
        &store,
        &["--cors", "http://app.example"],
        &[("PROVRUN_SERVE_TOKEN", TOKEN)],
    );
    let pre = request(
        served.addr,
        "OPTIONS",
        "/agents/chat",
        &[("Origin", "http://app.example")],
        b"",
    );
    assert_eq!(pre.status, 204, "a preflight needs no token");
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("http://app.example")
    );
    assert!(
        pre.header("access-control-allow-headers")
            .unwrap()
            .contains("authorization")
    );
    let other = request(
        served.addr,
        "OPTIONS",
        "/agents/chat",
        &[("Origin", "http://evil.example")],
        b"",
    );
    assert!(other.header("access-control-allow-origin").is_none());
}

#[test]
fn serve_refuses_a_public_address_without_a_token_and_other_bad_starts() {
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let agents = dir.path().join("agents");
    let store = dir.path().join("store");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_provrun"));
        cmd.arg("serve")
            .arg("--agents")
            .arg(&agents)
            .arg("--out")
            .arg(&store)
            .args(args);
        cmd.env_remove("PROVRUN_SERVE_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--listen", "0.0.0.0:0"], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("without a token"), "{err}");
    let (code, err) = run(&["--ledger", "/tmp/l"], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--ledger"), "{err}");
    let (code, err) = run(&["--cors", "app.example/path"], &[]);
    assert_eq!(code, Some(2), "{err}");
    let empty = dir.path().join("empty-token");
    std::fs::write(&empty, "\n").unwrap();
    let (code, err) = run(&["--token-file", empty.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!store.exists(), "nothing was made");
}

/// The events of a run request, and its bundle's id.
fn ran(addr: std::net::SocketAddr, agent: &str, body: &[u8]) -> (Vec<serde_json::Value>, String) {
    let r = request(addr, "POST", &format!("/agents/{agent}"), &[], body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let events = r.events();
    let bundle = events[0]["metadata"]["bundle"]
        .as_str()
        .unwrap()
        .to_string();
    (events, bundle)
}

#[test]
fn a_thread_goes_on_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let store = dir.path().join("store");
    let first = Served::start(&dir.path().join("agents"), &store, &[], &[]);
    let (_, earlier) = ran(first.addr, "chat", &input("talk", "turn-1", "Hi"));
    drop(first);
    let again = Served::start(&dir.path().join("agents"), &store, &[], &[]);
    let (events, later) = ran(again.addr, "chat", &input("talk", "turn-2", "And now?"));
    assert_eq!(events.last().unwrap()["result"]["output"], "Second answer.");
    let details = &crate::support::cli::events(&store.join(&later))[0]["payload"]["details"];
    assert_eq!(
        details["continues"]["run_id"].as_str(),
        Some(earlier.as_str())
    );
    // Both turns name their thread (telemetry's `gen_ai.conversation.id`).
    assert_eq!(details["thread"], "talk");
    let first_details =
        &crate::support::cli::events(&store.join(&earlier))[0]["payload"]["details"];
    assert_eq!(first_details["thread"], "talk");
}

#[test]
fn a_bucket_store_keeps_tars_resumes_paused_runs_and_continues_threads() {
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let bucket = dir.path().join("bucket");
    std::fs::create_dir_all(&bucket).unwrap();
    let work = dir.path().join("work");
    let url = format!("file://{}", bucket.display());
    let served = Served::start(
        &dir.path().join("agents"),
        Path::new(&url),
        &["--work-dir", work.to_str().unwrap()],
        &[],
    );
    // An approval: paused (its tar is in the bucket, its folder in the work folder) …
    let (events, id) = ran(served.addr, "approve", &input("b", "appr", "Write it."));
    let interrupt = events.last().unwrap()["outcome"]["interrupts"][0]["id"].clone();
    assert!(bucket.join(format!("{id}.tar")).is_file());
    assert!(work.join(&id).join("events.jsonl").is_file());
    // … then resumed: the bucket's tar is replaced by the finished one, the folder goes.
    let resume = serde_json::json!({"threadId": "b", "runId": "appr-2",
        "messages": [{"id": "u", "role": "user", "content": "Write it."}],
        "resume": [{"interruptId": interrupt, "status": "resolved"}]});
    let (events, same) = ran(served.addr, "approve", resume.to_string().as_bytes());
    assert_eq!(same, id);
    assert_eq!(events.last().unwrap()["result"]["status"], "finished");
    assert!(!work.join(&id).exists());
    fetch_and_verify(served.addr, &[], &id, dir.path());
    let report = request(served.addr, "GET", &format!("/runs/{id}/verify"), &[], b"").json();
    assert_eq!(report["status"], "finished");
    assert_eq!(
        request(served.addr, "GET", &format!("/runs/{id}"), &[], b"").status,
        200
    );
    // A thread's next turn reads the earlier bundle back from the bucket.
    let (_, earlier) = ran(served.addr, "chat", &input("c", "c-1", "Hi"));
    let (events, _) = ran(served.addr, "chat", &input("c", "c-2", "Again"));
    assert_eq!(events.last().unwrap()["result"]["output"], "Second answer.");
    let listed = request(served.addr, "GET", "/runs", &[], b"").json();
    let ids: Vec<&str> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&earlier.as_str()) && ids.contains(&id.as_str()),
        "{ids:?}"
    );
    assert!(
        work.join("index.jsonl").is_file(),
        "a bucket's index is kept in the work folder"
    );
}
