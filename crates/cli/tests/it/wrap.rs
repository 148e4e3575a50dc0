//! `provrun wrap` on the generic path: a plain Python script (the system's `python3`,
//! standard library only: `urllib`, `socket`) that calls Chat Completions through the
//! variables wrap sets, runs the tool the model asks for, lists the models, opens a tunnel
//! to an allowed host and tries one that is not. Against a loopback upstream that keeps
//! its own log. Also the set-ups wrap refuses, the program's exit code and a workspace
//! folder (the signals it passes on are in `wrap_cli.rs`).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::support::cli::{events, s};
use crate::support::upstream::{Reply, Request, Upstream, chat_stream, chat_tool_call};
use crate::support::wrap::{
    assert_exchanges_match, assert_no_secret, assert_verifies, blob, of_kind, provrun, wrap_ready,
};

const REAL_KEY: &str = "sk-test-REAL-openai-key-0123456789";

/// The script: two Chat Completions requests (the second streamed), the tool the first
/// asks for run on an input, a model listing, a tunnel to `argv[1]:argv[2]`, a refused one,
/// and a direct connection that does not get out.
const SCRIPT: &str = r#"
import json, os, socket, sys, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
with open("env.txt", "w") as f:
    f.write("".join(f"{k}={v}\n" for k, v in sorted(os.environ.items())))

def post(body):
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return r.read()

tools = [{"type": "function", "function": {"name": "uppercase_file", "description": "Uppercase a file into answer.txt",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
messages = [{"role": "user", "content": "Uppercase the notes."}]
first = json.loads(post({"model": "gpt-test", "messages": messages, "tools": tools}))
call = first["choices"][0]["message"]["tool_calls"][0]
path = json.loads(call["function"]["arguments"])["path"]
with open(path) as f, open("answer.txt", "w") as out:
    out.write(f.read().upper())
messages += [first["choices"][0]["message"], {"role": "tool", "tool_call_id": call["id"], "content": "written"}]
answer = ""
for line in post({"model": "gpt-test", "messages": messages, "tools": tools, "stream": True}).decode().splitlines():
    if line.startswith("data: {"):
        for choice in json.loads(line[6:])["choices"]:
            answer += choice["delta"].get("content") or ""
print("answer:", answer, flush=True)
urllib.request.urlopen(urllib.request.Request(base + "/models", headers={"Authorization": "Bearer " + key})).read()

def connect(host, port):
    proxy_host, proxy_port = os.environ["HTTPS_PROXY"].removeprefix("http://").split(":")
    s = socket.create_connection((proxy_host, int(proxy_port)))
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    return s, int(head.split()[1])

s, status = connect(sys.argv[1], int(sys.argv[2]))
s.sendall(b"ping\n")
print("tunnel:", status, s.recv(100).decode().strip(), flush=True)
s.close()
print("refused:", connect("example.com", 443)[1], flush=True)
try:
    socket.create_connection(("192.0.2.1", 443), timeout=2)
    print("direct: open")
except OSError:
    print("direct: no way out")
"#;

/// The upstream's script for the Python program.
fn chat(req: &Request) -> Reply {
    let body = req.json();
    if req.path.ends_with("/models") {
        return Reply::json(
            200,
            &json!({"object": "list", "data": [{"id": "gpt-test", "object": "model"}]}),
        );
    }
    if body["stream"] == true {
        return chat_stream("gpt-test", "Done: answer.txt holds the notes.");
    }
    chat_tool_call(
        "gpt-test",
        "call_up_1",
        "uppercase_file",
        &json!({"path": "/input/notes.txt"}),
    )
}

/// A TCP service on 127.0.0.2 (loopback, but not a name the program's `NO_PROXY` names)
/// that answers each line with `pong`.
fn echo_service() -> u16 {
    let listener = TcpListener::bind("127.0.0.2:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let _ = (&stream).write_all(b"pong\n");
            });
        }
    });
    port
}

