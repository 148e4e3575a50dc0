//! `provrun import pydantic-ai`: real PydanticAI histories become bundles that verify,
//! with every model and tool event `parsed`; malformed or hostile histories are refused
//! with exit 2 and nothing written.
//!
//! One committed history (tests/fixtures/pydantic-ai/) is imported without Python. The
//! others are made by real PydanticAI (`pydantic-ai-slim`, offline TestModel and
//! FunctionModel) in a throwaway virtualenv under target/; without Python (or PyPI) that
//! test is skipped with a loud message, except under `CI=true`, where it fails instead
//! (`cargo xtask ci` installs python3 and venv there).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::cli::{events, provrun, s};
use crate::support::venv;
use crate::support::venv::in_ci;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// A history's time (pydantic writes UTC with `Z` and microseconds) as an event's `ts`:
/// milliseconds, cut, not rounded.
fn ms(ts: &Value) -> String {
    let ts = ts.as_str().expect("a timestamp");
    let (seconds, fraction) = ts.trim_end_matches('Z').split_once('.').unwrap_or((ts, ""));
    format!("{seconds}.{:0<3}Z", &fraction[..fraction.len().min(3)])
}

fn millis_between(from: &Value, to: &Value) -> u64 {
    let at = |v: &Value| humantime::parse_rfc3339(v.as_str().unwrap()).unwrap();
    at(to).duration_since(at(from)).unwrap().as_millis() as u64
}

/// The events are stamped with the history's times, not the import's, and the durations
/// are the times between them (docs/capture.md).
fn check_times(messages: &[Value], events: &[Value]) {
    assert_eq!(
        events[0]["ts"],
        ms(&messages[0]["timestamp"]),
        "run_started"
    );
    let mut last = events[0]["ts"].as_str().unwrap().to_owned();
    let mut sent = &messages[0]["timestamp"];
    let models = of_type(events, "model_called");
    let mut model = models.iter();
    for m in messages {
        if m["kind"] == "request" {
            sent = &m["timestamp"];
            continue;
        }
        let e = model.next().unwrap();
        assert_eq!(e["ts"], ms(&m["timestamp"]), "a response's time");
        assert_eq!(
            e["payload"]["duration_ms"],
            millis_between(sent, &m["timestamp"])
        );
        last = last.max(e["ts"].as_str().unwrap().to_owned());
    }
    // Every event in order of time; the end at the history's latest time.
    let stamps: Vec<&str> = events.iter().map(|e| e["ts"].as_str().unwrap()).collect();
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    let mut all: Vec<String> = messages.iter().map(|m| ms(&m["timestamp"])).collect();
    all.extend(
        messages
            .iter()
            .flat_map(|m| m["parts"].as_array().unwrap())
            .filter(|p| p["part_kind"] == "tool-return" || p["part_kind"] == "retry-prompt")
            .map(|p| ms(&p["timestamp"])),
    );
    let latest = all.into_iter().max().unwrap();
    assert!(latest >= last);
    assert_eq!(
        events.last().unwrap()["ts"],
        latest.as_str(),
        "run_finished"
    );
}

