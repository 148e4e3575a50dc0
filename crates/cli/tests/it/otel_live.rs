//! OpenTelemetry while a run goes: a span reaches a loopback OTLP receiver while the run's
//! 6-second command still runs; a paused run sends its first part and its resume only
//! the new part, in the same trace; and a real tracing backend from PyPI (Arize Phoenix,
//! started on loopback) takes a run and shows its spans with the GenAI attributes parsed.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::otel::{Mode, Receiver, assert_verifies, attrs, example, output, run_scripted};
use crate::support::cli::{command, events, text};

/// A span name's first word (`chat`, `execute_tool`, `invoke_agent`).
fn kind(name: &str) -> &str {
    name.split(' ').next().unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_chat_span_reaches_the_collector_while_a_long_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"slow\"\nmodel = \"script:script.json\"\ninstructions = \"Wait.\"\n\
         tools = [\"run_command\"]\nallow_degraded_sandbox = true\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"tool_calls": [{"id": "wait", "name": "run_command", "arguments": {"command": "sleep 6; echo done"}}]}, {"text": "Waited."}]"#,
    )
    .unwrap();
    let receiver = Receiver::start(Mode::Accept);
    let bundle = dir.path().join("bundle");
    let mut cmd = command(&[
        "run",
        &dir.path().join("agent.toml").display().to_string(),
        "--out",
        &bundle.display().to_string(),
    ]);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    // The first request's span, while the command sleeps.
    let seen = loop {
        let spans = receiver.spans();
        if !spans.is_empty() {
            break spans;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no span within 5 s of the run's start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run is still going when its first span arrives ({:?} in)",
        started.elapsed()
    );
    let names: Vec<&str> = seen.iter().map(|s| kind(&s.name)).collect();
    assert_eq!(names, ["chat"], "only the first request so far");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(started.elapsed() >= Duration::from_secs(6));
    assert_verifies(&bundle);

    // In the end: each span once, the command's and the run's included.
    let spans = receiver.spans();
    let mut names: Vec<&str> = spans.iter().map(|s| kind(&s.name)).collect();
    names.sort_unstable();
    assert_eq!(names, ["chat", "chat", "execute_tool", "invoke_agent"]);
    let ids: BTreeSet<Vec<u8>> = spans.iter().map(|s| s.span_id.clone()).collect();
    assert_eq!(ids.len(), spans.len(), "no span sent twice");
    let tool = spans
        .iter()
        .find(|s| s.name.starts_with("execute_tool"))
        .unwrap();
    let took = tool.end_time_unix_nano - tool.start_time_unix_nano;
    assert!(
        took >= 6_000_000_000,
        "the command's span covers its 6 s: {took}"
    );
}

#[test]
fn a_resumed_run_sends_only_its_new_part_in_the_same_trace() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let b = bundle.display().to_string();
    let first = Receiver::start(Mode::Accept);
    let mut cmd = command(&["run", &example("approve/agent.toml"), "--out", &b]);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &first.url);
    let out = output(&mut cmd);
    assert_eq!(out.status.code(), Some(4), "paused: {}", text(&out.stderr));
    let before = first.spans();
    let names: Vec<&str> = before.iter().map(|s| kind(&s.name)).collect();
    assert_eq!(names, ["chat", "invoke_agent"]);
    let run_span = before.iter().find(|s| s.parent_span_id.is_empty()).unwrap();
    assert_eq!(attrs(&run_span.attributes)["provrun.status"], "paused");

    let second = Receiver::start(Mode::Accept);
    let mut cmd = command(&["resume", &b, "--approve", "greet"]);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &second.url);
    let out = output(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_verifies(&bundle);
    let after = second.spans();
    let mut names: Vec<&str> = after.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0].starts_with("chat script:"), "{names:?}");
    assert_eq!(
        names[1..],
        ["execute_tool write_file", "invoke_agent approve"],
        "only what followed the pause"
    );
    let old: BTreeSet<&Vec<u8>> = before.iter().map(|s| &s.span_id).collect();
    assert!(
        after.iter().all(|s| !old.contains(&s.span_id)),
        "nothing sent twice"
    );
    assert!(
        after.iter().all(|s| s.trace_id == run_span.trace_id),
        "one trace"
    );
    let part = after
        .iter()
        .find(|s| s.name.starts_with("invoke_agent"))
        .unwrap();
    assert_eq!(
        part.parent_span_id, run_span.span_id,
        "the resumed part is under the run"
    );
    let a = attrs(&part.attributes);
    assert_eq!(a["provrun.part"], 1);
    assert_eq!(a["provrun.status"], "finished");
    for s in after.iter().filter(|s| !s.name.starts_with("invoke_agent")) {
        assert_eq!(
            s.parent_span_id, part.span_id,
            "{} is under its part",
            s.name
        );
    }
    // An export of the whole bundle afterwards: both parts, the same ids.
    let all = Receiver::start(Mode::Accept);
    let out = output(&mut command(&[
        "export",
        "otlp",
        &b,
        "--endpoint",
        &all.url,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let live: BTreeSet<String> = before
        .iter()
        .chain(&after)
        .map(|s| hex(&s.span_id))
        .collect();
    let exported: BTreeSet<String> = all.spans().iter().map(|s| hex(&s.span_id)).collect();
    assert_eq!(live, exported);
}

/// Where CI installs Arize Phoenix (`cargo xtask setup`), keyed by its pinned version.
const PHOENIX: &str = "phoenix-20.26.1";

fn phoenix_python() -> Option<PathBuf> {
    let cache = std::env::var_os("PROVRUN_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/provrun-ci")))?;
    let python = cache.join(PHOENIX).join("bin/python");
    python.is_file().then_some(python)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A GET on loopback: the status and the body.
fn get(port: u16, path: &str) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).ok()?;
    let head_end = reply.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&reply[..head_end]);
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, reply[head_end + 4..].to_vec()))
}