/// The Python program's exchanges: every upstream exchange is one event with the very
/// bytes, and the real key went upstream on each.
fn check_exchanges(bundle: &Path, logged: &[crate::support::upstream::Logged]) {
    assert_eq!(logged.len(), 3, "{logged:?}");
    for l in logged {
        assert_eq!(
            l.request.header("authorization"),
            Some(&*format!("Bearer {REAL_KEY}"))
        );
        assert_eq!(l.request.header("accept-encoding"), Some("identity"));
    }
    let exchanges = assert_exchanges_match(bundle, logged);
    let (first, second, listing) = (&exchanges[0], &exchanges[1], &exchanges[2]);
    assert_eq!(first["type"], "model_called");
    assert_eq!(first["payload"]["model"], "openai:gpt-test");
    assert_eq!(first["payload"]["finish_reason"], "tool_calls");
    assert_eq!(first["payload"]["usage"]["input_tokens"], 42);
    assert_eq!(
        first["payload"]["tool_calls"],
        json!([{"call_id": "call_up_1", "name": "uppercase_file"}])
    );
    assert_eq!(
        first["payload"]["http"]["removed_headers"],
        json!(["authorization"])
    );
    assert_eq!(second["payload"]["stream"], true);
    assert_eq!(second["payload"]["finish_reason"], "stop");
    assert_eq!(listing["type"], "http_exchanged");
    assert_eq!(listing["payload"]["kind"], "models");
}

/// The Python program's connections: the tunnel to the allowed host with its bytes, and
/// the refusal.
fn check_connections(bundle: &Path) {
    let connections = of_kind(bundle, "connection_handled");
    assert_eq!(connections.len(), 2, "{connections:?}");
    // A tunnel is recorded when it closes, a refusal at once: either may come first.
    let with = |outcome: &str| {
        connections
            .iter()
            .map(|c| &c["payload"])
            .find(|p| p["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no {outcome} connection: {connections:?}"))
    };
    let tunnel = with("tunneled");
    assert_eq!(
        (tunnel["host"].as_str(), tunnel["outcome"].as_str()),
        (Some("127.0.0.2"), Some("tunneled"))
    );
    assert_eq!(
        (
            tunnel["bytes_sent"].as_u64(),
            tunnel["bytes_received"].as_u64()
        ),
        (Some(5), Some(5))
    );
    let refused = with("refused");
    assert_eq!(
        (
            refused["host"].as_str(),
            refused["port"].as_u64(),
            refused["outcome"].as_str()
        ),
        (Some("example.com"), Some(443), Some("refused"))
    );
}

