//! A writer process killed with SIGKILL at an arbitrary moment leaves a bundle that
//! verifies as incomplete, never as corrupt, and that can be reopened and finished.

use crate::common;

use std::time::Duration;

use common::*;
use provrun_evidence::*;
use serde_json::json;

const CHILD_ENV: &str = "PROVRUN_EVIDENCE_CRASH_CHILD_DIR";

/// `crash_child_writer` as the test harness names it, for `--exact`: its path below the
/// crate root (`crash::crash_child_writer` while this file is a module of `tests/it`).
fn child_test() -> &'static str {
    let path = concat!(module_path!(), "::crash_child_writer");
    path.split_once("::").map_or(path, |(_krate, below)| below)
}

/// Not a test on its own: the body of the child process that the crash test kills.
#[test]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let rec = Recorder::create(&dir, "crash", Durability::GroupCommit, &run_started()).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let rec = rec.clone();
            s.spawn(move || {
                for i in 0.. {
                    let blob = rec
                        .put_blob(format!("{t}-{i}").as_bytes(), "text/plain")
                        .unwrap();
                    let mut call = tool_call(&format!("{t}-{i}"), false);
                    call.result_blob = Some(blob);
                    call.arguments = json!({"pad": "x".repeat(i % 3000)});
                    rec.record(&call).unwrap();
                }
            });
        }
    });
}

#[test]
fn sigkill_at_any_moment_leaves_an_incomplete_valid_bundle() {
    for (round, delay_ms) in [30u64, 75, 120, 200, 333].into_iter().enumerate() {
        let dir = scratch("crash");
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", child_test(), "--nocapture"])
            .env(CHILD_ENV, &dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        if !dir.join("events.jsonl").exists() {
            continue; // killed before the bundle existed
        }
        let r = verify(&dir);
        assert!(r.ok && !r.complete, "round {round}: {r:#?}");
        assert_eq!(r.exit_code(), 3);

        if std::fs::metadata(dir.join("events.jsonl")).unwrap().len() == 0 {
            // Killed before run_started was written: nothing to resume.
            assert!(matches!(
                Recorder::reopen(&dir, Durability::Flush),
                Err(EvidenceError::InvalidLog { .. })
            ));
            continue;
        }
        // The run can be resumed and finished on the same chain.
        let rec = Recorder::reopen(&dir, Durability::Flush).unwrap();
        rec.finish(RunEnd::new(RunStatus::Failed)).unwrap();
        let r = verify(&dir);
        assert!(r.ok && r.complete, "round {round} after reopen: {r:#?}");
    }
}
