//! `provrun run`, `verify`, `replay`, `show` and `resume` as scripts see them: the built
//! binary, its stdout, stderr and exit code, over the repository's examples and bundles
//! made (and damaged) here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::cli::{command, events, provrun, s};
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn example(rel: &str) -> String {
    examples().join(rel).display().to_string()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

#[track_caller]
fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
}

/// A fresh temporary folder and a bundle path inside it that does not exist yet.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    (dir, bundle)
}

fn run_scripted(bundle: &Path) {
    let out = provrun(&[
        "run",
        &example("scripted/agent.toml"),
        "--input",
        &example("scripted/input"),
        "--out",
        &s(bundle),
    ]);
    assert_exit(&out, 0);
}

fn verify_json(bundle: &Path) -> (i32, Value) {
    let out = provrun(&["verify", &s(bundle), "--json"]);
    let report: Value = serde_json::from_str(stdout(&out).trim()).expect("one JSON object");
    (out.status.code().unwrap(), report)
}

fn last_status(bundle: &Path) -> String {
    let events = events(bundle);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run_finished");
    last["payload"]["status"].as_str().unwrap().to_string()
}

/// Write an agent file (and optional script) into `dir`; returns the agent path.
fn agent_file(dir: &Path, toml: &str, script: Option<&str>) -> PathBuf {
    let path = dir.join("agent.toml");
    std::fs::write(&path, toml).unwrap();
    if let Some(script) = script {
        std::fs::write(dir.join("script.json"), script).unwrap();
    }
    path
}

// ---- run -------------------------------------------------------------------------------

#[test]
fn hello_runs_offline_finishes_and_verifies() {
    let (_dir, bundle) = scratch();
    let out = provrun(&[
        "run",
        &example("hello/agent.toml"),
        "--input",
        &example("hello/input"),
        "--out",
        &s(&bundle),
        "--verify",
    ]);
    assert_exit(&out, 0);
    // The test model's answer: which of its placeholder calls succeeded.
    let answer: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let names: Vec<&str> = answer["tool_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list_dir", "read_file", "write_file"]);
    assert!(
        stderr(&out).contains("bundle verifies: all"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(bundle.join("input/notes.txt")).unwrap(),
        std::fs::read(examples().join("hello/input/notes.txt")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/response.txt")).unwrap(),
        stdout(&out).trim_end()
    );
    assert_eq!(last_status(&bundle), "finished");
}

#[test]
fn scripted_run_resolves_its_script_beside_the_agent_file_from_any_folder() {
    let (dir, bundle) = scratch();
    let out = command(&[
        "run",
        &example("scripted/agent.toml"),
        "--input",
        &example("scripted/input/report.txt"),
        "--out",
        &s(&bundle),
        "--prompt",
        "Summarise the report.",
    ])
    .current_dir(dir.path())
    .output()
    .unwrap();
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        "Wrote /output/summary.md: revenue up 12%, costs flat, two components shipped.\n"
    );
    let summary = std::fs::read_to_string(bundle.join("output/summary.md")).unwrap();
    assert!(summary.starts_with("# Summary of report.txt"), "{summary}");
    let started = &events(&bundle)[0]["payload"];
    assert_eq!(started["details"]["prompt"], "Summarise the report.");
}

#[test]
fn the_default_prompt_is_sent_when_none_is_given() {
    let (_dir, bundle) = scratch();
    run_scripted(&bundle);
    let started = &events(&bundle)[0]["payload"];
    assert_eq!(
        started["details"]["prompt"],
        "Do the task your instructions describe."
    );
}

#[test]
fn model_flag_overrides_the_spec_and_resolves_against_the_current_folder() {
    let (_dir, bundle) = scratch();
    let out = command(&[
        "run",
        "hello/agent.toml",
        "--model",
        "script:scripted/script.json",
        "--input",
        "scripted/input",
        "--out",
        &s(&bundle),
    ])
    .current_dir(examples())
    .output()
    .unwrap();
    assert_exit(&out, 0);
    assert!(stdout(&out).starts_with("Wrote /output/summary.md"));
    let started = &events(&bundle)[0]["payload"];
    assert!(
        started["model"].as_str().unwrap().starts_with("script:"),
        "{started}"
    );
    // The spec recorded is the one that ran, override included.
    let spec = started["details"]["agent_spec"].as_str().unwrap();
    assert!(spec.contains("script:"), "{spec}");
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
}