#[test]
fn a_python_script_is_recorded_byte_for_byte_with_its_tunnels_and_never_holds_the_key() {
    if !wrap_ready(
        "a_python_script_is_recorded_byte_for_byte_with_its_tunnels_and_never_holds_the_key",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (scripts, bundle) = (tmp.path().join("scripts"), tmp.path().join("bundle"));
    std::fs::create_dir(&scripts).unwrap();
    std::fs::write(scripts.join("agent.py"), SCRIPT).unwrap();
    let notes = tmp.path().join("notes.txt");
    std::fs::write(&notes, "buy milk\n").unwrap();
    let upstream = Upstream::start(chat);
    let port = echo_service();
    let out = provrun()
        .env("OPENAI_API_KEY", REAL_KEY)
        .args(["wrap", "--out", &s(&bundle), "--input", &s(&notes)])
        .args(["--read-only", &s(&scripts)])
        .args(["--allow-host", &format!("127.0.0.2:{port}")])
        .args(["--upstream-openai", &format!("{}/v1", upstream.origin)])
        .args([
            "--",
            "/usr/bin/python3",
            &s(&scripts.join("agent.py")),
            "127.0.0.2",
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(
        stdout.contains("answer: Done: answer.txt holds the notes."),
        "{stdout}"
    );
    assert!(stdout.contains("tunnel: 200 pong"), "{stdout}");
    assert!(stdout.contains("refused: 403"), "{stdout}");
    assert!(stdout.contains("direct: no way out"), "{stdout}");
    assert_verifies(&bundle);

    check_exchanges(&bundle, &upstream.log());
    check_connections(&bundle);
    // The program's exit and output streams.
    let exited = &of_kind(&bundle, "program_exited")[0]["payload"];
    assert_eq!(exited["exit_code"], 0);
    assert_eq!(
        exited["stdout"]["sha256"],
        hex::encode(Sha256::digest(&out.stdout))
    );
    assert_eq!(blob(&bundle, &exited["stdout"]["blob"]), out.stdout);
    assert_eq!(exited["confinement"]["mode"], "full");

    // Outputs: the file the tool wrote, and the program's environment.
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/answer.txt")).unwrap(),
        "BUY MILK\n"
    );
    let env = std::fs::read_to_string(bundle.join("output/env.txt")).unwrap();
    assert!(
        env.contains("OPENAI_API_KEY=sk-provrun-wrap-placeholder-openai\n"),
        "{env}"
    );
    assert!(env.contains("HOME=/home/provrun\n"), "{env}");
    assert!(!env.contains(REAL_KEY));
    assert_no_secret(&bundle, REAL_KEY);

    let finished = &of_kind(&bundle, "run_finished")[0]["payload"];
    assert_eq!(finished["status"], "finished");
    assert_eq!(finished["usage"]["requests"], 2);
    assert_eq!(finished["usage"]["refused_connections"], 1);

    // `export otlp` maps it: the run, and a chat span per generation.
    let log = provrun_evidence::read_events(&bundle).unwrap();
    let spans = provrun_otel::spans_from_events(&bundle, &log, false).unwrap();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(
        names,
        ["invoke_agent python3", "chat gpt-test", "chat gpt-test"],
        "{names:?}"
    );
}

/// Runs `provrun wrap --out BUNDLE ARGS…`; its exit code and stderr.
fn wrap_run(bundle: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = provrun()
        .args(["wrap", "--out", &s(bundle)])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn set_ups_wrap_refuses_write_nothing_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let hidden = tmp.path().join("hidden");
    std::fs::create_dir(&hidden).unwrap();
    std::fs::write(hidden.join("tool.sh"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        hidden.join("tool.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--".into(), "no-such-program-anywhere".into()],
            "not on PATH",
        ),
        (vec!["--".into(), s(&hidden.join("tool.sh"))], "--read-only"),
        (
            vec![
                "--workspace".into(),
                s(tmp.path()),
                "--".into(),
                "true".into(),
            ],
            "inside",
        ),
        (
            vec![
                "--allow-host".into(),
                "bad host".into(),
                "--".into(),
                "true".into(),
            ],
            "--allow-host",
        ),
        (
            vec![
                "--upstream-openai".into(),
                "ftp://x".into(),
                "--".into(),
                "true".into(),
            ],
            "http",
        ),
        (
            vec![
                "--input".into(),
                s(&tmp.path().join("absent")),
                "--".into(),
                "true".into(),
            ],
            "input",
        ),
    ];
    for (args, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = wrap_run(&bundle, &args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!bundle.exists(), "{args:?} wrote a bundle");
    }
    // No program at all is a usage error too.
    let (code, _) = wrap_run(&bundle, &[]);
    assert_eq!(code, Some(2));
    assert!(!bundle.exists());
}

#[test]
fn the_programs_exit_code_is_wraps_and_a_run_without_exchanges_is_warned_about() {
    if !wrap_ready("the_programs_exit_code_is_wraps_and_a_run_without_exchanges_is_warned_about") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let key = tmp.path().join("key.pem");
    let made = provrun().args(["keygen", &s(&key)]).output().unwrap();
    assert!(made.status.success());
    let (code, stderr) = wrap_run(
        &bundle,
        &["--sign-key", &s(&key), "--", "sh", "-c", "echo out; exit 7"],
    );
    assert_eq!(code, Some(7), "{stderr}");
    // Signed as asked: verify with the public key passes.
    let pubkey = tmp.path().join("key.pem.pub");
    let checked = provrun()
        .args(["verify", &s(&bundle), "--key", &s(&pubkey)])
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    // view writes its page, with the program's exit among the entries.
    let page = tmp.path().join("page.html");
    let viewed = provrun()
        .args(["view", &s(&bundle), "-o", &s(&page)])
        .output()
        .unwrap();
    assert!(viewed.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(r#""kind":"program""#),
        "the page has no program entry"
    );
    assert!(stderr.contains("no request through the proxy"), "{stderr}");
    assert_verifies(&bundle);
    let finished = &of_kind(&bundle, "run_finished")[0]["payload"];
    assert_eq!(finished["status"], "failed");
    assert_eq!(finished["error"], "the program exited with code 7");
    assert!(
        finished["usage"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("no request")
    );
    // replay refuses it clearly.
    let out = provrun()
        .args([
            "replay",
            &s(&bundle),
            "--out",
            &s(&tmp.path().join("again")),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run another program"));
    // show names the program and its exit.
    let out = provrun()
        .args(["show", &s(&bundle)])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("program sh exited with code 7"), "{shown}");
}

#[test]
fn a_workspace_folder_is_worked_in_and_its_final_files_are_the_outputs() {
    if !wrap_ready("a_workspace_folder_is_worked_in_and_its_final_files_are_the_outputs") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (ws, bundle) = (tmp.path().join("repo"), tmp.path().join("bundle"));
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("README.md"), "old\n").unwrap();
    std::fs::write(ws.join("gone.txt"), "deleted by the program\n").unwrap();
    let script = "pwd > where.txt; echo new >> README.md; rm gone.txt; ln -s /etc/passwd link; \
                  mkdir -p src && echo 'fn main() {}' > src/main.rs";
    let (code, stderr) = wrap_run(&bundle, &["--workspace", &s(&ws), "--", "sh", "-c", script]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_verifies(&bundle);
    // The program worked in the folder itself …
    assert_eq!(
        std::fs::read_to_string(ws.join("README.md")).unwrap(),
        "old\nnew\n"
    );
    assert!(!ws.join("gone.txt").exists());
    // … and its final files are the outputs, under the output rules.
    let outputs: Vec<String> = of_kind(&bundle, "output_produced")
        .iter()
        .map(|e| e["payload"]["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(outputs, ["README.md", "src/main.rs", "where.txt"]);
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/where.txt")).unwrap(),
        "/workspace\n"
    );
    let skipped = of_kind(&bundle, "output_skipped");
    assert_eq!(skipped.len(), 1);
    assert_eq!(
        (
            skipped[0]["payload"]["path"].as_str(),
            skipped[0]["payload"]["reason"].as_str()
        ),
        (Some("link"), Some("not_regular"))
    );
    let started = &events(&bundle)[0]["payload"];
    assert_eq!(
        started["builder"]
            .as_str()
            .map(|b| b.starts_with("provrun-wrap/")),
        Some(true)
    );
    assert_eq!(
        started["details"]["wrap"]["workspace"]["host"],
        Value::from(s(&std::fs::canonicalize(&ws).unwrap()))
    );
}

#[test]
fn an_upstream_that_cannot_be_reached_is_an_error_the_program_sees_and_the_bundle_keeps() {
    if !wrap_ready(
        "an_upstream_that_cannot_be_reached_is_an_error_the_program_sees_and_the_bundle_keeps",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = r#"
import os, urllib.request, urllib.error
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=b'{"model":"m","messages":[]}',
                             headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"})
try:
    urllib.request.urlopen(req)
except urllib.error.HTTPError as e:
    print("status:", e.code)
"#;
    let (code, stderr) = wrap_run(
        &bundle,
        &[
            "--upstream-anthropic",
            &format!("http://127.0.0.1:{port}"),
            "--",
            "/usr/bin/python3",
            "-c",
            script,
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_verifies(&bundle);
    let exited = &of_kind(&bundle, "program_exited")[0]["payload"];
    assert_eq!(blob(&bundle, &exited["stdout"]["blob"]), b"status: 502\n");
    let called = &of_kind(&bundle, "model_called")[0]["payload"];
    assert_eq!(called["model"], "anthropic:m");
    assert!(
        called["error"]
            .as_str()
            .unwrap()
            .contains("could not be reached"),
        "{called}"
    );
    assert!(called["response"].is_null());
}
