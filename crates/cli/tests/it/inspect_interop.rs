//! `provrun export inspect`: bundles written as an Inspect `.eval` log that the real
//! `inspect-ai` (0.3.285, PyPI, in a virtualenv in the CI cache) reads back with its own
//! `read_eval_log`: one sample per run, the messages, tool calls and results, the model
//! usage, and the run id, statement digest and verdict in each sample's metadata.
//!
//! The way back: a log that inspect-ai itself writes (`write_eval_log` of what it read)
//! is imported with `provrun import inspect`, one verifying bundle per sample, holding
//! the same model calls, tool calls and final text as the bundles it came from.
//!
//! Without Python or PyPI the round trip is skipped loudly, except under `CI=true`, where
//! it fails (`cargo xtask ci` installs inspect-ai into its cache).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::support::cli::{events, provrun, s};
use crate::support::venv::{cached_virtualenv, in_ci};

const INSPECT_AI: &str = "inspect-ai==0.3.285";

/// The virtualenv's python with inspect-ai, from the CI cache, installed there if missing.
fn inspect_python() -> Result<PathBuf, String> {
    let ready = |venv: &Path| {
        Command::new(venv.join("bin/python"))
            .args(["-c", "import inspect_ai.log"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let venv = cached_virtualenv("inspect-ai-0.3.285", INSPECT_AI, ready)?;
    Ok(venv.join("bin/python"))
}

/// What inspect-ai's `read_eval_log` makes of the log, as JSON.
const READ_BACK: &str = r#"
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1])
out = {"status": log.status, "samples": []}
for s in log.samples:
    out["samples"].append({
        "id": s.id,
        "metadata": s.metadata,
        "roles": [m.role for m in s.messages],
        "calls": [[c.function, c.arguments] for m in s.messages if m.role == "assistant" for c in (m.tool_calls or [])],
        "tool_results": [m.text for m in s.messages if m.role == "tool"],
        "tokens": sum(u.total_tokens for u in s.model_usage.values()),
        "events": [e.event for e in s.events],
        "completion": s.output.completion,
    })
print(json.dumps(out))
"#;

fn scripted(dir: &Path, name: &str) -> PathBuf {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripted");
    let bundle = dir.join(name);
    let out = provrun(&[
        "run",
        &s(&example.join("agent.toml")),
        "--input",
        &s(&example.join("input")),
        "--out",
        &s(&bundle),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bundle
}

#[test]
fn an_exported_log_is_read_back_by_inspect_ai_one_sample_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (a, b) = (scripted(&store, "a"), scripted(&store, "b"));
    // b changed after its run: it no longer verifies, and its sample says so.
    let statement = b.join("statement.json");
    let text = std::fs::read_to_string(&statement).unwrap();
    std::fs::write(&statement, text.replacen('"', "\" ", 1)).unwrap();

    let log = dir.path().join("runs.eval");
    let out = provrun(&["export", "inspect", &s(&store), "--out", &s(&log)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 samples written"));
    let bad = provrun(&[
        "export",
        "inspect",
        &s(&dir.path().join("nope")),
        "--out",
        &s(&log),
    ]);
    assert_eq!(bad.status.code(), Some(2));

    let python = match inspect_python() {
        Ok(p) => p,
        Err(why) => {
            assert!(
                !in_ci(),
                "CI=true: the Inspect round trip cannot run: {why}"
            );
            eprintln!(
                "\n*** SKIPPED the Inspect round trip: {why} (CI=true makes this a failure).\n"
            );
            return;
        }
    };
    let read = Command::new(&python)
        .args(["-c", READ_BACK])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let v: Value = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(v["status"], "success");
    let samples = v["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2);
    for (sample, bundle, verdict) in [(&samples[0], &a, "verifies"), (&samples[1], &b, "fails")] {
        let run_id = events(bundle)[0]["run_id"].clone();
        let m = &sample["metadata"];
        assert_eq!(m["provrun_run_id"], run_id);
        assert_eq!(m["provrun_verdict"], verdict);
        let digest: String = Sha256::digest(std::fs::read(bundle.join("statement.json")).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(m["provrun_statement_sha256"], digest.as_str());
        assert_eq!(
            sample["roles"],
            serde_json::json!([
                "system",
                "user",
                "assistant",
                "tool",
                "tool",
                "assistant",
                "tool",
                "assistant"
            ])
        );
        let calls = sample["calls"].as_array().unwrap();
        assert_eq!(
            calls[0],
            serde_json::json!(["list_dir", {"path": "/input"}])
        );
        assert_eq!(
            calls[1],
            serde_json::json!(["read_file", {"path": "/input/report.txt"}])
        );
        assert_eq!(calls[2][0], "write_file");
        assert!(
            sample["tool_results"][1]
                .as_str()
                .unwrap()
                .contains("Revenue grew 12%")
        );
        let usage = events(bundle).last().unwrap()["payload"]["usage"].clone();
        let total =
            usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap();
        assert_eq!(sample["tokens"], total);
        assert_eq!(
            sample["events"],
            serde_json::json!(["model", "tool", "tool", "model", "tool", "model"])
        );
        assert!(
            sample["completion"]
                .as_str()
                .unwrap()
                .contains("revenue up 12%")
        );
    }
    assert_ne!(
        samples[0]["metadata"]["provrun_failed_checks"],
        samples[1]["metadata"]["provrun_failed_checks"]
    );
}

/// inspect-ai reads the log at argv[1] and writes it again, itself, at argv[2].
const REWRITE: &str = r#"
import sys
from inspect_ai.log import read_eval_log, write_eval_log
write_eval_log(read_eval_log(sys.argv[1]), sys.argv[2])
"#;

/// The tool calls of a bundle: name, arguments (a JSON text parsed) and whether it
/// succeeded.
fn tool_calls(bundle: &Path) -> Vec<Value> {
    events(bundle)
        .iter()
        .filter(|e| e["type"] == "tool_called")
        .map(|e| {
            let p = &e["payload"];
            let arguments = match &p["arguments"] {
                Value::String(t) => serde_json::from_str(t).unwrap_or(Value::String(t.clone())),
                other => other.clone(),
            };
            serde_json::json!([p["name"], arguments, p["ok"]])
        })
        .collect()
}

fn kinds(bundle: &Path, kind: &str) -> Vec<Value> {
    events(bundle)
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

#[test]
fn a_log_inspect_ai_writes_is_imported_one_bundle_per_sample() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let originals = [scripted(&store, "a"), scripted(&store, "b")];
    let ours = dir.path().join("ours.eval");
    let out = provrun(&["export", "inspect", &s(&store), "--out", &s(&ours)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let python = match inspect_python() {
        Ok(p) => p,
        Err(why) => {
            assert!(!in_ci(), "CI=true: the Inspect import cannot run: {why}");
            eprintln!("\n*** SKIPPED the Inspect import: {why} (CI=true makes this a failure).\n");
            return;
        }
    };
    let theirs = dir.path().join("theirs.eval");
    let rewrote = Command::new(&python)
        .args(["-c", REWRITE])
        .arg(&ours)
        .arg(&theirs)
        .output()
        .unwrap();
    assert!(
        rewrote.status.success(),
        "{}",
        String::from_utf8_lossy(&rewrote.stderr)
    );
    assert_ne!(
        std::fs::read(&ours).unwrap(),
        std::fs::read(&theirs).unwrap()
    );

    let imported = dir.path().join("imported");
    let out = provrun(&["import", "inspect", &s(&theirs), "--out", &s(&imported)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("imported 2 sample(s)"));
    let script: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripted/script.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let final_text = script.as_array().unwrap().last().unwrap()["text"].clone();
    for (id, original) in ["1", "2"].iter().zip(&originals) {
        let bundle = imported.join(id);
        let verified = provrun(&["verify", &s(&bundle)]);
        assert_eq!(
            verified.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&verified.stdout)
        );
        let models = kinds(&bundle, "model_called");
        assert_eq!(models.len(), kinds(original, "model_called").len());
        assert_eq!(models.len(), 3);
        let tools = tool_calls(&bundle);
        assert_eq!(tools, tool_calls(original));
        assert_eq!(
            tools[0],
            serde_json::json!(["list_dir", {"path": "/input"}, true])
        );
        for e in models
            .iter()
            .chain(&kinds(&bundle, "tool_called"))
            .chain(&kinds(&bundle, "trace_imported"))
        {
            assert_eq!(e["confidence"], "parsed", "{e}");
        }
        assert_eq!(kinds(&bundle, "trace_imported").len(), 1);
        assert_eq!(
            std::fs::read_to_string(bundle.join("output/response.txt")).unwrap(),
            final_text.as_str().unwrap()
        );
    }
    // Importing again over the same folder writes nothing.
    let again = provrun(&["import", "inspect", &s(&theirs), "--out", &s(&imported)]);
    assert_eq!(again.status.code(), Some(2));
}

#[test]
fn what_is_not_an_inspect_log_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let not_zip = dir.path().join("notes.eval");
    std::fs::write(&not_zip, "not a zip").unwrap();
    // An empty zip: only the end-of-central-directory record, no member at all.
    let empty = dir.path().join("empty.eval");
    let mut record = b"PK\x05\x06".to_vec();
    record.extend([0u8; 18]);
    std::fs::write(&empty, record).unwrap();
    for (log, says) in [
        (&not_zip, "not a zip"),
        (&empty, "no `samples/*.json`"),
        (&dir.path().join("missing.eval"), "cannot read"),
    ] {
        let out_dir = dir.path().join("out");
        let out = provrun(&["import", "inspect", &s(log), "--out", &s(&out_dir)]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out_dir.exists());
    }
}
