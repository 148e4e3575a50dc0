//! `provrun serve` against hostile and unlucky clients, with the built binary on loopback:
//! many requests with one `runId` at the same moment (each its own bundle, every bundle
//! verifying, each thread taking another turn), a thread whose last bundle is broken, a
//! flood of slow connections (a normal client still served; the open-files limit raised),
//! cross-site and DNS-rebinding requests without a token, a symlinked spec, a 20 MB body
//! of small values (the server's peak RSS measured), a tool result for a call never made,
//! and the `Authorization` header's case and count.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Reply, Served, input, request, verify, write_agents};

/// `run_started`'s details in a bundle folder.
fn details(bundle: &Path) -> Value {
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    let first: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    first["payload"]["details"].clone()
}

fn post(addr: SocketAddr, agent: &str, body: &[u8]) -> Reply {
    request(addr, "POST", &format!("/agents/{agent}"), &[], body)
}

/// The bundle a stream names, after checking it ended with `RUN_FINISHED`.
fn finished_bundle(r: &Reply) -> String {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let events = r.events();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"RUN_STARTED"), "{types:?}");
    assert_eq!(types.last(), Some(&"RUN_FINISHED"), "{types:?}");
    assert!(!types.contains(&"RUN_ERROR"), "{types:?}");
    events[0]["metadata"]["bundle"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn requests_sharing_a_run_id_each_get_their_own_bundle_and_every_bundle_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let store = dir.path().join("store");
    let served = Served::start(&agents, &store, &["--concurrency", "64"], &[]);
    let addr = served.addr;
    const ROUNDS: usize = 30;
    const AT_ONCE: usize = 6;
    let mut threads = Vec::new();
    for round in 0..ROUNDS {
        let run_id = format!("same-{round}");
        let barrier = Arc::new(Barrier::new(AT_ONCE));
        let clients: Vec<_> = (0..AT_ONCE)
            .map(|k| {
                let (barrier, run_id) = (Arc::clone(&barrier), run_id.clone());
                let thread = format!("t{round}-{k}");
                std::thread::spawn(move || {
                    let body = input(&thread, &run_id, "hi");
                    barrier.wait();
                    (thread, post(addr, "chat", &body))
                })
            })
            .collect();
        let mut bundles = Vec::new();
        for c in clients {
            let (thread, reply) = c.join().unwrap();
            let bundle = finished_bundle(&reply);
            // Every stream names its own request's run and its own bundle.
            let events = reply.events();
            assert_eq!(events[0]["runId"], run_id.as_str());
            assert_eq!(events[0]["threadId"], thread.as_str());
            bundles.push(bundle.clone());
            threads.push((thread, bundle));
        }
        let mut unique = bundles.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), AT_ONCE, "round {round}: {bundles:?}");
        assert_eq!(
            bundles.iter().filter(|b| **b == run_id).count(),
            1,
            "round {round}: one request takes the runId as its bundle id: {bundles:?}"
        );
    }
    // Every bundle in the store verifies, and the index says so.
    for (_, bundle) in &threads {
        let report = provrun_evidence::verify(store.join(bundle));
        assert!(report.ok && report.complete, "{bundle}: {report:?}");
    }
    let (code, text) = verify(&store.join("same-0"));
    assert_eq!(code, 0, "{text}");
    let listed = request(addr, "GET", "/runs?limit=100", &[], b"").json();
    assert!(
        listed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["verified"] == true && r["status"] == "finished"),
        "{listed}"
    );
    // Each thread takes another turn, continuing its own bundle.
    for (thread, bundle) in threads.iter().step_by(7) {
        let next = finished_bundle(&post(addr, "chat", &input(thread, "again", "more")));
        assert_eq!(
            details(&store.join(&next))["continues"]["run_id"],
            bundle.as_str(),
            "{thread}"
        );
    }
}