#[test]
fn a_failed_run_exits_1_and_its_bundle_verifies() {
    let dir = tempfile::tempdir().unwrap();
    // The script ends after one tool call: the second request fails the run.
    let agent = agent_file(
        dir.path(),
        "name = \"short\"\nmodel = \"script:script.json\"\ntools = [\"list_dir\"]\n",
        Some(
            r#"[{"tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "/input"}}]}]"#,
        ),
    );
    let bundle = dir.path().join("bundle");
    let out = provrun(&["run", &s(&agent), "--out", &s(&bundle)]);
    assert_exit(&out, 1);
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(err.starts_with("provrun: the run failed: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(last_status(&bundle), "failed");
    let (code, report) = verify_json(&bundle);
    assert_eq!(code, 0, "{report}");
}

#[test]
fn durability_policies_are_accepted_and_a_wrong_one_is_a_usage_error() {
    for policy in ["flush", "per-event", "per-step", "at-end", "group-commit"] {
        let (_dir, bundle) = scratch();
        let out = provrun(&[
            "run",
            &example("scripted/agent.toml"),
            "--input",
            &example("scripted/input"),
            "--out",
            &s(&bundle),
            "--durability",
            policy,
        ]);
        assert_exit(&out, 0);
        assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
    }
    let (_dir, bundle) = scratch();
    let out = provrun(&[
        "run",
        &example("scripted/agent.toml"),
        "--out",
        &s(&bundle),
        "--durability",
        "sometimes",
    ]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--durability"), "{}", stderr(&out));
    assert!(!bundle.exists());
}

// ---- run: usage and spec errors, nothing written ----------------------------------------

/// Run with these arguments (plus `--out <fresh>`) and check: exit 2, one `provrun: …`
/// line mentioning every needle, and no bundle.
#[track_caller]
fn refused(args: &[&str], needles: &[&str]) {
    let (_dir, bundle) = scratch();
    let mut all: Vec<&str> = args.to_vec();
    let out_path = s(&bundle);
    all.extend(["--out", &out_path]);
    let out = provrun(&all);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.starts_with("provrun: "), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    for needle in needles {
        assert!(err.contains(needle), "`{needle}` not in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(!bundle.exists(), "nothing is written");
    assert!(stdout(&out).is_empty());
}

#[test]
fn a_missing_agent_file_is_a_usage_error_naming_it() {
    refused(
        &["run", "/nonexistent/agent.toml"],
        &["/nonexistent/agent.toml"],
    );
}

#[test]
fn a_malformed_agent_file_is_a_usage_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_file(
        dir.path(),
        "name = \"broken\"\nmodel = \"test\"\ntools = [\"list_dir\",\n",
        None,
    );
    refused(&["run", &s(&agent)], &[&s(&agent), "line 3"]);

    let unknown_key = agent_file(
        dir.path(),
        "name = \"x\"\nmodel = \"test\"\ncolour = 1\n",
        None,
    );
    refused(&["run", &s(&unknown_key)], &["colour", "line 3"]);
}

#[test]
fn an_unknown_tool_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_file(
        dir.path(),
        "name = \"x\"\nmodel = \"test\"\ntools = [\"list_dir\", \"teleport\"]\n",
        None,
    );
    refused(&["run", &s(&agent)], &["teleport"]);
}

#[test]
fn an_unknown_model_scheme_is_a_usage_error_in_the_file_or_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_file(dir.path(), "name = \"x\"\nmodel = \"gemini:pro\"\n", None);
    refused(&["run", &s(&agent)], &["model", "gemini:pro"]);
    refused(
        &["run", &example("hello/agent.toml"), "--model", "gemini:pro"],
        &["--model", "gemini:pro"],
    );
}

#[test]
fn a_missing_script_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_file(
        dir.path(),
        "name = \"x\"\nmodel = \"script:missing.json\"\n",
        None,
    );
    refused(&["run", &s(&agent)], &["missing.json"]);
}

#[test]
fn a_missing_input_is_a_usage_error_naming_it() {
    refused(
        &[
            "run",
            &example("hello/agent.toml"),
            "--input",
            "/nonexistent/input.txt",
        ],
        &["/nonexistent/input.txt"],
    );
}

#[test]
fn an_existing_non_empty_out_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("taken");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("keep.txt"), "mine").unwrap();
    let out = provrun(&["run", &example("hello/agent.toml"), "--out", &s(&out_dir)]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--out"), "{}", stderr(&out));
    assert!(stderr(&out).contains("not empty"), "{}", stderr(&out));
    let entries: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        std::fs::read_to_string(out_dir.join("keep.txt")).unwrap(),
        "mine"
    );

    // An existing *empty* folder is fine.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    run_scripted(&empty);
}

