//! The determinism promise, fuzzed: random turns of reads, writes and edits of a few
//! files (`write_file`, `str_replace`, `read_file`, `list_dir`), each run twice and
//! replayed once. All three give the same tool results and the same output files, and
//! those are what running the calls one by one in the model's order gives.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use provrun::agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus, replay};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::ScriptModel;
use serde_json::{Value, json};

const FILES: [&str; 3] = ["a.txt", "b.txt", "c.txt"];
const WORDS: [&str; 4] = ["red", "green", "blue", "red green"];

#[derive(Debug, Clone)]
enum Op {
    Write(usize, Vec<usize>),
    Replace(usize, usize, usize),
    Read(usize),
    List,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..FILES.len(), prop::collection::vec(0..WORDS.len(), 1..4))
            .prop_map(|(f, w)| Op::Write(f, w)),
        (0..FILES.len(), 0..WORDS.len(), 0..WORDS.len()).prop_map(|(f, o, n)| Op::Replace(f, o, n)),
        (0..FILES.len()).prop_map(Op::Read),
        Just(Op::List),
    ]
}

fn call(id: String, op: &Op) -> Value {
    let path = |f: &usize| format!("/output/{}", FILES[*f]);
    match op {
        Op::Write(f, words) => json!({"id": id, "name": "write_file", "arguments": {
            "path": path(f),
            "content": words.iter().map(|w| WORDS[*w]).collect::<Vec<_>>().join(" "),
        }}),
        Op::Replace(f, old, new) => json!({"id": id, "name": "str_replace", "arguments": {
            "path": path(f),
            "old": WORDS[*old],
            "new": WORDS[*new].to_uppercase(),
        }}),
        Op::Read(f) => json!({"id": id, "name": "read_file", "arguments": {"path": path(f)}}),
        Op::List => json!({"id": id, "name": "list_dir", "arguments": {"path": "/output"}}),
    }
}

/// The files the turns leave when their calls run one by one, in order.
fn sequential(turns: &[Vec<Op>]) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for op in turns.iter().flatten() {
        match op {
            Op::Write(f, words) => {
                let text = words
                    .iter()
                    .map(|w| WORDS[*w])
                    .collect::<Vec<_>>()
                    .join(" ");
                files.insert(FILES[*f].to_string(), text);
            }
            Op::Replace(f, old, new) => {
                if let Some(text) = files.get_mut(FILES[*f])
                    && text.matches(WORDS[*old]).count() == 1
                {
                    *text = text.replacen(WORDS[*old], &WORDS[*new].to_uppercase(), 1);
                }
            }
            Op::Read(_) | Op::List => {}
        }
    }
    files
}

/// Every completed call: id, name, result, ok.
fn results(bundle: &Path) -> Vec<(String, String, String, bool)> {
    read_events(bundle)
        .unwrap()
        .iter()
        .filter(|e| e.kind == EventType::ToolCalled && e.payload["deferred"] != true)
        .map(|e| {
            let p = &e.payload;
            (
                p["call_id"].as_str().unwrap().to_string(),
                p["name"].as_str().unwrap().to_string(),
                p["result"].as_str().unwrap_or_default().to_string(),
                p["ok"] == true,
            )
        })
        .collect()
}

/// The output files a run left (its answer aside).
fn outputs(bundle: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(bundle.join("output"))
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "response.txt")
        .map(|n| {
            let text = std::fs::read_to_string(bundle.join("output").join(&n)).unwrap();
            (n, text)
        })
        .collect()
}

fn run_case(turns: &[Vec<Op>]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut script: Vec<Value> = turns
        .iter()
        .enumerate()
        .map(|(t, ops)| {
            let calls: Vec<Value> = ops
                .iter()
                .enumerate()
                .map(|(i, op)| call(format!("t{t}c{i}"), op))
                .collect();
            json!({"tool_calls": calls})
        })
        .collect();
    script.push(json!({"text": "done"}));
    let script = Value::Array(script);
    let mut agent = AgentSpec::new("props", "test");
    agent.tools = ["write_file", "str_replace", "read_file", "list_dir"]
        .map(String::from)
        .to_vec();
    agent.max_steps = 10;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut bundles = Vec::new();
    for n in 0..2 {
        let bundle = dir.path().join(format!("run-{n}"));
        let model = Arc::new(ScriptModel::from_value(&script).unwrap());
        let run = RunSpec::new("go", &bundle);
        let r = rt
            .block_on(
                Backend::new()
                    .with_model(model)
                    .execute(&RunControl::new(), &agent, &run),
            )
            .unwrap();
        prop_assert_eq!(r.status(), RunStatus::Finished);
        prop_assert!(verify(&bundle).ok);
        bundles.push(bundle);
    }
    let again = dir.path().join("replay");
    let report = rt
        .block_on(replay(
            &Backend::new(),
            &RunControl::new(),
            &bundles[0],
            &again,
        ))
        .unwrap();
    prop_assert!(report.matches(), "replay differs: {:?}", report.difference);
    bundles.push(again);

    let expected = sequential(turns);
    let first = results(&bundles[0]);
    prop_assert_eq!(first.len(), turns.iter().map(Vec::len).sum::<usize>());
    for b in &bundles {
        prop_assert_eq!(&results(b), &first, "{} saw other results", b.display());
        prop_assert_eq!(&outputs(b), &expected, "{} left other files", b.display());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_turns_run_twice_and_replayed_agree_with_running_them_in_order(
        turns in prop::collection::vec(prop::collection::vec(op(), 1..7), 1..4)
    ) {
        run_case(&turns)?;
    }
}
