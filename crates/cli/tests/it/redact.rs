//! `provrun redact` as scripts see it: a run of the offline example redacted by pattern,
//! blob digest and path, still verifying with its original signature and in its ledger,
//! `verify` listing the redactions in text and JSON; every exit code; and the committed
//! bundle of a version that chained lines by their bytes (tests/fixtures/bundle-v4-hello):
//! it still verifies and shows, its blobs and files redact, its text cannot.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::cli::{events, exit, provrun, s};

fn hello(bundle: &Path) {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello");
    exit(
        &provrun(&[
            "run",
            &s(&ex.join("agent.toml")),
            "--input",
            &s(&ex.join("input")),
            "--out",
            &s(bundle),
        ]),
        0,
    );
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Every file under `root`, read.
fn all_files(root: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all_files(&path, out);
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_run_redacted_by_pattern_blob_and_path_verifies_with_its_signature_and_in_its_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let (src, new) = (dir.path().join("run"), dir.path().join("new"));
    hello(&src);
    let key = dir.path().join("k");
    exit(
        &provrun(&["keygen", &s(&key), "--algorithm", "ecdsa-p256"]),
        0,
    );
    exit(&provrun(&["sign", &s(&src), "--key", &s(&key)]), 0);
    let (lkey, ledger) = (dir.path().join("lk"), dir.path().join("ledger"));
    exit(&provrun(&["keygen", &s(&lkey)]), 0);
    exit(
        &provrun(&[
            "ledger",
            "init",
            &s(&ledger),
            "--key",
            &s(&lkey),
            "--origin",
            "example.org/runs",
        ]),
        0,
    );
    exit(&provrun(&["ledger", "add", &s(&ledger), &s(&src)]), 0);

    // The first model response, by its digest; the answer file, by its path; and the notes
    // the agent read, wherever they are (the tool result, the input file, the later
    // requests and the trace that quote them).
    let evs = events(&src);
    let response = evs
        .iter()
        .find(|e| e["type"] == "model_called")
        .map(|e| {
            e["payload"]["response"]["digest"]["sha256"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .unwrap();
    let stdout = exit(
        &provrun(&[
            "redact",
            &s(&src),
            "--out",
            &s(&new),
            "--match",
            "Meeting notes",
            "--blob",
            &format!("sha256:{response}"),
            "--path",
            "output/response.txt",
            "--reason",
            "attendees' names",
            "--sign-key",
            &s(&key),
        ]),
        0,
    );
    assert!(
        stdout.starts_with("redacted 1 string(s), 3 blob(s), 2 file(s) into"),
        "{stdout}"
    );

    let text = exit(
        &provrun(&[
            "verify",
            &s(&new),
            "--key",
            &s(&dir.path().join("k.pub")),
            "--ledger",
            &s(&ledger),
        ]),
        0,
    );
    for want in [
        "pass  signature",
        "pass  ledger",
        "pass  redactions",
        "redaction 1: \"attendees' names\" on ",
        "  removed text  line 6 /payload/result  sha256:",
        &format!("  removed blob  sha256:{response} ("),
        "  removed file  input/notes.txt  sha256:",
        "  removed file  output/response.txt  sha256:",
        "bundle verifies",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    let report: Value =
        serde_json::from_str(&exit(&provrun(&["verify", &s(&new), "--json"]), 0)).unwrap();
    let r = &report["redactions"][0];
    assert_eq!(r["signature"], "verified");
    assert_eq!(r["record"]["reason"], "attendees' names");
    let kinds: Vec<&str> = r["record"]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "blob", "blob", "blob", "file", "file"]);
    // A bundle never redacted has no `redactions` member.
    let plain: Value =
        serde_json::from_str(&exit(&provrun(&["verify", &s(&src), "--json"]), 0)).unwrap();
    assert!(plain.get("redactions").is_none());

    // The notes are nowhere in the copy; the copy still shows.
    let mut files = Vec::new();
    all_files(&new, &mut files);
    for (path, bytes) in &files {
        assert!(!contains(bytes, b"Meeting notes"), "{}", path.display());
    }
    assert!(!new.join("output/response.txt").exists());
    exit(&provrun(&["show", &s(&new)]), 0);

    // Taken apart: without its record the copy does not verify.
    std::fs::remove_file(new.join("redactions.jsonl")).unwrap();
    let text = exit(&provrun(&["verify", &s(&new)]), 1);
    assert!(text.contains("FAIL  chain"), "{text}");
}

#[test]
fn every_exit_code_of_redact() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("run");
    hello(&src);
    let out = |name: &str| s(&dir.path().join(name));
    let base = |o: &str| vec!["redact".to_owned(), s(&src), "--out".into(), o.to_owned()];
    let run = |extra: &[&str], o: &str| {
        let mut a = base(o);
        a.extend(extra.iter().map(|x| x.to_string()));
        provrun(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    // No selector, a bad digest, a bad pattern, a path outside input/ and output/, a blob
    // or file the run does not have, a pattern that matches what must stay: exit 2.
    for (extra, why) in [
        (vec!["--reason", "r"], "required"),
        (
            vec!["--blob", "xyz", "--reason", "r"],
            "not a SHA-256 digest",
        ),
        (vec!["--match", "(", "--reason", "r"], "--match `(`"),
        (
            vec!["--path", "events.jsonl", "--reason", "r"],
            "input/PATH or output/PATH",
        ),
        (
            vec!["--blob", &"0".repeat(64), "--reason", "r"],
            "no event names",
        ),
        (
            vec!["--path", "output/none.txt", "--reason", "r"],
            "not a recorded",
        ),
        (
            vec!["--match", "read_file", "--reason", "r"],
            "nothing can be removed",
        ),
        (
            vec!["--match", "run-", "--reason", "r"],
            "nothing can be removed",
        ),
        (
            vec!["--match", "no such words", "--reason", "r"],
            "nothing matches",
        ),
    ] {
        let o = out("refused");
        let res = run(&extra, &o);
        exit(&res, 2);
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains(why), "{extra:?}: {err}");
        assert!(!Path::new(&o).exists(), "{extra:?}");
    }
    // NEW not empty: exit 2, nothing touched.
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("keep"), b"x").unwrap();
    exit(
        &run(&["--path", "output/summary.md", "--reason", "r"], &s(&busy)),
        2,
    );
    assert_eq!(std::fs::read_dir(&busy).unwrap().count(), 1);
    // A bundle that does not verify: exit 1.
    let broken = dir.path().join("broken");
    exit(
        &provrun(&[
            "redact",
            &s(&src),
            "--out",
            &s(&broken),
            "--path",
            "output/summary.md",
            "--reason",
            "r",
        ]),
        0,
    );
    std::fs::write(broken.join("output/response.txt"), b"changed").unwrap();
    exit(
        &provrun(&[
            "redact",
            &s(&broken),
            "--out",
            &out("again"),
            "--path",
            "output/summary.md",
            "--reason",
            "r",
        ]),
        1,
    );
}

#[test]
fn a_bundle_chained_by_bytes_still_verifies_and_redacts_its_blobs_and_files_not_its_text() {
    let old = fixture("bundle-v4-hello");
    assert!(events(&old)[0]["payload"].get("chain").is_none());
    exit(&provrun(&["verify", &s(&old)]), 0);
    exit(&provrun(&["show", &s(&old)]), 0);
    let dir = tempfile::tempdir().unwrap();

    let text = dir.path().join("text");
    let res = provrun(&[
        "redact",
        &s(&old),
        "--out",
        &s(&text),
        "--match",
        "Meeting notes",
        "--reason",
        "r",
    ]);
    exit(&res, 2);
    assert!(String::from_utf8_lossy(&res.stderr).contains("chains its lines' bytes"));
    assert!(!text.exists());

    let new = dir.path().join("new");
    let trace = events(&old)
        .iter()
        .find(|e| e["type"] == "trace_imported")
        .map(|e| {
            e["payload"]["trace"]["digest"]["sha256"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .unwrap();
    exit(
        &provrun(&[
            "redact",
            &s(&old),
            "--out",
            &s(&new),
            "--blob",
            &trace,
            "--path",
            "input/notes.txt",
            "--reason",
            "r",
        ]),
        0,
    );
    // The log and the statement are the original's, byte for byte.
    for name in ["events.jsonl", "statement.json"] {
        assert_eq!(
            std::fs::read(old.join(name)).unwrap(),
            std::fs::read(new.join(name)).unwrap()
        );
    }
    let text = exit(&provrun(&["verify", &s(&new)]), 0);
    assert!(
        text.contains("pass  redactions 1 redaction(s): 0 string(s), 1 blob(s), 1 file(s)"),
        "{text}"
    );
}

#[test]
fn a_committed_redacted_bundle_still_verifies_with_its_signature_and_lists_its_redaction() {
    let old = fixture("bundle-v5-redacted");
    let key = fixture("bundle-v5-redacted.pub");
    assert_eq!(events(&old)[0]["payload"]["chain"], 2);
    let text = exit(&provrun(&["verify", &s(&old), "--key", &s(&key)]), 0);
    for want in [
        "pass  signature",
        "pass  redactions 1 redaction(s): 1 string(s), 2 blob(s), 2 file(s) removed",
        "redaction 1: \"fixture: the meeting notes are personal\" on 2026-12-05",
        "  removed file  output/summary.md  sha256:",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    let report: Value =
        serde_json::from_str(&exit(&provrun(&["verify", &s(&old), "--json"]), 0)).unwrap();
    assert_eq!(report["redactions"][0]["signature"], "verified");
    exit(&provrun(&["show", &s(&old)]), 0);
}

/// The secret of the issue: a quote and a backslash, so that JSON escapes it.
const SECRET: &str = "pw\"Q7z\\9Lk-tok";
/// A PIN: a whole tool argument, and inside longer text.
const PIN: &str = "4821";

/// A Chat Completions tool call, streamed (SSE) or whole, asking for `calls`.
fn chat_calls(
    stream: bool,
    calls: &[(&str, &str, serde_json::Value)],
) -> crate::support::upstream::Reply {
    use crate::support::upstream::Reply;
    use serde_json::json;
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| {
            json!({"index": i, "id": id, "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    if !stream {
        let mut message_calls = tool_calls.clone();
        for c in &mut message_calls {
            c.as_object_mut().unwrap().remove("index");
        }
        return Reply::json(
            200,
            &json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                        "role": "assistant", "content": null, "tool_calls": message_calls}}],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18}}),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut r = Reply::sse(&[
        (
            None,
            chunk(
                json!({"role": "assistant", "tool_calls": tool_calls}),
                Value::Null,
            ),
        ),
        (None, chunk(json!({}), json!("tool_calls"))),
    ]);
    r.chunks.push(b"data: [DONE]\n\n".to_vec());
    r
}

/// A run on a live (loopback) Chat Completions model that reads a file holding the
/// secret, quotes it in the next request, writes the PIN as a whole tool argument and
/// answers with both, the secret split across two streamed deltas when `stream`.
fn secret_run(dir: &Path, stream: bool) -> PathBuf {
    use crate::support::upstream::{Reply, Upstream, chat_stream};
    use serde_json::json;
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    let upstream = Upstream::start(move |req| {
        let n = req.json()["messages"].as_array().map_or(0, Vec::len);
        match n {
            0..=2 => chat_calls(
                stream,
                &[("c1", "read_file", json!({"path": "/input/secret.txt"}))],
            ),
            3 => chat_calls(
                stream,
                &[
                    (
                        "c2",
                        "write_file",
                        json!({"path": "/output/notes.md", "content": "code: PIN."}),
                    ),
                    (
                        "c3",
                        "str_replace",
                        json!({"path": "/output/notes.md", "old": "PIN", "new": PIN}),
                    ),
                ],
            ),
            _ => {
                // The secret sits across the middle of the answer: split between deltas.
                let text = format!("The password {SECRET} and PIN {PIN}: done");
                if stream {
                    chat_stream("m", &text)
                } else {
                    Reply::json(
                        200,
                        &json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                                "choices": [{"index": 0, "finish_reason": "stop",
                                             "message": {"role": "assistant", "content": text}}],
                                "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18}}),
                    )
                }
            }
        }
    });
    let spec = dir.join("agent.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"secrets\"\nmodel = \"openai:m\"\nbase_url = \"{}/v1\"\nstream = {stream}\n\
             tools = [\"read_file\", \"write_file\", \"str_replace\"]\n",
            upstream.origin
        ),
    )
    .unwrap();
    let bundle = dir.join("run");
    let out = crate::support::cli::command(&[
        "run",
        &s(&spec),
        "--input",
        &s(&input.join("secret.txt")),
        "--out",
        &s(&bundle),
        "--prompt",
        "go",
    ])
    .env("OPENAI_API_KEY", "sk-test")
    .output()
    .unwrap();
    exit(&out, 0);
    // The secret did cross the wire escaped, and split in the stream.
    let log = upstream.log();
    assert!(
        log.iter()
            .any(|l| contains(&l.request.body, br#"pw\"Q7z\\9Lk-tok"#))
    );
    bundle
}

/// Every SHA-256 of a 4-digit candidate, with and without a newline, as hex and base64.
fn pin_digests() -> Vec<String> {
    use base64::Engine as _;
    use sha2::Digest as _;
    let mut out = Vec::new();
    for n in 0..10_000u32 {
        for s in [format!("{n:04}"), format!("{n:04}\n")] {
            let d = sha2::Sha256::digest(s.as_bytes());
            out.push(hex::encode(d));
            out.push(base64::engine::general_purpose::STANDARD.encode(d));
            out.push(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(d));
        }
    }
    out
}

/// What a redacted copy holds, every blob read back: its files' bytes, each blob's bytes
/// by `provrun cat`, and the redaction records' payloads decoded.
fn readable(copy: &Path) -> Vec<(String, Vec<u8>)> {
    use base64::Engine as _;
    let mut files = Vec::new();
    all_files(copy, &mut files);
    let mut out: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .map(|(p, b)| (p.display().to_string(), b))
        .collect();
    let mut digests = std::collections::BTreeSet::new();
    for ev in events(copy) {
        collect_digests(&ev["payload"], &mut digests);
    }
    for d in digests {
        let cat = provrun(&["cat", &s(copy), &d]);
        out.push((format!("blob {d}"), cat.stdout));
    }
    let records = std::fs::read_to_string(copy.join("redactions.jsonl")).unwrap_or_default();
    for line in records.lines() {
        let env: Value = serde_json::from_str(line).unwrap();
        let payload = base64::engine::general_purpose::STANDARD
            .decode(env["payload"].as_str().unwrap())
            .unwrap();
        out.push(("redaction record".into(), payload));
    }
    out
}

fn collect_digests(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            if let Some(h) = m.get("digest").and_then(|d| d["sha256"].as_str()) {
                out.insert(h.to_owned());
            }
            m.values().for_each(|x| collect_digests(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_digests(x, out)),
        _ => {}
    }
}

/// The text deltas of every SSE body among `blobs`, joined.
fn streamed_text(blobs: &[(String, Vec<u8>)]) -> String {
    let mut joined = String::new();
    for (_, b) in blobs {
        let text = String::from_utf8_lossy(b);
        for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            if let Ok(v) = serde_json::from_str::<Value>(data)
                && let Some(t) = v["choices"][0]["delta"]["content"].as_str()
            {
                joined.push_str(t);
            }
        }
    }
    joined
}

#[test]
fn redaction_removes_a_secret_in_every_form_and_leaves_no_digest_of_a_short_value() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k");
    exit(&provrun(&["keygen", &s(&key)]), 0);
    let digests = pin_digests();
    for stream in [false, true] {
        let d = dir.path().join(if stream { "streamed" } else { "whole" });
        let src = secret_run(&d, stream);
        exit(&provrun(&["sign", &s(&src), "--key", &s(&key)]), 0);
        // Before: the secret is there escaped, and the streamed text carries it.
        let before = readable(&src);
        if stream {
            let joined = streamed_text(&before);
            assert!(joined.contains(SECRET), "{joined}");
            assert!(
                !before
                    .iter()
                    .any(|(_, b)| contains(b, SECRET.as_bytes()) && b.starts_with(b"data:")),
                "the streamed body holds the secret only split"
            );
        }
        let copy = d.join("copy");
        let secret_pattern = regex::escape(SECRET);
        let pin_pattern = format!(r"\b{PIN}\b");
        exit(
            &provrun(&[
                "redact",
                &s(&src),
                "--out",
                &s(&copy),
                "--match",
                &secret_pattern,
                "--match",
                &pin_pattern,
                "--reason",
                "credentials",
            ]),
            0,
        );
        // The copy verifies, with the original signature.
        let pubkey = dir.path().join("k.pub");
        let report: Value = serde_json::from_str(&exit(
            &provrun(&["verify", &s(&copy), "--key", &s(&pubkey), "--json"]),
            0,
        ))
        .unwrap();
        assert_eq!(report["ok"], true, "{report:#}");
        let signature = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["code"] == "signature")
            .unwrap();
        assert_eq!(signature["status"], "pass", "{signature}");
        let after = readable(&copy);
        let escaped = serde_json::to_string(SECRET).unwrap();
        let escaped = &escaped[1..escaped.len() - 1];
        for (what, bytes) in &after {
            assert!(
                !contains(bytes, SECRET.as_bytes()),
                "{what} holds the secret"
            );
            assert!(
                !contains(bytes, escaped.as_bytes()),
                "{what} holds the secret escaped"
            );
            let text = String::from_utf8_lossy(bytes);
            for d in &digests {
                assert!(
                    !text.contains(d.as_str()),
                    "{what} holds a digest of a 4-digit value"
                );
            }
        }
        assert!(!streamed_text(&after).contains(SECRET));
        // The PIN as a whole tool argument became the placeholder.
        let evs = events(&copy);
        let replaced = evs
            .iter()
            .find(|e| e["payload"]["call_id"] == "c3" || e["payload"]["name"] == "str_replace")
            .unwrap();
        assert_eq!(replaced["payload"]["arguments"]["new"], "[redacted]");
    }
}
