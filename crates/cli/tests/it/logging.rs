//! The log on stderr through the `provrun` binary: the library's warnings reach it by
//! default, `-v`/`-vv` say more, `-q` says nothing but errors, `RUST_LOG` wins over the
//! flags, `--log-format json` writes one JSON object a line, and stdout stays the
//! command's output. A key that a server echoes back (planted in recorded provider
//! responses, served from loopback) appears in no line at any level or format.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::cli::{s, text};

const KEY: &str = "sk-logtest-planted-7f3a9c2e1b";

/// A recorded response of the model crate's fixtures.
fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../model/tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A loopback server answering each request with the next of `replies` (status, body),
/// round and round; returns its base URL.
fn serve(replies: Vec<(u16, String)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let (status, answer) = &replies[n % replies.len()];
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\nretry-after-ms: 10\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    base
}

/// An agent over an `openai:` model at `base`, its key in `LOGTEST_KEY`.
fn agent(dir: &Path, base: &str) -> PathBuf {
    let path = dir.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"log\"\nmodel = \"openai:gpt-4o-mini\"\nbase_url = \"{base}\"\n\
             api_key_env = \"LOGTEST_KEY\"\n"
        ),
    )
    .unwrap();
    path
}

fn run(agent: &Path, bundle: &Path, flags: &[&str], rust_log: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_provrun"));
    cmd.args(flags)
        .args(["run", &s(agent), "--out", &s(bundle)])
        .env("LOGTEST_KEY", KEY)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    match rust_log {
        Some(v) => cmd.env("RUST_LOG", v),
        None => cmd.env_remove("RUST_LOG"),
    };
    cmd.output().unwrap()
}

/// The replies of one run: a 429 whose message echoes the key (retried), then a recorded
/// answer whose text echoes it.
fn echoing_replies() -> Vec<(u16, String)> {
    let limited = fixture("openai/10_error_429_openrouter_rate_limited.response.json")
        .replace(
            "\"Provider returned error\"",
            &format!("\"Provider returned error for {KEY}\""),
        )
        .replace("\"REDACTED\"", &format!("\"{KEY}\""));
    let answer = fixture("openai/15_seq_final_text_bytes.response.json").replace(
        "\"content\": \"YES\"",
        &format!("\"content\": \"YES {KEY}\""),
    );
    assert!(limited.contains(KEY) && answer.contains(KEY));
    vec![(429, limited), (200, answer)]
}

#[test]
fn warnings_reach_stderr_at_every_level_and_format_without_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(dir.path(), &serve(echoing_replies()));
    let mut n = 0;
    let mut run_with = |flags: &[&str], rust_log: Option<&str>| {
        n += 1;
        let out = run(&agent, &dir.path().join(format!("b{n}")), flags, rust_log);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{flags:?}: {stderr}");
        assert!(
            !stderr.contains(KEY),
            "{flags:?}: the key is on stderr:\n{stderr}"
        );
        assert!(!stdout.contains(KEY), "{flags:?}: the key is on stdout");
        // stdout is the answer alone, whatever the log says.
        assert_eq!(stdout, "YES [REDACTED]\n", "{flags:?}");
        stderr
    };

    // By default: the library's warnings, one line each, and nothing else.
    let err = run_with(&[], None);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.iter().any(|l| l.starts_with("provrun: WARN")
            && l.contains("model request failed")
            && l.contains("retrying")),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the response echoed a secret")),
        "{err}"
    );
    assert!(
        lines.iter().all(|l| l.starts_with("provrun: WARN")),
        "{err}"
    );

    // -vv: debug lines of provrun's crates too (each attempt, the bundle's creation).
    let err = run_with(&["-vv"], None);
    assert!(
        err.lines().any(|l| l.starts_with("provrun: DEBUG")
            && l.contains("provrun_model::native::attempt: model attempt finished")),
        "{err}"
    );
    assert!(err.contains("INFO provrun_sandbox"), "{err}");

    // -q: nothing on stderr at all for a run that finished.
    assert_eq!(run_with(&["-q"], None), "");

    // RUST_LOG wins over -q.
    let err = run_with(&["-q"], Some("provrun_model=debug"));
    assert!(err.contains("model attempt finished"), "{err}");

    // --log-format json: every line one JSON object with the level, target and fields.
    for flags in [
        &["--log-format", "json"][..],
        &["-vv", "--log-format", "json"],
    ] {
        let err = run_with(flags, None);
        let mut levels = std::collections::BTreeSet::new();
        for line in err.lines() {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{flags:?}: not one JSON object ({e}): {line}"));
            levels.insert(v["level"].as_str().unwrap().to_string());
            assert!(
                v["target"].as_str().unwrap().starts_with("provrun"),
                "{line}"
            );
            assert!(v["fields"]["message"].is_string(), "{line}");
        }
        assert!(levels.contains("WARN"), "{flags:?}: {err}");
        assert_eq!(levels.contains("DEBUG"), flags.contains(&"-vv"), "{err}");
    }
}

#[test]
fn a_failed_request_that_echoes_the_key_keeps_it_out_of_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let refused = fixture("openai-responses/16_error_401_invalid_api_key_bytes.response.json")
        .replace("invalid-key", KEY);
    let agent = agent(dir.path(), &serve(vec![(401, refused)]));
    for flags in [&["-vvv"][..], &["-vvv", "--log-format", "json"]] {
        let bundle = dir.path().join(format!("b{}", flags.len()));
        let out = run(&agent, &bundle, flags, None);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("not authorised (HTTP 401"), "{err}");
        assert!(
            !err.contains(KEY),
            "{flags:?}: the key is on stderr:\n{err}"
        );
        let kept = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
        assert!(!kept.contains(KEY));
    }
}

#[test]
fn an_unparsable_rust_log_is_said_and_the_flags_are_used() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(dir.path(), &serve(echoing_replies()));
    let out = run(
        &agent,
        &dir.path().join("b"),
        &[],
        Some("provrun_model=notalevel"),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.starts_with("provrun: RUST_LOG is not a filter"),
        "{err}"
    );
    assert!(err.contains("echoed a secret"), "{err}");
}