#[test]
fn missing_required_flags_are_usage_errors() {
    let out = provrun(&["run", &example("hello/agent.toml")]);
    assert_exit(&out, 2);
    assert_eq!(
        stderr(&out),
        "provrun: the following required arguments were not provided: --out <BUNDLE> (see --help)\n"
    );
    let out = provrun(&["verify", "b", "--jsn"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.starts_with("provrun: ") && err.contains("--jsn"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = provrun(&["run", "--out", "/tmp/x"]);
    assert_exit(&out, 2);
    let out = provrun(&["frobnicate"]);
    assert_exit(&out, 2);
}

// ---- pause and resume ------------------------------------------------------------------

fn run_approve(bundle: &Path) -> Output {
    provrun(&["run", &example("approve/agent.toml"), "--out", &s(bundle)])
}

#[test]
fn a_paused_run_exits_4_and_resumes_in_a_new_process() {
    let (_dir, bundle) = scratch();
    let out = run_approve(&bundle);
    assert_exit(&out, 4);
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    // The call is named by its run id, the model's id beside it.
    assert!(
        err.contains("1.1 (model id \"greet\")  write_file"),
        "{err}"
    );
    let resume_cmd = format!("provrun resume {} --approve 1.1", s(&bundle));
    assert!(err.contains(&resume_cmd), "{err}");
    assert_eq!(last_status(&bundle), "paused");
    // A paused bundle verifies, and `verify --json` says it is paused.
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
    let (code, report) = verify_json(&bundle);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(report["status"], "paused", "{report}");
    assert!(!bundle.join("output/hello.txt").exists());

    // The command printed, run as printed (in a new process).
    let words: Vec<&str> = resume_cmd.split(' ').skip(1).collect();
    let out = provrun(&words);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "Wrote /output/hello.txt.\n");
    assert_eq!(
        std::fs::read_to_string(bundle.join("output/hello.txt")).unwrap(),
        "Hello, world.\n"
    );
    assert_eq!(last_status(&bundle), "finished");
    let (code, report) = verify_json(&bundle);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["status"], "finished", "{report}");
    let timeline = stdout(&provrun(&["show", &s(&bundle)]));
    assert!(timeline.contains("end     paused"), "{timeline}");
    assert!(timeline.contains("resume  the run continues"), "{timeline}");
    assert!(timeline.contains("end     finished"), "{timeline}");

    // Finished now: nothing more to resume.
    let out = provrun(&["resume", &s(&bundle), "--approve", "greet"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("not paused"), "{}", stderr(&out));
}

#[test]
fn a_bundle_another_writer_holds_is_refused_with_exit_2_and_left_alone() {
    let (_dir, bundle) = scratch();
    assert_exit(&run_approve(&bundle), 4);
    let before = std::fs::read(bundle.join("events.jsonl")).unwrap();
    let listing = |b: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(b)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let files = listing(&bundle);
    // This process holds the bundle, as a running resume would.
    let held = provrun_evidence::BundleLock::acquire(&bundle).unwrap();
    let out = provrun(&["resume", &s(&bundle), "--approve", "greet"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&s(&bundle)) && err.contains("in use"), "{err}");
    if Path::new("/proc/locks").exists() {
        assert!(
            err.contains(&format!("process {}", std::process::id())),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(bundle.join("events.jsonl")).unwrap(), before);
    assert_eq!(listing(&bundle), files);
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
    // The lock goes with its holder.
    drop(held);
    assert_exit(&provrun(&["resume", &s(&bundle), "--approve", "greet"]), 0);
}

#[test]
fn two_resumes_of_one_paused_run_at_once_one_wins_and_the_bundle_verifies() {
    for round in 0..4 {
        let (_dir, bundle) = scratch();
        assert_exit(&run_approve(&bundle), 4);
        let spawn = || {
            command(&["resume", &s(&bundle), "--approve", "greet"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let mut codes = [a.status.code(), b.status.code()];
        codes.sort();
        assert_eq!(
            codes,
            [Some(0), Some(2)],
            "round {round}: {}\n{}",
            stderr(&a),
            stderr(&b)
        );
        let (code, report) = verify_json(&bundle);
        assert_eq!(code, 0, "round {round}: {report}");
        // One decision, one run of the call.
        let greet_done = events(&bundle)
            .iter()
            .filter(|e| {
                e["type"] == "tool_called"
                    && e["payload"]["call_id"] == "greet"
                    && e["payload"]["deferred"] != true
            })
            .count();
        assert_eq!(greet_done, 1, "round {round}");
        assert_eq!(last_status(&bundle), "finished");
    }
}

#[test]
fn resume_can_deny_with_a_message() {
    let (_dir, bundle) = scratch();
    assert_exit(&run_approve(&bundle), 4);
    let out = provrun(&[
        "resume",
        &s(&bundle),
        "--deny",
        "greet",
        "--deny-message",
        "not today",
        "--verify",
    ]);
    assert_exit(&out, 0);
    assert!(!bundle.join("output/hello.txt").exists());
    let call = events(&bundle)
        .into_iter()
        .rev()
        .find(|e| e["type"] == "tool_called")
        .unwrap();
    assert_eq!(call["payload"]["ok"], false);
    assert!(
        call["payload"]["result"]
            .as_str()
            .unwrap()
            .contains("not today"),
        "{call}"
    );
}

#[test]
fn resume_with_a_wrong_call_id_changes_nothing() {
    let (_dir, bundle) = scratch();
    assert_exit(&run_approve(&bundle), 4);
    let before = std::fs::read(bundle.join("events.jsonl")).unwrap();
    let out = provrun(&["resume", &s(&bundle), "--approve", "nope"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("nope") && err.contains("greet"), "{err}");
    assert_eq!(std::fs::read(bundle.join("events.jsonl")).unwrap(), before);
    // No decision at all is a usage error too.
    assert_exit(&provrun(&["resume", &s(&bundle)]), 2);
    assert_exit(
        &provrun(&["resume", "/nonexistent/bundle", "--approve", "x"]),
        2,
    );
}

#[test]
fn resume_grants_the_host_folder_again() {
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().join("host");
    std::fs::create_dir(&host).unwrap();
    let input = dir.path().join("note.txt");
    std::fs::write(&input, "kept\n").unwrap();
    let agent = agent_file(
        dir.path(),
        "name = \"out\"\nmodel = \"script:script.json\"\ntools = [\"copy_to_host\"]\napprove = \"destructive\"\n",
        Some(
            r#"[{"tool_calls": [{"id": "c1", "name": "copy_to_host",
                                 "arguments": {"path": "/input/note.txt", "host_path": "note.txt"}}]},
                {"text": "copied"}]"#,
        ),
    );
    let bundle = dir.path().join("bundle");
    let out = provrun(&[
        "run",
        &s(&agent),
        "--input",
        &s(&input),
        "--host-dir",
        &s(&host),
        "--out",
        &s(&bundle),
    ]);
    assert_exit(&out, 4);
    // The printed command grants the folder again.
    let resume_cmd = format!(
        "provrun resume {} --approve 1.1 --host-dir {}",
        s(&bundle),
        s(&host)
    );
    assert!(stderr(&out).contains(&resume_cmd), "{}", stderr(&out));
    // Without it the resume is refused and changes nothing.
    let before = std::fs::read(bundle.join("events.jsonl")).unwrap();
    let out = provrun(&["resume", &s(&bundle), "--approve", "c1"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--host-dir"), "{}", stderr(&out));
    assert_eq!(std::fs::read(bundle.join("events.jsonl")).unwrap(), before);
    let out = provrun(&[
        "resume",
        &s(&bundle),
        "--approve",
        "c1",
        "--host-dir",
        &s(&dir.path().join("missing")),
    ]);
    assert_exit(&out, 2);
    // As printed, in a new process.
    let words: Vec<&str> = resume_cmd.split(' ').skip(1).collect();
    let out = provrun(&words);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "copied\n");
    assert_eq!(
        std::fs::read_to_string(host.join("note.txt")).unwrap(),
        "kept\n"
    );
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
}

// ---- verify ----------------------------------------------------------------------------

#[test]
fn verify_prints_a_line_per_check_and_a_verdict_or_one_json_object() {
    let (_dir, bundle) = scratch();
    run_scripted(&bundle);
    let (code, report) = verify_json(&bundle);
    assert_eq!(code, 0);
    let keys: Vec<&String> = report.as_object().unwrap().keys().collect();
    // `status` was added later (extending the object): how the run ended.
    assert_eq!(keys, ["checks", "complete", "ok", "status"]);
    assert_eq!(report["ok"], true);
    assert_eq!(report["complete"], true);
    assert_eq!(report["status"], "finished");
    let checks = report["checks"].as_array().unwrap();
    assert!(!checks.is_empty());
    for c in checks {
        let mut keys: Vec<&String> = c.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["code", "detail", "status"]);
        assert!(c["detail"].is_string());
        assert_ne!(c["status"], "fail");
    }
    let codes: Vec<&str> = checks.iter().map(|c| c["code"].as_str().unwrap()).collect();
    for code in ["layout", "chain", "sequence", "outputs", "statement"] {
        assert!(codes.contains(&code), "{codes:?}");
    }

    let out = provrun(&["verify", &s(&bundle)]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), checks.len() + 1, "{text}");
    assert!(text.lines().next().unwrap().starts_with("pass  "), "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("bundle verifies: all")
    );
    assert!(!text.contains('\x1b'), "plain when piped");
}

#[test]
fn verify_exits_1_when_an_output_byte_is_flipped() {
    let (_dir, bundle) = scratch();
    run_scripted(&bundle);
    let path = bundle.join("output/summary.md");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();

    let (code, report) = verify_json(&bundle);
    assert_eq!(code, 1);
    assert_eq!(report["ok"], false);
    let outputs = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "outputs")
        .unwrap();
    assert_eq!(outputs["status"], "fail");

    let out = provrun(&["verify", &s(&bundle)]);
    assert_exit(&out, 1);
    assert!(stdout(&out).contains("FAIL  outputs"), "{}", stdout(&out));
    assert!(stdout(&out).contains("bundle does not verify"));
}

/// Cut the last line (`run_finished`) off the log and remove the statement: what a run
/// killed just before its end leaves.
fn unfinish(bundle: &Path) {
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    let mut lines: Vec<&str> = log.lines().collect();
    assert!(lines.pop().unwrap().contains("\"type\":\"run_finished\""));
    std::fs::write(bundle.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::remove_file(bundle.join("statement.json")).unwrap();
}

#[test]
fn verify_exits_3_for_a_run_that_never_finished() {
    let (_dir, bundle) = scratch();
    run_scripted(&bundle);
    unfinish(&bundle);
    let (code, report) = verify_json(&bundle);
    assert_eq!(code, 3, "{report}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["complete"], false);
    let out = provrun(&["verify", &s(&bundle)]);
    assert_exit(&out, 3);
    assert!(stdout(&out).contains("never finished"), "{}", stdout(&out));
}

#[test]
fn verify_of_a_missing_bundle_is_a_usage_error_like_show() {
    // Exit 2 and one line on stderr, as `show` does (issue 37; it was a report and exit 1).
    let out = provrun(&["verify", "/nonexistent/bundle", "--json"]);
    assert_exit(&out, 2);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(stderr(&out).starts_with("provrun: no bundle at `/nonexistent/bundle`"));
    // A folder that is no bundle is still checked, and fails.
    let dir = tempfile::tempdir().unwrap();
    let out = provrun(&["verify", &s(dir.path()), "--json"]);
    assert_exit(&out, 1);
    let report: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(report["ok"], false);
}

// ---- replay ----------------------------------------------------------------------------

#[test]
fn replay_of_a_recorded_run_matches() {
    let (dir, bundle) = scratch();
    run_scripted(&bundle);
    let new = dir.path().join("again");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&new)]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).starts_with("replay matches: 3 tool calls and 2 output files"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        std::fs::read(bundle.join("output/summary.md")).unwrap(),
        std::fs::read(new.join("output/summary.md")).unwrap()
    );
    assert_exit(&provrun(&["verify", &s(&new)]), 0);
    // The replay needs nothing but the bundle: not the script, not the input folder.
    let started = &events(&new)[0]["payload"];
    assert!(started["model"].as_str().unwrap().starts_with("replay:"));
}

