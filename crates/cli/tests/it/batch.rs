//! `provrun batch` as scripts see it: the built binary over JSONL files made here — bad
//! lines refused before anything runs, one verifying bundle per line, exit codes, JSON
//! lines, a batch killed with SIGKILL and started again, and shards that together are the
//! whole.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::{assert_exit, command, provrun, s};
use serde_json::Value;

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

/// A folder with `agent.toml` (a script model answering after `delay_ms`, then again:
/// two model requests, no tools), `limited.toml` (its script `fail.json` calls one tool and
/// then runs out: the run fails) and an `input/` folder.
fn workspace(delay_ms: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("agent.toml"),
        "name = \"batch\"\nmodel = \"script:script.json\"\ninstructions = \"\"\ntools = [\"list_dir\"]\nmax_steps = 4\n",
    )
    .unwrap();
    std::fs::write(
        p.join("script.json"),
        format!(
            r#"[{{"tool_calls": [{{"id": "c1", "name": "list_dir", "arguments": {{"path": "/input"}}}}], "delay_ms": {delay_ms}}},
               {{"text": "done", "delay_ms": {delay_ms}}}]"#
        ),
    )
    .unwrap();
    std::fs::write(
        p.join("fail.json"),
        r#"[{"tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "/input"}}]}]"#,
    )
    .unwrap();
    std::fs::write(
        p.join("limited.toml"),
        "name = \"limited\"\nmodel = \"script:fail.json\"\ninstructions = \"\"\ntools = [\"list_dir\"]\nmax_steps = 4\n",
    )
    .unwrap();
    std::fs::create_dir(p.join("input")).unwrap();
    std::fs::write(p.join("input/a.txt"), "hello").unwrap();
    dir
}

/// `n` good lines `r0..r{n-1}`.
fn lines(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{{\"id\": \"r{i}\", \"agent\": \"agent.toml\", \"input\": [\"input\"], \"prompt\": \"task {i}\"}}\n"
            )
        })
        .collect()
}

fn json_lines(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn verify_ok(bundle: &Path) -> bool {
    let out = provrun(&["verify", &s(bundle)]);
    out.status.code() == Some(0)
}

/// The run id in a bundle's first event.
fn run_id(bundle: &Path) -> String {
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    let first: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    first["run_id"].as_str().unwrap().to_string()
}

fn bundles(dest: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dest)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect()
}

