//! `provrun wrap` against a hostile program and the set-ups people really have
//! (issue 49): the real key never reaches the program or the bundle in any form the
//! upstream echoes it in, the caller's other secrets never sit on a command line, a
//! virtualenv's interpreter runs as the virtualenv, a CA variable does not stop an SDK,
//! an exchange still in flight when the program left is recorded as cut, an unreadable
//! workspace file is left out (not the run), set-id bits never stay on the host, and the
//! forwarder and the proxy hold against many connections. Real processes throughout,
//! against loopback upstreams.

use std::process::Stdio;

use crate::support::cli::s;
use crate::support::upstream::{Reply, Request, Upstream};
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
                event[..cut].as_bytes().to_vec(),
                event[cut..].as_bytes().to_vec(),
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