#[test]
fn replay_exits_1_naming_the_first_difference() {
    // The host folder is granted to the run but not to its replay (a replay has only the
    // bundle), so the host tool's result differs.
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().join("host");
    std::fs::create_dir(&host).unwrap();
    std::fs::write(host.join("secret.txt"), "on the host only").unwrap();
    let agent = agent_file(
        dir.path(),
        "name = \"host\"\nmodel = \"script:script.json\"\ntools = [\"list_host_files\"]\n",
        Some(
            r#"[{"tool_calls": [{"id": "h1", "name": "list_host_files", "arguments": {"path": "."}}]},
                {"text": "listed"}]"#,
        ),
    );
    let bundle = dir.path().join("bundle");
    let out = provrun(&[
        "run",
        &s(&agent),
        "--host-dir",
        &s(&host),
        "--out",
        &s(&bundle),
    ]);
    assert_exit(&out, 0);
    let call = events(&bundle)
        .into_iter()
        .find(|e| e["type"] == "tool_called")
        .unwrap();
    assert_eq!(call["payload"]["ok"], true, "{call}");
    assert!(call["payload"]["result"].to_string().contains("secret.txt"));

    let new = dir.path().join("again");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&new)]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.starts_with("replay differs: tool call 1 differs"),
        "{text}"
    );
    assert!(text.contains("list_host_files"), "{text}");
}

