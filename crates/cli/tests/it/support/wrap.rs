//! What the `provrun wrap` tests share: whether this machine can run them, the bundle's
//! exchanges compared with the upstream's own log, and a search of every byte of a
//! bundle (blobs unpacked) for a secret.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::cli::events;
use super::upstream::Logged;
pub(crate) use super::venv::ci_cache;
use super::venv::in_ci;

/// Whether every confinement layer is there (wrap refuses otherwise); a loud skip when
/// not, a failure under `CI=true`.
pub(crate) fn wrap_ready(test: &str) -> bool {
    let support = provrun_sandbox::Sandbox::command_support();
    if support.is_complete() {
        return true;
    }
    assert!(
        !in_ci(),
        "CI=true: {test} must run, but this machine lacks: {}",
        support.missing_summary()
    );
    eprintln!(
        "\n** WARNING: {test} SKIPPED: provrun wrap needs every confinement layer and this \
         machine lacks: {} **\n",
        support.missing_summary()
    );
    false
}

/// `provrun` with a clean environment but `PATH` (and the variables given later).
pub(crate) fn provrun() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_provrun"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TMPDIR", std::env::temp_dir())
        .env("LANG", "C.UTF-8");
    c
}

/// The bytes of the blob a blob ref names.
pub(crate) fn blob(bundle: &Path, r: &Value) -> Vec<u8> {
    let hex = r["digest"]["sha256"]
        .as_str()
        .unwrap_or_else(|| panic!("not a blob ref: {r}"));
    provrun_evidence::read_blob_by_digest(bundle, hex).unwrap()
}

/// The events of `kind`.
pub(crate) fn of_kind(bundle: &Path, kind: &str) -> Vec<Value> {
    events(bundle)
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

/// Every exchange the upstream logged is one event of the bundle, in the same order
/// (`model_called` for generations, `http_exchanged` for the rest), whose request blob
/// is the exact bytes the upstream received and whose response blob the exact bytes it
/// sent; and the bundle has no other exchange. Returns the events.
pub(crate) fn assert_exchanges_match(bundle: &Path, logged: &[Logged]) -> Vec<Value> {
    let exchanges: Vec<Value> = events(bundle)
        .into_iter()
        .filter(|e| e["type"] == "model_called" || e["type"] == "http_exchanged")
        .collect();
    assert_eq!(
        exchanges.len(),
        logged.len(),
        "the bundle records {} exchanges, the upstream saw {}",
        exchanges.len(),
        logged.len()
    );
    for (i, (e, l)) in exchanges.iter().zip(logged).enumerate() {
        let p = &e["payload"];
        assert_eq!(e["confidence"], "observed", "exchange {i}");
        let request = if p["request"].is_null() {
            Vec::new()
        } else {
            blob(bundle, &p["request"])
        };
        assert!(
            request == l.request.body,
            "exchange {i}: the request differs"
        );
        let response = if p["response"].is_null() {
            Vec::new()
        } else {
            blob(bundle, &p["response"])
        };
        assert!(
            response == l.response,
            "exchange {i}: the response differs:\n{}\n---\n{}",
            String::from_utf8_lossy(&response),
            String::from_utf8_lossy(&l.response)
        );
        assert_eq!(p["http"]["status"], l.status, "exchange {i}");
        assert_eq!(p["http"]["path"], l.request.path.as_str(), "exchange {i}");
    }
    exchanges
}

/// Every regular file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

/// Every blob ref in a JSON value.
fn refs(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            if m.contains_key("digest") && m.contains_key("media_type") {
                out.push(v.clone());
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// No byte of the bundle holds `secret`: not a file of it, and not a blob unpacked.
pub(crate) fn assert_no_secret(bundle: &Path, secret: &str) {
    let needle = secret.as_bytes();
    let holds = |bytes: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    for f in files(bundle) {
        assert!(
            !holds(&std::fs::read(&f).unwrap()),
            "{} holds the secret",
            f.display()
        );
    }
    let mut all = Vec::new();
    for e in events(bundle) {
        refs(&e["payload"], &mut all);
    }
    assert!(!all.is_empty());
    for r in all {
        assert!(!holds(&blob(bundle, &r)), "a blob holds the secret: {r}");
    }
}

/// None of `needles` is in any byte of the bundle: not in a file of it (as stored), and
/// not in any blob its events name, each read back with `provrun cat`.
pub(crate) fn assert_absent_everywhere(bundle: &Path, needles: &[&[u8]]) {
    let holds = |bytes: &[u8]| {
        needles
            .iter()
            .find(|n| bytes.windows(n.len()).any(|w| w == **n))
            .map(|n| String::from_utf8_lossy(n).into_owned())
    };
    for f in files(bundle) {
        let found = holds(&std::fs::read(&f).unwrap());
        assert!(found.is_none(), "{} holds {found:?}", f.display());
    }
    let mut all = Vec::new();
    for e in events(bundle) {
        refs(&e["payload"], &mut all);
    }
    assert!(!all.is_empty());
    for r in all {
        let digest = r["digest"]["sha256"].as_str().unwrap();
        let out = provrun()
            .args([
                "cat",
                &bundle.display().to_string(),
                &format!("sha256:{digest}"),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "provrun cat {digest}");
        let found = holds(&out.stdout);
        assert!(found.is_none(), "the blob {digest} holds {found:?}");
    }
}

/// `provrun verify BUNDLE` passes.
pub(crate) fn assert_verifies(bundle: &Path) {
    let out = provrun().arg("verify").arg(bundle).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `provrun show --json BUNDLE` lists each of the `calls` (imported from a wrapped
/// program's session log) once, under the step its `run_call_id` `STEP.N` names.
pub(crate) fn assert_show_json_links(bundle: &Path, calls: &[Value]) {
    let out = provrun()
        .args(["show", "--json"])
        .arg(bundle)
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut listed = Vec::new();
    for step in shown["steps"].as_array().unwrap() {
        for call in step["calls"].as_array().unwrap() {
            let id = call["run_call_id"].as_str().unwrap_or_default();
            let asked = id.split_once('.').map(|(s, _)| s.to_owned());
            assert_eq!(
                asked.as_deref(),
                Some(step["step"].to_string().as_str()),
                "{call} is not under the step that asked for it"
            );
            listed.push(call["call_id"].clone());
        }
    }
    let recorded: Vec<Value> = calls.iter().map(|c| c["call_id"].clone()).collect();
    assert_eq!(listed.len(), recorded.len(), "{listed:?} vs {recorded:?}");
    assert!(recorded.iter().all(|c| listed.contains(c)), "{listed:?}");
}

/// The npm prefix a pinned package was installed into, when it is there; a loud skip
/// when not (a failure under CI).
pub(crate) fn npm_package(test: &str, folder: &str, bin: &str) -> Option<PathBuf> {
    let prefix = ci_cache().join("npm").join(folder);
    if prefix.join("node_modules/.bin").join(bin).exists() {
        return Some(prefix);
    }
    assert!(
        !in_ci(),
        "CI=true: {test} must run, but {} is missing: `cargo xtask ci` installs it",
        prefix.display()
    );
    eprintln!(
        "\n** WARNING: {test} SKIPPED: {} is missing (`cargo xtask ci` installs it) **\n",
        prefix.display()
    );
    None
}