/// Import `history` into a fresh bundle, check it verifies and matches the history
/// message for message; returns the bundle's events.
fn import_and_check(history: &[u8], dir: &Path, name: &str) -> Vec<Value> {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, history).unwrap();
    let bundle = dir.join(name);
    let out = provrun(&[
        "import",
        "pydantic-ai",
        &s(&file),
        "--out",
        &s(&bundle),
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();

    let verify = provrun(&["verify", &s(&bundle), "--json"]);
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{name}: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    let parse = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "parse")
        .unwrap();
    assert!(
        parse["detail"].as_str().unwrap().contains(" parsed"),
        "verify says how many events are parsed: {parse}"
    );
    let show = provrun(&["show", &s(&bundle)]);
    assert_eq!(show.status.code(), Some(0), "{name}: show");
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        shown.contains(&format!("{} tool calls", summary["tool_calls"])),
        "{shown}"
    );

    let messages: Vec<Value> = serde_json::from_slice(history).unwrap();
    let responses: Vec<&Value> = messages
        .iter()
        .filter(|m| m["kind"] == "response")
        .collect();
    let calls: Vec<&Value> = responses
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter(|p| p["part_kind"] == "tool-call")
        .collect();
    let events = events(&bundle);
    assert_eq!(summary["messages"], messages.len());
    assert_eq!(summary["model_calls"], responses.len());
    assert_eq!(summary["tool_calls"], calls.len());

    let model_events = of_type(&events, "model_called");
    assert_eq!(model_events.len(), responses.len(), "{name}");
    for (e, r) in model_events.iter().zip(&responses) {
        assert_eq!(e["confidence"], "parsed", "{name}: never claimed observed");
        for key in ["input_tokens", "output_tokens"] {
            assert_eq!(e["payload"]["usage"][key], r["usage"][key]);
        }
    }
    let tool_events = of_type(&events, "tool_called");
    assert_eq!(tool_events.len(), calls.len(), "{name}");
    for (e, c) in tool_events.iter().zip(&calls) {
        assert_eq!(e["confidence"], "parsed");
        assert_eq!(e["payload"]["name"], c["tool_name"]);
        assert_eq!(e["payload"]["call_id"], c["tool_call_id"]);
        // the answer PydanticAI gave the model, from the tool-return with the same id
        let answer = messages
            .iter()
            .filter(|m| m["kind"] == "request")
            .flat_map(|m| m["parts"].as_array().unwrap())
            .find(|p| p["tool_call_id"] == c["tool_call_id"] && p["part_kind"] == "tool-return")
            .expect("every call here is answered");
        assert_eq!(e["payload"]["result"], answer["content"]);
        assert_eq!(e["payload"]["ok"], answer["outcome"] == "success");
        // Stamped when it was answered (never before the event before it), and its
        // duration from the response that asked for it to that answer.
        let asked = responses
            .iter()
            .find(|r| r["parts"].as_array().unwrap().contains(c))
            .unwrap();
        assert!(e["ts"].as_str().unwrap() >= ms(&answer["timestamp"]).as_str());
        assert_eq!(
            e["payload"]["duration_ms"],
            millis_between(&asked["timestamp"], &answer["timestamp"])
        );
    }
    check_times(&messages, &events);
    let trace = of_type(&events, "trace_imported");
    assert_eq!(trace.len(), 1);
    assert_eq!(trace[0]["confidence"], "parsed");
    assert_eq!(trace[0]["payload"]["messages"], messages.len());
    // the trace is kept byte for byte
    let digest = trace[0]["payload"]["trace"]["digest"]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let cat = provrun(&["cat", &s(&bundle), &digest]);
    assert_eq!(cat.stdout, history);
    events
}

#[test]
fn a_committed_pydantic_ai_history_imports_and_verifies_without_python() {
    let dir = tempfile::tempdir().unwrap();
    let history =
        std::fs::read(root().join("crates/cli/tests/fixtures/pydantic-ai/retry_and_parallel.json"))
            .unwrap();
    let events = import_and_check(&history, dir.path(), "fixture");
    let tools = of_type(&events, "tool_called");
    assert_eq!(
        tools[0]["payload"]["arguments"],
        serde_json::json!({"a": 2, "b": 3})
    );
    assert_eq!(tools[0]["payload"]["result"], 5);
    assert_eq!(tools[0]["payload"]["ok"], true);
    // a string of JSON arguments is parsed; a retried call is a failed one
    assert_eq!(
        tools[1]["payload"]["arguments"],
        serde_json::json!({"key": "missing"})
    );
    assert_eq!(tools[1]["payload"]["ok"], false);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("fixture/output/response.txt")).unwrap(),
        "2+3 is 5; the key is missing."
    );
    let started = &events[0]["payload"];
    let parsed: Vec<Value> = serde_json::from_slice(&history).unwrap();
    assert_eq!(
        started["model"],
        format!("pydantic-ai:{}", parsed[1]["model_id"].as_str().unwrap())
    );
    assert!(
        started["builder"]
            .as_str()
            .unwrap()
            .starts_with("provrun-import/")
    );
    // The statement's times are the history's.
    let statement: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("fixture/statement.json")).unwrap())
            .unwrap();
    let metadata = &statement["predicate"]["runDetails"]["metadata"];
    assert_eq!(metadata["startedOn"], "2026-12-03T22:17:49.625Z");
    assert_eq!(metadata["finishedOn"], "2026-12-03T22:17:49.650Z");

    // An imported run cannot be replayed: said plainly, exit 2, nothing written.
    let new = dir.path().join("replayed");
    let out = provrun(&["replay", &s(&dir.path().join("fixture")), "--out", &s(&new)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("imported from pydantic-ai, and imported runs cannot be replayed"),
        "{err}"
    );
    assert!(!new.exists());
}

