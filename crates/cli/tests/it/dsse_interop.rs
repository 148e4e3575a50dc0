//! The signing round trip against independent implementations: `provrun keygen`, a run
//! signed with `--sign-key`, `provrun verify --key`, then tests/interop/check_dsse.py in a
//! throwaway Python virtualenv (under target/) with securesystemslib (DSSE), pyca/cryptography
//! (the PEM key files) and in-toto-attestation (the statement).
//!
//! The statements of finished, failed, paused and cancelled runs are checked the same way
//! (tests/interop/check_statement.py): in-toto-attestation validates each, and its
//! `builder.id` and `buildType` must be URIs.
//!
//! Without Python (or without PyPI) the test is skipped with a loud message, except under
//! `CI=true`, where it fails instead: `cargo xtask ci` installs python3 and venv there.

use crate::support::venv::in_ci;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::venv;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Skip loudly, or fail under CI.
fn unavailable(why: &str) {
    assert!(
        !in_ci(),
        "CI=true: the DSSE interoperability test cannot run: {why}"
    );
    eprintln!(
        "\n*** SKIPPED dsse_interop: {why}.\n*** The signature is NOT checked against an \
         independent DSSE implementation on this machine (CI=true makes this a failure).\n"
    );
}

/// A virtualenv with the verifiers, made once under target/ (once per process: the tests
/// of this file share it); `Err` says why not.
fn virtualenv() -> Result<PathBuf, String> {
    static VENV: std::sync::Mutex<Option<Result<PathBuf, String>>> = std::sync::Mutex::new(None);
    let mut made = VENV
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    made.get_or_insert_with(|| {
        venv::virtualenv(
            "dsse-interop-venv",
            "tests/interop/requirements.txt",
            "import securesystemslib, in_toto_attestation, cryptography",
        )
    })
    .clone()
}

/// The built `provrun` with these arguments; its exit code.
fn provrun(args: &[&str]) -> i32 {
    let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(args)
        .output()
        .expect("the provrun binary runs");
    out.status.code().unwrap_or(-1)
}

#[test]
fn signed_bundles_verify_with_securesystemslib_and_in_toto_attestation() {
    round_trip("ed25519");
}

/// The same with an ECDSA P-256 key: securesystemslib checks the DER signature under its
/// `ecdsa-sha2-nistp256` scheme, and the key id is the SHA-256 of the SPKI DER.
#[test]
fn ecdsa_p256_signatures_verify_with_securesystemslib() {
    round_trip("ecdsa-p256");
}

/// keygen, a signed run, `verify --key`, check_dsse.py; a signature by another key of the
/// same algorithm is refused by both.
fn round_trip(algorithm: &str) {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => return unavailable(&why),
    };
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("signing.pem");
    let s = |p: &Path| p.display().to_string();
    assert_eq!(provrun(&["keygen", &s(&key), "--algorithm", algorithm]), 0);
    let public = dir.path().join("signing.pem.pub");
    let bundle = dir.path().join("bundle");
    let ex = root().join("examples/scripted");
    assert_eq!(
        provrun(&[
            "run",
            &s(&ex.join("agent.toml")),
            "--input",
            &s(&ex.join("input")),
            "--out",
            &s(&bundle),
            "--sign-key",
            &s(&key),
        ]),
        0
    );
    assert!(bundle.join("statement.dsse.json").is_file());
    assert_eq!(provrun(&["verify", &s(&bundle), "--key", &s(&public)]), 0);

    let out = Command::new(&python)
        .arg(root().join("tests/interop/check_dsse.py"))
        .args([&bundle, &public, &key])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("INTEROP-OK"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "dsse: securesystemslib verifies the envelope",
        "dsse: securesystemslib refuses a changed payload",
        "predicate: parses as SLSA provenance v1",
    ] {
        assert!(text.contains(line), "{text}");
    }

    // The same checker refuses an envelope whose signature is not by that key.
    let other = dir.path().join("other.pem");
    assert_eq!(
        provrun(&["keygen", &s(&other), "--algorithm", algorithm]),
        0
    );
    assert_eq!(provrun(&["sign", &s(&bundle), "--key", &s(&other)]), 0);
    let out = Command::new(&python)
        .arg(root().join("tests/interop/check_dsse.py"))
        .args([&bundle, &public, &key])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a signature by another key passed");
    assert_eq!(provrun(&["verify", &s(&bundle), "--key", &s(&public)]), 1);
}

