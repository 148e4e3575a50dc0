//! The capture API from outside: confidences, deferred calls, staging and output errors,
//! large values, and what `verify` says about each bundle.

use std::time::Duration;

use provrun_capture::{Body, Capture, CaptureError, ModelExchange, ToolCallRecord};
use provrun_evidence::{
    CheckCode, CheckStatus, Confidence, Declared, Recorder, RunStatus, read_blob, read_events,
    verify,
};
use serde_json::{Value, json};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn confidences(bundle: &std::path::Path, kind: &str) -> Vec<Confidence> {
    read_events(bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.as_str() == kind)
        .map(|e| e.confidence)
        .collect()
}

#[test]
fn raw_bodies_are_observed_and_any_parsed_side_makes_the_exchange_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    rt().block_on(async {
        let c = Capture::builder(&bundle)
            .model("fake:model")
            .open()
            .unwrap();
        // raw both sides
        c.model_exchange(ModelExchange {
            request: Some(Body::raw(b"req".to_vec(), "application/json")),
            response: Some(Body::raw(b"data: x\n\n".to_vec(), "text/event-stream")),
            stream: true,
            ..ModelExchange::default()
        })
        .await
        .unwrap();
        // raw request, parsed response
        c.model_exchange(ModelExchange {
            request: Some(Body::raw(b"req2".to_vec(), "application/json")),
            response: Some(Body::parsed(json!({"text": "hi"}))),
            ..ModelExchange::default()
        })
        .await
        .unwrap();
        // a failed request, no bodies at all
        c.model_exchange(ModelExchange {
            error: Some("connection refused".into()),
            ..ModelExchange::default()
        })
        .await
        .unwrap();
        c.tool_call(
            ToolCallRecord::new("t", "1", json!({}))
                .succeeded("ok")
                .parsed(),
        )
        .await
        .unwrap();
        c.finish(RunStatus::Finished, Value::Null, None).unwrap();
    });
    assert_eq!(
        confidences(&bundle, "model_called"),
        [
            Confidence::Observed,
            Confidence::Parsed,
            Confidence::Observed
        ]
    );
    assert_eq!(confidences(&bundle, "tool_called"), [Confidence::Parsed]);
    let events = read_events(&bundle).unwrap();
    let models: Vec<_> = events
        .iter()
        .filter(|e| e.kind.as_str() == "model_called")
        .collect();
    // the empty model name was filled in from the declaration
    assert_eq!(models[0].payload["model"], "fake:model");
    // the raw bytes are stored verbatim, with their media type
    let resp: provrun_evidence::BlobRef =
        serde_json::from_value(models[0].payload["response"].clone()).unwrap();
    assert_eq!(resp.media_type, "text/event-stream");
    assert_eq!(read_blob(&bundle, &resp).unwrap(), b"data: x\n\n");
    // the parsed side is stored as canonical JSON
    let parsed: provrun_evidence::BlobRef =
        serde_json::from_value(models[1].payload["response"].clone()).unwrap();
    assert_eq!(read_blob(&bundle, &parsed).unwrap(), br#"{"text":"hi"}"#);
    assert_eq!(models[2].payload["request"], Value::Null);

    let report = verify(&bundle);
    assert!(report.ok && report.complete, "{report:?}");
    let parse = report.check(CheckCode::Parse).unwrap();
    assert!(
        parse.detail.contains("2 parsed"),
        "verify names the parsed events: {}",
        parse.detail
    );
}

#[test]
fn a_native_looking_bundle_keeps_the_plain_parse_detail() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    rt().block_on(async {
        let c = Capture::builder(&bundle).model("m").open().unwrap();
        c.model_exchange(ModelExchange {
            request: Some(Body::raw(b"r".to_vec(), "application/json")),
            ..ModelExchange::default()
        })
        .await
        .unwrap();
        c.finish(RunStatus::Finished, Value::Null, None).unwrap();
    });
    let report = verify(&bundle);
    assert!(report.ok, "{report:?}");
    let detail = &report.check(CheckCode::Parse).unwrap().detail;
    assert!(!detail.contains("parsed"), "{detail}");
}