#[test]
fn a_thread_whose_last_bundle_is_broken_still_takes_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let store = dir.path().join("store");
    let served = Served::start(&agents, &store, &[], &[]);
    let addr = served.addr;
    let first = finished_bundle(&post(addr, "chat", &input("tb", "tb-1", "one")));
    let second = finished_bundle(&post(addr, "chat", &input("tb", "tb-2", "two")));
    assert_eq!(details(&store.join(&second))["continues"]["run_id"], first);
    // The last bundle loses its log: the next turn continues the one before it.
    std::fs::remove_file(store.join(&second).join("events.jsonl")).unwrap();
    let third = finished_bundle(&post(addr, "chat", &input("tb", "tb-3", "three")));
    assert_eq!(details(&store.join(&third))["continues"]["run_id"], first);
    // With none of its bundles readable, the thread starts afresh.
    for b in [&first, &third] {
        std::fs::remove_dir_all(store.join(b)).unwrap();
    }
    let fourth = finished_bundle(&post(addr, "chat", &input("tb", "tb-4", "four")));
    assert!(details(&store.join(&fourth)).get("continues").is_none());
    // And after a restart the thread goes on from its newest readable bundle.
    drop(served);
    let served = Served::start(&agents, &store, &[], &[]);
    let fifth = finished_bundle(&post(served.addr, "chat", &input("tb", "tb-5", "five")));
    assert_eq!(details(&store.join(&fifth))["continues"]["run_id"], fourth);
    for b in [&fourth, &fifth] {
        let report = provrun_evidence::verify(store.join(b));
        assert!(report.ok && report.complete, "{b}: {report:?}");
    }
}

