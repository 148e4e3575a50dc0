//! A turn's tool calls as scripts see them through `provrun`: they take effect in the
//! order the model listed them, every run and every replay; a call that timed out is
//! answered from the recording by `provrun replay`; Ctrl-C kills a running command's whole
//! process tree and the bundle records the call once, as cancelled.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::{assert_exit, command, events, provrun, s, text};
use serde_json::Value;

/// The completed tool calls of a bundle: their payloads.
fn completed_calls(bundle: &Path) -> Vec<Value> {
    events(bundle)
        .into_iter()
        .filter(|e| e["type"] == "tool_called" && e["payload"]["deferred"] != true)
        .map(|e| e["payload"].clone())
        .collect()
}

fn write_agent(dir: &Path, toml: &str, script: &str) -> PathBuf {
    std::fs::write(dir.join("script.json"), script).unwrap();
    let path = dir.join("agent.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// The issue's turn: a write, an edit of it, reads of it, then two writes of one file.
const ORDER_SCRIPT: &str = r#"[
  {"tool_calls": [
    {"id": "w1", "name": "write_file", "arguments": {"path": "/output/c.txt", "content": "one two three"}},
    {"id": "e1", "name": "str_replace", "arguments": {"path": "/output/c.txt", "old": "two", "new": "TWO"}},
    {"id": "r1", "name": "read_file", "arguments": {"path": "/output/c.txt"}},
    {"id": "l1", "name": "list_dir", "arguments": {"path": "/output"}},
    {"id": "r2", "name": "read_file", "arguments": {"path": "/output/c.txt"}},
    {"id": "w2", "name": "write_file", "arguments": {"path": "/output/d.txt", "content": "first"}},
    {"id": "w3", "name": "write_file", "arguments": {"path": "/output/d.txt", "content": "second"}},
    {"id": "r3", "name": "read_file", "arguments": {"path": "/output/d.txt"}},
    {"id": "e2", "name": "str_replace", "arguments": {"path": "/output/c.txt", "old": "one", "new": "ONE"}}
  ]},
  {"text": "done"}
]"#;

// One long scenario per run: each run is checked, compared with the first, and replayed.
#[test]
fn a_turns_calls_take_effect_in_the_models_order_in_every_run_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let agent = write_agent(
        dir.path(),
        "name = \"order\"\nmodel = \"script:script.json\"\n\
         tools = [\"write_file\", \"str_replace\", \"read_file\", \"list_dir\"]\n",
        ORDER_SCRIPT,
    );
    let mut first: Option<Vec<(Value, Value, Value)>> = None;
    for i in 0..8 {
        let bundle = dir.path().join(format!("run-{i}"));
        assert_exit(&provrun(&["run", &s(&agent), "--out", &s(&bundle)]), 0);
        assert_eq!(
            std::fs::read_to_string(bundle.join("output/c.txt")).unwrap(),
            "ONE TWO three"
        );
        assert_eq!(
            std::fs::read_to_string(bundle.join("output/d.txt")).unwrap(),
            "second"
        );
        let calls = completed_calls(&bundle);
        let ids: Vec<&str> = calls
            .iter()
            .map(|c| c["call_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["w1", "e1", "r1", "l1", "r2", "w2", "w3", "r3", "e2"]);
        for c in &calls {
            assert_eq!(c["ok"], true, "{c}");
        }
        assert!(
            calls[2]["result"]
                .as_str()
                .unwrap()
                .contains("one TWO three")
        );
        assert!(
            calls[4]["result"]
                .as_str()
                .unwrap()
                .contains("one TWO three")
        );
        assert!(calls[7]["result"].as_str().unwrap().contains("second"));
        // The order on the turn's clock: each write or edit runs alone, after everything
        // listed before it and before everything listed after it; the three reads in a
        // row overlap (each starts before any of them ends).
        let span = |k: usize| {
            (
                calls[k]["start_order"].as_u64().unwrap(),
                calls[k]["end_order"].as_u64().unwrap(),
            )
        };
        for k in 0..calls.len() - 1 {
            let alone = ![2usize, 3].contains(&k);
            if alone {
                assert!(
                    span(k).1 < span(k + 1).0,
                    "call {k} ends before {} starts",
                    k + 1
                );
            }
        }
        let reads = [span(2), span(3), span(4)];
        let last_start = reads.iter().map(|r| r.0).max().unwrap();
        let first_end = reads.iter().map(|r| r.1).min().unwrap();
        assert!(last_start < first_end, "the reads ran together: {reads:?}");

        // What the model saw and what the files hold: the same in every run.
        let seen: Vec<(Value, Value, Value)> = calls
            .iter()
            .map(|c| (c["call_id"].clone(), c["result"].clone(), c["ok"].clone()))
            .collect();
        match &first {
            None => first = Some(seen),
            Some(f) => assert_eq!(f, &seen, "run {i} saw other results"),
        }

        let again = dir.path().join(format!("replay-{i}"));
        let out = provrun(&["replay", &s(&bundle), "--out", &s(&again)]);
        assert_exit(&out, 0);
        assert!(
            text(&out.stdout).contains("replay matches"),
            "{}",
            text(&out.stdout)
        );
        let replayed: Vec<Value> = completed_calls(&again);
        // Every call the same, timing aside (reads that overlap may end in any order).
        let strip = |v: &[Value]| -> Vec<Value> {
            v.iter()
                .map(|c| {
                    let mut c = c.clone();
                    let o = c.as_object_mut().unwrap();
                    for timing in ["duration_ms", "start_order", "end_order"] {
                        o.remove(timing);
                    }
                    c
                })
                .collect()
        };
        assert_eq!(strip(&replayed), strip(&calls));
        assert_eq!(
            std::fs::read(again.join("output/c.txt")).unwrap(),
            std::fs::read(bundle.join("output/c.txt")).unwrap()
        );
    }
}

/// An agent whose one call runs `command` (with the given tool time limit), then answers.
fn command_agent(dir: &Path, command: &str, tool_timeout_s: u64) -> PathBuf {
    let script = serde_json::json!([
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "done"}
    ]);
    write_agent(
        dir,
        &format!(
            "name = \"cmd\"\nmodel = \"script:script.json\"\ntools = [\"run_command\"]\n\
             tool_timeout_s = {tool_timeout_s}\n\
             # Runs wherever the tests run: the tree is killed with or without every layer.\n\
             allow_degraded_sandbox = true\n"
        ),
        &script.to_string(),
    )
}

/// Whether a process whose command line holds `needle` is alive.
fn process_alive(needle: &str) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        std::fs::read(p.path().join("cmdline"))
            .map(|c| text(&c).replace('\0', " ").contains(needle))
            .unwrap_or(false)
    })
}

