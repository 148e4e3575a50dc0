//! One ledger in a bucket (moto's S3 server on loopback, 5.2 or newer for conditional
//! writes): `ledger init s3://…`, many `ledger add` processes at once ending in one tree
//! with each statement once and no fork, a batch a writer claimed and never finished
//! completed by the next writer, `ledger verify` and `ledger proof` on the bucket, and Go's
//! sumdb packages (tests/interop/ledger_check.go) on its checkpoint and inclusion proofs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use serde_json::Value;

use crate::support::cli::{exit, s};
use crate::support::moto::{Moto, unavailable, virtualenv};

/// `provrun` with moto's environment.
fn provrun(moto: &Moto, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(args)
        .envs(moto.env())
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn scripted(bundle: &Path, prompt: &str) {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripted");
    exit(
        &crate::support::cli::provrun(&[
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

fn statement(bundle: &Path) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(
        std::fs::read(bundle.join("statement.json")).unwrap(),
    ))
}

/// The object at `key` of bucket `runs`, read with boto3.
fn object(moto: &Moto, key: &str) -> Vec<u8> {
    let b64 = moto.python(&format!(
        "import boto3, base64; print(base64.b64encode(boto3.client('s3').get_object(Bucket='runs', Key='{key}')['Body'].read()).decode())"
    ));
    base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .unwrap()
}

#[test]
fn many_writers_share_one_ledger_in_a_bucket_without_forking() {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => return unavailable("ledger in a bucket", &why),
    };
    let moto = Moto::start(&python);
    assert_eq!(moto.request("PUT", "/runs", b""), 200, "bucket not made");
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let key = t.join("log.pem");
    exit(&provrun(&moto, &["keygen", &s(&key)]), 0);
    let url = "s3://runs/ledger";
    let init = exit(
        &provrun(
            &moto,
            &[
                "ledger",
                "init",
                url,
                "--key",
                &s(&key),
                "--origin",
                "example.com/bucket",
            ],
        ),
        0,
    );
    let vkey = init.lines().last().unwrap().to_owned();
    // The bucket's configuration names the verifier key, not a key file.
    let config: Value = serde_json::from_slice(&object(&moto, "ledger/ledger.json")).unwrap();
    assert_eq!(config["verifier_key"], vkey.as_str());
    assert!(config.get("key_file").is_none(), "{config}");
    // Twice is refused.
    assert_eq!(
        provrun(
            &moto,
            &["ledger", "init", url, "--key", &s(&key), "--origin", "x"]
        )
        .status
        .code(),
        Some(2)
    );

    let bundles: Vec<PathBuf> = (0..8).map(|i| t.join(format!("b{i}"))).collect();
    for (i, b) in bundles.iter().enumerate() {
        scripted(b, &format!("run {i}"));
    }
    // Ten writers at once: each bundle once, two of them twice.
    let mut children = Vec::new();
    for b in bundles.iter().chain(&bundles[..2]) {
        children.push(
            Command::new(env!("CARGO_BIN_EXE_provrun"))
                .args(["ledger", "add", url, &s(b), "--key", &s(&key), "--json"])
                .envs(moto.env())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
    }
    let mut indexes = std::collections::BTreeMap::new();
    for (child, b) in children
        .into_iter()
        .zip(bundles.iter().chain(&bundles[..2]))
    {
        let out = child.wait_with_output().unwrap();
        let added: Value = serde_json::from_str(&exit(&out, 0)).unwrap();
        let index = added["added"][0]["index"].as_u64().unwrap();
        // The same bundle always lands at one index.
        assert_eq!(*indexes.entry(statement(b)).or_insert(index), index);
    }
    let report: Value = serde_json::from_str(&exit(
        &provrun(&moto, &["ledger", "verify", url, "--json"]),
        0,
    ))
    .unwrap();
    assert_eq!(report["size"], 8, "{report:#}");
    let distinct: std::collections::BTreeSet<u64> = indexes.values().copied().collect();
    assert_eq!(distinct.len(), 8);

    // A writer that claimed a batch and died before finishing it: the next add finishes it.
    let cp = String::from_utf8(object(&moto, "ledger/checkpoint")).unwrap();
    let root = cp.lines().nth(2).unwrap().to_owned();
    let orphan = format!("sha256:{}\n", "a".repeat(64));
    let mut entries = (orphan.len() as u16).to_be_bytes().to_vec();
    entries.extend_from_slice(orphan.as_bytes());
    moto.python(&format!(
        "import boto3, json; c = boto3.client('s3'); \
         c.put_object(Bucket='runs', Key='ledger/pending/dead', Body=bytes({entries:?})); \
         c.put_object(Bucket='runs', Key='ledger/next', Body=json.dumps({{'base': 8, 'root': '{root}', 'leaves': 'pending/dead', 'count': 1}}).encode())"
    ));
    let late = t.join("late");
    scripted(&late, "late");
    let added: Value = serde_json::from_str(&exit(
        &provrun(
            &moto,
            &["ledger", "add", url, &s(&late), "--key", &s(&key), "--json"],
        ),
        0,
    ))
    .unwrap();
    assert_eq!(added["added"][0]["index"], 9);
    assert_eq!(added["size"], 10);
    let proof: Value = serde_json::from_str(&exit(
        &provrun(
            &moto,
            &[
                "ledger",
                "proof",
                url,
                &format!("sha256:{}", "a".repeat(64)),
                "--json",
            ],
        ),
        0,
    ))
    .unwrap();
    assert_eq!(proof["index"], 8);
    exit(&provrun(&moto, &["ledger", "verify", url]), 0);

    // Adding without the signing key, or with another, is refused.
    assert_eq!(
        provrun(&moto, &["ledger", "add", url, &s(&late)])
            .status
            .code(),
        Some(2)
    );
    let other = t.join("other.pem");
    exit(&provrun(&moto, &["keygen", &s(&other)]), 0);
    assert_eq!(
        provrun(
            &moto,
            &["ledger", "add", url, &s(&late), "--key", &s(&other)]
        )
        .status
        .code(),
        Some(2)
    );

    // Go's sumdb packages: the checkpoint, and the inclusion proofs of sampled runs.
    let Some(go) = crate::ledger_trust::go_checker() else {
        return;
    };
    let cp_file = t.join("checkpoint");
    std::fs::write(&cp_file, object(&moto, "ledger/checkpoint")).unwrap();
    let mut lines = String::new();
    for b in [&bundles[0], &bundles[5], &late] {
        let mut p: Value = serde_json::from_str(&exit(
            &provrun(&moto, &["ledger", "proof", url, &s(b), "--json"]),
            0,
        ))
        .unwrap();
        p["leaf"] = base64::engine::general_purpose::STANDARD
            .encode(format!("sha256:{}\n", statement(b)))
            .into();
        lines.push_str(&format!("{p}\n"));
    }
    let proofs = t.join("proofs.jsonl");
    std::fs::write(&proofs, lines).unwrap();
    for args in [
        vec!["checkpoint", vkey.as_str(), cp_file.to_str().unwrap()],
        vec![
            "proofs",
            vkey.as_str(),
            cp_file.to_str().unwrap(),
            proofs.to_str().unwrap(),
        ],
    ] {
        let out = Command::new(&go).args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// `run`, `batch` and `serve` adding their runs to a ledger in a bucket as the runs end
/// (`--ledger s3://… --ledger-key FILE`): one run, then two batch shards at once, then a
/// server's run; the ledger verifies and holds each run exactly once. A ledger location
/// the commands cannot use is exit 2, and never becomes a folder.
#[test]
fn run_batch_and_serve_add_their_runs_to_a_ledger_in_a_bucket() {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => return unavailable("run and batch adding to a ledger in a bucket", &why),
    };
    let moto = Moto::start(&python);
    assert_eq!(moto.request("PUT", "/runs", b""), 200, "bucket not made");
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let key = t.join("log.pem");
    exit(&provrun(&moto, &["keygen", &s(&key)]), 0);
    let url = "s3://runs/shared";
    exit(
        &provrun(
            &moto,
            &[
                "ledger",
                "init",
                url,
                "--key",
                &s(&key),
                "--origin",
                "example.com/shared",
            ],
        ),
        0,
    );
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripted");
    let agent = s(&ex.join("agent.toml"));
    let input = s(&ex.join("input"));
    let run = |out: &Path, ledger: &[&str]| {
        let mut args = vec!["run", &agent, "--input", &input, "--prompt", "one", "--out"];
        let out = s(out);
        args.push(&out);
        args.extend_from_slice(ledger);
        Command::new(env!("CARGO_BIN_EXE_provrun"))
            .args(&args)
            .envs(moto.env())
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("RUST_LOG")
            .current_dir(t)
            .output()
            .unwrap()
    };

    // Refused before anything runs (exit 2, no bundle, no folder named after the URL): a
    // bucket without its signing key, another key, a URL no ledger is written at, a key
    // without a ledger.
    let other = t.join("other.pem");
    exit(&provrun(&moto, &["keygen", &s(&other)]), 0);
    let (k, o) = (s(&key), s(&other));
    for (ledger, says) in [
        (vec!["--ledger", url], "--ledger-key"),
        (
            vec!["--ledger", url, "--ledger-key", &o],
            "not the ledger's key",
        ),
        (
            vec!["--ledger", "http://127.0.0.1:1/log", "--ledger-key", &k],
            "s3:// bucket",
        ),
        (
            vec!["--ledger", "s3://runs/nothing", "--ledger-key", &k],
            "",
        ),
        (vec!["--ledger-key", &k], "--ledger"),
    ] {
        let refused = t.join("refused");
        let out = run(&refused, &ledger);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{ledger:?}: {err}");
        assert!(err.contains(says), "{ledger:?}: {err}");
        assert!(!refused.exists(), "{ledger:?} wrote a bundle");
        assert!(!t.join("s3:").exists() && !t.join("http:").exists());
    }

    // One run.
    let first = t.join("first");
    let out = run(&first, &["--ledger", url, "--ledger-key", &k]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("added to the ledger s3://runs/shared at index 0"),
        "{err}"
    );

    // Two shards of one batch at once, adding to the same ledger.
    let runs = t.join("runs.jsonl");
    let lines: String = (0..6)
        .map(|i| {
            format!(
                "{{\"id\": \"r{i}\", \"agent\": {agent:?}, \"input\": [{input:?}], \"prompt\": \"task {i}\"}}\n"
            )
        })
        .collect();
    std::fs::write(&runs, lines).unwrap();
    let shards: Vec<_> = (0..2)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_provrun"))
                .args(["batch", &s(&runs), "--out"])
                .arg(t.join(format!("shard{i}")))
                .args(["--shard", &format!("{i}/2"), "--ledger", url])
                .args(["--ledger-key", &k])
                .envs(moto.env())
                .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
                .env_remove("RUST_LOG")
                .env_remove("JOB_COMPLETION_INDEX")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in shards {
        let out = child.wait_with_output().unwrap();
        exit(&out, 0);
    }
    let mut bundles = vec![first];
    for i in 0..6 {
        let shard = t.join(format!("shard{}", i % 2)).join(format!("r{i}"));
        assert!(
            shard.join("statement.json").is_file(),
            "{}",
            shard.display()
        );
        bundles.push(shard);
    }

    // A server's run, added as it ends.
    let agents = t.join("agents");
    crate::serve::write_agents(&agents);
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let store = t.join("store");
    let served = crate::serve::Served::start(
        &agents,
        &store,
        &["--ledger", url, "--ledger-key", &k],
        &env,
    );
    let r = crate::serve::request(
        served.addr,
        "POST",
        "/agents/chat",
        &[],
        &crate::serve::input("ledger", "ledger-1", "Hi"),
    );
    assert_eq!(r.status, 200);
    let id = r.events()[0]["metadata"]["bundle"]
        .as_str()
        .unwrap()
        .to_string();
    drop(served);
    bundles.push(store.join(id));

    // The ledger verifies and holds each of the 8 runs exactly once.
    let report: Value = serde_json::from_str(&exit(
        &provrun(&moto, &["ledger", "verify", url, "--json"]),
        0,
    ))
    .unwrap();
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["size"], 8, "{report:#}");
    let mut indexes = std::collections::BTreeSet::new();
    for b in &bundles {
        let proof: Value = serde_json::from_str(&exit(
            &provrun(&moto, &["ledger", "proof", url, &s(b), "--json"]),
            0,
        ))
        .unwrap();
        indexes.insert(proof["index"].as_u64().unwrap());
        exit(&provrun(&moto, &["verify", &s(b), "--ledger", url]), 0);
    }
    assert_eq!(indexes.len(), 8, "two runs share a leaf: {indexes:?}");
}
