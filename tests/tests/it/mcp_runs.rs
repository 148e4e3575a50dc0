//! Agents that use an MCP server's tools next to built-in ones, end to end: through the
//! `provrun` CLI (`run`, `verify`, `replay` — the replay answering from the recording with
//! the server gone) and through `Backend` (approval of a destructive MCP tool, a server
//! that crashes mid-run, a server whose schema is broken).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use provrun::agent::{AgentError, AgentSpec, Backend, Decision, RunControl, RunSpec, RunStatus};
use provrun::evidence::{Event, EventType, read_events, verify};
use provrun::mcp::McpError;
use provrun::model::ScriptModel;
use serde_json::{Value, json};

const SERVER: &str = env!("CARGO_BIN_EXE_mcp-test-server");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn cli(args: &[&str]) -> ExitCode {
    let mut all = vec!["provrun"];
    all.extend_from_slice(args);
    provrun_cli::main_with_args(all)
}

fn tool_calls(events: &[Event]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| &e.payload)
        .collect()
}

/// `examples/mcp` as a user runs it, with the server program copied next to the spec
/// (so it can be taken away before the replay).
// One scenario, as a user runs it: run, verify, take the server away, replay.
#[test]
fn the_mcp_example_runs_verifies_and_replays_from_the_recording_without_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mcp");
    std::fs::create_dir_all(&dir).unwrap();
    let server_copy = dir.join("mcp-test-server");
    std::fs::copy(SERVER, &server_copy).unwrap();
    let example = std::fs::read_to_string(root().join("examples/mcp/agent.toml")).unwrap();
    assert!(example.contains("command = \"../../target/debug/mcp-test-server\""));
    let spec = example
        .replace("../../target/debug/mcp-test-server", "mcp-test-server")
        .replace(
            "command = \"mcp-test-server\"",
            "command = \"./mcp-test-server\"",
        )
        + "allow_degraded_sandbox = true\n";
    // `allow_degraded_sandbox` must sit before the `[[mcp]]` table: put it at the top.
    let (head, tail) = spec.split_once("[[mcp]]").unwrap();
    let tail = tail.replace("allow_degraded_sandbox = true\n", "");
    let spec = format!("{head}allow_degraded_sandbox = true\n\n[[mcp]]{tail}");
    std::fs::write(dir.join("agent.toml"), spec).unwrap();
    std::fs::copy(
        root().join("examples/mcp/script.json"),
        dir.join("script.json"),
    )
    .unwrap();

    let bundle = tmp.path().join("bundle");
    let agent = dir.join("agent.toml");
    assert_eq!(
        cli(&[
            "run",
            agent.to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap()
        ]),
        ExitCode::SUCCESS
    );
    assert_eq!(
        cli(&["verify", bundle.to_str().unwrap()]),
        ExitCode::SUCCESS
    );
    let events = read_events(&bundle).unwrap();
    let started = &events[0].payload;
    let names: Vec<&str> = started["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "write_file",
            "demo_add",
            "demo_delete_note",
            "demo_echo",
            "demo_env",
            "demo_fail"
        ]
    );
    let mcp = &started["details"]["mcp"][0];
    assert_eq!(mcp["name"], "demo");
    assert_eq!(mcp["implementation"]["name"], "provrun-test-server");
    let add = mcp["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "demo_add")
        .unwrap();
    let listed = started["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "demo_add")
        .unwrap();
    assert_eq!(
        add["schema_sha256"], listed["schema_sha256"],
        "one digest, two places"
    );
    assert_eq!(add["remote_name"], "add");

    let calls = tool_calls(&events);
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0]["name"], "demo_add");
    assert_eq!(calls[0]["mode"], "remote_mcp");
    assert_eq!(calls[0]["result"], "42");
    assert_eq!(calls[0]["ok"], true);
    assert_eq!(calls[0]["mcp"]["tool"], "add");
    assert_eq!(calls[0]["mcp"]["server"]["transport"], "stdio");
    assert_eq!(calls[0]["mcp"]["claims"]["confidence"], "parsed");
    assert_eq!(calls[0]["mcp"]["claims"]["structured_content"]["sum"], 42.0);
    assert_eq!(calls[1]["result"], "echo: provenance");
    assert!(
        calls[2].get("mcp").is_none(),
        "a built-in tool has no mcp details"
    );
    let answer = std::fs::read_to_string(bundle.join("output/answer.md")).unwrap();
    assert!(answer.contains("= 42"));

    // The stdio server's process trail: the server itself, hashed as what ran, still
    // running when the run ended, and the trail's summary saying so.
    let procs: Vec<&Value> = events
        .iter()
        .filter(|e| e.kind == EventType::ProcessRan)
        .map(|e| &e.payload)
        .collect();
    let server = procs
        .iter()
        .find(|p| p["parent"].is_null())
        .unwrap_or_else(|| panic!("{procs:#?}"));
    assert_eq!(
        server["owner"],
        json!({"kind": "mcp_server", "server": "demo"})
    );
    assert!(server["exe"].as_str().unwrap().ends_with("mcp-test-server"));
    assert_eq!(
        server["exe_sha256"],
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
            std::fs::read(&server_copy).unwrap()
        ))
    );
    assert!(server["ended"].is_null(), "the server outlives the run");
    let trail = events
        .iter()
        .find(|e| e.kind == EventType::TrailRecorded)
        .unwrap();
    assert_eq!(trail.payload["owner"]["server"], "demo");
    assert_eq!(trail.payload["complete"], false);
    assert!(trail.payload["processes"].as_u64().unwrap() >= 1);

    // The server is gone: a new run cannot start, but the replay answers from the
    // recording and matches.
    std::fs::remove_file(&server_copy).unwrap();
    let again = tmp.path().join("again");
    assert_eq!(
        cli(&[
            "run",
            agent.to_str().unwrap(),
            "--out",
            again.to_str().unwrap()
        ]),
        ExitCode::from(2),
        "no server, no run"
    );
    assert!(!again.exists(), "a run that could not start leaves nothing");
    let replayed = tmp.path().join("replayed");
    assert_eq!(
        cli(&[
            "replay",
            bundle.to_str().unwrap(),
            "--out",
            replayed.to_str().unwrap()
        ]),
        ExitCode::SUCCESS
    );
    let new_events = read_events(&replayed).unwrap();
    let new_calls = tool_calls(&new_events);
    assert_eq!(new_calls[0]["result"], "42");
    assert_eq!(new_calls[0]["mcp"]["replayed"], true);
    // What decided the replayed result is said: the recording, not the server.
    assert_eq!(new_calls[0]["mcp"]["answered_by"], "recording");
    assert!(verify(&replayed).ok);
}

