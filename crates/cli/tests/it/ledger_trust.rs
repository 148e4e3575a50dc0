//! What a careful holder of a checkpoint can check with provrun alone: `ledger verify
//! --since` (and `verify --ledger --since`) catching a log rewritten with the same key
//! and accepting honest growth, from a folder, a `file://` URL and a plain web server;
//! witnesses (`ledger witness init|serve`, `ledger cosign`, `ledger verify
//! --witness-key`) cosigning consistent growth, refusing a fork, and their lines checked
//! by Go's crypto/ed25519 alone (tests/interop/ledger_check.go); `ledger audit` naming a
//! deleted bundle and an unlogged one; `ledger proof` by statement digest or index.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::support::cli::{command, exit, provrun, s};

/// A scripted run of the example into `bundle`.
fn run(bundle: &Path, prompt: &str) {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripted");
    exit(
        &provrun(&[
            "run",
            &s(&ex.join("agent.toml")),
            "--input",
            &s(&ex.join("input")),
            "--prompt",
            prompt,
            "--out",
            &s(bundle),
        ]),
        0,
    );
}

/// A new ledger at `dir` signed by `key` under `origin`; its verifier key.
fn init(dir: &Path, key: &Path, origin: &str) -> String {
    let out = exit(
        &provrun(&[
            "ledger",
            "init",
            &s(dir),
            "--key",
            &s(key),
            "--origin",
            origin,
        ]),
        0,
    );
    out.lines().last().unwrap().to_owned()
}

fn add(ledger: &Path, bundles: &[&Path]) {
    let mut args = vec!["ledger".to_owned(), "add".into(), s(ledger)];
    args.extend(bundles.iter().map(|b| s(b)));
    exit(
        &provrun(&args.iter().map(String::as_str).collect::<Vec<_>>()),
        0,
    );
}

fn check<'a>(report: &'a Value, code: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == code)
        .unwrap_or_else(|| panic!("no {code} check in {report:#}"))
}

/// The Go checker (see ledger.rs), built once; `None` (skipped loudly) without Go
/// unless CI=true.
pub(crate) fn go_checker() -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-trust");
    std::fs::create_dir_all(&out).unwrap();
    let exe = out.join("ledger_check");
    let made = Command::new("go")
        .args(["build", "-o"])
        .arg(&exe)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/ledger_check.go"))
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", out.join("cache"))
        .env("GOFLAGS", "")
        .env("CGO_ENABLED", "0")
        .output();
    match made {
        Ok(o) if o.status.success() => Some(exe),
        other => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(!ci, "CI=true: the Go checker cannot be built: {other:?}");
            eprintln!("\n*** SKIPPED the Go check of cosignatures: no Go toolchain\n");
            None
        }
    }
}

/// A static web server (Python's http.server) serving `dir` on loopback, and its URL.
struct WebServer(Child, String);

impl WebServer {
    fn start(dir: &Path) -> Option<WebServer> {
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take()?)
            .read_line(&mut line)
            .ok()?;
        // "Serving HTTP on 127.0.0.1 port 43123 (http://127.0.0.1:43123/) ..."
        let port = line.split("port ").nth(1)?.split(' ').next()?.to_owned();
        Some(WebServer(child, format!("http://127.0.0.1:{port}")))
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_log_rewritten_with_the_same_key_is_caught_by_a_held_checkpoint_and_honest_growth_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let key = t.join("log.pem");
    exit(&provrun(&["keygen", &s(&key)]), 0);
    let runs: Vec<PathBuf> = (1..=5).map(|i| t.join(format!("b{i}"))).collect();
    for (i, b) in runs.iter().enumerate() {
        run(b, &format!("run {i}"));
    }
    let ledger = t.join("ledger");
    init(&ledger, &key, "example.com/runs");
    add(&ledger, &[&runs[0], &runs[1], &runs[2]]);
    let held = t.join("held-3");
    std::fs::copy(ledger.join("checkpoint"), &held).unwrap();

