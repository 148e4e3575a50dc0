//! SIGTERM and SIGHUP through the `provrun` binary, as a container runtime, systemd or a
//! closed terminal sends them: `run` and `resume` cancel cleanly (exit 143 or 129, a
//! finished `cancelled` bundle that verifies), and `batch` takes no more lines, lets its
//! running runs finish `cancelled`, and a restart redoes exactly what did not end.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::{assert_exit, command, events, s, text};
use serde_json::Value;

fn spawn(args: &[&str]) -> Child {
    command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn send(child: &Child, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Waits until `ready` holds, failing after 30 s.
fn wait_for(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn last_status(bundle: &Path) -> String {
    let log = events(bundle);
    let last = log.last().unwrap();
    assert_eq!(last["type"], "run_finished", "{last}");
    last["payload"]["status"].as_str().unwrap().to_string()
}

fn verifies(bundle: &Path) -> bool {
    command(&["verify", &s(bundle)])
        .output()
        .unwrap()
        .status
        .code()
        == Some(0)
}

/// How many model requests a bundle's log records.
fn model_calls(bundle: &Path) -> usize {
    events(bundle)
        .iter()
        .filter(|e| e["type"] == "model_called")
        .count()
}

#[test]
fn sigterm_and_sighup_cancel_a_run_and_leave_a_finished_bundle() {
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("agent.toml"),
            "name = \"slow\"\nmodel = \"script:script.json\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("script.json"),
            r#"[{"text": "too late", "delay_ms": 60000}]"#,
        )
        .unwrap();
        let bundle = dir.path().join("bundle");
        let child = spawn(&[
            "run",
            &s(&dir.path().join("agent.toml")),
            "--out",
            &s(&bundle),
        ]);
        wait_for("the run started", || bundle.join("events.jsonl").exists());
        std::thread::sleep(Duration::from_millis(200));
        let asked = Instant::now();
        send(&child, signal);
        let out = child.wait_with_output().unwrap();
        // Cancelled while the model was still thinking: not after its 60 s.
        assert!(asked.elapsed() < Duration::from_secs(20));
        assert_exit(&out, code);
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("cancelled (SIG{signal})")),
            "{signal}: {err}"
        );
        assert_eq!(last_status(&bundle), "cancelled", "{signal}");
        assert!(verifies(&bundle), "{signal}");
    }
}

#[test]
fn sigterm_cancels_a_resumed_run_too() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"approve\"\nmodel = \"script:script.json\"\ntools = [\"write_file\"]\napprove = \"all\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "/output/a.txt", "content": "a"}}]},
            {"text": "too late", "delay_ms": 60000}]"#,
    )
    .unwrap();
    let bundle = dir.path().join("bundle");
    let out = command(&[
        "run",
        &s(&dir.path().join("agent.toml")),
        "--out",
        &s(&bundle),
    ])
    .output()
    .unwrap();
    assert_exit(&out, 4);
    let child = spawn(&["resume", &s(&bundle), "--approve", "1.1"]);
    // The approved call ran and the second model request is under way.
    wait_for("the resumed run reached its slow request", || {
        std::fs::read_to_string(bundle.join("events.jsonl"))
            .is_ok_and(|log| log.matches("\"tool_called\"").count() >= 2)
    });
    std::thread::sleep(Duration::from_millis(200));
    send(&child, "TERM");
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 143);
    assert_eq!(last_status(&bundle), "cancelled");
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/a.txt")).unwrap(),
        "a"
    );
    assert!(verifies(&bundle));
}

