//! `provrun wrap` against a hostile program and the set-ups people really have
//! (issue 49): the real key never reaches the program or the bundle in any form the
//! upstream echoes it in, the caller's other secrets never sit on a command line, a
//! virtualenv's interpreter runs as the virtualenv, a CA variable does not stop an SDK,
//! an exchange still in flight when the program left is recorded as cut, an unreadable
//! workspace file is left out (not the run), set-id bits never stay on the host, and the
//! forwarder and the proxy hold against many connections. Real processes throughout,
//! against loopback upstreams.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::support::cli::s;
use crate::support::upstream::{Reply, Request, Upstream};
use crate::support::venv::{ci_cache, in_ci};
use crate::support::wrap::{
    assert_absent_everywhere, assert_verifies, of_kind, provrun, wrap_ready,
};

const REAL_KEY: &str = "sk-test-REAL-openai-key-0123456789";

/// The key as a JSON body escapes it: every `-` as `\u002d` (upper and lower case hex).
fn json_escaped(key: &str) -> String {
    key.chars()
        .enumerate()
        .map(|(i, c)| match c {
            '-' if i % 2 == 0 => "\\u002d".to_owned(),
            '-' => "\\u002D".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

/// The program: one request answered 401 with the key echoed JSON-escaped and in
/// headers, one streamed answer that echoes it escaped and split across writes; it
/// prints every header and body it got, and the messages as its JSON parser decodes them.
const ECHO_SCRIPT: &str = r#"
import json, os, urllib.request, urllib.error
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
def call(body):
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        r = urllib.request.urlopen(req)
        status = r.status
    except urllib.error.HTTPError as e:
        r, status = e, e.code
    raw = r.read()
    print("status:", status)
    for k, v in r.headers.items():
        print("header:", k, v)
    print("body:", raw.decode())
    text = raw.decode()
    if text.startswith("{"):
        print("decoded:", json.loads(text)["error"]["message"])
    for line in text.splitlines():
        if line.startswith("data: {"):
            for c in json.loads(line[6:])["choices"]:
                print("decoded:", c["delta"].get("content"))
call({"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]})
call({"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "stream": True})
"#;

/// The upstream that echoes the key.
fn echoing(req: &Request) -> Reply {
    let escaped = json_escaped(REAL_KEY);
    if req.json()["stream"] == true {
        let (a, b) = escaped.split_at(escaped.len() / 2);
        let chunk = |content: &str| {
            format!(
                "{{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-test\",\
                 \"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}"
            )
        };
        let event = format!("data: {}\n\n", chunk(&format!("echo {escaped} again")));
        let cut = event.find(a).unwrap() + a.len();
        return Reply {
            status: 200,
            content_type: "text/event-stream".into(),
            chunks: vec![
                event.as_bytes()[..cut].to_vec(),
                event.as_bytes()[cut..].to_vec(),
                format!("data: {}\n\ndata: [DONE]\n\n", chunk(&format!("{b} end"))).into_bytes(),
            ],
            headers: Vec::new(),
            delay: std::time::Duration::ZERO,
        };
    }
    let body = format!(
        "{{\"error\":{{\"message\":\"Incorrect API key provided: {escaped}\",\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}}}"
    );
    Reply {
        status: 401,
        content_type: "application/json".into(),
        chunks: vec![body.into_bytes()],
        headers: vec![
            ("x-echo-key".into(), REAL_KEY.into()),
            ("set-cookie".into(), format!("session={REAL_KEY}; Path=/")),
            ("x-echo-percent".into(), REAL_KEY.replace('-', "%2D")),
            ("x-request-id".into(), "req_1".into()),
        ],
        delay: std::time::Duration::ZERO,
    }
}

#[test]
fn a_key_the_upstream_echoes_escaped_or_in_headers_reaches_neither_the_program_nor_the_bundle() {
    if !wrap_ready(
        "a_key_the_upstream_echoes_escaped_or_in_headers_reaches_neither_the_program_nor_the_bundle",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let upstream = Upstream::start(echoing);
    let out = provrun()
        .env("OPENAI_API_KEY", REAL_KEY)
        .args(["wrap", "--out", &s(&bundle)])
        .args(["--upstream-openai", &format!("{}/v1", upstream.origin)])
        .args(["--", "/usr/bin/python3", "-c", ECHO_SCRIPT])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // The upstream did echo it, in every form, and the program asked twice.
    assert_eq!(upstream.log().len(), 2);
    assert!(
        stdout.contains("status: 401") && stdout.contains("status: 200"),
        "{stdout}"
    );
    assert!(stdout.contains("header: x-request-id req_1"), "{stdout}");
    // Neither raw, nor escaped, nor decoded by the program's own JSON parser.
    assert!(!stdout.contains("REAL"), "{stdout}");
    assert!(
        !stdout.to_ascii_lowercase().contains("set-cookie"),
        "{stdout}"
    );
    assert!(
        stdout.contains("decoded: Incorrect API key provided: ****"),
        "{stdout}"
    );
    assert!(!stderr.contains("REAL"), "{stderr}");
    assert_verifies(&bundle);
    let escaped = json_escaped(REAL_KEY);
    assert_absent_everywhere(
        &bundle,
        &[
            REAL_KEY.as_bytes(),
            escaped.as_bytes(),
            b"REAL-openai",
            b"REAL\\u002",
        ],
    );
    let called = of_kind(&bundle, "model_called");
    assert_eq!(called.len(), 2);
    let refused = &called[0]["payload"];
    assert_eq!(refused["http"]["status"], 401);
    assert_eq!(refused["http"]["redacted"], true);
    let removed = refused["http"]["removed_headers"].to_string();
    for h in [
        "response:x-echo-key",
        "response:set-cookie",
        "response:x-echo-percent",
    ] {
        assert!(removed.contains(h), "{removed}");
    }
    // The error the recorder read from the parsed body is there, masked.
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(error.contains("Incorrect API key provided"), "{refused}");
    assert!(!error.contains("REAL"), "{error}");
    assert_eq!(called[1]["payload"]["http"]["redacted"], true);
    let finished = &of_kind(&bundle, "run_finished")[0]["payload"];
    assert_eq!(finished["usage"]["requests"], 2);
}

/// Every process's command line, NUL-separated arguments joined by spaces.
fn command_lines() -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            Some((pid, line))
        })
        .collect()
}

#[test]
fn the_callers_other_secrets_never_sit_on_a_command_line() {
    if !wrap_ready("the_callers_other_secrets_never_sit_on_a_command_line") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let canary = format!("canary-{}-AWS-secret", std::process::id());
    let mut child = provrun()
        .env("AWS_SECRET_ACCESS_KEY", &canary)
        .env("OPENAI_API_KEY", REAL_KEY)
        .args(["wrap", "--out", &s(&bundle), "--"])
        .args([
            "sh",
            "-c",
            "printf '%s' \"$AWS_SECRET_ACCESS_KEY\" > seen.txt; sleep 2",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut saw_bubblewrap = false;
    let mut scans = 0;
    while child.try_wait().unwrap().is_none() {
        for (pid, line) in command_lines() {
            assert!(
                !line.contains(&canary) && !line.contains(REAL_KEY),
                "process {pid} shows a secret on its command line: {line}"
            );
            saw_bubblewrap |= line.contains("--unshare-all");
        }
        scans += 1;
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The scans saw the sandbox running, and the variable still reached the program.
    assert!(saw_bubblewrap, "{scans} scans never saw bubblewrap");
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/seen.txt")).unwrap(),
        canary
    );
}

/// `python3 -m venv --without-pip VENV` with `base` as the interpreter; the venv's
/// folder, or `None` (with a loud skip, a failure under CI) when it cannot be made.
fn fresh_venv(base: &Path, venv: &Path) -> bool {
    let made = std::process::Command::new(base)
        .args(["-m", "venv", "--without-pip"])
        .arg(venv)
        .output()
        .unwrap();
    if made.status.success() {
        return true;
    }
    let why = String::from_utf8_lossy(&made.stderr).into_owned();
    assert!(
        !in_ci(),
        "CI=true: `{} -m venv` failed: {why}",
        base.display()
    );
    eprintln!(
        "\n** WARNING: `{} -m venv` failed ({why}): skipped **\n",
        base.display()
    );
    false
}

/// The interpreters to make virtualenvs from: the system's, and the `python3` on `PATH`
/// when it is another installation (pyenv's, under a folder the sandbox does not show).
fn base_pythons() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/usr/bin/python3")];
    let on_path = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, os; print(os.path.realpath(sys.executable))",
        ])
        .output();
    if let Ok(o) = on_path
        && o.status.success()
    {
        let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        if !p.starts_with("/usr") && !out.contains(&p) {
            out.push(p);
        }
    }
    out.retain(|p| p.is_file());
    out
}

#[test]
fn a_virtualenvs_interpreter_runs_as_the_virtualenv_and_its_base_installation_is_shown() {
    if !wrap_ready(
        "a_virtualenvs_interpreter_runs_as_the_virtualenv_and_its_base_installation_is_shown",
    ) {
        return;
    }
    for base in base_pythons() {
        let tmp = tempfile::tempdir().unwrap();
        let venv = tmp.path().join("venv");
        if !fresh_venv(&base, &venv) {
            continue;
        }
        let expected_base = String::from_utf8(
            std::process::Command::new(&base)
                .args(["-c", "import sys; print(sys.base_prefix)"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        // A script whose `#!` names the virtualenv's interpreter, as pip writes them.
        let tool = venv.join("bin/tool");
        std::fs::write(
            &tool,
            format!(
                "#!{}\nimport sys\nprint('tool', sys.prefix)\n",
                venv.join("bin/python").display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bundle = tmp.path().join("bundle");
        let out = provrun()
            .args(["wrap", "--out", &s(&bundle), "--read-only", &s(&venv), "--"])
            .arg(venv.join("bin/python"))
            .args([
                "-c",
                "import sys, json, subprocess; print(sys.prefix); print(sys.base_prefix); \
                 print(sys.executable); sys.stdout.flush(); subprocess.run([sys.argv[1]])",
            ])
            .arg(&tool)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {stdout}\n{}",
            base.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines,
            [
                s(&venv).as_str(),
                expected_base.trim(),
                s(&venv.join("bin/python")).as_str(),
                format!("tool {}", venv.display()).as_str(),
            ],
            "{}",
            base.display()
        );
        // The base installation, when the sandbox does not show it already, is shown
        // read-only, and the bundle says so.
        let started = &of_kind(&bundle, "run_started")[0]["payload"];
        let granted = started["details"]["wrap"]["read_only"].to_string();
        if !expected_base.starts_with("/usr") {
            assert!(granted.contains(expected_base.trim()), "{granted}");
        }
        assert_eq!(
            started["details"]["wrap"]["argv_inside"][0],
            s(&venv.join("bin/python"))
        );
    }
}

/// The Python SDKs' virtualenv the CI set-up makes (`cargo xtask setup`), when it is
/// there; a loud skip when not (a failure under CI).
fn sdk_venv(test: &str) -> Option<PathBuf> {
    let venv = ci_cache().join("wrap-sdks-openai-3.63.0-anthropic-1.17.0");
    if venv.join("bin/python").is_file() {
        return Some(venv);
    }
    assert!(
        !in_ci(),
        "CI=true: {test} must run, but {} is missing: `cargo xtask setup` makes it",
        venv.display()
    );
    eprintln!(
        "\n** WARNING: {test} SKIPPED: {} is missing (`cargo xtask setup` makes it) **\n",
        venv.display()
    );
    None
}

/// The SDK program: an OpenAI and an Anthropic client, built as any script builds them
/// (the CA variables are read there), each asking once.
const SDK_SCRIPT: &str = r#"
import openai, anthropic
c = openai.OpenAI()
r = c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
print("openai:", r.choices[0].message.content)
a = anthropic.Anthropic()
m = a.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
print("anthropic:", m.content[0].text)
"#;

fn sdk_upstream(req: &Request) -> Reply {
    if req.path.contains("/messages") {
        return Reply::json(
            200,
            &serde_json::json!({"id": "msg_1", "type": "message", "role": "assistant",
                "model": "claude-test", "content": [{"type": "text", "text": "hello from claude"}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 3, "output_tokens": 4}}),
        );
    }
    Reply::json(
        200,
        &serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "gpt-test", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "hello from gpt"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}),
    )
}

#[test]
fn sdk_clients_start_and_node_is_quiet_with_ca_variables_naming_files_the_sandbox_would_hide() {
    let test =
        "sdk_clients_start_and_node_is_quiet_with_ca_variables_naming_files_the_sandbox_would_hide";
    if !wrap_ready(test) {
        return;
    }
    let Some(venv) = sdk_venv(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    // A CA bundle of the caller's own, in a folder nothing else shows the sandbox.
    let ca = tmp.path().join("ca");
    std::fs::create_dir(&ca).unwrap();
    let system = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
    ]
    .into_iter()
    .find(|p| Path::new(p).is_file())
    .expect("a system CA bundle");
    std::fs::copy(system, ca.join("corp.pem")).unwrap();
    let upstream = Upstream::start(sdk_upstream);
    let with_ca_variables = |cmd: &mut std::process::Command| {
        cmd.env("SSL_CERT_FILE", ca.join("corp.pem"))
            .env("REQUESTS_CA_BUNDLE", ca.join("corp.pem"))
            .env("SSL_CERT_DIR", "/etc/ssl/certs")
            .env("NODE_EXTRA_CA_CERTS", ca.join("corp.pem"))
            .env("OPENAI_API_KEY", REAL_KEY)
            .env("ANTHROPIC_API_KEY", "sk-ant-test-REAL-anthropic-0123456789");
    };
    // The base installation granted by hand: what is tested here is the CA variables
    // (the test above has wrap grant it itself).
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).unwrap();
    let home = cfg
        .lines()
        .find_map(|l| l.strip_prefix("home = "))
        .expect("pyvenv.cfg names its home");
    let base = std::fs::canonicalize(home)
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let bundle = tmp.path().join("bundle");
    let mut cmd = provrun();
    with_ca_variables(&mut cmd);
    let out = cmd
        .args(["wrap", "--out", &s(&bundle), "--read-only", &s(&venv)])
        .args(["--read-only", &s(&base)])
        .args(["--upstream-openai", &format!("{}/v1", upstream.origin)])
        .args(["--upstream-anthropic", &upstream.origin])
        .arg("--")
        .arg(venv.join("bin/python"))
        .args(["-c", SDK_SCRIPT])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("openai: hello from gpt"), "{stdout}");
    assert!(stdout.contains("anthropic: hello from claude"), "{stdout}");
    assert_verifies(&bundle);
    let granted =
        of_kind(&bundle, "run_started")[0]["payload"]["details"]["wrap"]["read_only"].to_string();
    assert!(
        granted.contains("corp.pem") && granted.contains("/etc/ssl/certs"),
        "{granted}"
    );
    // Node reads NODE_EXTRA_CA_CERTS at its start, and says nothing when it can.
    let bundle = tmp.path().join("node-bundle");
    let mut cmd = provrun();
    with_ca_variables(&mut cmd);
    let out = cmd
        .args([
            "wrap",
            "--out",
            &s(&bundle),
            "--",
            "node",
            "-e",
            "console.log('node ok')",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout, "node ok\n");
    assert!(!stderr.contains("Ignoring extra certs"), "{stderr}");
}

/// The warnings of a finished wrapped run.
fn warnings(bundle: &Path) -> String {
    of_kind(bundle, "run_finished")[0]["payload"]["usage"]["warnings"].to_string()
}

#[test]
fn a_run_without_exchanges_is_told_for_what_happened() {
    if !wrap_ready("a_run_without_exchanges_is_told_for_what_happened") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, argv: &[&str]| {
        let bundle = tmp.path().join(name);
        let out = provrun()
            .args(["wrap", "--out", &s(&bundle), "--"])
            .args(argv)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (bundle, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // It crashed before any request.
    let (bundle, stderr) = run("crashed", &["sh", "-c", "echo boom >&2; exit 3"]);
    let said = warnings(&bundle);
    assert!(
        said.contains("exited with code 3") && said.contains("may have failed"),
        "{said}"
    );
    assert!(
        !said.contains("bypassed") && !stderr.contains("bypassed"),
        "{stderr}"
    );
    // Its only connection was one wrap refused, and recorded.
    let script = "import urllib.request\ntry:\n    urllib.request.urlopen('https://example.com/', timeout=5)\nexcept Exception as e:\n    print('refused:', e)\n";
    let (bundle, _) = run("refused", &["/usr/bin/python3", "-c", script]);
    let said = warnings(&bundle);
    assert_eq!(of_kind(&bundle, "connection_handled").len(), 1);
    assert!(said.contains("refused by wrap and recorded"), "{said}");
    assert!(!said.contains("bypassed"), "{said}");
    // It ended well without asking the proxy for anything.
    let (bundle, _) = run("quiet", &["true"]);
    assert!(warnings(&bundle).contains("bypassed provrun"));
}

#[test]
fn exchanges_still_in_flight_when_the_program_has_left_are_recorded_as_cut() {
    if !wrap_ready("exchanges_still_in_flight_when_the_program_has_left_are_recorded_as_cut") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    // Every answer takes 13 s: longer than wrap waits (10 s) once the program has left.
    let upstream = Upstream::start(|req: &Request| {
        let mut r = if req.path.ends_with("/models") {
            Reply::json(200, &serde_json::json!({"object": "list", "data": []}))
        } else {
            crate::support::upstream::chat_stream("gpt-test", "late")
        };
        r.delay = std::time::Duration::from_secs(13);
        r
    });
    // The program writes two requests and exits (0) before either is answered.
    let script = r#"
import os, socket, time
body = b'{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}'
a = socket.create_connection(("127.0.0.1", 47800))
a.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
b = socket.create_connection(("127.0.0.1", 47800))
b.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n")
time.sleep(1)
print("leaving", flush=True)
"#;
    let started = std::time::Instant::now();
    let out = provrun()
        .env("OPENAI_API_KEY", REAL_KEY)
        .args(["wrap", "--out", &s(&bundle)])
        .args(["--upstream-openai", &format!("{}/v1", upstream.origin)])
        .args(["--", "/usr/bin/python3", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // wrap waited its 10 s, not the upstream's 13.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(13),
        "{stderr}"
    );
    assert_verifies(&bundle);
    let called = of_kind(&bundle, "model_called");
    assert_eq!(called.len(), 1, "{called:?}");
    let c = &called[0]["payload"];
    assert!(
        c["error"].as_str().unwrap().contains("the program left"),
        "{c}"
    );
    assert!(c["response"].is_null(), "{c}");
    assert_eq!(
        crate::support::wrap::blob(&bundle, &c["request"]),
        br#"{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}"#
    );
    let other = of_kind(&bundle, "http_exchanged");
    assert_eq!(other.len(), 1, "{other:?}");
    assert!(
        other[0]["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("the program left")
    );
    let finished = &of_kind(&bundle, "run_finished")[0]["payload"];
    assert_eq!(finished["status"], "finished");
    assert_eq!(finished["usage"]["requests"], 1);
    assert_eq!(finished["usage"]["other_exchanges"], 1);
    assert_eq!(finished["usage"]["cut_exchanges"], 2);
    assert!(
        warnings(&bundle).contains("recorded as cut"),
        "{}",
        warnings(&bundle)
    );
    assert!(stderr.contains("recorded as cut"), "{stderr}");
}

/// The uid and gid the tests run provrun as when they drop root.
const ORDINARY: u32 = 1000;

fn my_uid() -> u32 {
    let out = std::process::Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// `provrun ARGS` as uid 1000 (the test is root: `setpriv`, with a copy of the binary
/// and TMPDIR and HOME in `dir`, which that user then owns); as the test's own user
/// otherwise.
fn provrun_as_ordinary(dir: &Path, args: &[&str]) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt as _;
    let mut cmd = if my_uid() == 0 {
        let binary = dir.join("provrun");
        if !binary.exists() {
            std::fs::copy(env!("CARGO_BIN_EXE_provrun"), &binary).unwrap();
            std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let owner = format!("{ORDINARY}:{ORDINARY}");
        let chowned = std::process::Command::new("chown")
            .args(["-R", &owner, &s(dir)])
            .status()
            .unwrap();
        assert!(chowned.success());
        let mut c = std::process::Command::new("setpriv");
        c.args([
            &format!("--reuid={ORDINARY}"),
            &format!("--regid={ORDINARY}"),
            "--clear-groups",
        ]);
        c.arg(&binary);
        c
    } else {
        std::process::Command::new(env!("CARGO_BIN_EXE_provrun"))
    };
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TMPDIR", dir)
        .env("HOME", dir)
        .env("LANG", "C.UTF-8")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn an_unreadable_workspace_file_is_left_out_not_the_run_when_provrun_is_an_ordinary_user() {
    if !wrap_ready(
        "an_unreadable_workspace_file_is_left_out_not_the_run_when_provrun_is_an_ordinary_user",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("before.txt"), "there before\n").unwrap();
    let bundle = dir.join("bundle");
    // The program locks a file and a folder it made, around two it leaves readable.
    let script = "echo a > a.txt; echo s > secret.txt; chmod 000 secret.txt; \
                  mkdir locked; echo x > locked/x; chmod 000 locked; echo z > z.txt";
    let out = provrun_as_ordinary(
        dir,
        &[
            "wrap",
            "--out",
            &s(&bundle),
            "--workspace",
            &s(&ws),
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_verifies(&bundle);
    let finished = &of_kind(&bundle, "run_finished")[0]["payload"];
    assert_eq!(finished["status"], "finished", "{finished}");
    let produced: Vec<String> = of_kind(&bundle, "output_produced")
        .iter()
        .map(|e| e["payload"]["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(produced, ["a.txt", "before.txt", "z.txt"]);
    let skipped: Vec<(String, String, String)> = of_kind(&bundle, "output_skipped")
        .iter()
        .map(|e| {
            let p = &e["payload"];
            (
                p["path"].as_str().unwrap().to_owned(),
                p["kind"].as_str().unwrap().to_owned(),
                p["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        skipped,
        [
            ("locked".into(), "directory".into(), "unreadable".into()),
            ("secret.txt".into(), "file".into(), "unreadable".into()),
        ]
    );
    assert!(warnings(&bundle).contains("`secret.txt` could not be read"));
}

#[test]
fn set_id_bits_never_stay_on_the_host_and_device_nodes_are_removed() {
    if !wrap_ready("set_id_bits_never_stay_on_the_host_and_device_nodes_are_removed") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    // A device node the caller's workspace should never hold (made here, as root).
    let device = my_uid() == 0
        && std::process::Command::new("mknod")
            .arg(ws.join("null"))
            .args(["c", "1", "3"])
            .status()
            .is_ok_and(|s| s.success());
    let bundle = tmp.path().join("bundle");
    // The program leaves a set-uid, set-gid interpreter, also hidden in a folder only
    // its owner may list but anyone may go through.
    let script = "cp /usr/bin/python3 py && chmod 6755 py && mkdir hide && \
                  cp /usr/bin/python3 hide/py && chmod 6755 hide/py && chmod 311 hide";
    let out = provrun()
        .args([
            "wrap",
            "--out",
            &s(&bundle),
            "--workspace",
            &s(&ws),
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    use std::os::unix::fs::MetadataExt as _;
    for p in ["py", "hide/py"] {
        let mode = std::fs::metadata(ws.join(p)).unwrap().mode();
        assert_eq!(mode & 0o6000, 0, "{p}: {mode:o}");
    }
    assert_eq!(
        std::fs::metadata(ws.join("hide")).unwrap().mode() & 0o777,
        0o311
    );
    assert!(
        warnings(&bundle).contains("`py` was left set-uid"),
        "{}",
        warnings(&bundle)
    );
    if device {
        assert!(!ws.join("null").exists());
        let skipped = of_kind(&bundle, "output_skipped");
        assert!(
            skipped
                .iter()
                .any(|e| e["payload"]["path"] == "null" && e["payload"]["kind"] == "char_device"),
            "{skipped:?}"
        );
    }
    assert_verifies(&bundle);
}

#[test]
fn three_hundred_connections_at_once_from_inside_the_sandbox_are_all_served() {
    if !wrap_ready("three_hundred_connections_at_once_from_inside_the_sandbox_are_all_served") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let upstream = Upstream::start(|_: &Request| {
        Reply::json(200, &serde_json::json!({"object": "list", "data": []}))
    });
    // One thread: 300 connections open at once, a request on each, then each answer read
    // and the connection closed; then one more request on a fresh connection.
    let script = r#"
import socket
req = b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
socks = [socket.create_connection(("127.0.0.1", 47800), timeout=60) for _ in range(300)]
for s in socks:
    s.sendall(req)
def answer(s):
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    return got
ok = sum(answer(s).startswith(b"HTTP/1.1 200") for s in socks)
print("served:", ok, flush=True)
last = socket.create_connection(("127.0.0.1", 47800), timeout=60)
last.sendall(req)
print("after:", answer(last).split(b"\r\n")[0].decode(), flush=True)
"#;
    let out = provrun()
        .env("OPENAI_API_KEY", REAL_KEY)
        .args(["wrap", "--out", &s(&bundle)])
        .args(["--upstream-openai", &format!("{}/v1", upstream.origin)])
        .args(["--", "/usr/bin/python3", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("served: 300"), "{stdout}\n{stderr}");
    assert!(stdout.contains("after: HTTP/1.1 200"), "{stdout}");
    assert_verifies(&bundle);
    assert_eq!(of_kind(&bundle, "http_exchanged").len(), 301);
    assert_eq!(upstream.log().len(), 301);
}

#[test]
fn a_hostile_session_log_is_imported_within_its_bounds_with_typed_warnings() {
    if !wrap_ready("a_hostile_session_log_is_imported_within_its_bounds_with_typed_warnings") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    // A rollout with 20 005 calls (5 over the bound), a line nested 200 deep, and one
    // call whose arguments are a 5 MB array of tiny numbers.
    let script = r#"
import json, os
d = os.path.join(os.environ["CODEX_HOME"], "sessions", "2026", "12", "05")
os.makedirs(d)
with open(os.path.join(d, "rollout-x.jsonl"), "w") as f:
    f.write(json.dumps({"timestamp": "2026-12-05T09:17:27.300Z", "type": "session_meta", "payload": {"id": "s"}}) + "\n")
    f.write('{"type":"response_item","payload":' + "[" * 200 + "]" * 200 + "}\n")
    big = "[" + ",".join(["0"] * 2_500_000) + "]"
    f.write('{"timestamp":"2026-12-05T09:17:28.000Z","type":"response_item","payload":{"type":"custom_tool_call","name":"big","call_id":"c_big","input":' + big + '}}\n')
    for i in range(20_004):
        f.write(json.dumps({"timestamp": "2026-12-05T09:17:28.000Z", "type": "response_item",
            "payload": {"type": "function_call", "name": "t", "arguments": "{}", "call_id": f"c{i}"}}) + "\n")
"#;
    let out = provrun()
        .args([
            "wrap",
            "--out",
            &s(&bundle),
            "--",
            "/usr/bin/python3",
            "-c",
            script,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_verifies(&bundle);
    let calls = of_kind(&bundle, "tool_called");
    assert_eq!(calls.len(), 20_000);
    // The large arguments are kept as their JSON text.
    let big = &calls[0]["payload"];
    assert_eq!(big["call_id"], "c_big");
    let said = warnings(&bundle);
    assert!(said.contains("5 tool call(s) beyond 20000"), "{said}");
    assert!(said.contains("1 line(s) nested deeper than 64"), "{said}");
    assert!(
        said.contains("1 call(s) with arguments or a result over"),
        "{said}"
    );
    let finished = &of_kind(&bundle, "run_finished")[0]["payload"];
    // The log's calls are claimed; none was seen on the wire (no model was called).
    assert_eq!(finished["usage"]["claimed_tool_calls"], 20_000);
    assert_eq!(finished["usage"]["tool_calls"], 0);
}

/// The private folders of wrapped runs in `tmp`.
fn private_folders(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("provrun-wrap-"))
        .map(|e| e.path())
        .collect()
}

#[test]
fn the_private_folder_of_a_killed_run_is_removed_by_the_next_run() {
    if !wrap_ready("the_private_folder_of_a_killed_run_is_removed_by_the_next_run") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let private = tmp.path().join("tmp");
    std::fs::create_dir(&private).unwrap();
    let mut killed = provrun()
        .env("TMPDIR", &private)
        .args([
            "wrap",
            "--out",
            &s(&tmp.path().join("killed")),
            "--",
            "sleep",
            "30",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while private_folders(&private).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    killed.kill().unwrap();
    killed.wait().unwrap();
    let left = private_folders(&private);
    assert_eq!(left.len(), 1, "{left:?}");
    // The next run, with the same TMPDIR, removes it (and its own when it ends).
    let out = provrun()
        .env("TMPDIR", &private)
        .args(["wrap", "--out", &s(&tmp.path().join("next")), "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(private_folders(&private), Vec::<PathBuf>::new());
}

#[test]
fn as_root_each_wrapped_run_has_a_uid_of_its_own_and_the_workspace_is_handed_back() {
    if my_uid() != 0
        || !wrap_ready(
            "as_root_each_wrapped_run_has_a_uid_of_its_own_and_the_workspace_is_handed_back",
        )
    {
        return;
    }
    use std::os::unix::fs::MetadataExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let runs: Vec<(PathBuf, PathBuf, std::process::Child)> = ["a", "b"]
        .iter()
        .map(|name| {
            let ws = tmp.path().join(format!("ws-{name}"));
            std::fs::create_dir(&ws).unwrap();
            let bundle = tmp.path().join(format!("bundle-{name}"));
            let child = provrun()
                .args(["wrap", "--out", &s(&bundle), "--workspace", &s(&ws), "--"])
                .args(["sh", "-c", "echo x > mark; sleep 3"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (ws, bundle, child)
        })
        .collect();
    // While both run, their files on the host are owned by two different uids.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let owners = loop {
        let owners: Vec<Option<u32>> = runs
            .iter()
            .map(|(ws, _, _)| {
                std::fs::symlink_metadata(ws.join("mark"))
                    .ok()
                    .map(|m| m.uid())
            })
            .collect();
        if owners.iter().all(Option::is_some) || std::time::Instant::now() > deadline {
            break owners;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (a, b) = (owners[0].unwrap(), owners[1].unwrap());
    assert_ne!(a, b, "two runs share uid {a}");
    assert!(a > 65_536 && b > 65_536, "{a} {b}");
    for ((ws, bundle, child), uid) in runs.into_iter().zip([a, b]) {
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let started = &of_kind(&bundle, "run_started")[0]["payload"];
        assert_eq!(started["details"]["sandbox"]["command_user"]["uid"], uid);
        // Handed back to the folder's owner (root) when the run ended.
        assert_eq!(std::fs::metadata(ws.join("mark")).unwrap().uid(), 0);
        assert_eq!(std::fs::metadata(&ws).unwrap().uid(), 0);
    }
}

#[test]
fn connections_made_straight_to_the_proxys_sockets_count_against_its_bound() {
    if !wrap_ready("connections_made_straight_to_the_proxys_sockets_count_against_its_bound") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let upstream = Upstream::start(|_: &Request| {
        Reply::json(200, &serde_json::json!({"object": "list", "data": []}))
    });
    // 300 connections held open on the socket itself, around the forwarder: the proxy
    // serves 256 at once; the others are answered 503 and recorded.
    let script = r#"
import select, socket, time
held = []
for _ in range(300):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/provrun-forward/openai.sock")
    held.append(s)
time.sleep(1)
readable, _, _ = select.select(held, [], [], 0)
refused = sum(s.recv(100).startswith(b"HTTP/1.1 503") for s in readable)
print("refused:", refused, flush=True)
"#;
    let out = provrun()
        .env("OPENAI_API_KEY", REAL_KEY)
        .args(["wrap", "--out", &s(&bundle)])
        .args(["--upstream-openai", &format!("{}/v1", upstream.origin)])
        .args(["--", "/usr/bin/python3", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("refused: 44"), "{stdout}\n{stderr}");
    assert_verifies(&bundle);
    let refusals = of_kind(&bundle, "connection_handled");
    assert_eq!(refusals.len(), 44);
    assert_eq!(refusals[0]["payload"]["via"], "socket:openai");
    assert_eq!(refusals[0]["payload"]["outcome"], "refused");
    let finished = &of_kind(&bundle, "run_finished")[0]["payload"];
    assert_eq!(finished["usage"]["refused_connections"], 44);
}
