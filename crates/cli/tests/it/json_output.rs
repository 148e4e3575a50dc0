//! The CLI's conventions for scripts and terminals: `--json` on `run`, `resume`, `replay`
//! and `show` (one object on stdout, the shapes docs/cli.md gives), `--color
//! auto|always|never`, and a top-level help in plain words.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::cli::{command, provrun, s, text};

fn example(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(rel)
        .display()
        .to_string()
}

/// The one JSON object on stdout, after checking the exit code.
#[track_caller]
fn one_object(out: &Output, code: i32) -> Value {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    let value: Value = serde_json::from_str(&stdout).unwrap();
    assert!(value.is_object(), "{value}");
    value
}

fn scripted(out: &Path, extra: &[&str]) -> Output {
    let (agent, input, out) = (
        example("scripted/agent.toml"),
        example("scripted/input"),
        s(out),
    );
    let mut args = vec!["run", &agent, "--input", &input, "--out", &out];
    args.extend_from_slice(extra);
    provrun(&args)
}

#[test]
fn run_and_replay_json_say_how_the_run_ended_in_one_object() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let plain = dir.path().join("plain");
    let answer = text(&scripted(&plain, &[]).stdout);
    let run = one_object(&scripted(&bundle, &["--json", "--verify"]), 0);
    assert_eq!(run["status"], "finished");
    assert_eq!(run["bundle"], s(&bundle));
    assert_eq!(run["output"].as_str().unwrap(), answer.trim_end());
    assert!(run["run_id"].as_str().unwrap().starts_with("run-"));
    assert!(run["error"].is_null());
    assert_eq!(run["usage"]["requests"], 3);
    assert_eq!(run["usage"]["tool_calls"], 3);
    assert_eq!(run["waiting"], serde_json::json!([]));
    // --verify's report, as `verify --json` prints it.
    assert_eq!(run["verify"]["ok"], true);
    assert_eq!(run["verify"]["status"], "finished");
    assert!(run["verify"]["checks"].as_array().unwrap().len() >= 11);
    let without = one_object(&scripted(&dir.path().join("again"), &["--json"]), 0);
    assert!(without["verify"].is_null());

    let replayed = dir.path().join("replayed");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&replayed), "--json"]);
    let replay = one_object(&out, 0);
    assert_eq!(replay["matches"], true);
    assert!(replay["difference"].is_null());
    assert_eq!(replay["tool_calls"], 3);
    assert_eq!(replay["outputs"], 2);
    assert_eq!(replay["answered_from_recording"], 0);
    assert_eq!(replay["bundle"], s(&replayed));
    assert_eq!(replay["status"], "finished");
    assert_ne!(replay["run_id"], run["run_id"]);
}

#[test]
fn a_paused_run_lists_its_waiting_calls_and_resume_json_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let agent = example("approve/agent.toml");
    let out = provrun(&["run", &agent, "--out", &s(&bundle), "--json"]);
    let paused = one_object(&out, 4);
    assert_eq!(paused["status"], "paused");
    assert_eq!(paused["output"], "");
    let waiting = paused["waiting"].as_array().unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["run_call_id"], "1.1");
    assert_eq!(waiting[0]["call_id"], "greet");
    assert_eq!(waiting[0]["name"], "write_file");
    assert_eq!(waiting[0]["reason"], "approval");
    // stderr still tells a person what to do.
    assert!(text(&out.stderr).contains("provrun resume"));
    let out = provrun(&["resume", &s(&bundle), "--approve", "1.1", "--json"]);
    let resumed = one_object(&out, 0);
    assert_eq!(resumed["status"], "finished");
    assert_eq!(resumed["run_id"], paused["run_id"]);
    assert_eq!(resumed["output"], "Wrote /output/hello.txt.");

    // A failed run: exit 1, its error in the object.
    std::fs::write(dir.path().join("short.json"), r#"[]"#).unwrap();
    let failing = dir.path().join("failing");
    let out = provrun(&[
        "run",
        &example("scripted/agent.toml"),
        "--model",
        &format!("script:{}", s(&dir.path().join("short.json"))),
        "--out",
        &s(&failing),
        "--json",
    ]);
    let failed = one_object(&out, 1);
    assert_eq!(failed["status"], "failed");
    assert!(!failed["error"].as_str().unwrap().is_empty(), "{failed}");
}

#[test]
fn show_json_is_the_run_its_steps_and_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    assert_eq!(scripted(&bundle, &[]).status.code(), Some(0));
    let shown = one_object(&provrun(&["show", &s(&bundle), "--json"]), 0);
    assert_eq!(shown["bundle"], s(&bundle));
    assert_eq!(shown["agent"], "scripted");
    assert_eq!(shown["status"], "finished");
    assert_eq!(shown["usage"]["requests"], 3);
    assert_eq!(shown["inputs"][0]["path"], "report.txt");
    let outputs: Vec<&str> = shown["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    assert!(outputs.contains(&"summary.md"), "{outputs:?}");
    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    let names: Vec<&str> = steps[0]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list_dir", "read_file"]);
    assert_eq!(steps[1]["calls"][0]["run_call_id"], "2.1");
    assert_eq!(steps[2]["calls"], serde_json::json!([]));
    assert_eq!(shown["verify"]["ok"], true);
    // A run that never finished has no status; the verdict says incomplete.
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    let cut: Vec<&str> = log.lines().take(4).collect();
    std::fs::write(bundle.join("events.jsonl"), cut.join("\n") + "\n").unwrap();
    let shown = one_object(&provrun(&["show", &s(&bundle), "--json"]), 0);
    assert!(shown["status"].is_null(), "{shown}");
    assert_eq!(shown["verify"]["complete"], false);
}

#[test]
fn color_always_never_and_auto_decide_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    assert_eq!(scripted(&bundle, &[]).status.code(), Some(0));
    let coloured = |args: &[&str], env: &[(&str, &str)]| -> bool {
        let out = command(args).envs(env.iter().copied()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout).contains("\x1b[")
    };
    let b = s(&bundle);
    // Piped: auto is plain; always paints, even under NO_COLOR; never stays plain even
    // when CLICOLOR_FORCE asks; the flag goes before or after the command.
    assert!(!coloured(&["show", &b], &[]));
    assert!(coloured(&["show", &b, "--color", "always"], &[]));
    assert!(coloured(
        &["--color=always", "verify", &b],
        &[("NO_COLOR", "1")]
    ));
    assert!(!coloured(
        &["show", &b, "--color", "never"],
        &[("CLICOLOR_FORCE", "1")]
    ));
    assert!(coloured(
        &["show", &b, "--color", "auto"],
        &[("CLICOLOR_FORCE", "1")]
    ));
    let out = provrun(&["show", &b, "--color", "sometimes"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_top_level_help_describes_cat_in_plain_words() {
    let help = text(&provrun(&["--help"]).stdout);
    let cat = help
        .lines()
        .find(|l| l.trim_start().starts_with("cat "))
        .unwrap();
    assert!(cat.contains("Print one blob's exact bytes"), "{cat}");
    assert!(!help.contains("Extension:"), "{help}");
    assert!(help.contains("--color"), "{help}");
}
