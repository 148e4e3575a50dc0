//! `provrun wrap` around the real programs, installed from the npm registry at pinned
//! versions by `cargo xtask ci` into a cache outside the clone (`@openai/codex` and
//! `@anthropic-ai/claude-code` ship their binaries inside the package and run offline):
//! each does a plain answer and a task with tool calls (read an input, write a file in the
//! workspace, dump its environment) against a loopback upstream answering in its wire
//! format. The bundle verifies; every upstream exchange is one `model_called` with the
//! very bytes; the imported session's tool calls are the ones the program ran, linked to
//! the response that asked for them; the outputs hold the written file; the real key went
//! upstream and is nowhere in the program's environment or the bundle.
//!
//! Without the programs (or without every confinement layer) the tests skip loudly,
//! except under `CI=true`, where they fail.

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::cli::s;
use crate::support::upstream::{
    Reply, Request, Upstream, messages_stream, responses_call, responses_message, responses_stream,
};
use crate::support::wrap::{
    assert_exchanges_match, assert_no_secret, assert_show_json_links, assert_verifies, npm_package,
    of_kind, provrun, wrap_ready,
};

/// The pinned versions (the same as xtask/src/setup.rs installs; a test below checks).
pub(crate) const CODEX: (&str, &str) = ("@openai/codex", "0.171.0");
/// See [`CODEX`].
pub(crate) const CLAUDE_CODE: (&str, &str) = ("@anthropic-ai/claude-code", "2.1.332");

const OPENAI_KEY: &str = "sk-test-REAL-codex-key-9f8e7d6c5b4a";
const ANTHROPIC_KEY: &str = "sk-ant-test-REAL-claude-key-1a2b3c4d";
pub(crate) const NOTES: &str = "remember the milk\n";
pub(crate) const TASK: &str = "tr a-z A-Z < /input/notes.txt > answer.txt && env > env.txt";

/// The cache folder of a package, as xtask names it.
pub(crate) fn folder((package, version): (&str, &str)) -> String {
    let name = package.rsplit('/').next().unwrap_or(package);
    format!("{name}-{version}")
}

/// The Codex CLI's recipe (docs/wrap.md): a provider whose base URL is `$OPENAI_BASE_URL`
/// (Codex takes its endpoint from its configuration, not from the variable), run through
/// a shell so the variable is read inside the sandbox, the program's path as the shell's
/// `$0`. `codex exec` with its own sandbox off: provrun confines it.
pub(crate) fn codex_command(prefix: &Path, prompt: &str) -> Vec<String> {
    let script = format!(
        "exec \"$0\" exec --skip-git-repo-check --sandbox danger-full-access \
         -c \"model_providers.wrap={{name=\\\"wrap\\\",base_url=\\\"$OPENAI_BASE_URL\\\",env_key=\\\"OPENAI_API_KEY\\\",wire_api=\\\"responses\\\"}}\" \
         -c model_provider=wrap -m gpt-test '{prompt}'"
    );
    vec![
        "sh".into(),
        "-c".into(),
        script,
        s(&prefix.join("node_modules/.bin/codex")),
    ]
}

/// The upstream's script for Codex: the task's prompt gets one `exec_command` call, then
/// (with its output in the input) the answer; any other prompt a plain answer.
pub(crate) fn codex_upstream(req: &Request) -> Reply {
    let body = req.json();
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let answered = input.iter().any(|i| i["type"] == "function_call_output");
    let asks_task = body.to_string().contains("uppercase the notes");
    if asks_task && !answered {
        let call = responses_call("call_task_1", "exec_command", &json!({"cmd": TASK}));
        return responses_stream("gpt-test", "resp_1", call);
    }
    let text = if asks_task {
        "answer.txt holds the notes in capitals."
    } else {
        "Hello from the loopback upstream."
    };
    responses_stream("gpt-test", "resp_2", responses_message(text))
}

struct Ran {
    bundle: std::path::PathBuf,
    stdout: String,
    _tmp: tempfile::TempDir,
}

