//! Who a statement says built the run: new bundles name the project's own build type and
//! builder URIs (statement format 3), an organisation names its own builder with
//! `PROVRUN_BUILDER_ID` (`run` and `batch` honour it; a value that is not a URI is exit 2
//! with nothing written), and a bundle of format 2, with the old placeholder URIs, still
//! verifies, shows, views and replays.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::cli::{assert_exit, events, s};

const BUILD_TYPE: &str =
    "https://github.com/provrun/provrun/blob/main/docs/evidence.md#build-type-agent-run-v1";

fn example(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(rel)
        .display()
        .to_string()
}

fn provrun(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_provrun"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("PROVRUN_BUILDER_ID")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .envs(env.iter().copied())
        .output()
        .expect("the provrun binary runs")
}

fn statement(bundle: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(bundle.join("statement.json")).unwrap()).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn a_bundle_of_statement_format_2_still_verifies_and_its_replay_names_the_real_uris() {
    // Written before format 3 (tests/fixtures/README.md): the placeholder URIs.
    let old = fixture("bundle-v3-hello");
    let st = statement(&old);
    assert_eq!(
        st["predicate"]["buildDefinition"]["buildType"],
        "https://provrun.invalid/agent-run/v1"
    );
    assert_eq!(
        st["predicate"]["runDetails"]["builder"]["id"],
        "https://provrun.invalid/builder/provrun/0.1.0"
    );
    assert_eq!(events(&old)[0]["payload"]["statement"], 2);
    let out = provrun(&["verify", &s(&old)], &[]);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("bundle verifies"));
    assert_exit(&provrun(&["show", &s(&old)], &[]), 0);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    assert_exit(&provrun(&["view", &s(&old), "-o", &s(&page)], &[]), 0);

    // Its replay is a new bundle, of format 3.
    let replayed = dir.path().join("replayed");
    let out = provrun(&["replay", &s(&old), "--out", &s(&replayed)], &[]);
    assert_exit(&out, 0);
    assert_eq!(events(&replayed)[0]["payload"]["statement"], 3);
    let st = statement(&replayed);
    assert_eq!(st["predicate"]["buildDefinition"]["buildType"], BUILD_TYPE);
    let builder = st["predicate"]["runDetails"]["builder"]["id"]
        .as_str()
        .unwrap();
    assert!(
        builder.starts_with("https://github.com/provrun/provrun/builder/provrun/"),
        "{builder}"
    );
    assert_exit(&provrun(&["verify", &s(&replayed)], &[]), 0);
}

#[test]
fn an_organisation_names_its_builder_with_provrun_builder_id() {
    let dir = tempfile::tempdir().unwrap();
    let ours = [(
        "PROVRUN_BUILDER_ID",
        "https://ci.example.com/runners/eu-1@v3",
    )];
    let bundle = dir.path().join("bundle");
    let args = [
        "run",
        &example("hello/agent.toml"),
        "--out",
        &s(&bundle),
        "--verify",
    ];
    assert_exit(&provrun(&args, &ours), 0);
    assert_eq!(events(&bundle)[0]["payload"]["builder"], ours[0].1);
    let st = statement(&bundle);
    assert_eq!(st["predicate"]["runDetails"]["builder"]["id"], ours[0].1);
    assert_eq!(st["predicate"]["buildDefinition"]["buildType"], BUILD_TYPE);

    // batch too, every run.
    std::fs::write(
        dir.path().join("runs.jsonl"),
        format!(
            "{{\"id\": \"a\", \"agent\": \"{0}\"}}\n{{\"id\": \"b\", \"agent\": \"{0}\"}}\n",
            example("hello/agent.toml")
        ),
    )
    .unwrap();
    let dest = dir.path().join("dest");
    let runs = s(&dir.path().join("runs.jsonl"));
    assert_exit(&provrun(&["batch", &runs, "--out", &s(&dest)], &ours), 0);
    for id in ["a", "b"] {
        let st = statement(&dest.join(id));
        assert_eq!(st["predicate"]["runDetails"]["builder"]["id"], ours[0].1);
    }

    // Not a URI: exit 2, nothing written; unset or empty: the runtime's own name.
    let bad = [("PROVRUN_BUILDER_ID", "our ci")];
    let refused = dir.path().join("refused");
    let out = provrun(
        &["run", &example("hello/agent.toml"), "--out", &s(&refused)],
        &bad,
    );
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("PROVRUN_BUILDER_ID"));
    assert!(!refused.exists());
    let out = provrun(
        &["batch", &runs, "--out", &s(&dir.path().join("dest2"))],
        &bad,
    );
    assert_exit(&out, 2);
    assert!(!dir.path().join("dest2").exists());
    let plain = dir.path().join("plain");
    let out = provrun(
        &["run", &example("hello/agent.toml"), "--out", &s(&plain)],
        &[("PROVRUN_BUILDER_ID", "")],
    );
    assert_exit(&out, 0);
    let builder = events(&plain)[0]["payload"]["builder"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(builder.starts_with("provrun/"), "{builder}");
}
