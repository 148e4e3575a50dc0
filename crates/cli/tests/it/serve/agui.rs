//! `provrun serve` against the official AG-UI client: `@ag-ui/client` (pinned) from npm,
//! driven by `tests/agui/drive.cjs` through a plain run, a streamed run with reasoning, a
//! tool run, an approval interrupt and its resume, a frontend tool round trip, a second
//! turn on a thread, a cancel by the client going away, a cancel by the cancel route and a
//! steer. The client's own schema enforcement and event-order verification run inside
//! every request, and any warning it prints fails the test. Every captured stream is then
//! checked by `ag-ui-validate` (pinned, from PyPI), and every run's bundle fetched from
//! `/runs/ID/bundle` must verify.
//!
//! Both programs are installed once into `${PROVRUN_CI_CACHE:-$HOME/.cache/provrun-ci}`
//! (`cargo xtask ci` does it under `CI=true`; here a missing one is installed the same way).
//! Without node or python3 the test skips loudly, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sha2::Digest as _;

use super::{Served, fetch_and_verify, in_ci, request, write_agents};
use crate::support::venv::{cached_virtualenv, ci_cache as cache};

/// The pinned official client, as npm names it.
const CLIENT: &str = "@ag-ui/client@1.0.0";
/// The pinned validator, as pip names it.
const VALIDATOR: &str = "ag-ui-validate==0.4.0";

