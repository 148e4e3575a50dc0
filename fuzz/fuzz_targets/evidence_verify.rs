//! Fuzz target: the evidence line parser and `verify` over a bundle whose `events.jsonl` is
//! the fuzz input. The rest of the bundle (statement, blobs, inputs, outputs) is a real one
//! made once per process, so mutated logs reach the deeper checks. Nothing may panic, and a
//! log that verifies reads back with one event per line.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use provrun_evidence::{
    Durability, Event, ModelCalled, Recorder, RunEnd, RunStarted, RunStatus, ToolCalled, ToolInfo,
    read_events, verify,
};
use serde_json::json;

fn make_template(dir: &std::path::Path) {
    let started = RunStarted {
        builder: "provrun/fuzz".into(),
        agent_spec_digest: "a".repeat(64),
        agent: "fuzz".into(),
        model: "test".into(),
        tools: vec![ToolInfo {
            name: "read_file".into(),
            schema_sha256: "b".repeat(64),
        }],
        limits: json!({"max_steps": 20}),
        details: serde_json::Value::Null,
    };
    let rec = Recorder::create(dir, "run-fuzz", Durability::Flush, &started).unwrap();
    std::fs::write(rec.input_dir().join("a.txt"), b"hello\n").unwrap();
    rec.record_inputs().unwrap();
    let request = rec
        .put_blob(br#"{"messages":[]}"#, "application/json")
        .unwrap();
    let response = rec
        .put_blob(b"data: {\"x\":1}\n\ndata: [DONE]\n\n", "text/event-stream")
        .unwrap();
    rec.record(&ModelCalled {
        model: "test".into(),
        stream: true,
        request: Some(request),
        response: Some(response),
        usage: json!({"input_tokens": 1, "output_tokens": 2}),
        finish_reason: Some("tool_calls".into()),
        duration_ms: 5,
        ..ModelCalled::default()
    })
    .unwrap();
    rec.record(&ToolCalled {
        name: "read_file".into(),
        call_id: "c1".into(),
        arguments: json!({"path": "/input/a.txt"}),
        result: json!("hello"),
        ok: true,
        duration_ms: 3,
        deferred: false,
        output_tool: false,
        provider_run: false,
        mode: Some("in_process".into()),
        arguments_blob: None,
        result_blob: None,
        decided_by: None,
        mcp: None,
        mcp_blob: None,
        ..ToolCalled::default()
    })
    .unwrap();
    std::fs::write(rec.output_dir().join("response.txt"), b"done").unwrap();
    rec.finish(RunEnd {
        status: RunStatus::Finished,
        usage: json!({}),
        error: None,
    })
    .unwrap();
}

fn bundle() -> &'static PathBuf {
    static BUNDLE: OnceLock<PathBuf> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("provrun-fuzz-evidence-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        make_template(&dir);
        // `PROVRUN_FUZZ_SEED_OUT=FILE` saves the template's log as a seed.
        if let Some(out) = std::env::var_os("PROVRUN_FUZZ_SEED_OUT") {
            std::fs::copy(dir.join("events.jsonl"), out).unwrap();
        }
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    for line in data.split(|b| *b == b'\n') {
        let _ = serde_json::from_slice::<Event>(line);
    }
    let dir = bundle();
    std::fs::write(dir.join("events.jsonl"), data).unwrap();
    let report = verify(dir);
    let _ = report.exit_code();
    let read = read_events(dir);
    if report.ok {
        let lines = data
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        let events = read.expect("a bundle that verifies can be read");
        assert_eq!(events.len(), lines);
    }
});
