//! Replicas: three `provrun serve` processes over one `s3://` store (moto's S3 server on
//! loopback, 5.2 or newer for conditional writes) behave as one server — the same `runId`
//! sent to two of them at once is taken by exactly one (each request its own bundle, every
//! bundle verified, no two ids alike), `GET /runs` on each lists every run, a thread's
//! turns alternate across them (each bundle continuing the one before, and a thread busy
//! on one is busy on all), and an approval raised on one is resumed on another, the same
//! answer sent to two at once resuming once; four batch shards and three replicas add to
//! one ledger in the bucket at once, each run exactly once.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Reply, Served, input, request, verify, write_agents};
use crate::support::moto::{Moto, unavailable, virtualenv};

const STORE: &str = "s3://runs/serve";

/// moto with a bucket `runs`, or `None` (skipped) when it cannot be installed here.
fn moto() -> Option<Moto> {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => {
            unavailable("serve replicas", &why);
            return None;
        }
    };
    let moto = Moto::start(&python);
    assert_eq!(moto.request("PUT", "/runs", b""), 200, "bucket not made");
    Some(moto)
}

/// `n` servers on the one store, each with its own work folder.
fn replicas(moto: &Moto, agents: &Path, n: usize) -> Vec<Served> {
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    (0..n)
        .map(|_| Served::start(agents, Path::new(STORE), &["--concurrency", "64"], &env))
        .collect()
}

fn post(addr: SocketAddr, agent: &str, body: &[u8]) -> Reply {
    request(addr, "POST", &format!("/agents/{agent}"), &[], body)
}

/// The bundle a stream names, after checking that it ended with `RUN_FINISHED`.
fn finished_bundle(r: &Reply) -> String {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let events = r.events();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"RUN_STARTED"), "{types:?}");
    assert_eq!(types.last(), Some(&"RUN_FINISHED"), "{types:?}");
    events[0]["metadata"]["bundle"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Fetch the bundle `id` from `addr` into `dir`, check that `provrun verify` accepts the
/// tar, and give `run_started.details` of the unpacked bundle.
fn fetched(addr: SocketAddr, id: &str, dir: &Path) -> Value {
    let r = request(addr, "GET", &format!("/runs/{id}/bundle"), &[], b"");
    assert_eq!(r.status, 200, "{id}: {}", String::from_utf8_lossy(&r.body));
    let tar = dir.join(format!("{id}.tar"));
    std::fs::write(&tar, &r.body).unwrap();
    let (code, text) = verify(&tar);
    assert_eq!(code, 0, "{id}: {text}");
    let into = dir.join(id);
    std::fs::create_dir_all(&into).unwrap();
    let ok = Command::new("tar")
        .arg("-xf")
        .arg(&tar)
        .arg("-C")
        .arg(&into)
        .status()
        .unwrap();
    assert!(ok.success());
    let log = std::fs::read_to_string(into.join("events.jsonl")).unwrap();
    let first: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    first["payload"]["details"].clone()
}

/// Every run id `GET /runs` on `addr` lists (all pages).
fn listed(addr: SocketAddr) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after = String::new();
    loop {
        let r = request(addr, "GET", &format!("/runs?limit=100{after}"), &[], b"");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let page = r.json();
        for run in page["runs"].as_array().unwrap() {
            ids.push(run["id"].as_str().unwrap().to_string());
        }
        match page["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
    }
    ids
}

#[test]
fn the_same_run_id_at_two_replicas_at_once_is_taken_once_and_every_replica_lists_every_run() {
    let Some(moto) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let servers = replicas(&moto, &agents, 3);
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    const ROUNDS: usize = 20;
    let mut all = Vec::new();
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        let run_id = format!("same-{round}");
        let barrier = Arc::new(Barrier::new(2));
        // Two replicas of the three, a different pair each round.
        let pair = [addrs[round % 3], addrs[(round + 1) % 3]];
        let clients: Vec<_> = pair
            .into_iter()
            .enumerate()
            .map(|(k, addr)| {
                let (barrier, run_id) = (Arc::clone(&barrier), run_id.clone());
                let thread = format!("t{round}-{k}");
                std::thread::spawn(move || {
                    let body = input(&thread, &run_id, "hi");
                    barrier.wait();
                    let at = Instant::now();
                    let reply = post(addr, "chat", &body);
                    (thread, reply, at.elapsed())
                })
            })
            .collect();
        let mut bundles = Vec::new();
        for c in clients {
            let (thread, reply, took) = c.join().unwrap();
            let bundle = finished_bundle(&reply);
            let events = reply.events();
            assert_eq!(events[0]["runId"], run_id.as_str());
            assert_eq!(events[0]["threadId"], thread.as_str());
            assert!(
                !events.iter().any(|e| e["type"] == "RUN_ERROR"),
                "{events:?}"
            );
            bundles.push(bundle);
            times.push(took);
        }
        assert_eq!(
            bundles.iter().filter(|b| **b == run_id).count(),
            1,
            "round {round}: exactly one request takes the runId: {bundles:?}"
        );
        assert!(
            bundles.iter().any(|b| b.starts_with("run-")),
            "round {round}: the other gets a generated id: {bundles:?}"
        );
        all.extend(bundles);
    }
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), all.len(), "ids repeat: {all:?}");
    times.sort();
    eprintln!(
        "replicas: {} runs through two replicas at once on moto: median {:?}, max {:?} per request",
        times.len(),
        times[times.len() / 2],
        times[times.len() - 1]
    );

    // Every bundle, fetched through any replica, verifies.
    let fetch_dir = dir.path().join("fetched");
    std::fs::create_dir_all(&fetch_dir).unwrap();
    for (i, id) in all.iter().enumerate() {
        fetched(addrs[i % 3], id, &fetch_dir);
    }
    // Each replica lists every run, its own and the others'.
    for (i, addr) in addrs.iter().enumerate() {
        let at = Instant::now();
        let mut ids = listed(*addr);
        let took = at.elapsed();
        ids.sort();
        assert_eq!(ids, distinct, "replica {i} lists every run");
        eprintln!(
            "replicas: GET /runs on replica {i}: {} runs in {took:?}",
            ids.len()
        );
    }
    // A second listing reads only the index objects it has not read yet (none).
    let at = Instant::now();
    assert_eq!(listed(addrs[0]).len(), distinct.len());
    eprintln!("replicas: GET /runs again on replica 0: {:?}", at.elapsed());
}

