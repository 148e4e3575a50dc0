//! Reading a bundle through the typed payloads ([`EventPayload`]): old bundles read
//! the same as through the JSON, an event type this version does not know still reads,
//! and a payload that does not fit its type is an error naming the event and the field.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use provrun_evidence::*;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

fn fixture(name: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dir = scratch(name);
    copy_tree(&from, &dir);
    dir
}

/// Write `events.jsonl` in `dir` from (type, confidence, payload) triples: canonical
/// lines, chained the way the recorder chains them.
fn write_log(dir: &Path, events: &[(&str, &str, Value)]) {
    fs::create_dir_all(dir).unwrap();
    let mut text = String::new();
    let mut prev: Option<String> = None;
    for (seq, (kind, confidence, payload)) in events.iter().enumerate() {
        let line = to_canonical_string(&json!({
            "v": 1,
            "run_id": "run-typed",
            "seq": seq,
            "prev": prev,
            "ts": "2026-12-04T00:00:00.000Z",
            "type": kind,
            "confidence": confidence,
            "payload": payload,
        }))
        .unwrap();
        prev = Some(hex::encode(Sha256::digest(line.as_bytes())));
        text.push_str(&line);
        text.push('\n');
    }
    fs::write(dir.join("events.jsonl"), text).unwrap();
}

fn started() -> Value {
    serde_json::to_value(run_started()).unwrap()
}

fn call(ok: Value) -> Value {
    json!({
        "name": "read_file", "call_id": "c1", "arguments": {"path": "/input/a"},
        "result": "hi", "ok": ok, "duration_ms": 1, "deferred": false,
        "output_tool": false, "provider_run": false,
    })
}

#[test]
fn old_bundles_read_the_same_typed_as_through_their_json() {
    for name in ["bundle-v1-hello", "bundle-v1-paused"] {
        let dir = fixture(name);
        let plain = read_events(&dir).unwrap();
        let typed = read_typed_events(&dir).unwrap();
        assert_eq!(plain.len(), typed.len(), "{name}");
        for (p, t) in plain.iter().zip(&typed) {
            assert_eq!(
                (p.seq, &p.payload, p.confidence),
                (t.seq, &t.payload, t.confidence)
            );
            assert_eq!(Some(p.kind), t.kind());
            assert_eq!(p.typed().unwrap(), t.body, "{name} seq {}", p.seq);
            assert_eq!(t.body.type_name(), p.kind.as_str());
        }
        let EventPayload::RunStarted(first) = &typed[0].body else {
            panic!("{name}: seq 0 is not run_started: {:?}", typed[0].body);
        };
        assert_eq!(first.builder, "provrun/0.1.0");
    }
    // The paused bundle: a deferred write waits, and the run ended paused.
    let typed = read_typed_events(fixture("bundle-v1-paused")).unwrap();
    let deferred: Vec<&ToolCalled> = typed
        .iter()
        .filter_map(|e| e.body.as_tool_called())
        .filter(|t| t.deferred)
        .collect();
    assert_eq!(deferred.len(), 1);
    assert_eq!(deferred[0].name, "write_file");
    assert_eq!(deferred[0].arguments["path"], "/output/hello.txt");
    let last = typed.last().unwrap().body.as_run_finished().unwrap();
    assert_eq!(last.status, RunStatus::Paused);
}

#[test]
fn an_event_type_this_version_does_not_know_still_reads() {
    let dir = scratch("typed-unknown");
    write_log(
        &dir,
        &[
            ("run_started", "observed", started()),
            ("tool_called", "observed", call(json!(true))),
            ("budget_checked", "observed", json!({"left": 3})),
        ],
    );
    let typed = read_typed_events(&dir).unwrap();
    assert_eq!(typed.len(), 3);
    assert!(typed[1].body.as_tool_called().is_some_and(|t| t.ok));
    match &typed[2].body {
        EventPayload::Unknown { kind, payload } => {
            assert_eq!(kind, "budget_checked");
            assert_eq!(payload, &json!({"left": 3}));
        }
        other => panic!("read as {other:?}"),
    }
    assert_eq!(typed[2].kind(), None);
    assert_eq!(typed[2].body.type_name(), "budget_checked");
    // The strict reader, which `verify` and the runtime use, refuses it.
    let err = read_events(&dir).unwrap_err().to_string();
    assert!(err.contains("unknown event type"), "{err}");
}

#[test]
fn a_malformed_payload_is_an_error_naming_the_event_and_the_field() {
    let cases: [(&str, Value, u64, &str); 3] = [
        // `ok` of the wrong type.
        ("tool_called", call(json!("yes")), 1, "ok"),
        // A missing field.
        (
            "tool_called",
            {
                let mut c = call(json!(true));
                c.as_object_mut().unwrap().remove("name");
                c
            },
            1,
            "name",
        ),
        // A nested one.
        (
            "run_started",
            {
                let mut s = started();
                s["tools"][0]["name"] = json!(5);
                s
            },
            0,
            "tools[0].name",
        ),
    ];
    for (kind, payload, seq, field) in cases {
        let dir = scratch("typed-malformed");
        let events = if kind == "run_started" {
            vec![("run_started", "observed", payload)]
        } else {
            vec![
                ("run_started", "observed", started()),
                (kind, "observed", payload),
            ]
        };
        write_log(&dir, &events);
        match read_typed_events(&dir) {
            Err(EvidenceError::MalformedPayload {
                seq: s,
                kind: k,
                field: f,
                reason,
            }) => {
                assert_eq!((s, k, f.as_str()), (seq, kind, field), "{reason}");
            }
            other => panic!("{kind} without a good `{field}`: {other:?}"),
        }
    }
    // The same through `Event::typed` on an event changed by hand.
    let dir = fixture("bundle-v1-hello");
    let mut events = read_events(&dir).unwrap();
    let e = events
        .iter_mut()
        .find(|e| e.kind == EventType::ModelCalled)
        .unwrap();
    e.payload["stream"] = json!("no");
    let seq = e.seq;
    let err = e.typed().unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!("seq {seq}")) && text.contains("`stream`"),
        "{text}"
    );
}

#[test]
fn typed_reading_keeps_the_checks_of_the_log() {
    // A broken chain is still refused.
    let dir = scratch("typed-chain");
    write_log(
        &dir,
        &[
            ("run_started", "observed", started()),
            ("tool_called", "observed", call(json!(true))),
        ],
    );
    let text = fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    fs::write(dir.join("events.jsonl"), format!("{}\n", lines[1])).unwrap();
    assert!(matches!(
        read_typed_events(&dir),
        Err(EvidenceError::InvalidLog { .. })
    ));
    // A known type with a confidence it may not carry is refused too.
    write_log(&dir, &[("run_started", "declared", started())]);
    let err = read_typed_events(&dir).unwrap_err().to_string();
    assert!(err.contains("confidence"), "{err}");
}