    // Honest growth: the log of 4 still holds the 3.
    add(&ledger, &[&runs[3]]);
    let report: Value = serde_json::from_str(&exit(
        &provrun(&[
            "ledger",
            "verify",
            &s(&ledger),
            "--since",
            &s(&held),
            "--json",
        ]),
        0,
    ))
    .unwrap();
    assert_eq!(check(&report, "since")["status"], "pass", "{report:#}");
    exit(
        &provrun(&[
            "verify",
            &s(&runs[3]),
            "--ledger",
            &s(&ledger),
            "--since",
            &s(&held),
        ]),
        0,
    );
    // The same from a file:// URL of the folder.
    exit(
        &provrun(&[
            "ledger",
            "verify",
            &format!("file://{}", ledger.display()),
            "--since",
            &s(&held),
        ]),
        0,
    );

    // A rewrite from scratch without run 2, signed with the same key under the same name:
    // every signature holds and the whole-log check passes, but the held checkpoint does
    // not.
    let forged = t.join("forged");
    init(&forged, &key, "example.com/runs");
    add(&forged, &[&runs[0], &runs[2], &runs[3], &runs[4]]);
    exit(&provrun(&["ledger", "verify", &s(&forged)]), 0);
    let out = provrun(&[
        "ledger",
        "verify",
        &s(&forged),
        "--since",
        &s(&held),
        "--json",
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    let since = check(&report, "since");
    assert_eq!(since["status"], "fail");
    let detail = since["detail"].as_str().unwrap();
    assert!(
        detail.contains("diverges from what was held at size 3"),
        "{detail}"
    );
    let text = exit(
        &provrun(&["ledger", "verify", &s(&forged), "--since", &s(&held)]),
        1,
    );
    assert!(text.contains("FAIL  since"), "{text}");
    // verify --ledger --since fails its ledger check though the run is in the forged log.
    let out = provrun(&[
        "verify",
        &s(&runs[3]),
        "--ledger",
        &s(&forged),
        "--since",
        &s(&held),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(check(&report, "ledger")["status"], "fail");

    // Published as static files on a web server: the same verdicts, read over HTTP.
    if let Some(web) = WebServer::start(&forged) {
        let vkey = std::fs::read_to_string(forged.join("ledger.json")).unwrap();
        let vkey: Value = serde_json::from_str(&vkey).unwrap();
        let vkey = vkey["verifier_key"].as_str().unwrap();
        let out = provrun(&[
            "ledger",
            "verify",
            &web.1,
            "--key",
            vkey,
            "--since",
            &s(&held),
            "--json",
        ]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(1), "{report:#}");
        assert_eq!(check(&report, "since")["status"], "fail");
        assert_eq!(check(&report, "entries")["status"], "pass", "{report:#}");
        // A web server cannot be listed: said, not failed.
        assert_eq!(check(&report, "files")["status"], "warn");
        let honest = WebServer::start(&ledger).unwrap();
        exit(
            &provrun(&[
                "ledger",
                "verify",
                &honest.1,
                "--key",
                vkey,
                "--since",
                &s(&held),
            ]),
            0,
        );
    } else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "CI=true: python3 -m http.server cannot start");
        eprintln!("\n*** SKIPPED the ledger over HTTP: no python3\n");
    }

    // A URL of a scheme no ledger is read from is refused, and so is writing at a URL.
    assert_eq!(
        provrun(&["ledger", "verify", "ftp://example.com/ledger"])
            .status
            .code(),
        Some(2)
    );
    let out = provrun(&[
        "ledger",
        "init",
        "s3://runs/ledger",
        "--key",
        &s(&key),
        "--origin",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!Path::new("s3:").exists());
}

/// `ledger witness serve`, its URL read from its first line.
struct WitnessServer(Child, String);

impl WitnessServer {
    fn start(dir: &Path, log_keys: &[&str]) -> WitnessServer {
        let mut args = vec![
            "ledger".to_owned(),
            "witness".into(),
            "serve".into(),
            s(dir),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ];
        for k in log_keys {
            args.push("--log".into());
            args.push((*k).to_owned());
        }
        let mut child = command(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("http://127.0.0.1:"), "{line}");
        WitnessServer(child, line.trim().to_owned())
    }
}

impl Drop for WitnessServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_witness_cosigns_consistent_growth_and_refuses_a_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (key, wkey_file) = (t.join("log.pem"), t.join("w.pem"));
    exit(&provrun(&["keygen", &s(&key)]), 0);
    exit(&provrun(&["keygen", &s(&wkey_file)]), 0);
    let runs: Vec<PathBuf> = (1..=6).map(|i| t.join(format!("b{i}"))).collect();
    for (i, b) in runs.iter().enumerate() {
        run(b, &format!("run {i}"));
    }
    let ledger = t.join("ledger");
    let log_vkey = init(&ledger, &key, "example.com/runs");
    add(&ledger, &[&runs[0], &runs[1]]);

    let wdir = t.join("witness");
    let made = exit(
        &provrun(&[
            "ledger",
            "witness",
            "init",
            "--key",
            &s(&wkey_file),
            "--name",
            "witness.example/w1",
            &s(&wdir),
        ]),
        0,
    );
    let wvkey = made.lines().last().unwrap().to_owned();
    assert!(wvkey.starts_with("witness.example/w1+"), "{made}");
    let witness = WitnessServer::start(&wdir, &[&log_vkey]);

    // First cosignature, checked by provrun and by the spec alone in Go.
    exit(
        &provrun(&["ledger", "cosign", &s(&ledger), "--witness", &witness.1]),
        0,
    );
    exit(
        &provrun(&["ledger", "verify", &s(&ledger), "--witness-key", &wvkey]),
        0,
    );
    let go = go_checker();
    if let Some(go) = &go {
        let out = Command::new(go)
            .args(["cosigned", &wvkey, &s(&ledger.join("checkpoint"))])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // A changed checkpoint line breaks it for Go too.
        let bad = t.join("bad-checkpoint");
        let note = std::fs::read_to_string(ledger.join("checkpoint")).unwrap();
        std::fs::write(&bad, note.replacen("\n2\n", "\n3\n", 1)).unwrap();
        let out = Command::new(go)
            .args(["cosigned", &wvkey, &s(&bad)])
            .output()
            .unwrap();
        assert!(!out.status.success());
    }

    // The log grows: the new checkpoint has no cosignature until cosigned again, which
    // the witness does from the size it holds, by a consistency proof.
    add(&ledger, &[&runs[2], &runs[3]]);
    exit(
        &provrun(&["ledger", "verify", &s(&ledger), "--witness-key", &wvkey]),
        1,
    );
    exit(
        &provrun(&["ledger", "cosign", &s(&ledger), "--witness", &witness.1]),
        0,
    );
    exit(
        &provrun(&["ledger", "verify", &s(&ledger), "--witness-key", &wvkey]),
        0,
    );
    if let Some(go) = &go {
        let out = Command::new(go)
            .args(["cosigned", &wvkey, &s(&ledger.join("checkpoint"))])
            .output()
            .unwrap();
        assert!(out.status.success());
    }

    // A fork with the same key: a log of 6 that left run 2 out. The witness holds 4 and
    // the proof from 4 does not hold: refused (422), named.
    let forked = t.join("forked");
    init(&forked, &key, "example.com/runs");
    add(&forked, &[&runs[0], &runs[2], &runs[3], &runs[4], &runs[5]]);
    add(&forked, &[&runs[1]]);
    let out = provrun(&["ledger", "cosign", &s(&forked), "--witness", &witness.1]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&witness.1) && stderr.contains("422"),
        "{stderr}"
    );
    exit(
        &provrun(&["ledger", "verify", &s(&forked), "--witness-key", &wvkey]),
        1,
    );
    // A shorter fork: the witness holds more than it has (409 with its size).
    let short = t.join("short");
    init(&short, &key, "example.com/runs");
    add(&short, &[&runs[0], &runs[2]]);
    let out = provrun(&["ledger", "cosign", &s(&short), "--witness", &witness.1]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds a checkpoint of 4 leaves"));

    // What the witness holds survives a restart.
    drop(witness);
    let witness = WitnessServer::start(&wdir, &[&log_vkey]);
    assert_eq!(
        provrun(&["ledger", "cosign", &s(&forked), "--witness", &witness.1])
            .status
            .code(),
        Some(1)
    );
    add(&ledger, &[&runs[4]]);
    exit(
        &provrun(&["ledger", "cosign", &s(&ledger), "--witness", &witness.1]),
        0,
    );
    // A log the witness was not told of: 404.
    let other_key = t.join("other.pem");
    exit(&provrun(&["keygen", &s(&other_key)]), 0);
    let other = t.join("other");
    init(&other, &other_key, "example.com/other");
    add(&other, &[&runs[0]]);
    let out = provrun(&["ledger", "cosign", &s(&other), "--witness", &witness.1]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("404"));
}

#[test]
fn audit_names_a_deleted_bundle_and_an_unlogged_one_and_proofs_need_no_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let key = t.join("log.pem");
    exit(&provrun(&["keygen", &s(&key)]), 0);
    let store = t.join("store");
    std::fs::create_dir(&store).unwrap();
    let runs: Vec<PathBuf> = ["a", "b", "c"].iter().map(|id| store.join(id)).collect();
    for (i, b) in runs.iter().enumerate() {
        run(b, &format!("run {i}"));
    }
    let ledger = t.join("ledger");
    init(&ledger, &key, "example.com/audit");
    add(&ledger, &[&runs[0], &runs[1], &runs[2]]);
    let report: Value = serde_json::from_str(&exit(
        &provrun(&[
            "ledger",
            "audit",
            &s(&ledger),
            "--store",
            &s(&store),
            "--json",
        ]),
        0,
    ))
    .unwrap();
    assert_eq!(report["missing"], serde_json::json!([]));
    assert_eq!(report["unlogged"], serde_json::json!([]));

    let digest = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(
            std::fs::read(runs[1].join("statement.json")).unwrap(),
        ))
    };
    std::fs::remove_dir_all(&runs[1]).unwrap();
    run(&store.join("d"), "never logged");
    let out = provrun(&[
        "ledger",
        "audit",
        &s(&ledger),
        "--store",
        &s(&store),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["missing"], serde_json::json!([digest]));
    let unlogged = report["unlogged"].as_array().unwrap();
    assert_eq!(unlogged.len(), 1);
    assert!(unlogged[0].as_str().unwrap().ends_with("/d"), "{report}");
    let text = exit(
        &provrun(&["ledger", "audit", &s(&ledger), "--store", &s(&store)]),
        1,
    );
    assert!(text.contains(&format!("sha256:{digest}")), "{text}");

    // The gone run is still proved, by its digest or its index, with no bundle.
    let by_digest: Value = serde_json::from_str(&exit(
        &provrun(&[
            "ledger",
            "proof",
            &s(&ledger),
            &format!("sha256:{digest}"),
            "--json",
        ]),
        0,
    ))
    .unwrap();
    assert_eq!(by_digest["index"], 1);
    let by_index: Value = serde_json::from_str(&exit(
        &provrun(&["ledger", "proof", &s(&ledger), "1", "--json"]),
        0,
    ))
    .unwrap();
    assert_eq!(by_digest, by_index);
    // Out of range, or not a digest: refused.
    assert_eq!(
        provrun(&["ledger", "proof", &s(&ledger), "3"])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        provrun(&["ledger", "proof", &s(&ledger), "sha256:xyz"])
            .status
            .code(),
        Some(2)
    );
}
