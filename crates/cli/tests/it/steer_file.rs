//! `provrun run --steer-file`: a person steers a running agent by appending lines to a
//! file. Deterministic: the line is appended during the run by one of the agent's own
//! calls (`copy_to_host` into the host folder that holds the file), so it is there before
//! the next model request, which is when the file is read.

use std::path::Path;
use std::process::Output;

use crate::support::cli::{assert_exit, command, s};
use provrun_evidence::{BlobRef, EventType, read_blob, read_events};

fn provrun(args: &[&str]) -> Output {
    command(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the provrun binary runs")
}

fn text(out: &[u8]) -> String {
    String::from_utf8(out.to_vec()).expect("UTF-8")
}

const BEFORE: &str = "Be brief.";
const DURING: &str = "Also say how many files you wrote.";

/// The agent writes the steering file's new contents (the line already there, then a
/// new one: an append) into /output, copies it over the file, and answers.
fn script() -> String {
    serde_json::json!([
        {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {
            "path": "/output/steer.txt", "content": format!("{BEFORE}\n\n{DURING}\n")}}]},
        {"tool_calls": [{"id": "c", "name": "copy_to_host", "arguments": {
            "path": "/output/steer.txt", "host_path": "steer.txt"}}]},
        {"text": "one file"}
    ])
    .to_string()
}

/// The `steered` events: (before_request, text).
fn steered(bundle: &Path) -> Vec<(u64, String)> {
    read_events(bundle)
        .unwrap()
        .iter()
        .filter(|e| e.kind == EventType::Steered)
        .map(|e| {
            let blob: BlobRef = serde_json::from_value(e.payload["text"].clone()).unwrap();
            (
                e.payload["before_request"].as_u64().unwrap(),
                text(&read_blob(bundle, &blob).unwrap()),
            )
        })
        .collect()
}

#[test]
fn lines_appended_to_the_steer_file_during_the_run_reach_the_agent_and_are_shown() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("script.json"), script()).unwrap();
    std::fs::write(
        root.join("agent.toml"),
        "name = \"steered\"\nmodel = \"script:script.json\"\n\
         tools = [\"write_file\", \"copy_to_host\"]\n",
    )
    .unwrap();
    let host = root.join("host");
    std::fs::create_dir(&host).unwrap();
    let steer = host.join("steer.txt");
    // A line already there when the run starts goes with the first request.
    std::fs::write(&steer, format!("{BEFORE}\n")).unwrap();
    let bundle = root.join("bundle");
    let out = provrun(&[
        "run",
        &s(&root.join("agent.toml")),
        "--out",
        &s(&bundle),
        "--host-dir",
        &s(&host),
        "--steer-file",
        &s(&steer),
        "--verify",
    ]);
    assert_exit(&out, 0);
    assert_eq!(text(&out.stdout).trim(), "one file");

    // The line appended by the second call went with the third request; the blank line
    // was ignored.
    assert_eq!(
        steered(&bundle),
        vec![(1, BEFORE.to_string()), (3, DURING.to_string())]
    );
    let events = read_events(&bundle).unwrap();
    let third = events
        .iter()
        .filter(|e| e.kind == EventType::ModelCalled)
        .nth(2)
        .unwrap();
    let request: BlobRef = serde_json::from_value(third.payload["request"].clone()).unwrap();
    let body = text(&read_blob(&bundle, &request).unwrap());
    assert!(body.contains(DURING), "{body}");

    let shown = provrun(&["show", &s(&bundle)]);
    assert_exit(&shown, 0);
    let shown = text(&shown.stdout);
    assert!(
        shown.contains(&format!("steered before request 3: {DURING}")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("steered before request 1: {BEFORE}")),
        "{shown}"
    );

    let verified = provrun(&["verify", &s(&bundle)]);
    assert_exit(&verified, 0);

    // The viewer shows the message too.
    let page = root.join("page.html");
    let out = provrun(&["view", &s(&bundle), "--out", &s(&page)]);
    assert_exit(&out, 0);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("\"kind\":\"steered\""),
        "the page data has the steered entry"
    );
    assert!(html.contains(DURING));
}

/// A run steered from the file replays through the CLI with the same messages at the same
/// points. (The run above cannot be replayed whole: a replay has no host folder, so its
/// `copy_to_host` would fail; `tests/tests/steering.rs` replays a run steered mid-run
/// through the API.)
#[test]
fn a_run_steered_from_the_file_replays() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let script = serde_json::json!([
        {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {
            "path": "/output/a.txt", "content": "a"}}]},
        {"text": "done"}
    ]);
    std::fs::write(root.join("script.json"), script.to_string()).unwrap();
    std::fs::write(
        root.join("agent.toml"),
        "name = \"steered\"\nmodel = \"script:script.json\"\ntools = [\"write_file\"]\n",
    )
    .unwrap();
    let steer = root.join("steer.txt");
    std::fs::write(&steer, format!("{BEFORE}\n{DURING}\n")).unwrap();
    let bundle = root.join("bundle");
    let out = provrun(&[
        "run",
        &s(&root.join("agent.toml")),
        "--out",
        &s(&bundle),
        "--steer-file",
        &s(&steer),
    ]);
    assert_exit(&out, 0);
    assert_eq!(
        steered(&bundle),
        vec![(1, BEFORE.to_string()), (1, DURING.to_string())]
    );
    let replayed = root.join("replayed");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&replayed)]);
    assert_exit(&out, 0);
    assert!(
        text(&out.stdout).starts_with("replay matches"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(steered(&replayed), steered(&bundle));
    assert_exit(&provrun(&["verify", &s(&replayed)]), 0);
}

#[test]
fn a_steer_file_that_is_a_folder_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("agent.toml"), "name = \"a\"\nmodel = \"test\"\n").unwrap();
    let bundle = root.join("bundle");
    let out = provrun(&[
        "run",
        &s(&root.join("agent.toml")),
        "--out",
        &s(&bundle),
        "--steer-file",
        &s(root),
    ]);
    assert_exit(&out, 2);
    assert!(
        text(&out.stderr).contains("--steer-file"),
        "{}",
        text(&out.stderr)
    );
    assert!(!bundle.exists());
}