/// A folder with `agent.toml` over `script.json` (one request answered after `delay_ms`),
/// `fast.toml` over `fast.json` (answered at once), and `runs.jsonl`: r0 and r1 fast, r2 to
/// r5 slow.
fn batch_workspace(delay_ms: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for (spec, script, delay) in [("agent", "script", delay_ms), ("fast", "fast", 0)] {
        std::fs::write(
            p.join(format!("{spec}.toml")),
            format!("name = \"{spec}\"\nmodel = \"script:{script}.json\"\n"),
        )
        .unwrap();
        std::fs::write(
            p.join(format!("{script}.json")),
            format!(r#"[{{"text": "done", "delay_ms": {delay}}}]"#),
        )
        .unwrap();
    }
    let runs: String = (0..6)
        .map(|i| {
            let agent = if i < 2 { "fast.toml" } else { "agent.toml" };
            format!("{{\"id\": \"r{i}\", \"agent\": \"{agent}\"}}\n")
        })
        .collect();
    std::fs::write(p.join("runs.jsonl"), runs).unwrap();
    dir
}

fn json_lines(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn a_batch_stopped_by_sigterm_cancels_its_runs_and_a_restart_redoes_only_those() {
    let dir = batch_workspace(60_000);
    let runs = dir.path().join("runs.jsonl");
    let dest = dir.path().join("out");
    let args = [
        "batch",
        &s(&runs),
        "--out",
        &s(&dest),
        "--concurrency",
        "2",
        "--json",
    ];
    let child = spawn(&args);
    // r0 and r1 end at once; r2 and r3 then wait on their model; r4 and r5 wait for a slot.
    wait_for("two runs finished and two started", || {
        ["r0", "r1"]
            .iter()
            .all(|id| dest.join(id).join("statement.json").is_file())
            && ["r2", "r3"]
                .iter()
                .all(|id| dest.join(id).join("events.jsonl").is_file())
    });
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    send(&child, "TERM");
    let out = child.wait_with_output().unwrap();
    assert!(asked.elapsed() < Duration::from_secs(20));
    assert_exit(&out, 143);
    let lines = json_lines(&out);
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["stopped_by"], "SIGTERM", "{summary}");
    assert_eq!(summary["finished"], 2, "{summary}");
    assert_eq!(summary["not_finished"], 2, "{summary}");
    assert_eq!(summary["not_started"], 2, "{summary}");
    let status_of = |id: &str| {
        lines
            .iter()
            .find(|l| l["id"] == id)
            .map(|l| l["status"].as_str().unwrap().to_string())
    };
    assert_eq!(status_of("r2").as_deref(), Some("cancelled"));
    assert_eq!(status_of("r3").as_deref(), Some("cancelled"));
    assert_eq!(status_of("r4"), None, "r4 was taken after the signal");
    assert!(text(&out.stderr).contains("SIGTERM: taking no more lines"));
    // The running runs' bundles are finished and verify; the lines never taken have none.
    for id in ["r2", "r3"] {
        assert_eq!(last_status(&dest.join(id)), "cancelled", "{id}");
        assert!(verifies(&dest.join(id)), "{id}");
    }
    assert!(!dest.join("r4").exists() && !dest.join("r5").exists());
    let first_ids: Vec<String> = ["r0", "r1"]
        .iter()
        .map(|id| events(&dest.join(id))[0]["run_id"].to_string())
        .collect();

    // Started again (the model now quick): r0 and r1 are kept, the cancelled r2 and r3
    // are moved aside and run again, r4 and r5 run for the first time.
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"text": "done", "delay_ms": 0}]"#,
    )
    .unwrap();
    let out = command(&args).output().unwrap();
    assert_exit(&out, 0);
    let lines = json_lines(&out);
    let summary = lines.last().unwrap();
    assert_eq!(summary["finished"], 6, "{summary}");
    assert_eq!(summary["skipped"], 2, "{summary}");
    assert_eq!(summary["ran"], 4, "{summary}");
    assert!(summary.get("stopped_by").is_none(), "{summary}");
    for l in &lines[..6] {
        let skipped = l["id"] == "r0" || l["id"] == "r1";
        assert_eq!(l["skipped"], skipped, "{l}");
    }
    for (i, id) in ["r0", "r1"].iter().enumerate() {
        assert_eq!(
            events(&dest.join(id))[0]["run_id"].to_string(),
            first_ids[i]
        );
    }
    for i in 0..6 {
        let bundle = dest.join(format!("r{i}"));
        assert_eq!(last_status(&bundle), "finished", "r{i}");
        assert_eq!(model_calls(&bundle), 1, "r{i}");
        assert!(verifies(&bundle), "r{i}");
    }
    let aside = std::fs::read_dir(dest.join(".provrun-aside"))
        .unwrap()
        .count();
    assert_eq!(aside, 2, "the cancelled bundles are kept aside");
}