#[test]
fn a_threads_turns_alternate_across_replicas_and_a_busy_thread_is_busy_on_all() {
    let Some(moto) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let servers = replicas(&moto, &agents, 3);
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let fetch_dir = dir.path().join("fetched");
    std::fs::create_dir_all(&fetch_dir).unwrap();
    // An agent with an answer for each turn (a scripted model counts the thread's turns).
    std::fs::write(
        agents.join("long.toml"),
        "name = \"long\"\nmodel = \"script:long.json\"\n",
    )
    .unwrap();
    let answers: Vec<Value> = (0..8)
        .map(|i| json!({"text": format!("Answer {i}.")}))
        .collect();
    std::fs::write(agents.join("long.json"), Value::from(answers).to_string()).unwrap();

    // Six turns of one thread, each on the next replica, each continuing the last.
    let mut previous: Option<String> = None;
    for turn in 0..6 {
        let addr = addrs[turn % 3];
        let bundle = finished_bundle(&post(
            addr,
            "long",
            &input("talk", &format!("talk-{turn}"), &format!("turn {turn}")),
        ));
        let details = fetched(addrs[(turn + 1) % 3], &bundle, &fetch_dir);
        assert_eq!(details["thread"], "talk");
        match &previous {
            None => assert!(details["continues"].is_null(), "{details}"),
            Some(p) => {
                assert_eq!(details["continues"]["run_id"], p.as_str(), "turn {turn}");
                // The history holds every earlier turn's prompt.
                let history = details["history"].to_string();
                for earlier in 0..turn {
                    assert!(
                        history.contains(&format!("turn {earlier}")),
                        "turn {turn}: {history}"
                    );
                }
            }
        }
        previous = Some(bundle);
    }

    // A run in flight on one replica makes its thread busy on the others.
    let slow = std::thread::spawn({
        let addr = addrs[0];
        move || post(addr, "slow", &input("busy", "busy-1", "take your time"))
    });
    std::thread::sleep(Duration::from_millis(500));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = post(addrs[1], "chat", &input("busy", "busy-2", "me too"));
        if r.status == 409 {
            assert_eq!(r.code(), "thread_busy");
            break;
        }
        // The slow run may not have taken its turn yet: then this one did, and ended.
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert!(Instant::now() < deadline, "the thread never showed busy");
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = post(addrs[2], "chat", &input("busy", "busy-3", "and me"));
    assert_eq!((r.status, r.code()), (409, "thread_busy".to_string()));
    // Cancelled where it runs; then the thread takes a turn on another replica.
    let r = request(addrs[0], "POST", "/runs/busy-1/cancel", &[], b"");
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let ended = slow.join().unwrap();
    assert_eq!(
        ended.events().last().unwrap()["outcome"]["type"],
        "cancelled"
    );
    finished_bundle(&post(addrs[2], "chat", &input("busy", "busy-4", "now")));
}