/// Runs `argv` wrapped, with `key_var` set to `key`, the installation at `prefix`
/// readable, the notes as input and `upstream_flag` pointing at `upstream`.
fn run_wrapped(
    prefix: &Path,
    argv: &[String],
    (key_var, key): (&str, &str),
    (upstream_flag, upstream_url): (&str, String),
    extra_env: &[(&str, &str)],
) -> Ran {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let notes = tmp.path().join("notes.txt");
    std::fs::write(&notes, NOTES).unwrap();
    let mut cmd = provrun();
    cmd.env(key_var, key)
        .env("HOME", tmp.path())
        .args(["wrap", "--out", &s(&bundle), "--input", &s(&notes)])
        .args(["--read-only", &s(prefix)])
        .args([upstream_flag, &upstream_url, "--"])
        .args(argv)
        .stdin(Stdio::null());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_verifies(&bundle);
    Ran {
        bundle,
        stdout,
        _tmp: tmp,
    }
}

/// The imported session: one `trace_imported` of `format`, and its `parsed` tool calls.
fn imported_calls(bundle: &Path, format: &str) -> Vec<Value> {
    let traces = of_kind(bundle, "trace_imported");
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert_eq!(traces[0]["payload"]["format"], format);
    assert_eq!(traces[0]["confidence"], "parsed");
    of_kind(bundle, "tool_called")
        .into_iter()
        .map(|e| {
            assert_eq!(e["confidence"], "parsed");
            e["payload"].clone()
        })
        .collect()
}

/// The shell command the upstream asked for (`call_id`, running `command`) ran as an
/// observed process of the program's trail, hashed, and the session log's claim of it is
/// matched to that process; the call and its result were seen on the wire; `verify`'s
/// `claims` check does not name it.
pub(crate) fn assert_command_observed(bundle: &Path, call_id: &str, command: &str) {
    let out = provrun()
        .args(["show", "--json"])
        .arg(bundle)
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let procs = shown["processes"].as_array().unwrap();
    let ran = procs
        .iter()
        .find(|p| {
            p["belongs_to"]["kind"] == "program"
                && p["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a.as_str().unwrap_or("").contains(command))
        })
        .unwrap_or_else(|| panic!("no observed process ran `{command}`: {procs:#?}"));
    assert_eq!(ran["exe_sha256"].as_str().map(str::len), Some(64), "{ran}");
    let claims = &shown["claims"];
    assert_eq!(claims["traced"], true, "{claims:#}");
    assert!(
        claims["unobserved"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["call_id"] != call_id),
        "the claim of {call_id} is unobserved: {claims:#}"
    );
    let matched = claims["matched"].as_array().unwrap();
    let process =
        matched
            .iter()
            .find(|m| {
                let key = m["call"].as_str().unwrap_or("");
                key == call_id
                    || shown["steps"].as_array().unwrap().iter().any(|s| {
                        s["calls"].as_array().unwrap().iter().any(|c| {
                            c["call_id"] == call_id && c["run_call_id"].as_str() == Some(key)
                        })
                    })
            })
            .unwrap_or_else(|| panic!("{call_id} is not matched: {claims:#}"))["process"]
            .as_u64()
            .unwrap();
    // The matched process is the command's, or the shell above it.
    let mut id = ran["id"].as_u64();
    let mut chain = Vec::new();
    while let Some(i) = id {
        chain.push(i);
        id = procs
            .iter()
            .find(|p| p["id"] == i)
            .and_then(|p| p["parent"].as_u64());
    }
    assert!(chain.contains(&process), "{process} is not above {ran}");
    let seen = shown["tool_calls_seen"].as_array().unwrap();
    let call = seen
        .iter()
        .find(|c| c["call_id"] == call_id)
        .unwrap_or_else(|| panic!("{call_id} was not seen on the wire: {seen:#?}"));
    assert!(call["answered_in"].as_u64().is_some(), "{call}");
    assert!(
        shown["usage"]["tool_calls"].as_u64().unwrap() >= 1,
        "{}",
        shown["usage"]
    );
    let verify = provrun()
        .args(["verify", "--json"])
        .arg(bundle)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "claims")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert!(
        !check["detail"].as_str().unwrap().contains(call_id),
        "{check}"
    );
}

/// What the task left: the file it wrote, and an environment without the real key.
fn assert_task_outputs(bundle: &Path, key: &str, key_var: &str, placeholder: &str) {
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/answer.txt")).unwrap(),
        NOTES.to_uppercase()
    );
    let env = std::fs::read_to_string(bundle.join("output/env.txt")).unwrap();
    assert!(env.contains(&format!("{key_var}={placeholder}\n")), "{env}");
    assert!(
        !env.contains(key),
        "the program's environment holds the key"
    );
    assert_no_secret(bundle, key);
}

