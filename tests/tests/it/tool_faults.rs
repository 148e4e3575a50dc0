//! Tool faults end to end: tools that panic (sync and async), hang past the per-call
//! timeout (sync and async), return a result far over the size cap, or produce text from
//! invalid UTF-8. The run survives each, records each as a `tool_called` event, and its
//! bundle verifies.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use provrun::agent::consts::MAX_TOOL_RESULT_BYTES;
use provrun::agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun::evidence::{BlobRef, EventType, read_blob, read_events, verify};
use provrun::model::ScriptModel;
use provrun::tool;
use serde_json::{Value, json};

/// Panics at once.
#[tool]
fn fault_panic_sync() -> String {
    panic!("sync tool exploded")
}

/// Panics after an await.
#[tool]
async fn fault_panic_async() -> String {
    tokio::task::yield_now().await;
    panic!("async tool exploded")
}

/// Never returns in time (async).
#[tool]
async fn fault_hang_async() -> String {
    tokio::time::sleep(Duration::from_secs(120)).await;
    "too late".to_string()
}

/// Blocks its thread past the timeout (sync).
#[tool]
fn fault_hang_sync() -> String {
    std::thread::sleep(Duration::from_secs(6));
    "too late".to_string()
}

/// Returns `mib` MiB of text.
#[tool]
fn fault_huge(
    /// Size in MiB.
    mib: u32,
) -> String {
    "0123456789abcdef".repeat(mib as usize * 65536)
}

/// Decodes bytes that are not UTF-8, lossily.
#[tool]
fn fault_bad_utf8() -> String {
    String::from_utf8_lossy(b"ok \xff\xfe bytes \xc3\x28 end").into_owned()
}

struct Call {
    name: String,
    ok: bool,
    result: String,
}

fn calls(bundle: &Path) -> Vec<Call> {
    read_events(bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| {
            let p = &e.payload;
            // The result is inline, or (when large) a JSON blob named by `result_blob`.
            let value = if p["result_blob"].is_object() {
                let blob: BlobRef = serde_json::from_value(p["result_blob"].clone()).unwrap();
                serde_json::from_slice(&read_blob(bundle, &blob).unwrap()).unwrap()
            } else {
                p["result"].clone()
            };
            let result = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            Call {
                name: p["name"].as_str().unwrap().to_string(),
                ok: p["ok"] == true,
                result,
            }
        })
        .collect()
}

// One run holds every fault, so its one bundle is read back fault by fault.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_survives_every_tool_fault_and_records_each() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("binary.dat"), b"head \x00\xff\xfe\xfd tail").unwrap();
    let bundle = dir.path().join("bundle");
    let mut agent = AgentSpec::new("tool-faults", "test");
    agent.tools = [
        "fault_panic_sync",
        "fault_panic_async",
        "fault_hang_async",
        "fault_hang_sync",
        "fault_huge",
        "fault_bad_utf8",
        "read_file",
    ]
    .map(String::from)
    .to_vec();
    agent.tool_timeout_s = 1;
    let model = ScriptModel::from_value(&json!([
        {"tool_calls": [
            {"id": "p1", "name": "fault_panic_sync", "arguments": {}},
            {"id": "p2", "name": "fault_panic_async", "arguments": {}},
            {"id": "h1", "name": "fault_hang_async", "arguments": {}},
            {"id": "h2", "name": "fault_hang_sync", "arguments": {}}
        ]},
        {"tool_calls": [
            {"id": "b1", "name": "fault_huge", "arguments": {"mib": 3}},
            {"id": "u1", "name": "fault_bad_utf8", "arguments": {}},
            {"id": "u2", "name": "read_file", "arguments": {"path": "/input/binary.dat"}}
        ]},
        {"text": "survived"}
    ]))
    .unwrap();
    let started = Instant::now();
    let r = Backend::new()
        .with_model(Arc::new(model))
        .execute(
            &RunControl::new(),
            &agent,
            &RunSpec::new("Break things.", &bundle).input(&input),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished, "{:?}", r.error());
    assert_eq!(r.output(), "survived");
    // Bounded by the 1 s timeout, not by the 120 s / 6 s tools.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.usage.tool_calls, 7);

    let c = calls(&bundle);
    let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fault_panic_sync",
            "fault_panic_async",
            "fault_hang_async",
            "fault_hang_sync",
            "fault_huge",
            "fault_bad_utf8",
            "read_file"
        ]
    );
    assert!(
        !c[0].ok && c[0].result.contains("sync tool exploded"),
        "{}",
        c[0].result
    );
    assert!(
        !c[1].ok && c[1].result.contains("async tool exploded"),
        "{}",
        c[1].result
    );
    for hang in &c[2..4] {
        assert!(!hang.ok, "{}", hang.name);
        assert!(
            hang.result.contains("timed out after 1 s"),
            "{}",
            hang.result
        );
    }
    // 3 MiB cut to the cap, with a note saying how much there was.
    let huge = &c[4];
    assert!(huge.ok);
    assert!(
        huge.result.len() < MAX_TOOL_RESULT_BYTES + 200,
        "{}",
        huge.result.len()
    );
    assert!(
        huge.result.ends_with(&format!(
            "[result cut: {MAX_TOOL_RESULT_BYTES} of {} bytes shown]",
            3 << 20
        )),
        "{}",
        &huge.result[huge.result.len() - 80..]
    );
    assert!(
        c[5].ok && c[5].result.contains('\u{FFFD}'),
        "{}",
        c[5].result
    );
    // A binary file is described (size, digest), not shown as escapes.
    assert!(
        c[6].ok && c[6].result.contains("binary content"),
        "{}",
        c[6].result
    );
    assert!(
        c[6].result.contains("bytes 0..14 of 14, sha256 "),
        "{}",
        c[6].result
    );
    assert!(!c[6].result.contains("tail"), "{}", c[6].result);

    let report = verify(&bundle);
    assert!(
        report.ok && report.complete,
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_does_not_poison_the_next_run() {
    // The same tools in a second run on the same runtime work as before.
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let bundle = dir.path().join(format!("b{round}"));
        let mut agent = AgentSpec::new("again", "test");
        agent.tools = vec!["fault_panic_sync".into(), "fault_bad_utf8".into()];
        let model = ScriptModel::from_value(&json!([
            {"tool_calls": [
                {"id": "p", "name": "fault_panic_sync", "arguments": {}},
                {"id": "u", "name": "fault_bad_utf8", "arguments": {}}
            ]},
            {"text": "ok"}
        ]))
        .unwrap();
        let r = Backend::new()
            .with_model(Arc::new(model))
            .execute(&RunControl::new(), &agent, &RunSpec::new("go", &bundle))
            .await
            .unwrap();
        assert_eq!(r.status(), RunStatus::Finished);
        let c = calls(&bundle);
        assert_eq!((c[0].ok, c[1].ok), (false, true));
        assert!(verify(&bundle).ok);
    }
}

