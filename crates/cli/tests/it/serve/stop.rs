//! SIGTERM mid-run: `provrun serve` stops taking connections, lets a run that ends within
//! the grace period finish, cancels the one that does not, and exits 0 once both bundles
//! are finished, stored and indexed; both verify.

use std::time::{Duration, Instant};

use super::{Served, input, request, verify, write_agents};

#[test]
fn sigterm_lets_runs_finish_in_the_grace_then_cancels_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    write_agents(&dir.path().join("agents"));
    let store = dir.path().join("store");
    let served = Served::start(&dir.path().join("agents"), &store, &["--grace", "5"], &[]);
    let addr = served.addr;
    // `steer` answers after 1.5 s (inside the grace), `slow` after 60 s (outside it).
    let quick = std::thread::spawn(move || {
        request(
            addr,
            "POST",
            "/agents/steer",
            &[],
            &input("q", "quick", "go"),
        )
    });
    let slow = std::thread::spawn(move || {
        request(addr, "POST", "/agents/slow", &[], &input("s", "slow", "go"))
    });
    let started = Instant::now();
    while !(store.join("quick/events.jsonl").exists() && store.join("slow/events.jsonl").exists()) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the runs did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: not needed: `kill(2)` on our own child's pid.
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &served.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "a stopping server takes no new connection"
    );
    let (quick, slow) = (
        quick.join().unwrap().events(),
        slow.join().unwrap().events(),
    );
    assert_eq!(
        quick.last().unwrap()["outcome"]["type"],
        "success",
        "{quick:?}"
    );
    assert_eq!(
        slow.last().unwrap()["outcome"]["type"],
        "cancelled",
        "{slow:?}"
    );
    let (code, stderr) = served.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("1 cancelled"), "{stderr}");
    // One log line per request, and one per run's end.
    let requests: Vec<&str> = stderr.lines().filter(|l| l.contains(" request ")).collect();
    assert_eq!(requests.len(), 2, "{stderr}");
    assert!(
        requests
            .iter()
            .any(|l| l.contains("/agents/slow") && l.contains("status=200")),
        "{stderr}"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.contains("run ended")).count(),
        2,
        "{stderr}"
    );
    for (id, status) in [("quick", "finished"), ("slow", "cancelled")] {
        let (code, text) = verify(&store.join(id));
        assert_eq!(code, 0, "{id}: {text}");
        let index = std::fs::read_to_string(store.join("index.jsonl")).unwrap();
        assert!(
            index
                .lines()
                .any(|l| l.contains(&format!("\"id\":\"{id}\""))
                    && l.contains(&format!("\"status\":\"{status}\""))),
            "{index}"
        );
    }
}
