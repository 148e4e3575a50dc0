//! A run whose `run_started` is written but that cannot be set up (here: its `/scratch`
//! cannot be made, as when the process is out of descriptors) ends as a failed run, exit
//! 1, with a bundle that verifies and says why, not an unfinished one.

use std::path::Path;

use crate::support::cli::{assert_exit, command, events, s, text};

#[test]
fn a_run_that_cannot_make_its_sandbox_ends_failed_and_its_bundle_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripted");
    let bundle = dir.path().join("bundle");
    // A TMPDIR that passes the roots' checks but where no scratch folder can be made.
    let gone = dir.path().join("no-such-folder");
    let out = command(&[
        "run",
        &s(&examples.join("agent.toml")),
        "--input",
        &s(&examples.join("input")),
        "--out",
        &s(&bundle),
        "--json",
    ])
    .env("TMPDIR", &gone)
    .output()
    .unwrap();
    assert_exit(&out, 1);
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed", "{result}");
    let why = result["error"].as_str().unwrap();
    assert!(why.contains("scratch"), "{why}");

    let log = events(&bundle);
    let last = log.last().unwrap();
    assert_eq!(last["type"], "run_finished", "{last}");
    assert_eq!(last["payload"]["status"], "failed");
    assert!(
        last["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("scratch")
    );
    // The inputs were on record before the sandbox was tried.
    assert!(log.iter().any(|e| e["type"] == "input_staged"), "{log:?}");
    let verify = command(&["verify", &s(&bundle)]).output().unwrap();
    assert_exit(&verify, 0);
    assert!(text(&verify.stdout).contains("bundle verifies"));
}