#[test]
fn every_line_gets_a_verifying_bundle_and_json_lines_with_a_summary() {
    let dir = workspace(0);
    let runs = dir.path().join("runs.jsonl");
    let mut file = lines(12);
    // Blank lines are allowed; a run that fails still leaves a bundle that verifies.
    file.push_str("\n{\"id\": \"bad-run\", \"agent\": \"limited.toml\"}\n");
    std::fs::write(&runs, file).unwrap();
    let dest = dir.path().join("out");
    let out = provrun(&[
        "batch",
        &s(&runs),
        "--out",
        &s(&dest),
        "--concurrency",
        "3",
        "--json",
    ]);
    assert_exit(&out, 1);
    let lines = json_lines(&out);
    assert_eq!(
        lines.len(),
        14,
        "13 runs and a summary: {}",
        text(&out.stdout)
    );
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["runs"], 13);
    assert_eq!(summary["finished"], 12);
    assert_eq!(summary["not_finished"], 1);
    assert_eq!(summary["skipped"], 0);
    let mut seen = BTreeMap::new();
    for l in &lines[..13] {
        assert_eq!(l["type"], "run");
        seen.insert(l["id"].as_str().unwrap().to_string(), l.clone());
    }
    assert_eq!(seen.len(), 13);
    assert_eq!(seen["bad-run"]["status"], "failed");
    assert_eq!(seen["bad-run"]["line"], 14);
    for (id, l) in &seen {
        let bundle = dest.join(id);
        assert_eq!(l["bundle"], s(&bundle));
        assert!(verify_ok(&bundle), "{id} does not verify");
        assert_eq!(l["run_id"].as_str().unwrap(), run_id(&bundle));
        if id != "bad-run" {
            assert_eq!(l["status"], "finished", "{l}");
            // The line's input was staged, its prompt sent.
            assert!(bundle.join("input/a.txt").is_file());
            let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
            assert!(
                log.contains(&format!("task {}", &id[1..])),
                "{id}: prompt not recorded"
            );
        }
    }

    // Without --json: a table, and the plain progress line on stderr (not a terminal).
    let dest2 = dir.path().join("out2");
    let out = provrun(&["batch", &s(&runs), "--out", &s(&dest2)]);
    assert_exit(&out, 1);
    let table = text(&out.stdout);
    assert!(
        table.contains("finished                                 12"),
        "{table}"
    );
    assert!(table.contains("bad-run  failed"), "{table}");
    assert!(
        text(&out.stderr).contains("13/13 done (1 failed), 0 running"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_batch_where_every_run_finishes_exits_0() {
    let dir = workspace(0);
    let runs = dir.path().join("runs.jsonl");
    std::fs::write(&runs, lines(5)).unwrap();
    let dest = dir.path().join("out");
    let out = provrun(&[
        "batch",
        &s(&runs),
        "--out",
        &s(&dest),
        "--max-model-requests",
        "1",
    ]);
    assert_exit(&out, 0);
    assert_eq!(bundles(&dest).len(), 5);
}

#[test]
fn bad_lines_are_named_by_number_and_nothing_runs() {
    let dir = workspace(0);
    let cases: &[(&str, &str)] = &[
        ("not json", "line 2: expected"),
        (r#"{"id": "x"}"#, "line 2: missing field `agent`"),
        (
            r#"{"id": "../x", "agent": "agent.toml"}"#,
            "line 2: id `../x` is not a safe name",
        ),
        (
            r#"{"id": "r0", "agent": "agent.toml"}"#,
            "line 2: id `r0` is already used on line 1",
        ),
        (r#"{"id": "x", "agent": "nope.toml"}"#, "line 2: "),
        (
            r#"{"id": "x", "agent": "agent.toml", "input": ["missing"]}"#,
            "line 2: input `",
        ),
        (
            r#"{"id": "x", "agent": "agent.toml", "model": "script:none.json"}"#,
            "line 2: model script `",
        ),
        (
            r#"{"id": "x", "agent": "agent.toml", "colour": "red"}"#,
            "line 2: unknown field `colour`",
        ),
    ];
    for (bad, expected) in cases {
        let runs = dir.path().join("runs.jsonl");
        std::fs::write(
            &runs,
            format!(
                "{}{bad}\n{}",
                lines(1),
                "{\"id\": \"z\", \"agent\": \"agent.toml\"}\n"
            ),
        )
        .unwrap();
        let dest = dir.path().join("out");
        let out = provrun(&["batch", &s(&runs), "--out", &s(&dest)]);
        assert_exit(&out, 2);
        let err = text(&out.stderr);
        assert!(err.contains(expected), "{bad}: {err}");
        assert!(err.contains("runs.jsonl"), "{err}");
        assert!(!dest.exists(), "{bad}: something was written");
    }
    let runs = dir.path().join("empty.jsonl");
    std::fs::write(&runs, "\n\n").unwrap();
    let out = provrun(&["batch", &s(&runs), "--out", &s(&dir.path().join("o"))]);
    assert_exit(&out, 2);
    assert!(text(&out.stderr).contains("holds no runs"));
}

#[test]
fn a_destination_that_cannot_be_written_is_refused_before_any_run() {
    let dir = workspace(0);
    let runs = dir.path().join("runs.jsonl");
    std::fs::write(&runs, lines(2)).unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    for dest in [file.clone(), file.join("below")] {
        let out = provrun(&["batch", &s(&runs), "--out", &s(&dest)]);
        assert_exit(&out, 2);
        assert!(text(&out.stderr).contains("--out"), "{}", text(&out.stderr));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

#[test]
fn shards_are_disjoint_and_together_the_whole() {
    let dir = workspace(0);
    let runs = dir.path().join("runs.jsonl");
    std::fs::write(&runs, lines(17)).unwrap();
    let mut union = BTreeSet::new();
    let mut total = 0;
    for i in 0..3 {
        let dest = dir.path().join(format!("shard{i}"));
        let out = provrun(&[
            "batch",
            &s(&runs),
            "--out",
            &s(&dest),
            "--shard",
            &format!("{i}/3"),
        ]);
        assert_exit(&out, 0);
        let got = bundles(&dest);
        assert!(!got.is_empty());
        total += got.len();
        union.extend(got);
    }
    assert_eq!(total, 17, "a line ran in two shards");
    assert_eq!(union, (0..17).map(|i| format!("r{i}")).collect());

    // --shards N with JOB_COMPLETION_INDEX is the same split.
    let dest = dir.path().join("indexed");
    let out = command(&["batch", &s(&runs), "--out", &s(&dest), "--shards", "3"])
        .env("JOB_COMPLETION_INDEX", "1")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(bundles(&dest), bundles(&dir.path().join("shard1")));

    // Without the index, or with one out of range: a usage error.
    let out = provrun(&["batch", &s(&runs), "--out", &s(&dest), "--shards", "3"]);
    assert_exit(&out, 2);
    assert!(text(&out.stderr).contains("JOB_COMPLETION_INDEX"));
    let out = command(&["batch", &s(&runs), "--out", &s(&dest), "--shards", "3"])
        .env("JOB_COMPLETION_INDEX", "3")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let out = provrun(&["batch", &s(&runs), "--out", &s(&dest), "--shard", "3/3"]);
    assert_exit(&out, 2);
}

#[test]
fn a_batch_killed_mid_way_resumes_without_losing_or_repeating_a_run() {
    let n = 40;
    // Each run waits 2 × 60 ms on its model: at 4 in flight the batch takes about 1.2 s.
    let dir = workspace(60);
    let runs = dir.path().join("runs.jsonl");
    std::fs::write(&runs, lines(n)).unwrap();
    let dest = dir.path().join("out");
    let args = [
        "batch",
        &s(&runs),
        "--out",
        &s(&dest),
        "--concurrency",
        "4",
        "--json",
    ];
    let mut child = command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it (SIGKILL: no chance to clean up) once some runs have finished.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let finished = bundles(&dest.clone())
            .iter()
            .filter(|id| {
                // statement.json is written last, when the run has ended.
                dest.join(id).join("statement.json").is_file()
            })
            .count();
        if finished >= 8 {
            break;
        }
        assert!(Instant::now() < deadline, "the batch made no progress");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the batch ended too soon"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // What the kill left: finished bundles (kept), unfinished ones (to be moved aside).
    let mut done_before = BTreeMap::new();
    let mut unfinished = 0;
    for id in bundles(&dest) {
        let bundle = dest.join(&id);
        if verify_ok(&bundle) {
            done_before.insert(id, run_id(&bundle));
        } else {
            unfinished += 1;
        }
    }
    assert!(
        done_before.len() >= 8 && done_before.len() < n,
        "{}",
        done_before.len()
    );

    let out = provrun(&args);
    assert_exit(&out, 0);
    let lines = json_lines(&out);
    let summary = lines.last().unwrap();
    assert_eq!(summary["finished"], n);
    assert_eq!(summary["skipped"], done_before.len(), "{summary}");
    assert_eq!(summary["ran"], n - done_before.len());
    for l in &lines[..n] {
        let id = l["id"].as_str().unwrap();
        assert_eq!(l["skipped"], done_before.contains_key(id), "{l}");
    }
    // Every line has one bundle that verifies; the ones finished before the kill are the
    // same runs (not run twice), and each bundle holds exactly one run.
    assert_eq!(bundles(&dest), (0..n).map(|i| format!("r{i}")).collect());
    for id in bundles(&dest) {
        let bundle = dest.join(&id);
        assert!(verify_ok(&bundle), "{id}");
        if let Some(before) = done_before.get(&id) {
            assert_eq!(&run_id(&bundle), before, "{id} ran again");
        }
        let log = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
        assert_eq!(log.matches("\"run_started\"").count(), 1, "{id}");
    }
    // The unfinished bundles were moved aside, not mixed into new ones.
    let aside: Vec<PathBuf> = std::fs::read_dir(dest.join(".provrun-aside"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(aside.len(), unfinished, "{aside:?}");

    // A third start has nothing left to do.
    let out = provrun(&args);
    assert_exit(&out, 0);
    let summary = json_lines(&out).pop().unwrap();
    assert_eq!(summary["skipped"], n);
    assert_eq!(summary["ran"], 0);
}