#[test]
fn a_timed_out_call_is_answered_from_the_recording_by_replay() {
    let dir = tempfile::tempdir().unwrap();
    // Sleeps past the 1 s limit, then would write a file: it must be killed first.
    let agent = command_agent(dir.path(), "sleep 4.25; echo late > /output/late.txt", 1);
    let bundle = dir.path().join("bundle");
    assert_exit(&provrun(&["run", &s(&agent), "--out", &s(&bundle)]), 0);
    let calls = completed_calls(&bundle);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["timed_out"], true, "{}", calls[0]);
    assert_eq!(calls[0]["ok"], false);
    assert_eq!(calls[0]["decided_by"], "runtime");
    assert!(
        calls[0]["result"]
            .as_str()
            .unwrap()
            .contains("timed out after 1 s")
    );
    // The command was killed with the call, not left to write later.
    std::thread::sleep(Duration::from_millis(4500));
    assert!(!bundle.join("output/late.txt").exists());
    assert!(!process_alive("sleep 4.25"));

    let again = dir.path().join("replay");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&again)]);
    assert_exit(&out, 0);
    assert!(
        text(&out.stdout).contains("replay matches"),
        "{}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("1 tool call") && err.contains("answered from the recording"),
        "{err}"
    );
    let replayed = completed_calls(&again);
    assert_eq!(replayed[0]["timed_out"], true);
    assert_eq!(replayed[0]["result"], calls[0]["result"]);
    // Not run again: running it would have taken the whole second of its time limit.
    assert!(
        replayed[0]["duration_ms"].as_u64().unwrap() < 1000,
        "{}",
        replayed[0]
    );
}

#[test]
fn run_returns_only_when_a_timed_out_commands_whole_tree_is_gone() {
    // Several runs at once (load), each with a command whose shell starts children and
    // grandchildren that outlive the 1 s limit: when `provrun run` returns, none is left.
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..6)
        .map(|i| {
            let needle = format!("sleep 41.{i}7");
            let home = dir.path().join(format!("r{i}"));
            std::fs::create_dir_all(&home).unwrap();
            let agent = command_agent(
                &home,
                &format!("sh -c '{needle} & {needle}' & {needle} & {needle}; wait"),
                1,
            );
            let bundle = home.join("bundle");
            let child = command(&["run", &s(&agent), "--out", &s(&bundle)])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (needle, bundle, child)
        })
        .collect();
    for (needle, bundle, child) in runs {
        let out = child.wait_with_output().unwrap();
        assert_exit(&out, 0);
        assert!(
            !process_alive(&needle),
            "a process of the timed-out command ({needle}) outlived `provrun run`"
        );
        let calls = completed_calls(&bundle);
        assert_eq!(calls[0]["timed_out"], true, "{}", calls[0]);
    }
}

#[test]
fn ctrl_c_kills_a_running_commands_whole_tree_and_records_the_call_once() {
    let dir = tempfile::tempdir().unwrap();
    // A shell that starts a child and a grandchild; all must go at once.
    let needle = "sleep 37.75";
    let agent = command_agent(
        dir.path(),
        &format!("sh -c '{needle}' & {needle}; wait"),
        120,
    );
    let bundle = dir.path().join("bundle");
    let child = command(&["run", &s(&agent), "--out", &s(&bundle)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !process_alive(needle) {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 130);
    assert!(
        !process_alive(needle),
        "a process of the command outlived the cancel"
    );
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
    let calls = completed_calls(&bundle);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["call_id"], "c1");
    assert_eq!(calls[0]["cancelled"], true, "{}", calls[0]);
    let last = events(&bundle).pop().unwrap();
    assert_eq!(last["payload"]["status"], "cancelled");
    // The replay stops where the recording did, and answers the call from it.
    let again = dir.path().join("replay");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&again)]);
    assert_exit(&out, 0);
    assert!(!process_alive(needle));
}