#[test]
fn malformed_and_hostile_histories_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[u8], &str)] = &[
        ("not-json", b"{\"kind\": ", "not JSON"),
        ("object", b"{}", "expected a JSON array"),
        ("kindless", br#"[{"parts": []}]"#, "needs a `kind`"),
        (
            "bad-args",
            br#"[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","tool_call_id":"c","args":[1]}]}]"#,
            "/0/parts/0/args",
        ),
        (
            "escape",
            br#"[{"kind":"\u001b[31mred","parts":[]}]"#,
            "unknown message kind",
        ),
    ];
    for (name, bytes, want) in cases {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, bytes).unwrap();
        let bundle = dir.path().join(format!("{name}-bundle"));
        let out = provrun(&["import", "pydantic-ai", &s(&file), "--out", &s(&bundle)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(
            !err.contains('\u{1b}'),
            "{name}: control characters are escaped: {err}"
        );
        assert!(!bundle.exists(), "{name}: nothing written");
    }
    // a missing file, and a bundle that already holds something
    let out = provrun(&[
        "import",
        "pydantic-ai",
        "/no/such/file.json",
        "--out",
        &s(&dir.path().join("x")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let good = root().join("crates/cli/tests/fixtures/pydantic-ai/retry_and_parallel.json");
    let taken = dir.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("keep.txt"), "mine").unwrap();
    let out = provrun(&["import", "pydantic-ai", &s(&good), "--out", &s(&taken)]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(taken.join("keep.txt")).unwrap(),
        "mine"
    );
}

/// Skip loudly, or fail under CI.
fn unavailable(why: &str) {
    assert!(
        !in_ci(),
        "CI=true: the PydanticAI import test cannot run: {why}"
    );
    eprintln!(
        "\n*** SKIPPED import_pydantic_ai (live histories): {why}.\n*** Histories made by \
         a real PydanticAI are NOT imported on this machine (CI=true makes this a failure).\n"
    );
}

/// A virtualenv for this test, made once under target/; `Err` says why not.
fn virtualenv() -> Result<PathBuf, String> {
    venv::virtualenv(
        "pydantic-ai-venv",
        "tests/interop/pydantic-ai-requirements.txt",
        "import pydantic_ai.models.function, pydantic_ai.models.test",
    )
}

#[test]
fn histories_made_by_real_pydantic_ai_import_and_verify() {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => return unavailable(&why),
    };
    let out = Command::new(&python)
        .arg(root().join("tests/interop/pydantic_ai_histories.py"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let histories: serde_json::Map<String, Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(histories.len(), 3);
    let dir = tempfile::tempdir().unwrap();
    for (name, history) in &histories {
        let bytes = history.as_str().unwrap().as_bytes();
        let events = import_and_check(bytes, dir.path(), name);
        let tools = of_type(&events, "tool_called");
        match name.as_str() {
            "tools" => {
                assert_eq!(tools.len(), 1);
                assert_eq!(tools[0]["payload"]["name"], "add");
                assert!(dir.path().join("tools/output/response.txt").is_file());
            }
            "retry_and_parallel" => {
                assert_eq!(tools.len(), 2);
                assert_eq!(tools[1]["payload"]["ok"], false);
            }
            "structured" => {
                // the answer is a call of PydanticAI's output tool, answered in a last
                // request that no response follows
                assert_eq!(tools.len(), 1);
                assert_eq!(tools[0]["payload"]["name"], "final_result");
                assert_eq!(tools[0]["payload"]["ok"], true);
            }
            other => panic!("unexpected scenario {other}"),
        }
    }
}
