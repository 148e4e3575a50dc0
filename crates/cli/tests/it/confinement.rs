//! Every command's confinement is on record: a `run_command` call's `tool_called` event
//! carries the mode, Landlock (ABI, status, unenforced rights), the seccomp filter's
//! digest, bubblewrap's version, the namespaces, the host uid and the limits; `show`
//! prints one line of it per command; `verify` fails a log (of this version) where a fact
//! or the whole record was removed and the chain re-computed, and still passes an older
//! log that never had them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::cli::command;

fn provrun(args: &[&str]) -> Output {
    command(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the provrun binary runs")
}

/// A run whose agent runs two commands and one manifest command tool (degraded mode
/// allowed, so it runs on any machine).
fn command_run(dir: &Path) -> PathBuf {
    std::fs::write(
        dir.join("agent.toml"),
        "name = \"cmd\"\nmodel = \"script:script.json\"\n\
         tools = [\"run_command\", \"word_count\"]\nallow_degraded_sandbox = true\n",
    )
    .unwrap();
    let tools = dir.join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(
        tools.join("wc.toml"),
        "[[tools]]\nname = \"word_count\"\ndescription = \"Count words.\"\n\
         mode = \"in_process\"\ncommand = [\"wc\", \"-w\"]\ncategory = \"read\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("script.json"),
        r#"[{"tool_calls": [
              {"id": "c1", "name": "run_command", "arguments": {"command": "echo hi"}},
              {"id": "c2", "name": "run_command", "arguments": {"command": "exit 3", "timeout_s": 5}},
              {"id": "c3", "name": "word_count", "arguments": {}}
            ]},
            {"text": "done"}]"#,
    )
    .unwrap();
    let bundle = dir.join("bundle");
    let agent = dir.join("agent.toml").display().to_string();
    let out = provrun(&[
        "run",
        &agent,
        "--tools-dir",
        &tools.display().to_string(),
        "--out",
        &bundle.display().to_string(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bundle
}

fn lines(bundle: &Path) -> Vec<Value> {
    std::fs::read_to_string(bundle.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Writes `events` back as the log, every `seq` and `prev` re-computed.
fn rechain(bundle: &Path, events: &[Value]) {
    let mut text = String::new();
    let mut prev: Option<String> = None;
    // The chain scheme the log's `run_started` declares (docs/evidence.md §2a).
    let chain = events
        .first()
        .map_or(1, |e| provrun_evidence::chain_of(&e["payload"]));
    for (i, e) in events.iter().enumerate() {
        let mut e = e.clone();
        e["seq"] = serde_json::json!(i);
        e["prev"] = prev.clone().map_or(Value::Null, Value::String);
        let line = provrun_evidence::to_canonical_string(&e).unwrap();
        prev = Some(provrun_evidence::line_hash_in(bundle, &line, chain).unwrap());
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(bundle.join("events.jsonl"), text).unwrap();
}

fn tool_calls_check(bundle: &Path) -> (String, String) {
    let out = provrun(&["verify", &bundle.display().to_string(), "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "tool-calls")
        .unwrap()
        .clone();
    (
        check["status"].as_str().unwrap().to_owned(),
        check["detail"].as_str().unwrap().to_owned(),
    )
}

const FACTS: &[&str] = &[
    "/mode",
    "/missing",
    "/landlock/status",
    "/landlock/abi",
    "/landlock/abi_wanted",
    "/landlock/unenforced",
    "/seccomp/applied",
    "/seccomp/filter_sha256",
    "/bubblewrap",
    "/namespaces",
    "/host_uid",
    "/limits/timeout_ms",
    "/limits/cpu_s",
    "/limits/memory_bytes",
    "/limits/processes",
    "/limits/process_limit",
    "/limits/file_size_bytes",
    "/limits/output_bytes",
    "/limits/quota_bytes",
    "/limits/quota_files",
];

// One long scenario: every check reads, or edits and re-verifies, the one bundle run here.
#[test]
fn every_command_event_carries_its_confinement_and_verify_requires_it() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = command_run(dir.path());
    let events = lines(&bundle);
    let sandbox = &events[0]["payload"]["details"]["sandbox"];
    assert_eq!(sandbox["command_records"], 1);
    assert_eq!(
        sandbox["command_tools"],
        serde_json::json!(["run_command", "word_count"])
    );
    let commands: Vec<(usize, &Value)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "tool_called")
        .collect();
    assert_eq!(commands.len(), 3);
    let uid = Command::new("id").arg("-u").output().unwrap();
    let uid: u64 = String::from_utf8_lossy(&uid.stdout).trim().parse().unwrap();
    // As root, commands run as the dedicated user (`[limits] command_uid`, 65536).
    let uid = if uid == 0 { 65536 } else { uid };
    assert_eq!(sandbox["command_user"]["uid"], uid, "{sandbox}");
    for (_, e) in &commands {
        let c = &e["payload"]["confinement"];
        for fact in FACTS {
            assert!(c.pointer(fact).is_some(), "{fact} missing: {c}");
        }
        assert_eq!(c["host_uid"], uid, "{c}");
        let mode = c["mode"].as_str().unwrap();
        let missing = c["missing"].as_array().unwrap();
        assert_eq!(mode == "full", missing.is_empty(), "{c}");
        assert_eq!(c["landlock"]["abi_wanted"], 6);
        assert_eq!(c["limits"]["output_bytes"], 65536);
        assert_eq!(c["limits"]["quota_bytes"], 268435456);
        if c["seccomp"]["applied"] == true {
            assert_eq!(c["seccomp"]["filter_sha256"].as_str().unwrap().len(), 64);
        }
        if c["bubblewrap"].is_string() {
            assert!(c["bubblewrap"].as_str().unwrap().starts_with("bubblewrap "));
            assert_eq!(c["namespaces"].as_array().unwrap().len(), 7);
        }
    }
    // The per-call timeout is the call's own.
    let timeout =
        |i: usize| commands[i].1["payload"]["confinement"]["limits"]["timeout_ms"].clone();
    assert_eq!(timeout(0), 30000);
    assert_eq!(timeout(1), 5000);
    assert_eq!(tool_calls_check(&bundle).0, "pass");

    // show: one line per command.
    let shown =
        String::from_utf8(provrun(&["show", &bundle.display().to_string()]).stdout).unwrap();
    let summaries: Vec<&str> = shown
        .lines()
        .filter(|l| l.trim_start().starts_with("sandbox "))
        .collect();
    assert_eq!(summaries.len(), 3, "{shown}");
    for s in summaries {
        assert!(
            s.contains("landlock ") && s.contains(" ABI ") && s.contains("uid "),
            "{s}"
        );
        assert!(s.contains(" ms, cpu "), "{s}");
    }

    // Each fact removed, the chain re-computed: verify's tool-calls check fails naming it.
    let (c1, _) = commands[0];
    for fact in FACTS {
        let mut edited = events.clone();
        let mut record = edited[c1]["payload"]["confinement"].clone();
        let (parent, key) = fact.rsplit_once('/').unwrap();
        let target = if parent.is_empty() {
            &mut record
        } else {
            record.pointer_mut(parent).unwrap()
        };
        target.as_object_mut().unwrap().remove(key).unwrap();
        edited[c1]["payload"]["confinement"] = record;
        rechain(&bundle, &edited);
        let (status, detail) = tool_calls_check(&bundle);
        assert_eq!(status, "fail", "{fact}: {detail}");
        let dotted = fact.trim_start_matches('/').replace('/', ".");
        assert!(detail.contains(&dotted), "{fact}: {detail}");
    }
    // The whole record removed, from run_command's event or the manifest tool's.
    for (at, _) in [commands[0], commands[2]] {
        let mut edited = events.clone();
        edited[at]["payload"]
            .as_object_mut()
            .unwrap()
            .remove("confinement");
        rechain(&bundle, &edited);
        let (status, detail) = tool_calls_check(&bundle);
        assert_eq!(status, "fail");
        assert!(
            detail.contains("without its confinement record"),
            "{detail}"
        );
    }

    // A log from before the marker (no `command_records`, no records) is not held to it.
    let mut older = events.clone();
    for (at, _) in &commands {
        older[*at]["payload"]
            .as_object_mut()
            .unwrap()
            .remove("confinement");
    }
    let sandbox = older[0]["payload"]["details"]["sandbox"]
        .as_object_mut()
        .unwrap();
    sandbox.remove("command_records");
    sandbox.remove("command_tools");
    rechain(&bundle, &older);
    assert_eq!(tool_calls_check(&bundle).0, "pass");
}

/// A manifest command tool sees the staged inputs read-only at `/input`, as `run_command`
/// does (and as an MCP stdio server does: tests/it/mcp_published.rs).
#[test]
fn a_manifest_command_tool_sees_the_staged_inputs_at_input_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let (dir, tools, inputs) = (dir.path(), dir.path().join("tools"), dir.path().join("in"));
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::write(inputs.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(
        tools.join("look.toml"),
        "[[tools]]\nname = \"look\"\ndescription = \"Read the inputs, then try to change one.\"\n\
         command = [\"/bin/sh\", \"-c\", \"ls /input; cat /input/a.txt; echo x > /input/a.txt || echo refused\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        "name = \"look\"\nmodel = \"script:script.json\"\ntools = [\"look\"]\n\
         allow_degraded_sandbox = true\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("script.json"),
        r#"[{"tool_calls": [{"id": "l", "name": "look", "arguments": {}}]}, {"text": "done"}]"#,
    )
    .unwrap();
    let bundle = dir.join("bundle");
    let out = provrun(&[
        "run",
        &dir.join("agent.toml").display().to_string(),
        "--tools-dir",
        &tools.display().to_string(),
        "--input",
        &inputs.display().to_string(),
        "--out",
        &bundle.display().to_string(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    let call: Value = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "tool_called")
        .unwrap();
    let result = call["payload"]["result"].as_str().unwrap();
    assert!(result.starts_with("a.txt\nalpha\n"), "{result}");
    assert!(result.contains("refused"), "{result}");
    assert_eq!(
        std::fs::read_to_string(bundle.join("input/a.txt")).unwrap(),
        "alpha\n"
    );
}