#[test]
fn replay_of_a_paused_then_resumed_bundle_matches() {
    let (dir, bundle) = scratch();
    assert_exit(&run_approve(&bundle), 4);
    // Still paused: replayed up to the pause.
    let paused = dir.path().join("paused");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&paused)]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).starts_with("replay matches: 0 tool calls and 0 output files"),
        "{}",
        stdout(&out)
    );
    assert_eq!(last_status(&paused), "paused");
    // Resumed with a denial: the replay pauses and is denied the same way.
    let denied = dir.path().join("denied");
    std::fs::create_dir(&denied).unwrap();
    let src = dir.path().join("src-denied");
    assert_exit(&run_approve(&src), 4);
    assert_exit(
        &provrun(&[
            "resume",
            &s(&src),
            "--deny",
            "greet",
            "--deny-message",
            "no",
        ]),
        0,
    );
    let out = provrun(&["replay", &s(&src), "--out", &s(&denied)]);
    assert_exit(&out, 0);
    assert!(!denied.join("output/hello.txt").exists());
    // Resumed with an approval: the replay writes the file too.
    assert_exit(&provrun(&["resume", &s(&bundle), "--approve", "greet"]), 0);
    let again = dir.path().join("again");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&again)]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).starts_with("replay matches: 1 tool calls and 2 output files"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        std::fs::read(bundle.join("output/hello.txt")).unwrap(),
        std::fs::read(again.join("output/hello.txt")).unwrap()
    );
    assert_eq!(last_status(&again), "finished");
    assert_exit(&provrun(&["verify", &s(&again)]), 0);
}

#[test]
fn replay_refuses_a_tampered_or_unfinished_source() {
    let (dir, bundle) = scratch();
    run_scripted(&bundle);
    let path = bundle.join("input/report.txt");
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    std::fs::write(&path, "Revenue fell.\n").unwrap();
    let new = dir.path().join("again");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&new)]);
    assert_exit(&out, 1);
    let err = stderr(&out);
    assert!(err.contains("refusing to replay"), "{err}");
    assert!(err.contains("inputs"), "names the failed check: {err}");
    assert!(!new.exists());

    let (dir2, bundle2) = scratch();
    run_scripted(&bundle2);
    unfinish(&bundle2);
    let new = dir2.path().join("again");
    let out = provrun(&["replay", &s(&bundle2), "--out", &s(&new)]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("never finished"), "{}", stderr(&out));
}

