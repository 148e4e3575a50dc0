//! `provrun diff A B`: a replay against its original (the same behaviour, exit 0), two
//! scripted runs whose one tool result differs (named, exit 1), and bad input (exit 2).

use std::path::Path;

use crate::support::cli::{assert_exit, provrun, s};

/// A run of the scripted example with `report` as its input file.
fn scripted(dir: &Path, name: &str, report: &str) -> String {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripted");
    let input = dir.join(format!("{name}-input"));
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("report.txt"), report).unwrap();
    let bundle = dir.join(name);
    let out = provrun(&[
        "run",
        &s(&example.join("agent.toml")),
        "--input",
        &s(&input),
        "--out",
        &s(&bundle),
    ]);
    assert_exit(&out, 0);
    s(&bundle)
}

#[test]
fn a_replay_behaves_as_its_original() {
    let dir = tempfile::tempdir().unwrap();
    let original = scripted(dir.path(), "original", "Revenue grew 12%.\n");
    let replayed = s(&dir.path().join("replayed"));
    assert_exit(&provrun(&["replay", &original, "--out", &replayed]), 0);
    let out = provrun(&["diff", &original, &replayed]);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("the same behaviour"));
    let json = provrun(&["diff", &original, &replayed, "--json"]);
    assert_exit(&json, 0);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["same"], true);
    assert_eq!(v["differences"], serde_json::json!([]));
    assert_eq!(v["steps"].as_array().unwrap().len(), 3);
    assert_eq!(v["a"]["tool_calls"], v["b"]["tool_calls"]);
    assert_ne!(v["a"]["run_id"], v["b"]["run_id"]);
}

#[test]
fn two_runs_that_differ_in_one_tool_result_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let a = scripted(dir.path(), "a", "Revenue grew 12%.\n");
    let b = scripted(dir.path(), "b", "Revenue grew 13%.\n");
    let json = provrun(&["diff", &a, &b, "--json"]);
    assert_exit(&json, 1);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["same"], false);
    let differences = v["differences"].as_array().unwrap();
    assert_eq!(differences.len(), 1, "{differences:?}");
    let d = &differences[0];
    assert_eq!(d["kind"], "tool_result");
    assert_eq!(d["step"], 1);
    assert_eq!(d["at"], "2 (read_file)");
    assert!(d["a"].as_str().unwrap().contains("12%"));
    assert!(d["b"].as_str().unwrap().contains("13%"));
    // The same outputs (the script writes them), so no output differs.
    assert!(
        v["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["same"] == true)
    );

    let text = provrun(&["diff", &a, &b]);
    assert_exit(&text, 1);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("1 differences:"), "{stdout}");
    assert!(
        stdout.contains("step 1, 2 (read_file), tool_result:"),
        "{stdout}"
    );
}

#[test]
fn bad_input_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let a = scripted(dir.path(), "a", "x\n");
    let out = provrun(&["diff", &a, &s(&dir.path().join("nope"))]);
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_exit(&provrun(&["diff", &s(&empty), &a]), 2);
    assert_exit(&provrun(&["diff", &a]), 2);
}