#[test]
fn codex_answers_and_runs_a_tool_wrapped() {
    const TEST: &str = "codex_answers_and_runs_a_tool_wrapped";
    if !wrap_ready(TEST) {
        return;
    }
    let Some(installed) = npm_package(TEST, &folder(CODEX), "codex") else {
        return;
    };
    // Named through a link, as `~/codex` often is: the sandbox shows both paths.
    let links = tempfile::tempdir().unwrap();
    let prefix = links.path().join("codex");
    std::os::unix::fs::symlink(&installed, &prefix).unwrap();
    // A plain answer.
    let upstream = Upstream::start(codex_upstream);
    let flag = ("--upstream-openai", format!("{}/v1", upstream.origin));
    let ran = run_wrapped(
        &prefix,
        &codex_command(&prefix, "say hello"),
        ("OPENAI_API_KEY", OPENAI_KEY),
        flag.clone(),
        &[],
    );
    assert!(
        ran.stdout.contains("Hello from the loopback upstream."),
        "{}",
        ran.stdout
    );
    let logged = upstream.log();
    assert!(!logged.is_empty());
    for l in &logged {
        assert_eq!(
            l.request.header("authorization"),
            Some(&*format!("Bearer {OPENAI_KEY}"))
        );
    }
    let exchanges = assert_exchanges_match(&ran.bundle, &logged);
    assert_eq!(
        exchanges[0]["payload"]["model"],
        "openai-responses:gpt-test"
    );
    assert_eq!(exchanges[0]["payload"]["finish_reason"], "stop");
    assert!(imported_calls(&ran.bundle, "codex-rollout/1").is_empty());
    assert_no_secret(&ran.bundle, OPENAI_KEY);

    // The task: one exec_command that reads the input and writes in the workspace.
    let upstream = Upstream::start(codex_upstream);
    let flag = ("--upstream-openai", format!("{}/v1", upstream.origin));
    let ran = run_wrapped(
        &prefix,
        &codex_command(&prefix, "uppercase the notes"),
        ("OPENAI_API_KEY", OPENAI_KEY),
        flag,
        &[],
    );
    let exchanges = assert_exchanges_match(&ran.bundle, &upstream.log());
    let asked = exchanges
        .iter()
        .position(|e| {
            e["payload"]["tool_calls"]
                == json!([{"call_id": "call_task_1", "name": "exec_command"}])
        })
        .expect("a response asked for the call");
    let calls = imported_calls(&ran.bundle, "codex-rollout/1");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let source = of_kind(&ran.bundle, "trace_imported")[0]["payload"]["source"].clone();
    assert!(
        source.as_str().unwrap().starts_with(".codex/sessions/"),
        "{source}"
    );
    let call = &calls[0];
    assert_eq!(call["name"], "exec_command");
    assert_eq!(call["call_id"], "call_task_1");
    assert_eq!(call["arguments"]["cmd"], TASK);
    assert_eq!(call["run_call_id"], format!("{}.1", asked + 1));
    assert!(
        call["result"]
            .as_str()
            .unwrap()
            .contains("exited with code 0"),
        "{call}"
    );
    assert_eq!(call["ok"], true);
    assert_show_json_links(&ran.bundle, &calls);
    assert_command_observed(&ran.bundle, "call_task_1", TASK);
    assert_task_outputs(
        &ran.bundle,
        OPENAI_KEY,
        "OPENAI_API_KEY",
        "sk-provrun-wrap-placeholder-openai",
    );
}

/// The upstream's script for Claude Code: with its tools offered, the task's prompt gets
/// Read (the input), then Write (the answer), then Bash (the environment), then the
/// answer; any other request a plain answer.
pub(crate) fn claude_upstream(req: &Request) -> Reply {
    let body = req.json();
    let model = body["model"].as_str().unwrap_or("claude-test");
    let results = body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .count()
        })
        .unwrap_or(0);
    let task = body["messages"].to_string().contains("uppercase the notes");
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let call = |id: &str, name: &str, input: Value| json!({"type": "tool_use", "id": id, "name": name, "input": input});
    let (blocks, stop) = match (task && has_tools, results) {
        (true, 0) => (
            vec![call(
                "toolu_read",
                "Read",
                json!({"file_path": "/input/notes.txt"}),
            )],
            "tool_use",
        ),
        (true, 1) => (
            vec![call(
                "toolu_write",
                "Write",
                json!({"file_path": "/workspace/answer.txt", "content": NOTES.to_uppercase()}),
            )],
            "tool_use",
        ),
        (true, 2) => (
            vec![call(
                "toolu_env",
                "Bash",
                json!({"command": "env > /workspace/env.txt", "description": "Save the environment"}),
            )],
            "tool_use",
        ),
        (true, _) => (
            vec![json!({"type": "text", "text": "answer.txt holds the notes in capitals."})],
            "end_turn",
        ),
        (false, _) => (
            vec![json!({"type": "text", "text": "Hello from the loopback upstream."})],
            "end_turn",
        ),
    };
    messages_stream(model, &format!("msg_{results}"), &blocks, stop)
}