/// The soft open-files limit of a process, from /proc.
fn soft_nofile(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

fn hard_nofile(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(4).unwrap().parse().unwrap()
}

#[test]
fn a_flood_of_slow_connections_does_not_lock_a_client_out() {
    const SLOW: usize = 1_100;
    // This test holds 1,100 sockets itself.
    let mine = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if mine.current.is_some() && mine.current < mine.maximum {
        rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: mine.maximum,
                maximum: mine.maximum,
            },
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let store = dir.path().join("store");
    // Started with the common soft limit of 1,024: serve raises it to the hard one.
    let served = Served::start_with_soft_nofile(&agents, &store, 1024);
    let (soft, hard) = (soft_nofile(served.pid()), hard_nofile(served.pid()));
    assert_eq!(soft, hard, "serve raised its soft open-files limit");
    let addr = served.addr;

    // 1,100 connections that send a header one byte a second.
    let began = Instant::now();
    let mut slow: Vec<TcpStream> = (0..SLOW)
        .map(|_| {
            let s = TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    let header = b"POST /agents/chat HTTP/1.1\r\nHost: x\r\n";
    let trickle = |slow: &mut Vec<TcpStream>, i: usize| {
        for s in slow.iter_mut() {
            let _ = s.write_all(&header[i % header.len()..][..1]);
        }
    };
    trickle(&mut slow, 0);
    std::thread::sleep(Duration::from_secs(1));
    trickle(&mut slow, 1);

    // A normal client is served within seconds.
    let asked = Instant::now();
    let mut client = TcpStream::connect(addr).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let body = input("normal", "normal-1", "hi");
    client
        .write_all(
            format!(
                "POST /agents/chat HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .unwrap();
    client.write_all(&body).unwrap();
    let mut first = [0u8; 12];
    client
        .read_exact(&mut first)
        .expect("the normal client gets an answer within 5 s");
    assert_eq!(
        &first,
        b"HTTP/1.1 200",
        "{}",
        String::from_utf8_lossy(&first)
    );
    let waited = asked.elapsed();
    let mut rest = Vec::new();
    let _ = client.read_to_end(&mut rest);
    assert!(
        String::from_utf8_lossy(&rest).contains("RUN_FINISHED"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    eprintln!("a client among {SLOW} slow connections was answered in {waited:?}");

    // Keep trickling: every slow connection is closed by the server, made room for or
    // past the 30 s the header has to arrive in.
    let mut i = 2;
    let mut open: Vec<bool> = vec![true; SLOW];
    for s in &slow {
        s.set_nonblocking(true).unwrap();
    }
    while open.iter().any(|o| *o) && began.elapsed() < Duration::from_secs(45) {
        std::thread::sleep(Duration::from_secs(1));
        trickle(&mut slow, i);
        i += 1;
        for (k, s) in slow.iter_mut().enumerate() {
            let mut buf = [0u8; 256];
            match s.read(&mut buf) {
                // An answer (408 or the like) or the end: the server let it go.
                Ok(_) => open[k] = false,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => open[k] = false,
            }
        }
    }
    let still = open.iter().filter(|o| **o).count();
    assert_eq!(
        still,
        0,
        "{still} slow connections were still open after {:?}",
        began.elapsed()
    );
}

#[test]
fn without_a_token_cross_site_and_rebinding_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let store = dir.path().join("store");
    let served = Served::start(
        &agents,
        &store,
        &[
            "--cors",
            "http://app.example:8000",
            "--allow-host",
            "proxy.internal",
        ],
        &[],
    );
    let addr = served.addr;
    let body = input("x", "x-1", "hi");
    let host_port = format!("localhost:{}", addr.port());
    /// A request's method, path and headers, and the status and code it must get.
    type Refused<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, u16, &'a str);
    let refused: Vec<Refused> = vec![
        // A page's cross-site "simple" POST: text/plain needs no preflight.
        (
            "POST",
            "/agents/chat",
            vec![
                ("Origin", "http://evil.example"),
                ("Content-Type", "text/plain"),
            ],
            403,
            "bad_origin",
        ),
        // The same without an Origin (some clients send none): not JSON, not taken.
        (
            "POST",
            "/agents/chat",
            vec![("Content-Type", "text/plain;charset=UTF-8")],
            415,
            "bad_content_type",
        ),
        (
            "POST",
            "/agents/chat",
            vec![("Content-Type", "application/x-www-form-urlencoded")],
            415,
            "bad_content_type",
        ),
        // A DNS-rebinding page: same address, its own name.
        (
            "GET",
            "/runs",
            vec![("Host", "evil.example")],
            403,
            "bad_host",
        ),
        (
            "GET",
            "/runs",
            vec![("Host", "evil.example:80")],
            403,
            "bad_host",
        ),
        (
            "POST",
            "/agents/chat",
            vec![("Host", "rebind.evil.example")],
            403,
            "bad_host",
        ),
        // The right address at the wrong port is another server's name.
        (
            "GET",
            "/runs",
            vec![("Host", "127.0.0.1:1")],
            403,
            "bad_host",
        ),
        ("GET", "/runs", vec![("Origin", "null")], 403, "bad_origin"),
    ];
    for (method, path, headers, status, code) in refused {
        let sent = if method == "POST" { &body[..] } else { b"" };
        let r = request(addr, method, path, &headers, sent);
        assert_eq!(
            (r.status, r.code().as_str()),
            (status, code),
            "{method} {path} {headers:?}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    assert!(
        std::fs::read_dir(&store)
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );
    // A plain JSON POST with no Origin (curl, a script) still works, by address, by
    // localhost, and by an allowed name; so does the --cors origin and the server's own.
    let own_origin = format!("http://{addr}");
    for (i, headers) in [
        vec![],
        vec![("Host", host_port.as_str())],
        vec![("Host", "proxy.internal")],
        vec![("Host", "PROXY.internal:443")],
        vec![("Origin", "http://app.example:8000")],
        vec![("Origin", own_origin.as_str())],
    ]
    .into_iter()
    .enumerate()
    {
        let r = request(
            addr,
            "POST",
            "/agents/chat",
            &headers,
            &input(&format!("ok{i}"), &format!("ok-{i}"), "hi"),
        );
        finished_bundle(&r);
    }
    // curl itself, as a user would type it.
    let curl = Command::new("curl")
        .args(["-sS", "-N", "--json"])
        .arg(String::from_utf8(input("curl", "curl-1", "hi")).unwrap())
        .arg(format!("{}agents/chat", served.url))
        .output();
    if let Ok(out) = curl
        && out.status.success()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("RUN_FINISHED"), "{text}");
    }
}

#[test]
fn a_spec_linked_from_outside_the_agents_folder_is_not_an_agent() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    std::fs::write(
        dir.path().join("secret.toml"),
        "name = \"secret\"\nmodel = \"script:chat.json\"\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.toml"), agents.join("outside.toml"))
        .unwrap();
    std::os::unix::fs::symlink("chat.toml", agents.join("alias.toml")).unwrap();
    let store = dir.path().join("store");
    let served = Served::start(&agents, &store, &[], &[]);
    let r = post(served.addr, "outside", &input("s", "s-1", "hi"));
    assert_eq!((r.status, r.code().as_str()), (404, "unknown_agent"));
    // A link that stays inside the folder is the agent it leads to.
    finished_bundle(&post(served.addr, "alias", &input("a", "a-1", "hi")));
}

/// The peak resident memory of a process, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_20_mb_body_of_small_values_costs_about_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let store = dir.path().join("store");
    let served = Served::start(&agents, &store, &["--body-limit", "32000000"], &[]);
    let addr = served.addr;
    finished_bundle(&post(addr, "chat", &input("warm", "warm-1", "hi")));
    let before = peak_rss_kib(served.pid());
    // 20 MB of `0,` in members the server does not use, beside a valid input.
    let zeros = |n: usize| {
        let mut s = String::with_capacity(2 * n + 2);
        s.push('[');
        for i in 0..n {
            if i > 0 {
                s.push(',');
            }
            s.push('0');
        }
        s.push(']');
        s
    };
    let body = format!(
        r#"{{"threadId":"big","runId":"big-1","state":{},"forwardedProps":{{"x":{}}},"messages":[{{"id":"u","role":"user","content":[{{"type":"text","text":"hi"}},{{"type":"data","data":{}}}]}}]}}"#,
        zeros(4_000_000),
        zeros(3_000_000),
        zeros(3_000_000),
    );
    assert!(body.len() > 20_000_000, "{}", body.len());
    finished_bundle(&post(addr, "chat", body.as_bytes()));
    let after = peak_rss_kib(served.pid());
    let grown_mib = after.saturating_sub(before) / 1024;
    eprintln!(
        "peak RSS {} MiB before, {} MiB after a {} MB body (+{grown_mib} MiB)",
        before / 1024,
        after / 1024,
        body.len() / 1_000_000
    );
    // The body is held once and read in place: well under three times its size.
    assert!(
        grown_mib < 60,
        "the server's peak RSS grew by {grown_mib} MiB for a 20 MB body"
    );
}

#[test]
fn a_tool_result_for_a_call_never_made_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let store = dir.path().join("store");
    let served = Served::start(&agents, &store, &[], &[]);
    let addr = served.addr;
    let tools = json!([{"name": "pick_colour", "description": "Pick a colour.",
                        "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}}}]);
    let first = json!({"threadId": "f", "runId": "f-1", "tools": tools,
        "messages": [{"id": "u", "role": "user", "content": "pick"}]});
    let r = post(addr, "frontend", first.to_string().as_bytes());
    let events = r.events();
    let finished = events.last().unwrap();
    let pending = finished["outcome"]["pendingToolCallIds"][0]
        .as_str()
        .unwrap()
        .to_string();
    let answer = |extra: Option<&str>| {
        let mut messages = vec![
            json!({"id": "u", "role": "user", "content": "pick"}),
            json!({"id": "a", "role": "assistant", "toolCalls": [{"id": pending, "type": "function",
                   "function": {"name": "pick_colour", "arguments": "{}"}}]}),
            json!({"id": "r", "role": "tool", "toolCallId": pending, "content": "blue"}),
        ];
        if let Some(id) = extra {
            messages.push(json!({"id": "x", "role": "tool", "toolCallId": id, "content": "red"}));
        }
        json!({"threadId": "f", "runId": "f-2", "tools": tools, "messages": messages}).to_string()
    };
    for bogus in ["f-1.9.9", "made-up", "other-bundle.1.1"] {
        let r = post(addr, "frontend", answer(Some(bogus)).as_bytes());
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "bad_resume"),
            "{bogus}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains(bogus)
        );
    }
    // The valid answer alone resumes the run.
    let done = post(addr, "frontend", answer(None).as_bytes());
    assert_eq!(finished_bundle(&done), "f-1");
    let report = provrun_evidence::verify(store.join("f-1"));
    assert!(report.ok && report.complete, "{report:?}");
}

#[test]
fn the_bearer_scheme_is_taken_in_any_case_and_two_authorizations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let store = dir.path().join("store");
    let served = Served::start(&agents, &store, &[], &[("PROVRUN_SERVE_TOKEN", "tok-1")]);
    for value in ["Bearer tok-1", "bearer tok-1", "BEARER  tok-1"] {
        let r = request(
            served.addr,
            "GET",
            "/runs",
            &[("Authorization", value)],
            b"",
        );
        assert_eq!(r.status, 200, "{value}");
    }
    for value in ["Basic tok-1", "Bearertok-1", "tok-1"] {
        let r = request(
            served.addr,
            "GET",
            "/runs",
            &[("Authorization", value)],
            b"",
        );
        assert_eq!(r.status, 401, "{value}");
    }
    for pair in [
        ["Bearer tok-1", "Bearer wrong"],
        ["Bearer wrong", "Bearer tok-1"],
    ] {
        let r = request(
            served.addr,
            "GET",
            "/runs",
            &[("Authorization", pair[0]), ("Authorization", pair[1])],
            b"",
        );
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "bad_authorization"),
            "{pair:?}"
        );
    }
}

/// `Served::start` with the process's soft open-files limit lowered first (through `sh`'s
/// `ulimit`), as many systems start programs.
impl Served {
    pub(crate) fn start_with_soft_nofile(agents: &Path, store: &Path, soft: u64) -> Served {
        let script = format!(
            "ulimit -Sn {soft} && exec \"$0\" serve --agents \"$1\" --out \"$2\" --listen 127.0.0.1:0"
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_provrun"))
            .arg(agents)
            .arg(store)
            .env_remove("PROVRUN_SERVE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Served::from_command(cmd)
    }
}
