//! examples/kubernetes/batch.yaml is a valid Kubernetes manifest (checked with
//! `kubernetes-validate --strict` in a throwaway virtualenv under target/), its Job's
//! `completions` equals the `--shards` of its command, and that command, run once per
//! index with `JOB_COMPLETION_INDEX` on the ConfigMap's own files, runs every line once.
//! examples/kubernetes/serve.yaml is valid too, its probes, ports and selectors agree,
//! and its Deployment's command, run on its ConfigMap's agents and its Secret's token,
//! answers the kubelet's `/healthz` probe and serves an agent whose bundle verifies.
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

    // The manifest's documents as JSON.
    let docs = documents(&python, &manifest());
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

/// A manifest's documents as JSON, read with the virtualenv's PyYAML.
fn documents(python: &Path, file: &Path) -> Vec<Value> {
    let out = Command::new(python)
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

// examples/kubernetes/serve.yaml: valid, its probes, ports and selectors agree, and its
// container's own command serves its ConfigMap's agents with its Secret's token.
#[test]
fn the_serve_deployment_is_valid_and_its_command_serves_and_answers_probes() {
    let python = match virtualenv() {
        Ok(p) => p,
        Err(why) => return unavailable(&why),
    };
    let manifest = root().join("examples/kubernetes/serve.yaml");
    let (ok, report) = validate(&python, &manifest);
    assert!(ok, "serve.yaml does not validate:\n{report}");
    for name in [
        "deployment/provrun-serve",
        "service/provrun-serve",
        "configmap/provrun-serve-agents",
        "secret/provrun-serve-token",
    ] {
        assert!(report.contains(name), "{name}: {report}");
    }
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &broken,
        text.replace("  replicas: 1\n", "  replicas: 1\n  replica: 1\n"),
    )
    .unwrap();
    let (ok, report) = validate(&python, &broken);
    assert!(!ok, "a misspelt field passed:\n{report}");

    let docs = documents(&python, &manifest);
    let kind = |k: &str| docs.iter().find(|d| d["kind"] == k).expect(k);
    let (config, secret) = (kind("ConfigMap"), kind("Secret"));
    let (deployment, service) = (kind("Deployment"), kind("Service"));
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    // The selectors find the pod; the probes and the Service reach the port served.
    let labels = &pod["metadata"]["labels"];
    assert_eq!(&deployment["spec"]["selector"]["matchLabels"], labels);
    assert_eq!(&service["spec"]["selector"], labels);
    let command: Vec<String> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let flag = |name: &str| {
        let at = command.iter().position(|a| a == name).expect(name);
        command[at + 1].clone()
    };
    let listen = flag("--listen");
    let port = &container["ports"][0];
    assert_eq!(
        listen.rsplit(':').next().unwrap(),
        port["containerPort"].to_string()
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["path"], "/healthz", "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], port["name"], "{probe}");
    }
    assert_eq!(service["spec"]["ports"][0]["targetPort"], port["name"]);
    // Runs in flight get --grace seconds after SIGTERM: the pod must be given longer.
    let grace: u64 = flag("--grace").parse().unwrap();
    assert!(
        pod["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap()
            > grace
    );

    // The volumes where the pod would see them: the agents, the token, the runs.
    let mut mounts = Vec::new();
    for m in container["volumeMounts"].as_array().unwrap() {
        let volume = pod["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        let local = dir.path().join(m["name"].as_str().unwrap());
        std::fs::create_dir_all(&local).unwrap();
        let files = if volume.get("configMap").is_some() {
            &config["data"]
        } else if volume.get("secret").is_some() {
            &secret["stringData"]
        } else {
            &Value::Null
        };
        for (name, body) in files.as_object().into_iter().flatten() {
            std::fs::write(local.join(name), body.as_str().unwrap()).unwrap();
        }
        mounts.push((m["mountPath"].as_str().unwrap().to_string(), local));
    }
    let local_arg = |arg: &str| -> String {
        if arg == listen {
            // A free loopback port here; the pod listens on all its addresses.
            return "127.0.0.1:0".into();
        }
        for (mount, local) in &mounts {
            if let Some(rest) = arg.strip_prefix(mount.as_str()) {
                return format!("{}{rest}", local.display());
            }
        }
        arg.to_string()
    };
    assert_eq!(command[0], "provrun");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_provrun"));
    cmd.args(command[1..].iter().map(|a| local_arg(a)))
        .env_remove("PROVRUN_SERVE_TOKEN")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let served = crate::serve::Served::from_command(cmd);

    // The kubelet's probe: no token, the pod's address as Host.
    let probe = crate::serve::request(
        served.addr,
        "GET",
        "/healthz",
        &[("Host", "10.1.2.3:8787")],
        b"",
    );
    assert_eq!(probe.status, 200);
    assert_eq!(probe.json(), serde_json::json!({"status": "ok"}));
    // A client: the Secret's token, the ConfigMap's agent.
    let token = secret["stringData"]["token"].as_str().unwrap();
    let auth = format!("Bearer {token}");
    let input = crate::serve::input("k8s", "k8s-1", "Hi");
    let refused = crate::serve::request(served.addr, "POST", "/agents/chat", &[], &input);
    assert_eq!(refused.status, 401);
    let r = crate::serve::request(
        served.addr,
        "POST",
        "/agents/chat",
        &[("Authorization", &auth)],
        &input,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let events = r.events();
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED", "{last}");
    assert_eq!(
        last["result"]["output"],
        "Hello from provrun on Kubernetes."
    );
    let id = events[0]["metadata"]["bundle"].as_str().unwrap();
    crate::serve::fetch_and_verify(served.addr, &[("Authorization", &auth)], id, dir.path());
}