#[test]
fn a_deferred_call_must_be_completed_before_the_run_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");
    let open = dir.path().join("open");
    rt().block_on(async {
        let c = Capture::builder(&done).model("m").open().unwrap();
        c.tool_deferred("approve_me", "c1", json!({"x": 1}))
            .await
            .unwrap();
        c.tool_call(
            ToolCallRecord::new("approve_me", "c1", json!({"x": 1}))
                .failed("denied by the user")
                .decided_by("approval")
                .took(Duration::from_millis(3)),
        )
        .await
        .unwrap();
        c.finish(RunStatus::Finished, Value::Null, None).unwrap();

        let c = Capture::builder(&open).model("m").open().unwrap();
        c.tool_deferred("approve_me", "c1", json!({}))
            .await
            .unwrap();
        c.finish(RunStatus::Finished, Value::Null, None).unwrap();
    });
    let report = verify(&done);
    assert!(report.ok && report.complete, "{report:?}");
    let calls = read_events(&done).unwrap();
    let last = calls
        .iter()
        .rfind(|e| e.kind.as_str() == "tool_called")
        .unwrap();
    assert_eq!(last.payload["ok"], false);
    assert_eq!(last.payload["decided_by"], "approval");
    assert_eq!(last.payload["duration_ms"], 3);

    let report = verify(&open);
    assert!(!report.ok);
    assert_eq!(
        report.check(CheckCode::ToolCalls).unwrap().status,
        CheckStatus::Fail
    );
}

#[test]
fn run_call_ids_link_a_deferral_and_the_flags_of_output_and_provider_calls_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    rt().block_on(async {
        let c = Capture::builder(&bundle).model("m").open().unwrap();
        // The model reuses the id `x` for two calls: the run's ids tell them apart.
        let waits = ToolCallRecord::new("approve_me", "x", json!({"n": 1}))
            .run_call_id("1.1")
            .mode("in_process");
        c.tool_call_deferred(waits.clone()).await.unwrap();
        c.tool_call(
            ToolCallRecord::new("other", "x", json!({}))
                .run_call_id("1.2")
                .succeeded("fine"),
        )
        .await
        .unwrap();
        c.tool_call(
            ToolCallRecord::new("web_search", "ws_1", json!({"query": "q"}))
                .run_call_id("1.p1")
                .provider_run()
                .succeeded("results"),
        )
        .await
        .unwrap();
        c.tool_call(waits.succeeded("approved and done"))
            .await
            .unwrap();
        c.tool_call(
            ToolCallRecord::new("final_result", "o", json!({"a": 1}))
                .run_call_id("2.1")
                .output_tool()
                .decided_by("runtime")
                .succeeded("accepted"),
        )
        .await
        .unwrap();
        c.finish(RunStatus::Finished, Value::Null, None).unwrap();
    });
    let report = verify(&bundle);
    assert!(report.ok && report.complete, "{report:?}");
    let calls: Vec<_> = read_events(&bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.as_str() == "tool_called")
        .collect();
    let field = |i: usize, k: &str| calls[i].payload[k].clone();
    assert_eq!(field(0, "deferred"), true);
    assert_eq!(field(0, "run_call_id"), "1.1");
    assert_eq!(field(0, "mode"), "in_process");
    assert_eq!(field(0, "result"), Value::Null);
    assert!(calls[0].payload.get("decided_by").is_none());
    assert_eq!(field(2, "provider_run"), true);
    assert_eq!(field(2, "decided_by"), "provider");
    assert_eq!(calls[2].confidence, Confidence::Parsed);
    assert_eq!(field(3, "run_call_id"), "1.1");
    assert_eq!(field(3, "deferred"), false);
    assert_eq!(field(3, "ok"), true);
    assert_eq!(field(4, "output_tool"), true);
    assert_eq!(calls[4].confidence, Confidence::Observed);
}