pub(crate) fn claude_command(prefix: &Path, prompt: &str) -> Vec<String> {
    vec![
        s(&prefix.join("node_modules/.bin/claude")),
        "-p".into(),
        prompt.into(),
        "--model".into(),
        "claude-test".into(),
        "--permission-mode".into(),
        "bypassPermissions".into(),
    ]
}

#[test]
fn claude_code_answers_and_runs_tools_wrapped() {
    const TEST: &str = "claude_code_answers_and_runs_tools_wrapped";
    if !wrap_ready(TEST) {
        return;
    }
    let Some(prefix) = npm_package(TEST, &folder(CLAUDE_CODE), "claude") else {
        return;
    };
    let quiet = [("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")];
    // A plain answer.
    let upstream = Upstream::start(claude_upstream);
    let ran = run_wrapped(
        &prefix,
        &claude_command(&prefix, "say hello"),
        ("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
        ("--upstream-anthropic", upstream.origin.clone()),
        &quiet,
    );
    assert!(
        ran.stdout.contains("Hello from the loopback upstream."),
        "{}",
        ran.stdout
    );
    let logged = upstream.log();
    for l in &logged {
        assert_eq!(l.request.header("x-api-key"), Some(ANTHROPIC_KEY));
    }
    let exchanges = assert_exchanges_match(&ran.bundle, &logged);
    assert!(
        exchanges
            .iter()
            .any(|e| e["payload"]["model"] == "anthropic:claude-test")
    );
    assert!(imported_calls(&ran.bundle, "claude-code-session/1").is_empty());
    assert_no_secret(&ran.bundle, ANTHROPIC_KEY);

    // The task: Read, Write, Bash.
    let upstream = Upstream::start(claude_upstream);
    let ran = run_wrapped(
        &prefix,
        &claude_command(&prefix, "uppercase the notes"),
        ("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
        ("--upstream-anthropic", upstream.origin.clone()),
        &quiet,
    );
    let exchanges = assert_exchanges_match(&ran.bundle, &upstream.log());
    let step_of = |id: &str| {
        exchanges
            .iter()
            .position(|e| {
                e["payload"]["tool_calls"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["call_id"] == id))
            })
            .map(|i| format!("{}.1", i + 1))
    };
    let calls = imported_calls(&ran.bundle, "claude-code-session/1");
    let source = of_kind(&ran.bundle, "trace_imported")[0]["payload"]["source"].clone();
    assert!(
        source
            .as_str()
            .unwrap()
            .starts_with(".claude/projects/-workspace/"),
        "{source}"
    );
    let names: Vec<&str> = calls.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Read", "Write", "Bash"], "{calls:?}");
    for c in &calls {
        assert_eq!(c["ok"], true, "{c}");
        assert_eq!(
            c["run_call_id"].as_str(),
            step_of(c["call_id"].as_str().unwrap()).as_deref(),
            "{c}"
        );
    }
    assert_eq!(calls[0]["arguments"]["file_path"], "/input/notes.txt");
    assert!(
        calls[0]["result"]
            .as_str()
            .unwrap()
            .contains("remember the milk"),
        "{}",
        calls[0]
    );
    assert_eq!(calls[1]["arguments"]["file_path"], "/workspace/answer.txt");
    assert_show_json_links(&ran.bundle, &calls);
    assert_command_observed(&ran.bundle, "toolu_env", "env > /workspace/env.txt");
    assert_task_outputs(
        &ran.bundle,
        ANTHROPIC_KEY,
        "ANTHROPIC_API_KEY",
        "sk-ant-provrun-wrap-placeholder",
    );
}

#[test]
fn the_pinned_versions_are_the_ones_ci_installs() {
    let setup = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../xtask/src/setup.rs"),
    )
    .unwrap();
    for (package, version) in [CODEX, CLAUDE_CODE] {
        assert!(
            setup.contains(&format!("(\"{package}\", \"{version}\")")),
            "xtask/src/setup.rs does not install {package}@{version}"
        );
    }
}