/// A scripted agent in `dir` (the approval policy and the script given).
fn agent(dir: &Path, approve: &str, script: &str) -> PathBuf {
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "name = \"st\"\nmodel = \"script:script.json\"\ntools = [\"write_file\"]\n\
             approve = \"{approve}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("script.json"), script).unwrap();
    dir.join("agent.toml")
}

/// A run stopped with Ctrl-C while it waits on its model: a cancelled bundle.
fn cancelled_run(dir: &Path, bundle: &Path) {
    let agent = agent(dir, "none", r#"[{"text": "too late", "delay_ms": 30000}]"#);
    let child = Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(["run", &agent.display().to_string(), "--out"])
        .arg(bundle)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !bundle.join("events.jsonl").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
}

#[test]
fn statements_of_every_run_status_validate_with_in_toto_attestation() {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => return unavailable(&why),
    };
    let dir = tempfile::tempdir().unwrap();
    let s = |p: &Path| p.display().to_string();
    let write = r#"{"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "/output/a.txt", "content": "a"}}]}"#;
    let mut statements = Vec::new();
    // (status, approval policy, script, exit code)
    for (status, approve, script, code) in [
        (
            "finished",
            "none",
            format!("[{write}, {{\"text\": \"done\"}}]"),
            0,
        ),
        // The script ends before an answer: the run fails, with an output written.
        ("failed", "none", format!("[{write}]"), 1),
        // Calls an unknown tool, then the script ends: failed with no file written.
        (
            "failed",
            "none",
            r#"[{"tool_calls": [{"id": "x", "name": "nope"}]}]"#.to_string(),
            1,
        ),
        (
            "paused",
            "destructive",
            format!("[{write}, {{\"text\": \"done\"}}]"),
            4,
        ),
    ] {
        let case = dir.path().join(format!("{status}-{}", statements.len()));
        std::fs::create_dir_all(&case).unwrap();
        let agent = agent(&case, approve, &script);
        let bundle = case.join("bundle");
        let code_seen = provrun(&["run", &s(&agent), "--out", &s(&bundle), "--verify"]);
        assert_eq!(code_seen, code, "{status}");
        statements.push((status, bundle.join("statement.json")));
    }
    let cancelled = dir.path().join("cancelled");
    std::fs::create_dir_all(&cancelled).unwrap();
    cancelled_run(&cancelled, &cancelled.join("bundle"));
    assert_eq!(provrun(&["verify", &s(&cancelled.join("bundle"))]), 0);
    statements.push(("cancelled", cancelled.join("bundle/statement.json")));

    let out = Command::new(&python)
        .arg(root().join("tests/interop/check_statement.py"))
        .args(statements.iter().map(|(_, p)| p))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("STATEMENTS-OK"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (status, _) in &statements {
        assert!(text.contains(&format!("{status}: valid")), "{text}");
    }
    assert!(
        text.contains("builder https://github.com/provrun/provrun/builder/provrun/"),
        "{text}"
    );

    // A statement of format 2 (the placeholder URIs) stays valid by the same check.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let out = Command::new(&python)
        .arg(root().join("tests/interop/check_statement.py"))
        .arg(fixtures.join("bundle-v3-hello/statement.json"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("STATEMENTS-OK"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The control: the statements of a version before format 2 (a paused run without
    // subjects, a finished one whose builder is not a URI) are refused by the same check.
    let out = Command::new(&python)
        .arg(root().join("tests/interop/check_statement.py"))
        .arg("--invalid")
        .arg(fixtures.join("bundle-v2-paused/statement.json"))
        .arg(fixtures.join("bundle-v2-approved/statement.json"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("At least one subject required"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("is not a URI"), "{text}");
}