#[test]
fn inputs_are_staged_and_a_missing_one_leaves_no_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "hello").unwrap();
    let bundle = dir.path().join("b");
    let c = Capture::builder(&bundle)
        .model("m")
        .input(&input)
        .open()
        .unwrap();
    c.finish(RunStatus::Finished, Value::Null, None).unwrap();
    assert_eq!(
        std::fs::read(bundle.join("input/in.txt")).unwrap(),
        b"hello"
    );
    let staged: Vec<_> = read_events(&bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.as_str() == "input_staged")
        .collect();
    assert_eq!(staged.len(), 1);
    assert_eq!(staged[0].payload["path"], "in.txt");
    assert!(verify(&bundle).ok);

    let missing = dir.path().join("b2");
    let err = Capture::builder(&missing)
        .model("m")
        .input(dir.path().join("no-such-file"))
        .open()
        .unwrap_err();
    assert!(matches!(err, CaptureError::Input { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-file"), "{err}");
    assert!(!missing.exists(), "a failed open leaves nothing behind");
}

#[test]
fn outputs_cannot_escape_the_bundle_and_large_values_go_to_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    let big = "x".repeat(100_000);
    rt().block_on(async {
        let c = Capture::builder(&bundle).model("m").open().unwrap();
        for bad in ["../escape.txt", "a/../../escape.txt"] {
            let err = c.write_output(bad, b"no").unwrap_err();
            assert!(matches!(err, CaptureError::Sandbox(_)), "{bad}: {err:?}");
        }
        // Sandbox-style paths name outputs under /output; other absolute paths are refused.
        for other in ["/dir/ok.txt", "/input/x.txt", "/scratch/x.txt", "/output"] {
            let err = c.write_output(other, b"no").unwrap_err();
            assert!(
                matches!(err, CaptureError::NotAnOutput { .. }),
                "{other}: {err:?}"
            );
            assert!(err.to_string().contains(other), "{err}");
        }
        assert_eq!(c.write_output("/output/dir/ok.txt", b"yes").unwrap(), 3);
        assert_eq!(c.write_output("dir/rel.txt", b"rel").unwrap(), 3);
        c.tool_call(ToolCallRecord::new("t", "1", json!({"text": big})).succeeded(big.clone()))
            .await
            .unwrap();
        c.finish(RunStatus::Finished, Value::Null, None).unwrap();
    });
    assert!(!dir.path().join("escape.txt").exists());
    assert_eq!(
        std::fs::read(bundle.join("output/dir/ok.txt")).unwrap(),
        b"yes"
    );
    assert_eq!(
        std::fs::read(bundle.join("output/dir/rel.txt")).unwrap(),
        b"rel"
    );
    assert!(!bundle.join("output/output").exists());
    assert!(!bundle.join("output/input").exists());
    let call = read_events(&bundle)
        .unwrap()
        .into_iter()
        .find(|e| e.kind.as_str() == "tool_called")
        .unwrap();
    assert_eq!(call.payload["arguments"], Value::Null);
    assert!(call.payload["arguments_blob"].is_object());
    assert!(call.payload["result_blob"].is_object());
    let report = verify(&bundle);
    assert!(report.ok && report.complete, "{report:?}");
}

#[test]
fn only_model_tool_and_trace_events_can_be_recorded_as_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    let c = Capture::builder(&bundle).model("m").open().unwrap();
    let rec: &Recorder = c.recorder();
    let err = rec
        .record_parsed_async(&Declared {
            source: None,
            kind: "k".into(),
            data: Value::Null,
        })
        .wait()
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot be recorded as parsed"),
        "{err}"
    );
    rt().block_on(c.trace("x-format/1", b"[]", 0)).unwrap();
    c.finish(RunStatus::Finished, Value::Null, None).unwrap();
    assert_eq!(confidences(&bundle, "trace_imported"), [Confidence::Parsed]);
    assert!(verify(&bundle).ok);
}

#[test]
fn editing_a_parsed_event_to_claim_observed_breaks_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    rt().block_on(async {
        let c = Capture::builder(&bundle).model("m").open().unwrap();
        c.model_exchange(ModelExchange {
            response: Some(Body::parsed(json!({"t": 1}))),
            ..ModelExchange::default()
        })
        .await
        .unwrap();
        c.finish(RunStatus::Finished, Value::Null, None).unwrap();
    });
    let log = bundle.join("events.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(r#""confidence":"parsed""#));
    std::fs::write(
        &log,
        text.replace(r#""confidence":"parsed""#, r#""confidence":"observed""#),
    )
    .unwrap();
    assert!(!verify(&bundle).ok);
}