/// The client's `node_modules`, installed if missing.
fn client_modules() -> Result<PathBuf, String> {
    let prefix = cache().join("ag-ui-client-1.0.0");
    let modules = prefix.join("node_modules");
    if modules.join("@ag-ui/client/package.json").is_file() {
        return Ok(modules);
    }
    std::fs::create_dir_all(&prefix).map_err(|e| e.to_string())?;
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(CLIENT)
        .output()
        .map_err(|e| format!("npm is not available ({e})"))?;
    if out.status.success() && modules.join("@ag-ui/client/package.json").is_file() {
        Ok(modules)
    } else {
        Err(format!(
            "`npm install {CLIENT}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The validator's program, installed into its own virtualenv if missing.
fn validator() -> Result<PathBuf, String> {
    let program = |venv: &Path| venv.join("bin/ag-ui-validate");
    let venv = cached_virtualenv("ag-ui-validate-0.4.0", VALIDATOR, |v| program(v).is_file())?;
    Ok(program(&venv))
}

fn unavailable(why: &str) {
    assert!(!in_ci(), "CI=true: the AG-UI client test cannot run: {why}");
    eprintln!(
        "\n*** SKIPPED the official AG-UI client test: {why}.\n*** `provrun serve` is NOT \
         checked against @ag-ui/client on this machine (CI=true makes this a failure).\n"
    );
}

/// The events of run `i` of a scenario.
fn run<'a>(report: &'a Value, scenario: &str, i: usize) -> &'a Value {
    &report[scenario]["runs"][i]
}

fn types(run: &Value) -> Vec<&str> {
    run["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect()
}

fn bundle_id(run: &Value) -> String {
    run["bundle"]["bundle"].as_str().unwrap().to_string()
}

fn events(store: &Path, id: &str) -> Vec<Value> {
    crate::support::cli::events(&store.join(id))
}

#[test]
fn the_official_client_drives_every_kind_of_run_and_each_bundle_verifies() {
    if Command::new("node").arg("--version").output().is_err() {
        return unavailable("node is not installed");
    }
    let modules = match client_modules() {
        Ok(m) => m,
        Err(why) => return unavailable(&why),
    };
    let validator = match validator() {
        Ok(v) => v,
        Err(why) => return unavailable(&why),
    };
    let dir = tempfile::tempdir().unwrap();
    let (agents, store, captures) = (
        dir.path().join("agents"),
        dir.path().join("store"),
        dir.path().join("captures"),
    );
    write_agents(&agents);
    std::fs::create_dir_all(&captures).unwrap();
    let token = "agui-test-token";
    let served = Served::start(&agents, &store, &[], &[("PROVRUN_SERVE_TOKEN", token)]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agui/drive.cjs");
    let out = Command::new("node")
        .arg(&script)
        .arg(&served.url)
        .arg(token)
        .arg(&captures)
        .env("NODE_PATH", &modules)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the client script failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr: {stderr}"));
    for (name, scenario) in report.as_object().unwrap() {
        assert_eq!(scenario["ok"], true, "{name}: {}", scenario["error"]);
        assert_eq!(scenario["warnings"], serde_json::json!([]), "{name}");
    }
    check_runs(&report, &store);
    check_streams(&validator, &captures);
    // Every run the index lists: its bundle from /runs/ID/bundle verifies.
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str())];
    let listed = request(served.addr, "GET", "/runs", &headers, b"").json();
    let runs = listed["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 10, "{listed}");
    for r in runs {
        fetch_and_verify(served.addr, &headers, r["id"].as_str().unwrap(), dir.path());
        assert_eq!(r["verified"], true, "{r}");
    }
}

/// What each scenario must have done, in the streams the client saw and in the bundles.
fn check_runs(report: &Value, store: &Path) {
    let plain = run(report, "plain", 0);
    assert_eq!(plain["finished"]["outcome"]["type"], "success");
    assert_eq!(plain["result"]["output"], "Hello.");
    assert_eq!(plain["bundle"]["verified"], true);
    let last = report["plain"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["role"].as_str(), last["content"].as_str()),
        (Some("assistant"), Some("Hello."))
    );

    let streamed = types(run(report, "streamed", 0));
    for t in [
        "REASONING_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_END",
        "TEXT_MESSAGE_CONTENT",
    ] {
        assert!(streamed.contains(&t), "{streamed:?}");
    }
    let tools = types(run(report, "tools", 0));
    assert_eq!(
        tools.iter().filter(|t| **t == "TOOL_CALL_RESULT").count(),
        2,
        "{tools:?}"
    );

    // Approval: an interrupt naming the confirm text, then the same bundle resumed.
    let (first, second) = (run(report, "approval", 0), run(report, "approval", 1));
    let interrupt = &first["finished"]["outcome"]["interrupts"][0];
    assert!(
        interrupt["reason"]
            .as_str()
            .unwrap()
            .contains("/output/ok.txt"),
        "{interrupt}"
    );
    assert_eq!(second["finished"]["outcome"]["type"], "success");
    assert_eq!(bundle_id(first), bundle_id(second));
    let approved = store.join(bundle_id(first)).join("output/ok.txt");
    assert_eq!(std::fs::read_to_string(approved).unwrap(), "approved");

    // Frontend tool: pending call ids, the client's result in the same bundle.
    let (first, second) = (run(report, "frontend", 0), run(report, "frontend", 1));
    let pending = &first["finished"]["outcome"]["pendingToolCallIds"];
    assert_eq!(pending.as_array().unwrap().len(), 1, "{first}");
    assert!(!types(second).contains(&"TOOL_CALL_RESULT"));
    assert_eq!(bundle_id(first), bundle_id(second));
    let caller = events(store, &bundle_id(first))
        .into_iter()
        .find(|e| e["type"] == "tool_called" && e["payload"]["decided_by"] == "caller")
        .unwrap();
    assert_eq!(caller["payload"]["result"], "teal");

    // A thread's second turn continues the first: history and the first statement's digest.
    let (first, second) = (run(report, "thread", 0), run(report, "thread", 1));
    assert_eq!(second["result"]["output"], "Second answer.");
    let details = events(store, &bundle_id(second))[0]["payload"]["details"].clone();
    assert_eq!(
        details["continues"]["run_id"].as_str(),
        Some(bundle_id(first).as_str())
    );
    let statement = std::fs::read(store.join(bundle_id(first)).join("statement.json")).unwrap();
    assert_eq!(
        details["continues"]["statement_sha256"].as_str(),
        Some(hex::encode(sha2::Sha256::digest(&statement)).as_str())
    );
    assert_eq!(details["history"].as_array().unwrap().len(), 2, "{details}");

    // Cancelled: by the client going away, and by the cancel route.
    let aborted = report["abort"]["started"]["metadata"]["bundle"]
        .as_str()
        .unwrap();
    let end = events(store, aborted).last().unwrap().clone();
    assert_eq!(end["payload"]["status"], "cancelled");
    let cancel = run(report, "cancel", 0);
    assert_eq!(report["cancel"]["answer"], 202);
    assert_eq!(cancel["finished"]["outcome"]["type"], "cancelled");

    // Steered: the message is in the stream and in the bundle.
    assert_eq!(report["steer"]["answer"], 202);
    let steer = run(report, "steer", 0);
    let custom = steer["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "provrun.steered")
        .unwrap();
    assert_eq!(custom["value"]["text"], "Mention blue.");
    assert!(
        events(store, &bundle_id(steer))
            .iter()
            .any(|e| e["type"] == "steered")
    );
}

/// Every stream the client received in full passes `ag-ui-validate` with no error (the
/// aborted one is cut by the client itself, so it is left out).
fn check_streams(validator: &Path, captures: &Path) {
    let mut checked = 0;
    for entry in std::fs::read_dir(captures).unwrap() {
        let file = entry.unwrap().path();
        if file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("abort-")
        {
            continue;
        }
        let out = Command::new(validator)
            .args(["--json", "--no-color"])
            .arg(&file)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            out.status.success()
                && report["summary"]["errors"] == 0
                && report["summary"]["warnings"] == 0,
            "{}: {}",
            file.display(),
            report["diagnostics"]
        );
        assert!(report["eventCount"].as_u64().unwrap() >= 3);
        checked += 1;
    }
    assert_eq!(checked, 11, "every full stream was captured and checked");
}