/// Phoenix on loopback, stopped when dropped.
struct Phoenix {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_phoenix(python: &Path) -> Phoenix {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new(python)
        .args(["-m", "phoenix.server.main", "serve"])
        .env("PHOENIX_WORKING_DIR", dir.path())
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", free_port().to_string())
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let phoenix = Phoenix {
        child,
        port,
        _dir: dir,
    };
    let started = Instant::now();
    while get(port, "/healthz").is_none_or(|(status, _)| status != 200) {
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "Phoenix did not start within 180 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("Phoenix started in {:?}", started.elapsed());
    phoenix
}

/// The spans Phoenix's REST API lists for its default project.
fn phoenix_spans(port: u16) -> Vec<Value> {
    let Some((200, body)) = get(port, "/v1/projects/default/spans?limit=100") else {
        return Vec::new();
    };
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    v["data"].as_array().cloned().unwrap_or_default()
}

#[test]
fn phoenix_from_pypi_takes_a_run_and_parses_its_genai_attributes() {
    let Some(python) = phoenix_python() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI installs {PHOENIX} (cargo xtask setup)"
        );
        eprintln!("SKIPPED: {PHOENIX} is not installed (cargo xtask setup installs it)");
        return;
    };
    let phoenix = start_phoenix(&python);
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let endpoint = format!("http://127.0.0.1:{}", phoenix.port);
    let out = run_scripted(
        &bundle,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("OTLP"), "{}", text(&out.stderr));

    let started = Instant::now();
    let spans = loop {
        let spans = phoenix_spans(phoenix.port);
        if spans.len() >= 7 || started.elapsed() > Duration::from_secs(60) {
            break spans;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(spans.len(), 7, "{spans:#?}");
    let log = events(&bundle);
    let trace = log[0]["payload"]["details"]["otel"]["trace_id"]
        .as_str()
        .unwrap();
    assert!(spans.iter().all(|s| s["context"]["trace_id"] == trace));

    // Phoenix lists attributes by their flat keys; `llm.*` and the span kinds are its own
    // reading (OpenInference) of the GenAI attributes it was sent.
    let first_chat = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("chat "))
        .min_by_key(|s| s["attributes"]["provrun.seq"].as_i64())
        .unwrap();
    let a = &first_chat["attributes"];
    assert_eq!(a["gen_ai.operation.name"], "chat", "{first_chat:#}");
    assert_eq!(a["gen_ai.provider.name"], "provrun.script");
    assert_eq!(first_chat["span_kind"], "LLM", "{first_chat:#}");
    let event = log.iter().find(|e| e["seq"] == a["provrun.seq"]).unwrap();
    let usage = &event["payload"]["usage"];
    assert_eq!(a["llm.token_count.prompt"], usage["input_tokens"], "{a:#}");
    assert_eq!(
        a["llm.token_count.completion"], usage["output_tokens"],
        "{a:#}"
    );
    assert_eq!(a["llm.input_messages.0.message.role"], "system", "{a:#}");
    assert!(
        a["llm.input_messages.0.message.content"]
            .as_str()
            .is_some_and(|c| c.contains("/input/report.txt")),
        "{a:#}"
    );
    assert_eq!(a["llm.input_messages.1.message.role"], "user", "{a:#}");
    let call = |i: usize| {
        a[format!("llm.output_messages.0.message.tool_calls.{i}.tool_call.function.name")].clone()
    };
    assert_eq!(
        (call(0), call(1)),
        ("list_dir".into(), "read_file".into()),
        "{a:#}"
    );
    let tool = spans
        .iter()
        .find(|s| s["name"] == "execute_tool read_file")
        .unwrap();
    assert_eq!(tool["span_kind"], "TOOL", "{tool:#}");
    assert_eq!(tool["attributes"]["tool.name"], "read_file", "{tool:#}");
    assert_eq!(tool["attributes"]["tool.id"], "read", "{tool:#}");
    let run = spans
        .iter()
        .find(|s| s["name"] == "invoke_agent scripted")
        .unwrap();
    assert_eq!(run["span_kind"], "AGENT", "{run:#}");
    assert_eq!(run["parent_id"], Value::Null, "{run:#}");
}