#[test]
fn replay_usage_errors() {
    let (dir, bundle) = scratch();
    run_scripted(&bundle);
    // --out is the source itself: not empty.
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&bundle)]);
    assert_exit(&out, 2);
    let out = provrun(&[
        "replay",
        "/nonexistent/bundle",
        "--out",
        &s(&dir.path().join("x")),
    ]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("/nonexistent/bundle"));
    assert_exit(&provrun(&["replay", &s(&bundle)]), 2);
}

// ---- show ------------------------------------------------------------------------------

#[test]
fn show_prints_the_timeline_plain_when_piped() {
    let (_dir, bundle) = scratch();
    run_scripted(&bundle);
    let out = provrun(&["show", &s(&bundle)]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(!text.contains('\x1b'), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("run ") && lines[0].contains("agent scripted"));
    assert!(text.contains("inputs  report.txt (123 B)"), "{text}");
    for step in ["step 1 ", "step 2 ", "step 3 "] {
        assert!(text.contains(step), "{text}");
    }
    assert!(text.contains("ok     list_dir"), "{text}");
    assert!(text.contains("ok     write_file"), "{text}");
    assert!(text.contains(" ms "), "durations: {text}");
    assert!(text.contains("in / "), "tokens: {text}");
    assert!(text.contains("outputs response.txt"), "{text}");
    assert!(text.contains("summary.md (126 B)"), "{text}");
    assert!(text.contains("end     finished · 3 model requests · 3 tool calls"));
    assert!(lines.last().unwrap().starts_with("bundle verifies"));
}

#[test]
fn show_marks_failed_and_waiting_calls() {
    let (_dir, bundle) = scratch();
    let out = provrun(&["run", &example("hello/agent.toml"), "--out", &s(&bundle)]);
    assert_exit(&out, 0);
    let text = stdout(&provrun(&["show", &s(&bundle)]));
    assert!(text.contains("failed read_file"), "{text}");

    let (_dir, paused) = scratch();
    assert_exit(&run_approve(&paused), 4);
    let text = stdout(&provrun(&["show", &s(&paused)]));
    assert!(text.contains("waits  write_file"), "{text}");
    assert!(text.contains("end     paused"), "{text}");
}

#[test]
fn show_colours_only_when_asked_and_no_color_wins() {
    let (_dir, bundle) = scratch();
    run_scripted(&bundle);
    let forced = command(&["show", &s(&bundle)])
        .env("CLICOLOR_FORCE", "1")
        .output()
        .unwrap();
    assert!(stdout(&forced).contains("\x1b["), "{}", stdout(&forced));
    let both = command(&["show", &s(&bundle)])
        .env("CLICOLOR_FORCE", "1")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(!stdout(&both).contains('\x1b'));
}

#[test]
fn show_of_a_missing_bundle_is_a_usage_error_and_of_an_unreadable_log_a_failure() {
    let out = provrun(&["show", "/nonexistent/bundle"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).starts_with("provrun: no bundle at `/nonexistent/bundle`"));

    let (_dir, bundle) = scratch();
    run_scripted(&bundle);
    std::fs::write(bundle.join("events.jsonl"), "not json\n").unwrap();
    let out = provrun(&["show", &s(&bundle)]);
    assert_exit(&out, 1);
    let err = stderr(&out);
    assert!(
        err.starts_with("provrun: cannot read the evidence log of"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

// ---- Ctrl-C ----------------------------------------------------------------------------

#[test]
fn ctrl_c_cancels_the_run_and_finishes_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_file(
        dir.path(),
        "name = \"slow\"\nmodel = \"script:script.json\"\n",
        Some(r#"[{"text": "too late", "delay_ms": 30000}]"#),
    );
    let bundle = dir.path().join("bundle");
    let child = command(&["run", &s(&agent), "--out", &s(&bundle)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the run has started (its first event is on disk).
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
    assert_exit(&out, 130);
    assert!(stderr(&out).contains("cancelled"), "{}", stderr(&out));
    assert_eq!(last_status(&bundle), "cancelled");
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
}

// ---- client round trips ----------------------------------------------------------------

#[test]
fn a_client_round_trip_pauses_and_resumes_with_the_callers_result() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(
        tools.join("ask.toml"),
        "[[tools]]\nname = \"ask_user\"\ndescription = \"Ask the user a question.\"\n\
         mode = \"client_round_trip\"\n",
    )
    .unwrap();
    let agent = agent_file(
        dir.path(),
        "name = \"asker\"\nmodel = \"script:script.json\"\ntools = [\"ask_user\"]\n",
        Some(
            r#"[{"tool_calls": [{"id": "q1", "name": "ask_user", "arguments": {}}]},
                {"text": "thanks"}]"#,
        ),
    );
    let bundle = dir.path().join("bundle");
    let out = provrun(&[
        "run",
        &s(&agent),
        "--tools-dir",
        &s(&tools),
        "--out",
        &s(&bundle),
    ]);
    assert_exit(&out, 4);
    let err = stderr(&out);
    assert!(err.contains("1.1 (model id \"q1\")  ask_user"), "{err}");
    assert!(err.contains("the caller runs it"), "{err}");
    assert!(err.contains("--result 1.1=RESULT"), "{err}");

    // An approval is the wrong decision for a call the caller runs.
    let out = provrun(&[
        "resume",
        &s(&bundle),
        "--approve",
        "q1",
        "--tools-dir",
        &s(&tools),
    ]);
    assert_exit(&out, 2);

    let out = provrun(&[
        "resume",
        &s(&bundle),
        "--result",
        "q1=blue",
        "--tools-dir",
        &s(&tools),
    ]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "thanks\n");
    let call = events(&bundle)
        .into_iter()
        .rev()
        .find(|e| e["type"] == "tool_called")
        .unwrap();
    assert_eq!(call["payload"]["result"], "blue");
    assert_eq!(call["payload"]["ok"], true);
    assert_exit(&provrun(&["verify", &s(&bundle)]), 0);

    // A malformed --result is a usage error.
    let out = provrun(&["resume", &s(&bundle), "--result", "no-equals-sign"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("ID=TEXT"), "{}", stderr(&out));
}

#[test]
fn a_missing_host_dir_is_a_usage_error_naming_the_flag() {
    refused(
        &[
            "run",
            &example("scripted/agent.toml"),
            "--host-dir",
            "/nonexistent/host",
        ],
        &["--host-dir", "/nonexistent/host"],
    );
}

#[test]
fn inputs_whose_names_clash_are_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    for (sub, text) in [("one", "1"), ("two", "2")] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
        std::fs::write(dir.path().join(sub).join("same.txt"), text).unwrap();
    }
    refused(
        &[
            "run",
            &example("scripted/agent.toml"),
            "--input",
            &s(&dir.path().join("one")),
            "--input",
            &s(&dir.path().join("two")),
        ],
        &["same.txt"],
    );
}

/// Copy a folder tree (files and folders only).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Every blob ref's digest in a bundle's log.
fn blob_digests(bundle: &Path) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let (Some(d), Some(_), Some(_)) =
                    (m.get("digest"), m.get("size"), m.get("media_type"))
                {
                    out.push(d["sha256"].as_str().unwrap().to_string());
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for e in events(bundle) {
        walk(&e["payload"], &mut out);
    }
    out
}

#[test]
fn a_bundle_of_the_first_blob_layout_verifies_shows_replays_and_cats() {
    // Written by the version before the pack (tests/fixtures/README.md).
    let (_dir, bundle) = scratch();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundle-v1-hello"),
        &bundle,
    );
    let (code, report) = verify_json(&bundle);
    assert_eq!(code, 0, "{report}");
    let out = provrun(&["show", &s(&bundle)]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("read_file"), "{}", stdout(&out));
    let replayed = bundle.with_file_name("replayed");
    let out = provrun(&["replay", &s(&bundle), "--out", &s(&replayed)]);
    assert_exit(&out, 0);
    // The replay is a new bundle, in the pack layout.
    assert!(replayed.join("blobs/pack").is_file());
    assert_eq!(verify_json(&replayed).0, 0);
    let digests = blob_digests(&bundle);
    assert!(!digests.is_empty());
    for d in &digests {
        let out = provrun(&["cat", &s(&bundle), d]);
        assert_exit(&out, 0);
        assert_eq!(
            out.stdout,
            std::fs::read(bundle.join("blobs/sha256").join(d)).unwrap()
        );
    }
}

#[test]
fn cat_prints_a_packed_blob_and_refuses_what_it_cannot() {
    let (_dir, bundle) = scratch();
    let out = provrun(&[
        "run",
        &example("hello/agent.toml"),
        "--input",
        &example("hello/input"),
        "--out",
        &s(&bundle),
    ]);
    assert_exit(&out, 0);
    assert!(bundle.join("blobs/pack").is_file());
    assert!(!bundle.join("blobs/sha256").exists());
    let digests = blob_digests(&bundle);
    assert!(!digests.is_empty());
    for d in &digests {
        let out = provrun(&["cat", &s(&bundle), &format!("sha256:{d}")]);
        assert_exit(&out, 0);
        use sha2::Digest as _;
        assert_eq!(hex::encode(sha2::Sha256::digest(&out.stdout)), *d);
    }
    // Not in the bundle: 1. Not a digest, or not a folder: 2.
    let out = provrun(&["cat", &s(&bundle), &"0".repeat(64)]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("no blob"), "{}", stderr(&out));
    assert_exit(&provrun(&["cat", &s(&bundle), "abc"]), 2);
    assert_exit(&provrun(&["cat", &s(&bundle.join("nope")), &digests[0]]), 2);
    assert_exit(&provrun(&["cat", &s(&bundle)]), 2);
    // Stored bytes damaged: 1.
    let mut pack = std::fs::read(bundle.join("blobs/pack")).unwrap();
    let n = pack.len();
    for b in &mut pack[20..n - 1] {
        *b ^= 0x55;
    }
    std::fs::write(bundle.join("blobs/pack"), pack).unwrap();
    assert_exit(&provrun(&["cat", &s(&bundle), &digests[0]]), 1);
}

#[test]
fn run_help_lists_the_native_models_and_their_keys_are_checked_before_anything_is_written() {
    let help = stdout(&provrun(&["run", "--help"]));
    for needle in [
        "anthropic:MODEL_NAME",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "openai-responses:MODEL_NAME",
        "OPENAI_API_KEY",
    ] {
        assert!(help.contains(needle), "`run --help` lacks {needle}: {help}");
    }
    let dir = tempfile::tempdir().unwrap();
    for (model, key) in [
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openai-responses:gpt-5-mini", "OPENAI_API_KEY"),
    ] {
        let bundle = dir.path().join(model.replace(':', "-"));
        let out = command(&[
            "run",
            &example("hello/agent.toml"),
            "--out",
            &bundle.display().to_string(),
            "--model",
            model,
        ])
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
        assert_exit(&out, 2);
        assert!(stderr(&out).contains(key), "{}", stderr(&out));
        assert!(!bundle.exists(), "nothing is written");
    }
}

#[test]
fn keygen_sign_and_verify_key_from_the_command_line() {
    use std::os::unix::fs::PermissionsExt as _;
    let (dir, bundle) = scratch();
    let key = dir.path().join("k.pem");
    let public = dir.path().join("k.pem.pub");
    let out = provrun(&["keygen", &s(&key)]);
    assert_exit(&out, 0);
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the private key is readable by others");
    let pem = std::fs::read_to_string(&key).unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    let id = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("key id:"))
        .map(|l| l.trim().to_owned())
        .expect("keygen prints the key id");
    assert_eq!(id.len(), 64);
    // Never over an existing key.
    assert_exit(&provrun(&["keygen", &s(&key)]), 2);
    assert_eq!(std::fs::read_to_string(&key).unwrap(), pem);

    // A bad --sign-key stops the run before anything is written.
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "-----BEGIN PRIVATE KEY-----\nnope\n").unwrap();
    let agent = example("scripted/agent.toml");
    let input = example("scripted/input");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", &agent, "--input", &input, "--out"];
        let b = s(&bundle);
        args.push(&b);
        args.extend_from_slice(extra);
        provrun(&args)
    };
    let out = run(&["--sign-key", &s(&garbage)]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--sign-key"), "{}", stderr(&out));
    assert!(!bundle.exists());

    // Unsigned: verify --key fails; sign adds the signature; verify --key names the key.
    assert_exit(&run(&[]), 0);
    assert_exit(&provrun(&["verify", &s(&bundle), "--key", &s(&public)]), 1);
    assert_exit(&provrun(&["sign", &s(&bundle), "--key", &s(&key)]), 0);
    let out = provrun(&["verify", &s(&bundle), "--key", &s(&public)]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains(&format!("statement signed by key {id}")),
        "{}",
        stdout(&out)
    );
    // A public key file that is not one is a usage error.
    assert_exit(&provrun(&["verify", &s(&bundle), "--key", &s(&key)]), 2);

    // A garbage envelope fails verify even without a key, and `sign` replaces it.
    let envelope = bundle.join("statement.dsse.json");
    std::fs::write(&envelope, "garbage\n").unwrap();
    let out = provrun(&["verify", &s(&bundle), "--json"]);
    assert_exit(&out, 1);
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let sig = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == "signature")
        .unwrap();
    assert_eq!(sig["status"], "fail", "{report}");
    assert_exit(&provrun(&["sign", &s(&bundle), "--key", &s(&key)]), 0);
    assert_exit(&provrun(&["verify", &s(&bundle), "--key", &s(&public)]), 0);

    // A bundle that does not verify is not signed.
    std::fs::write(bundle.join("output/summary.md"), "changed\n").unwrap();
    std::fs::remove_file(&envelope).unwrap();
    assert_exit(&provrun(&["sign", &s(&bundle), "--key", &s(&key)]), 1);
    assert!(!envelope.exists());
}

#[test]
fn a_paused_run_is_signed_again_when_resumed_with_a_key() {
    let (dir, bundle) = scratch();
    let key = dir.path().join("k.pem");
    let public = dir.path().join("k.pem.pub");
    assert_exit(&provrun(&["keygen", &s(&key)]), 0);
    let out = provrun(&[
        "run",
        &example("approve/agent.toml"),
        "--out",
        &s(&bundle),
        "--sign-key",
        &s(&key),
    ]);
    assert_exit(&out, 4);
    // The paused bundle is signed as it stands.
    assert_exit(&provrun(&["verify", &s(&bundle), "--key", &s(&public)]), 0);
    let paused_envelope = std::fs::read(bundle.join("statement.dsse.json")).unwrap();
    let out = provrun(&[
        "resume",
        &s(&bundle),
        "--approve",
        "greet",
        "--sign-key",
        &s(&key),
    ]);
    assert_exit(&out, 0);
    let finished_envelope = std::fs::read(bundle.join("statement.dsse.json")).unwrap();
    assert_ne!(
        paused_envelope, finished_envelope,
        "the old signature was kept"
    );
    assert_exit(&provrun(&["verify", &s(&bundle), "--key", &s(&public)]), 0);
}
