//! examples/kubernetes/batch.yaml is a valid Kubernetes manifest (checked with
//! `kubernetes-validate --strict` in a throwaway virtualenv under target/), its Job's
//! `completions` equals the `--shards` of its command, and that command, run once per
//! index with `JOB_COMPLETION_INDEX` on the ConfigMap's own files, runs every line once.
//!
//! Without Python (or without PyPI) the test is skipped with a loud message, except under
//! `CI=true`, where it fails instead: `cargo xtask ci` installs python3 and venv there.

use crate::support::venv::in_ci;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::venv;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn manifest() -> PathBuf {
    root().join("examples/kubernetes/batch.yaml")
}

/// Skip loudly, or fail under CI.
fn unavailable(why: &str) {
    assert!(
        !in_ci(),
        "CI=true: the Kubernetes manifest test cannot run: {why}"
    );
    eprintln!(
        "\n*** SKIPPED kubernetes: {why}.\n*** examples/kubernetes/batch.yaml is NOT checked \
         against the Kubernetes schema on this machine (CI=true makes this a failure).\n"
    );
}

/// A virtualenv with kubernetes-validate (which brings PyYAML), made once under target/.
fn virtualenv() -> Result<PathBuf, String> {
    venv::virtualenv(
        "kubernetes-validate-venv",
        "tests/interop/kubernetes-requirements.txt",
        "import kubernetes_validate, yaml",
    )
}

/// `kubernetes-validate --strict` on a manifest: its exit status and output.
fn validate(python: &Path, file: &Path) -> (bool, String) {
    let out = Command::new(python)
        .args(["-m", "kubernetes_validate", "--strict"])
        .arg(file)
        .output()
        .expect("kubernetes-validate runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

// One long scenario: the manifest validated, parsed, then its shards run as the pods would.
#[test]
fn the_indexed_job_is_valid_and_its_shards_run_every_line_once() {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => return unavailable(&why),
    };
    let (ok, report) = validate(&python, &manifest());
    assert!(ok, "batch.yaml does not validate:\n{report}");
    assert!(report.contains("job/provrun-batch"), "{report}");

    // The validator is not a rubber stamp: a misspelt field is refused.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    let text = std::fs::read_to_string(manifest()).unwrap();
    std::fs::write(
        &broken,
        text.replace(
            "completionMode: Indexed",
            "completionMode: Indexed\n  parralelism: 4",
        ),
    )
    .unwrap();
    let (ok, report) = validate(&python, &broken);
    assert!(!ok, "a misspelt field passed:\n{report}");

    // The manifest's documents as JSON, read with the virtualenv's PyYAML.
    let out = Command::new(&python)
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(manifest())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let config = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("a ConfigMap");
    let job = docs.iter().find(|d| d["kind"] == "Job").expect("a Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let completions = job["spec"]["completions"].as_u64().unwrap();
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<String> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let shards_at = command
        .iter()
        .position(|a| a == "--shards")
        .expect("--shards");
    assert_eq!(
        command[shards_at + 1],
        completions.to_string(),
        "completions != --shards"
    );

    // The ConfigMap's files where the pod would see them, the bundles' volume beside.
    let batch = dir.path().join("batch");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&batch).unwrap();
    for (name, body) in config["data"].as_object().unwrap() {
        std::fs::write(batch.join(name), body.as_str().unwrap()).unwrap();
    }
    let mut mounts = Vec::new();
    for m in container["volumeMounts"].as_array().unwrap() {
        let path = m["mountPath"].as_str().unwrap().to_string();
        let volume = job["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        let local = if volume.get("configMap").is_some() {
            &batch
        } else {
            &out_dir
        };
        mounts.push((path, local.clone()));
    }
    let local_arg = |arg: &str| -> String {
        for (mount, local) in &mounts {
            if let Some(rest) = arg.strip_prefix(mount.as_str()) {
                return format!("{}{rest}", local.display());
            }
        }
        arg.to_string()
    };
    assert_eq!(command[0], "provrun");
    let args: Vec<String> = command[1..].iter().map(|a| local_arg(a)).collect();
    let mut ran = Vec::new();
    for index in 0..completions {
        let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
            .args(&args)
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "index {index}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["type"] == "run" {
                assert_eq!(v["skipped"], false, "{v}");
                ran.push(v["id"].as_str().unwrap().to_string());
            }
        }
    }
    let lines = std::fs::read_to_string(batch.join("runs.jsonl")).unwrap();
    let all: BTreeSet<String> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        ran.len(),
        all.len(),
        "a line ran twice or not at all: {ran:?}"
    );
    assert_eq!(ran.into_iter().collect::<BTreeSet<_>>(), all);
}
