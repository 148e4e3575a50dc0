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
