//! Run-unique call ids (issue 19): models reuse tool-call ids across turns and some send
//! none, yet every call must be one call in the evidence, in `verify`, `resume`, `show`
//! and `replay`. Bundles written before run ids existed still verify, resume and replay.

use std::path::{Path, PathBuf};

use crate::support::cli::{assert_exit, command, events, provrun, s, text};
use serde_json::Value;

fn tool_events(bundle: &Path) -> Vec<Value> {
    events(bundle)
        .into_iter()
        .filter(|e| e["type"] == "tool_called")
        .map(|e| e["payload"].clone())
        .collect()
}

fn last_status(bundle: &Path) -> String {
    let events = events(bundle);
    events.last().unwrap()["payload"]["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `verify --json` passes with no warning at all (a reused id used to be "completed
/// twice" or "deferred after it completed").
#[track_caller]
fn verifies_cleanly(bundle: &Path) {
    let out = provrun(&["verify", &s(bundle), "--json"]);
    assert_exit(&out, 0);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = report.to_string();
    assert!(!all.contains("twice"), "{all}");
    assert!(!all.contains("after it completed"), "{all}");
}

#[track_caller]
fn replay_matches(bundle: &Path, dir: &Path) {
    let again = dir.join(format!(
        "replay-{}",
        bundle.file_name().unwrap().to_string_lossy()
    ));
    let out = provrun(&["replay", &s(bundle), "--out", &s(&again)]);
    assert_exit(&out, 0);
    assert!(text(&out.stdout).contains("match"), "{}", text(&out.stdout));
    // The replay names every call the way the recording does (a recording from before
    // run ids has the model's ids only).
    let recorded = tool_events(bundle);
    let replayed = tool_events(&again);
    assert_eq!(recorded.len(), replayed.len());
    for (r, n) in recorded.iter().zip(&replayed) {
        assert_eq!(r["call_id"], n["call_id"]);
        if r.get("run_call_id").is_some() {
            assert_eq!(r["run_call_id"], n["run_call_id"]);
        }
    }
}

/// An agent of `write_file` calls, scripted, in a fresh folder.
fn agent(approve: &str, script: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agent.toml"),
        format!(
            "name = \"ids\"\nmodel = \"script:script.json\"\ntools = [\"write_file\", \
             \"read_file\"]\napprove = \"{approve}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("script.json"), script).unwrap();
    let path = dir.path().join("agent.toml");
    (dir, path)
}

fn write(id: &str, file: &str) -> String {
    format!(
        r#"{{"id": "{id}", "name": "write_file", "arguments": {{"path": "/output/{file}", "content": "{file}\n"}}}}"#
    )
}

/// Three turns that all call their tool `call_0`, as the OpenAI backend names the calls
/// of a model that sends no ids.
fn reused_script() -> String {
    format!(
        "[{{\"tool_calls\": [{}]}}, {{\"tool_calls\": [{}]}}, {{\"tool_calls\": [{}]}}, \
         {{\"text\": \"done\"}}]",
        write("call_0", "a.txt"),
        write("call_0", "b.txt"),
        write("call_0", "c.txt"),
    )
}

/// Two turns whose calls have empty ids, two calls in the first (the OpenAI wire the
/// script model speaks then makes up `call_0`, `call_1`, `call_0`).
fn empty_script() -> String {
    format!(
        "[{{\"tool_calls\": [{}, {}]}}, {{\"tool_calls\": [{}]}}, {{\"text\": \"done\"}}]",
        write("", "a.txt"),
        write("", "b.txt"),
        write("", "c.txt"),
    )
}

#[test]
fn reused_ids_without_approval_are_distinct_calls_that_verify_and_replay() {
    for script in [reused_script(), empty_script()] {
        let (dir, agent) = agent("none", &script);
        let bundle = dir.path().join("bundle");
        let out = provrun(&["run", &s(&agent), "--out", &s(&bundle), "--verify"]);
        assert_exit(&out, 0);
        let calls = tool_events(&bundle);
        assert_eq!(calls.len(), 3);
        let run_ids: Vec<&str> = calls
            .iter()
            .map(|c| c["run_call_id"].as_str().unwrap())
            .collect();
        // The model's ids are kept as sent; the run ids are `STEP.N`.
        let model_ids: Vec<&str> = calls
            .iter()
            .map(|c| c["call_id"].as_str().unwrap())
            .collect();
        if script.contains("call_0") {
            assert_eq!(model_ids, ["call_0"; 3]);
            assert_eq!(run_ids, ["1.1", "2.1", "3.1"]);
        } else {
            // The OpenAI wire the script model speaks makes up `call_N` (N the call's
            // place in its response) for an empty id, so ids collide across turns.
            assert_eq!(model_ids, ["call_0", "call_1", "call_0"]);
            assert_eq!(run_ids, ["1.1", "1.2", "2.1"]);
        }
        for f in ["a.txt", "b.txt", "c.txt"] {
            assert!(bundle.join("output").join(f).is_file(), "{f}");
        }
        verifies_cleanly(&bundle);
        replay_matches(&bundle, dir.path());
    }
}

#[test]
fn reused_ids_under_approval_pause_resume_by_run_id_verify_and_replay() {
    let (dir, agent) = agent("destructive", &reused_script());
    let bundle = dir.path().join("bundle");
    // A pause is exit 4 with --verify too: the paused bundle verifies.
    let out = provrun(&["run", &s(&agent), "--out", &s(&bundle), "--verify"]);
    assert_exit(&out, 4);
    let err = text(&out.stderr);
    assert!(err.contains("--approve 1.1"), "{err}");
    assert!(err.contains("model id \"call_0\""), "{err}");
    verifies_cleanly(&bundle);

    // The model's id is accepted while it names one waiting call.
    let out = provrun(&["resume", &s(&bundle), "--approve", "call_0", "--verify"]);
    assert_exit(&out, 4);
    assert!(
        text(&out.stderr).contains("--approve 2.1"),
        "{}",
        text(&out.stderr)
    );
    verifies_cleanly(&bundle);
    // A run id of a call already done is no waiting call.
    let out = provrun(&["resume", &s(&bundle), "--approve", "1.1"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("2.1"), "{}", text(&out.stderr));
    let out = provrun(&["resume", &s(&bundle), "--deny", "2.1", "--verify"]);
    assert_exit(&out, 4);
    let out = provrun(&["resume", &s(&bundle), "--approve", "3.1", "--verify"]);
    assert_exit(&out, 0);
    assert_eq!(last_status(&bundle), "finished");
    assert!(bundle.join("output/a.txt").is_file());
    assert!(!bundle.join("output/b.txt").exists(), "2.1 was denied");
    assert!(bundle.join("output/c.txt").is_file());

    // Each deferred call is completed once, under the same run id.
    let calls = tool_events(&bundle);
    let pairs: Vec<(bool, &str)> = calls
        .iter()
        .map(|c| (c["deferred"] == true, c["run_call_id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        pairs,
        [
            (true, "1.1"),
            (false, "1.1"),
            (true, "2.1"),
            (false, "2.1"),
            (true, "3.1"),
            (false, "3.1")
        ]
    );
    verifies_cleanly(&bundle);
    replay_matches(&bundle, dir.path());

    let out = provrun(&["show", &s(&bundle)]);
    assert_exit(&out, 0);
    let shown = text(&out.stdout);
    assert!(shown.contains("2.1 (model id \"call_0\")"), "{shown}");
}

#[test]
fn ids_shared_by_waiting_calls_need_run_ids_to_resume() {
    // One response gives two calls the same id; the next sends an empty one.
    let script = format!(
        "[{{\"tool_calls\": [{}, {}]}}, {{\"tool_calls\": [{}]}}, {{\"text\": \"done\"}}]",
        write("same", "a.txt"),
        write("same", "b.txt"),
        write("", "c.txt"),
    );
    let (dir, agent) = agent("destructive", &script);
    let bundle = dir.path().join("bundle");
    let out = provrun(&["run", &s(&agent), "--out", &s(&bundle), "--verify"]);
    assert_exit(&out, 4);
    let err = text(&out.stderr);
    assert!(err.contains("--approve 1.1 --approve 1.2"), "{err}");
    // The model's id names two waiting calls: refused, naming the run ids, nothing done.
    let out = provrun(&["resume", &s(&bundle), "--approve", "same"]);
    assert_ne!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(err.contains("1.1, 1.2"), "{err}");
    assert_eq!(last_status(&bundle), "paused");
    let out = provrun(&[
        "resume",
        &s(&bundle),
        "--approve",
        "1.2",
        "--deny",
        "1.1",
        "--verify",
    ]);
    assert_exit(&out, 4);
    let out = provrun(&["resume", &s(&bundle), "--approve", "2.1", "--verify"]);
    assert_exit(&out, 0);
    assert!(!bundle.join("output/a.txt").exists(), "1.1 was denied");
    assert!(bundle.join("output/b.txt").is_file());
    assert!(bundle.join("output/c.txt").is_file());
    verifies_cleanly(&bundle);
    replay_matches(&bundle, dir.path());

    // The page links each deferred call to its own completion, by run id: the two calls
    // that shared the model's id `same` are not crossed.
    let page_file = dir.path().join("page.html");
    assert_exit(&provrun(&["view", &s(&bundle), "-o", &s(&page_file)]), 0);
    let page = std::fs::read_to_string(&page_file).unwrap();
    let start = "<script type=\"application/json\" id=\"bundle-data\">";
    let from = page.find(start).unwrap() + start.len();
    let to = from + page[from..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&page[from..to]).unwrap();
    let entries: Vec<&Value> = data["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|step| step["entries"].as_array().unwrap())
        .filter(|e| e["kind"] == "tool")
        .collect();
    let run_id_at = |seq: &Value| {
        entries
            .iter()
            .find(|e| &e["seq"] == seq)
            .map(|e| e["run_call_id"].clone())
    };
    let deferred: Vec<&&Value> = entries.iter().filter(|e| e["deferred"] == true).collect();
    assert_eq!(deferred.len(), 3, "{entries:?}");
    for d in deferred {
        assert_eq!(
            run_id_at(&d["completed_seq"]),
            Some(d["run_call_id"].clone()),
            "deferred {} is linked to another call's completion",
            d["run_call_id"]
        );
    }
}

// ---- bundles from before run ids ---------------------------------------------------------

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A copy of a fixture bundle, with the empty folders a git checkout leaves out.
fn copy_fixture(name: &str, to: &Path) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }
    let bundle = to.join(name);
    copy(&fixture(name), &bundle);
    for sub in ["input", "output"] {
        std::fs::create_dir_all(bundle.join(sub)).unwrap();
    }
    bundle
}

#[test]
fn an_approved_bundle_from_before_run_ids_verifies_shows_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = copy_fixture("bundle-v2-approved", dir.path());
    assert!(
        tool_events(&bundle)
            .iter()
            .all(|c| c.get("run_call_id").is_none()),
        "the fixture predates run ids"
    );
    verifies_cleanly(&bundle);
    let out = provrun(&["show", &s(&bundle)]);
    assert_exit(&out, 0);
    assert!(text(&out.stdout).contains("greet"), "{}", text(&out.stdout));
    replay_matches(&bundle, dir.path());
}

#[test]
fn a_paused_bundle_from_before_run_ids_resumes_by_either_id() {
    for id in ["greet", "1.1"] {
        let dir = tempfile::tempdir().unwrap();
        let bundle = copy_fixture("bundle-v2-paused", dir.path());
        verifies_cleanly(&bundle);
        // The recorded agent names its script relative to the repository's root.
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = command(&["resume", &s(&bundle), "--approve", id, "--verify"])
            .current_dir(&root)
            .output()
            .unwrap();
        assert_exit(&out, 0);
        assert_eq!(
            std::fs::read_to_string(bundle.join("output/hello.txt")).unwrap(),
            "Hello, world.\n"
        );
        // The completion written now carries the run id; the old deferral does not, and
        // the two are still one call.
        let calls = tool_events(&bundle);
        assert_eq!(calls.len(), 2);
        assert!(calls[0].get("run_call_id").is_none());
        assert_eq!(calls[1]["run_call_id"], "1.1");
        assert_eq!(calls[1]["call_id"], "greet");
        verifies_cleanly(&bundle);
        replay_matches(&bundle, dir.path());
    }
}

#[test]
fn show_lines_up_its_columns_whatever_the_tool_names() {
    let long = "srv_a_tool_name_longer_than_sixteen_columns";
    let script = format!(
        "[{{\"tool_calls\": [{}, {{\"id\": \"x\", \"name\": \"{long}\"}}]}}, \
         {{\"text\": \"done\"}}]",
        write("w", "a.txt")
    );
    let (dir, agent) = agent("none", &script);
    let bundle = dir.path().join("bundle");
    assert_exit(&provrun(&["run", &s(&agent), "--out", &s(&bundle)]), 0);
    let out = provrun(&["show", &s(&bundle)]);
    assert_exit(&out, 0);
    let shown = text(&out.stdout);
    let calls: Vec<&str> = shown
        .lines()
        .filter(|l| l.starts_with("  ") && (l.contains("write_file") || l.contains(long)))
        .collect();
    assert_eq!(calls.len(), 2, "{shown}");
    // The duration column (" ms") starts at the same place on both lines.
    let at: Vec<usize> = calls.iter().map(|l| l.find(" ms ").unwrap()).collect();
    assert_eq!(at[0], at[1], "{shown}");
    assert!(calls[1].contains(&format!("{long} ")), "{shown}");
}