fn agent_with(server_args: &[&str], extra: &str) -> AgentSpec {
    let args: Vec<String> = server_args.iter().map(|a| format!("\"{a}\"")).collect();
    AgentSpec::from_toml_str(
        &format!(
            "name = \"t\"\nmodel = \"test\"\ntools = [\"list_dir\"]\nallow_degraded_sandbox = true\n{extra}\n\
             [[mcp]]\nname = \"srv\"\ncommand = \"{SERVER}\"\nargs = [{}]\ntimeout_s = 20\n",
            args.join(", ")
        ),
        None,
    )
    .unwrap()
}

fn backend(script: Value) -> Backend {
    Backend::new().with_model(Arc::new(ScriptModel::from_value(&script).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destructive_mcp_tool_waits_for_approval_and_runs_when_resumed() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    let agent = agent_with(&[], "approve = \"destructive\"");
    let script = json!([
        {"tool_calls": [
            {"id": "read", "name": "srv_echo", "arguments": {"text": "a"}},
            {"id": "del", "name": "srv_delete_note", "arguments": {"name": "old"}}
        ]},
        {"text": "done"}
    ]);
    let run = RunSpec::new("go", &bundle);
    let b = backend(script);
    let paused = b.execute(&RunControl::new(), &agent, &run).await.unwrap();
    assert_eq!(paused.status(), RunStatus::Paused);
    assert_eq!(paused.deferred().len(), 1, "only the destructive one waits");
    assert_eq!(paused.deferred()[0].name, "srv_delete_note");

    let resumed = b
        .resume(
            &RunControl::new(),
            &bundle,
            &[Decision::Approve("del".into())],
        )
        .await
        .unwrap();
    assert_eq!(
        resumed.status(),
        RunStatus::Finished,
        "{:?}",
        resumed.error()
    );
    let events = read_events(&bundle).unwrap();
    let del: Vec<&Value> = tool_calls(&events)
        .into_iter()
        .filter(|p| p["call_id"] == "del")
        .collect();
    assert_eq!(del.len(), 2, "deferred, then completed");
    assert_eq!(del[0]["deferred"], true);
    assert_eq!(del[1]["result"], "deleted old");
    assert_eq!(
        del[1]["mcp"]["claims"]["annotations"]["destructiveHint"],
        true
    );
    assert!(verify(&bundle).ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_mid_run_fails_the_call_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    let agent = agent_with(&["--mode", "crash"], "");
    let script = json!([
        {"tool_calls": [{"id": "c1", "name": "srv_echo", "arguments": {"text": "a"}}]},
        {"tool_calls": [{"id": "c2", "name": "srv_echo", "arguments": {"text": "b"}}]},
        {"text": "the server is gone"}
    ]);
    let result = backend(script)
        .execute(&RunControl::new(), &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished);
    let events = read_events(&bundle).unwrap();
    let calls = tool_calls(&events);
    assert_eq!(calls.len(), 2, "each call has its one event");
    for c in &calls {
        assert_eq!(c["ok"], false);
        assert_eq!(c["mode"], "remote_mcp");
        assert!(c["mcp"]["error"].is_string(), "{c}");
    }
    assert!(
        calls[0]["result"]
            .as_str()
            .unwrap()
            .contains("crashing in the middle of a call"),
        "{}",
        calls[0]["result"]
    );
    assert!(verify(&bundle).ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_schema_or_a_name_clash_stops_the_run_before_it_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    let agent = agent_with(&["--mode", "bad-schema"], "");
    let failure = backend(json!([{"text": "x"}]))
        .execute(&RunControl::new(), &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap_err();
    let err = failure.to_string();
    assert!(
        err.contains("`broken`") && err.contains("invalid input schema"),
        "{err}"
    );
    // The MCP client's own error travels as the typed source, not only as text.
    match &failure {
        AgentError::McpServer(McpError::InvalidSchema { tool, .. }) => assert_eq!(tool, "broken"),
        other => panic!("expected the MCP client's InvalidSchema, got {other:?}"),
    }
    let source = std::error::Error::source(&failure).expect("the MCP error is the source");
    assert!(source.downcast_ref::<McpError>().is_some(), "{source:?}");
    assert!(!bundle.exists(), "nothing written");

    // prefix = "" exposes `echo` etc. as they are; a tool named like a built-in clashes.
    let mut agent = agent_with(&[], "");
    agent.tools = vec!["list_dir".into()];
    agent.mcp[0].prefix = Some(String::new());
    agent.mcp[0].tools = Some(vec!["echo".into()]);
    let ok = backend(json!([{"text": "x"}]))
        .execute(&RunControl::new(), &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap();
    assert_eq!(ok.status(), RunStatus::Finished);
    let mut registry = provrun::tools::ToolRegistry::linked();
    registry.add(
        provrun::tools::Tool::builder("echo", "A local echo.")
            .sync_handler(false, |_, _| provrun::tools::ToolOutput::succeed("local"))
            .build()
            .unwrap(),
    );
    agent.tools = vec!["echo".into()];
    let err = backend(json!([{"text": "x"}]))
        .with_registry(registry)
        .execute(
            &RunControl::new(),
            &agent,
            &RunSpec::new("go", tmp.path().join("c")),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`echo`") && err.contains("different `prefix`"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_mcp_details_go_to_a_blob_and_replay_from_it() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    let agent = agent_with(&[], "");
    let long = "x".repeat(40_000);
    let script = json!([
        {"tool_calls": [{"id": "big", "name": "srv_echo", "arguments": {"text": long}}]},
        {"text": "done"}
    ]);
    let result = backend(script)
        .execute(&RunControl::new(), &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished);
    let events = read_events(&bundle).unwrap();
    let call = tool_calls(&events)[0].clone();
    assert!(call["mcp"].is_null(), "too large to inline");
    assert!(call["mcp_blob"]["digest"]["sha256"].is_string(), "{call}");
    assert!(verify(&bundle).ok, "the blob is referenced and matches");

    // The replay reads the details back from the blob.
    let out = tmp.path().join("replayed");
    let report = provrun::agent::replay(&Backend::new(), &RunControl::new(), &bundle, &out)
        .await
        .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
    let replayed = read_events(&out).unwrap();
    let call = tool_calls(&replayed)[0].clone();
    assert!(
        call["mcp"].is_null() && call["mcp_blob"].is_object(),
        "{call}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_declared_in_a_tools_folder_is_used_by_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("tools");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("servers.toml"),
        format!("[[mcp]]\nname = \"shared\"\ncommand = \"{SERVER}\"\nprefix = \"s\"\n"),
    )
    .unwrap();
    let mut registry = provrun::tools::ToolRegistry::linked();
    assert_eq!(
        registry.load_folder(&folder).unwrap(),
        0,
        "servers, no tools"
    );
    assert!(registry.mcp_server("shared").is_some());

    let agent = AgentSpec::from_toml_str(
        "name = \"t\"\nmodel = \"test\"\nallow_degraded_sandbox = true\n\
         [[mcp]]\nname = \"shared\"\ntools = [\"echo\"]\n",
        None,
    )
    .unwrap();
    let script = json!([
        {"tool_calls": [{"id": "e", "name": "s_echo", "arguments": {"text": "via folder"}}]},
        {"text": "done"}
    ]);
    let bundle = tmp.path().join("b");
    let result = backend(script)
        .with_registry(registry)
        .execute(&RunControl::new(), &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished);
    let events = read_events(&bundle).unwrap();
    let tools: Vec<&str> = events[0].payload["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["s_echo"], "the agent's own `tools` filter applies");
    assert_eq!(tool_calls(&events)[0]["result"], "echo: via folder");

    // Without the folder, the bare name is a clear start-up error.
    let err = backend(json!([{"text": "x"}]))
        .execute(
            &RunControl::new(),
            &agent,
            &RunSpec::new("go", tmp.path().join("c")),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no tools folder declares it"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_does_not_wait_for_a_hung_server() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    let agent = agent_with(&["--mode", "hang"], "");
    let script = json!([
        {"tool_calls": [{"id": "h", "name": "srv_echo", "arguments": {"text": "a"}}]},
        {"text": "never reached"}
    ]);
    let control = RunControl::new();
    let mut events = control.subscribe();
    let canceller = control.clone();
    // Cancel as soon as the call to the hung server begins (tool_timeout_s is 300 s).
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            if matches!(e, provrun::agent::RunEvent::CallBegin { .. }) {
                canceller.cancel();
            }
        }
    });
    let result = backend(script)
        .execute(&control, &agent, &RunSpec::new("go", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Cancelled);
    let events = read_events(&bundle).unwrap();
    let calls = tool_calls(&events);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["ok"], false);
    assert!(
        calls[0]["result"]
            .as_str()
            .unwrap()
            .starts_with("cancelled")
    );
    assert!(verify(&bundle).ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mcp_tools_overlap_and_the_others_run_alone_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    let agent = agent_with(&[], "");
    // echo and add say readOnlyHint; delete_note does not; list_dir is a built-in read.
    let script = json!([
        {"tool_calls": [
            {"id": "e1", "name": "srv_echo", "arguments": {"text": "a"}},
            {"id": "a1", "name": "srv_add", "arguments": {"a": 1, "b": 2}},
            {"id": "l1", "name": "list_dir", "arguments": {"path": "/output"}},
            {"id": "d1", "name": "srv_delete_note", "arguments": {"name": "old"}},
            {"id": "e2", "name": "srv_echo", "arguments": {"text": "b"}}
        ]},
        {"text": "done"}
    ]);
    let run = RunSpec::new("go", &bundle);
    let r = backend(script)
        .execute(&RunControl::new(), &agent, &run)
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished, "{:?}", r.error());
    let events = read_events(&bundle).unwrap();
    let span = |id: &str| {
        let p = tool_calls(&events)
            .into_iter()
            .find(|p| p["call_id"] == id)
            .unwrap();
        (
            p["start_order"].as_u64().unwrap(),
            p["end_order"].as_u64().unwrap(),
        )
    };
    let reads = [span("e1"), span("a1"), span("l1")];
    let last_start = reads.iter().map(|r| r.0).max().unwrap();
    let first_end = reads.iter().map(|r| r.1).min().unwrap();
    assert!(
        last_start < first_end,
        "the three reads ran together: {reads:?}"
    );
    let last_read_end = reads.iter().map(|r| r.1).max().unwrap();
    assert!(
        last_read_end < span("d1").0,
        "delete_note waited for the reads"
    );
    assert!(
        span("d1").1 < span("e2").0,
        "the echo after it waited for it"
    );
    assert!(verify(&bundle).ok);
    let again = tmp.path().join("again");
    let report = provrun::agent::replay(&Backend::new(), &RunControl::new(), &bundle, &again)
        .await
        .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
}