fn approval(addr: SocketAddr, thread: &str) -> (String, Value) {
    let r = post(
        addr,
        "approve",
        &input(thread, &format!("{thread}-1"), "Write it."),
    );
    let bundle = finished_bundle(&r);
    let events = r.events();
    let outcome = &events.last().unwrap()["outcome"];
    assert_eq!(outcome["type"], "interrupt", "{outcome}");
    (bundle, outcome["interrupts"][0]["id"].clone())
}

fn answer(thread: &str, interrupt: &Value) -> Vec<u8> {
    json!({"threadId": thread, "runId": format!("{thread}-2"),
        "messages": [{"id": "u", "role": "user", "content": "Write it."}],
        "resume": [{"interruptId": interrupt, "status": "resolved"}]})
    .to_string()
    .into_bytes()
}

#[test]
fn an_approval_raised_on_one_replica_resumes_on_another_and_once_when_answered_twice() {
    let Some(moto) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    let servers = replicas(&moto, &agents, 3);
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let fetch_dir = dir.path().join("fetched");
    std::fs::create_dir_all(&fetch_dir).unwrap();

    // Raised on replica 0, answered on replica 1: the same bundle goes on there.
    let (bundle, interrupt) = approval(addrs[0], "ap");
    let r = post(addrs[1], "approve", &answer("ap", &interrupt));
    assert_eq!(finished_bundle(&r), bundle);
    let result = r.events().last().unwrap()["result"].clone();
    assert_eq!(result["status"], "finished", "{result}");
    assert_eq!(result["output"], "Written after approval.");
    fetched(addrs[2], &bundle, &fetch_dir);

    // The same answer sent to two replicas at once resumes once.
    let mut refusals: Vec<String> = Vec::new();
    for round in 0..8 {
        let thread = format!("twice-{round}");
        let (bundle, interrupt) = approval(addrs[round % 3], &thread);
        let body = answer(&thread, &interrupt);
        let barrier = Arc::new(Barrier::new(2));
        let clients: Vec<_> = [addrs[(round + 1) % 3], addrs[(round + 2) % 3]]
            .into_iter()
            .map(|addr| {
                let (barrier, body) = (Arc::clone(&barrier), body.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    post(addr, "approve", &body)
                })
            })
            .collect();
        let replies: Vec<Reply> = clients.into_iter().map(|c| c.join().unwrap()).collect();
        let resumed: Vec<&Reply> = replies.iter().filter(|r| r.status == 200).collect();
        assert_eq!(resumed.len(), 1, "round {round}: one resume");
        assert_eq!(finished_bundle(resumed[0]), bundle);
        assert_eq!(
            resumed[0].events().last().unwrap()["result"]["status"],
            "finished"
        );
        let refused = replies.iter().find(|r| r.status != 200).unwrap();
        // Refused while the other runs (busy), or after it (nothing waits any more).
        assert!(
            matches!(
                (refused.status, refused.code().as_str()),
                (409, "thread_busy") | (400, "bad_resume")
            ),
            "round {round}: {} {}",
            refused.status,
            String::from_utf8_lossy(&refused.body)
        );
        refusals.push(refused.code());
        let details = fetched(addrs[round % 3], &bundle, &fetch_dir);
        assert_eq!(details["thread"], thread.as_str());
    }
    eprintln!("replicas: the second answer of each pair was refused with {refusals:?}");
    // Every replica lists the resumed runs as finished.
    for addr in &addrs {
        let r = request(*addr, "GET", "/runs?limit=100", &[], b"");
        let page = r.json();
        let runs = page["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 9);
        assert!(runs.iter().all(|r| r["status"] == "finished"), "{runs:?}");
    }
}