/// Whether this machine can run confined commands; under `CI=true` it must.
fn commands_ready() -> bool {
    let support = provrun::sandbox::Sandbox::command_support();
    if support.is_complete() {
        return true;
    }
    let why = support.missing_summary();
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("CI must run the command tool faults for real, but this machine lacks: {why}");
    }
    eprintln!(
        "\n**********************************************************************\n\
         **  WARNING: COMMAND TOOL FAULTS SKIPPED: this machine lacks: {why}\n\
         **********************************************************************\n"
    );
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_tools_that_print_invalid_utf8_are_recorded_with_a_note() {
    if !commands_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A manifest command tool and `run_command`, each printing two invalid sequences
    // (\377 and a lone \303) between valid text; the manifest one also on stderr, then fails.
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(
        tools.join("bytes.toml"),
        r#"
        [[tools]]
        name = "emit_bytes"
        description = "Prints bytes that are not UTF-8."
        command = ["sh", "-c", 'cat >/dev/null; printf "ok \377 mid \303( end"']

        [[tools]]
        name = "emit_bytes_and_fail"
        description = "Prints bytes that are not UTF-8 to stderr, then fails."
        command = ["sh", "-c", 'printf "bad \376" >&2; exit 3']
        "#,
    )
    .unwrap();
    let registry = provrun::tools::ToolRegistry::new([tools.as_path()]).unwrap();
    let bundle = dir.path().join("bundle");
    let mut agent = AgentSpec::new("bytes", "test");
    agent.tools = ["emit_bytes", "emit_bytes_and_fail", "run_command"]
        .map(String::from)
        .to_vec();
    let model = ScriptModel::from_value(&json!([
        {"tool_calls": [
            {"id": "m1", "name": "emit_bytes", "arguments": {}},
            {"id": "m2", "name": "emit_bytes_and_fail", "arguments": {}},
            {"id": "r1", "name": "run_command",
             "arguments": {"command": "printf 'x \\377\\376 y\\n'; printf '\\351' >&2"}}
        ]},
        {"text": "survived"}
    ]))
    .unwrap();
    let r = Backend::new()
        .with_model(Arc::new(model))
        .with_registry(registry)
        .execute(
            &RunControl::new(),
            &agent,
            &RunSpec::new("Print bytes.", &bundle),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished, "{:?}", r.error());
    assert_eq!(r.output(), "survived");

    let c = calls(&bundle);
    let by_name = |n: &str| c.iter().find(|c| c.name == n).unwrap();
    // The manifest tool's stdout is its result: decoded with U+FFFD, and a note on its
    // own line says so, so the text never passes for the program's exact bytes.
    let m1 = by_name("emit_bytes");
    assert!(m1.ok, "{}", m1.result);
    assert_eq!(
        m1.result,
        "ok \u{FFFD} mid \u{FFFD}( end\n\
         [stdout: 2 byte sequences that are not UTF-8 shown as U+FFFD]"
    );
    // A failing one reports both streams, with the same note for stderr.
    let m2 = by_name("emit_bytes_and_fail");
    assert!(!m2.ok, "{}", m2.result);
    assert!(m2.result.starts_with("exit code 3"), "{}", m2.result);
    assert!(
        m2.result.contains("--- stderr ---\nbad \u{FFFD}\n[stderr: 1 byte sequence that is not UTF-8 shown as U+FFFD]"),
        "{}",
        m2.result
    );
    // run_command renders both streams, each with its note.
    let r1 = by_name("run_command");
    assert!(r1.ok, "{}", r1.result);
    assert!(
        r1.result.contains(
            "--- stdout ---\nx \u{FFFD}\u{FFFD} y\n[stdout: 2 byte sequences that are not UTF-8 shown as U+FFFD]"
        ),
        "{}",
        r1.result
    );
    assert!(
        r1.result.contains(
            "--- stderr ---\n\u{FFFD}\n[stderr: 1 byte sequence that is not UTF-8 shown as U+FFFD]"
        ),
        "{}",
        r1.result
    );

    let report = verify(&bundle);
    assert!(
        report.ok && report.complete,
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
}