#[test]
fn a_replica_killed_mid_run_loses_no_recorded_step_and_another_ends_its_run() {
    let Some(moto) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    // A write, then a model that answers after a minute: the run is mid-way long enough.
    std::fs::write(
        agents.join("lost.toml"),
        "name = \"lost\"\nmodel = \"script:lost.json\"\ntools = [\"write_file\"]\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("lost.json"),
        r#"[{"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "/output/kept.txt", "content": "kept"}}]},
            {"text": "never said", "delay_ms": 60000}]"#,
    )
    .unwrap();
    const LEASE_S: u64 = 3;
    // One ledger all three add to (a `file://` URL: through the ledger writer, signed by
    // the folder's own key).
    let provrun = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (key, ledger) = (dir.path().join("log.pem"), dir.path().join("ledger"));
    let (key_s, ledger_s) = (key.to_str().unwrap(), ledger.to_str().unwrap());
    provrun(&["keygen", key_s]);
    provrun(&[
        "ledger",
        "init",
        ledger_s,
        "--key",
        key_s,
        "--origin",
        "example.org/replicas",
    ]);
    let ledger_url = format!("file://{ledger_s}");
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let work: Vec<_> = (0..3)
        .map(|i| dir.path().join(format!("work{i}")))
        .collect();
    let mut servers: Vec<Option<Served>> = work
        .iter()
        .map(|w| {
            let w = w.to_str().unwrap();
            Some(Served::start(
                &agents,
                Path::new(STORE),
                &["--lease", "3", "--work-dir", w, "--ledger", &ledger_url],
                &env,
            ))
        })
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.as_ref().unwrap().addr).collect();

    // The run on replica 0; killed once its write is recorded (and a lease tick later,
    // checkpointed).
    let victim = addrs[0];
    let client = std::thread::spawn(move || post(victim, "lost", &input("lt", "lost-run", "go")));
    let log = work[0].join("lost-run/events.jsonl");
    let waited = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("\"tool_called\"")) {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the write was not recorded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let recorded = std::fs::read_to_string(&log).unwrap();
    let pid = servers[0].as_ref().unwrap().pid();
    let ok = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let killed = Instant::now();
    let _ = client.join();
    drop(servers[0].take());

    // Replica 1, asked for the thread's next turn: busy while the lease holds, then it
    // ends the lost run and takes the turn.
    let mut busy = 0;
    let reply = loop {
        let r = post(addrs[1], "chat", &input("lt", "after", "again"));
        if r.status != 409 {
            break r;
        }
        assert_eq!(r.code(), "thread_busy");
        busy += 1;
        assert!(
            killed.elapsed() < Duration::from_secs(LEASE_S + 10),
            "the thread stayed busy: {}",
            String::from_utf8_lossy(&r.body)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = killed.elapsed();
    let next = finished_bundle(&reply);
    assert_eq!(next, "after");
    eprintln!(
        "replicas: a run whose replica was killed was ended {took:?} after the kill (lease {LEASE_S} s)"
    );
    // Busy while the lease held (renewed every second until the kill, so at least a
    // second of it was left).
    assert!(
        busy > 0 && took >= Duration::from_secs(1),
        "ended before its lease ran out: {took:?}"
    );

    // Its bundle, from replica 2: verified, every step recorded before the kill, failed
    // with a reason naming the lost replica.
    let fetch_dir = dir.path().join("fetched");
    std::fs::create_dir_all(&fetch_dir).unwrap();
    fetched(addrs[2], "lost-run", &fetch_dir);
    // In the ledger (added before the index listed it as ended).
    let tar = fetch_dir.join("lost-run.tar");
    let v = provrun(&["verify", tar.to_str().unwrap(), "--ledger", ledger_s]);
    assert!(v.contains("pass  ledger"), "{v}");
    let ended = std::fs::read_to_string(fetch_dir.join("lost-run/events.jsonl")).unwrap();
    let lines: Vec<&str> = ended.lines().collect();
    let before: Vec<&str> = recorded.lines().collect();
    assert!(
        lines.len() > before.len() && lines[..before.len()] == before[..],
        "the steps recorded before the kill are kept:\n{recorded}\n---\n{ended}"
    );
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["type"], "run_finished");
    assert_eq!(last["payload"]["status"], "failed", "{last}");
    assert!(
        last["payload"]["error"]
            .as_str()
            .is_some_and(|e| e.contains(&victim.to_string())),
        "{last}"
    );
    // Every replica lists it as failed, and the thread's new run as finished.
    for addr in &addrs[1..] {
        let page = request(*addr, "GET", "/runs?limit=100", &[], b"").json();
        let runs = page["runs"].as_array().unwrap();
        let status = |id: &str| {
            runs.iter()
                .find(|r| r["id"] == id)
                .map(|r| r["status"].clone())
        };
        assert_eq!(status("lost-run"), Some(json!("failed")), "{runs:?}");
        assert_eq!(status("after"), Some(json!("finished")), "{runs:?}");
    }

    // With no request of its thread, a lost run is still ended: replica 1 killed mid-run,
    // replica 2's sweep (every lease) ends it.
    let second = addrs[1];
    let client = std::thread::spawn(move || post(second, "lost", &input("lt2", "lost-2", "go")));
    let log = work[1].join("lost-2/events.jsonl");
    let waited = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("\"tool_called\"")) {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the write was not recorded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let pid = servers[1].as_ref().unwrap().pid();
    let ok = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let killed = Instant::now();
    let _ = client.join();
    drop(servers[1].take());
    loop {
        let page = request(addrs[2], "GET", "/runs?limit=100", &[], b"").json();
        let runs = page["runs"].as_array().unwrap();
        if runs
            .iter()
            .any(|r| r["id"] == "lost-2" && r["status"] == "failed")
        {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(2 * LEASE_S + 10),
            "no replica ended the lost run: {runs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = killed.elapsed();
    eprintln!(
        "replicas: a lost run with no request of its thread was ended {took:?} after the kill (lease {LEASE_S} s, swept every lease)"
    );
    fetched(addrs[2], "lost-2", &fetch_dir);
    let r = post(addrs[2], "chat", &input("lt2", "after-2", "again"));
    assert_eq!(finished_bundle(&r), "after-2");
}

#[test]
fn a_replica_stopped_past_its_lease_finds_its_run_taken_over_and_leaves_it() {
    let Some(moto) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    write_agents(&agents);
    std::fs::write(
        agents.join("lost.toml"),
        "name = \"lost\"\nmodel = \"script:lost.json\"\ntools = [\"write_file\"]\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("lost.json"),
        r#"[{"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "/output/kept.txt", "content": "kept"}}]},
            {"text": "never said", "delay_ms": 60000}]"#,
    )
    .unwrap();
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let work: Vec<_> = (0..2)
        .map(|i| dir.path().join(format!("work{i}")))
        .collect();
    let servers: Vec<Served> = work
        .iter()
        .map(|w| {
            let w = w.to_str().unwrap();
            Served::start(
                &agents,
                Path::new(STORE),
                &["--lease", "3", "--work-dir", w],
                &env,
            )
        })
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let first = addrs[0];
    let client = std::thread::spawn(move || post(first, "lost", &input("st", "stopped", "go")));
    let log = work[0].join("stopped/events.jsonl");
    let waited = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("\"tool_called\"")) {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the write was not recorded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // Stopped (as a replica cut off from the store would be) until the other takes its run
    // over, then let go on.
    let signal = |name: &str| {
        let pid = servers[0].pid().to_string();
        assert!(
            Command::new("kill")
                .args([name, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP");
    let reply = loop {
        let r = post(addrs[1], "chat", &input("st", "next", "again"));
        if r.status != 409 {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(finished_bundle(&reply), "next");
    let taken = request(addrs[1], "GET", "/runs/stopped/bundle", &[], b"").body;
    signal("-CONT");
    // The stopped replica finds its next lease made: it cancels the run and writes nothing
    // of it; its client is told.
    let events = client.join().unwrap().events();
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["code"].as_str()),
        (Some("RUN_ERROR"), Some("run_lost")),
        "{events:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    for addr in &addrs {
        let r = request(*addr, "GET", "/runs/stopped/bundle", &[], b"");
        assert_eq!(r.body, taken, "the taken-over run's tar was replaced");
        let page = request(*addr, "GET", "/runs?limit=100", &[], b"").json();
        let runs = page["runs"].as_array().unwrap();
        let stopped = runs.iter().find(|r| r["id"] == "stopped").unwrap();
        assert_eq!(stopped["status"], "failed", "{runs:?}");
    }
    // No run is in flight on either; the taker counted the lost run failed, the replica
    // that lost it counts it nowhere.
    let metrics = |addr: SocketAddr| {
        String::from_utf8(request(addr, "GET", "/metrics", &[], b"").body).unwrap()
    };
    let (lost, taker) = (metrics(addrs[0]), metrics(addrs[1]));
    for m in [&lost, &taker] {
        assert!(m.contains("\nprovrun_runs_in_flight 0\n"), "{m}");
    }
    assert!(
        lost.contains("provrun_runs_ended_total{status=\"failed\"} 0\n"),
        "{lost}"
    );
    assert!(
        taker.contains("provrun_runs_ended_total{status=\"failed\"} 1\n"),
        "{taker}"
    );
    // And the thread goes on, on either replica.
    let r = post(addrs[0], "chat", &input("st", "then", "more"));
    assert_eq!(finished_bundle(&r), "then");
}

#[test]
fn four_batch_shards_and_three_replicas_add_to_one_bucket_ledger_at_once() {
    let Some(moto) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let env = moto.env();
    let provrun = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let key = t.join("log.pem");
    let key_s = key.to_str().unwrap();
    provrun(&["keygen", key_s]);
    let ledger = "s3://runs/ledger";
    provrun(&[
        "ledger",
        "init",
        ledger,
        "--key",
        key_s,
        "--origin",
        "example.org/everyone",
    ]);

    // Three replicas on one store, each adding the runs it ends to the bucket's ledger.
    let agents = t.join("agents");
    write_agents(&agents);
    let env_ref: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let servers: Vec<Served> = (0..3)
        .map(|_| {
            Served::start(
                &agents,
                Path::new(STORE),
                &["--ledger", ledger, "--ledger-key", key_s],
                &env_ref,
            )
        })
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();

    // Four shards of one batch of eight runs, started together with the servers' runs.
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripted");
    let (agent, input_dir) = (ex.join("agent.toml"), ex.join("input"));
    let runs = t.join("runs.jsonl");
    let lines: String = (0..8)
        .map(|i| {
            format!(
                "{{\"id\": \"r{i}\", \"agent\": {agent:?}, \"input\": [{input_dir:?}], \"prompt\": \"task {i}\"}}\n"
            )
        })
        .collect();
    std::fs::write(&runs, lines).unwrap();
    let shards: Vec<_> = (0..4)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_provrun"))
                .arg("batch")
                .arg(&runs)
                .arg("--out")
                .arg(t.join(format!("shard{i}")))
                .args(["--shard", &format!("{i}/4"), "--ledger", ledger])
                .args(["--ledger-key", key_s])
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
                .env_remove("RUST_LOG")
                .env_remove("JOB_COMPLETION_INDEX")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Three runs on each replica, all at once.
    let clients: Vec<_> = (0..9)
        .map(|i| {
            let addr = addrs[i % 3];
            std::thread::spawn(move || {
                let body = input(&format!("shared-{i}"), &format!("shared-run-{i}"), "Hi");
                finished_bundle(&post(addr, "chat", &body))
            })
        })
        .collect();
    for child in shards {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a shard failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let served: Vec<String> = clients.into_iter().map(|c| c.join().unwrap()).collect();

    // One tree: it verifies, and holds each of the 17 runs exactly once.
    let report: Value =
        serde_json::from_str(&provrun(&["ledger", "verify", ledger, "--json"])).unwrap();
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["size"], 17, "{report:#}");
    let mut indexes = std::collections::BTreeSet::new();
    for i in 0..8 {
        let bundle = t.join(format!("shard{}", i % 4)).join(format!("r{i}"));
        let b = bundle.to_str().unwrap();
        let proof: Value =
            serde_json::from_str(&provrun(&["ledger", "proof", ledger, b, "--json"])).unwrap();
        indexes.insert(proof["index"].as_u64().unwrap());
    }
    for (i, id) in served.iter().enumerate() {
        let r = request(addrs[i % 3], "GET", &format!("/runs/{id}/bundle"), &[], b"");
        assert_eq!(r.status, 200, "{id}");
        let tar = t.join(format!("{id}.tar"));
        std::fs::write(&tar, &r.body).unwrap();
        let tar = tar.to_str().unwrap();
        let proof: Value =
            serde_json::from_str(&provrun(&["ledger", "proof", ledger, tar, "--json"])).unwrap();
        indexes.insert(proof["index"].as_u64().unwrap());
        provrun(&["verify", tar, "--ledger", ledger]);
    }
    assert_eq!(indexes.len(), 17, "two runs share a leaf: {indexes:?}");
    drop(servers);
}
