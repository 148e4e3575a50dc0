//! The `tool-calls` check: deferred calls are completed, and every command's event
//! holds its confinement record.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::bundle::Bundle;
use super::{Acc, Check, CheckCode};
use crate::event::{EventType, RunStatus, ToolCalled};

/// `tool-calls`.
pub(super) fn tool_calls(b: &Bundle<'_>) -> Check {
    let mut tools = Acc::new(CheckCode::ToolCalls);
    let events = &b.log.events;
    let (ends_finished, status) = (b.shape.ends_finished, b.shape.status);
    let mut pending: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut calls = 0usize;
    // Logs written since command confinement is recorded per command say so in
    // run_started; older logs are not held to it.
    let sandbox_details = events
        .first()
        .and_then(Option::as_ref)
        .filter(|e| e.kind == EventType::RunStarted)
        .map(|e| &e.payload["details"]["sandbox"]);
    let command_records = sandbox_details.is_some_and(|s| s["command_records"] == 1);
    // The tools whose calls run a program (`run_command` when the list is absent).
    let command_tools: BTreeSet<&str> =
        match sandbox_details.and_then(|s| s["command_tools"].as_array()) {
            Some(names) => names.iter().filter_map(Value::as_str).collect(),
            None => BTreeSet::from(["run_command"]),
        };
    for (i, ev) in events.iter().enumerate() {
        let Some(ev) = ev else { continue };
        if ev.kind != EventType::ToolCalled {
            continue;
        }
        let Ok(call) = serde_json::from_value::<ToolCalled>(ev.payload.clone()) else {
            continue;
        };
        calls += 1;
        if command_records
            && let Some(problem) =
                confinement_problem(&call, command_tools.contains(call.name.as_str()))
        {
            tools.fail(format!(
                "line {}: call {:?} ({}): {problem}",
                i + 1,
                call.call_id,
                call.name
            ));
        }
        // A call is known by its run-unique id (older logs: the model's id).
        let key = call.key().to_string();
        if call.deferred {
            if done.contains(&key) {
                tools.fail(format!(
                    "line {}: call {key:?} deferred after it completed",
                    i + 1,
                ));
            } else {
                pending.insert(key, (i, call.run_call_id.is_none()));
            }
        } else {
            if !done.insert(key.clone()) {
                tools.warn(format!("line {}: call {key:?} completed twice", i + 1,));
            }
            if pending.remove(&key).is_none() && call.run_call_id.is_some() {
                // A run paused by a version before run ids and resumed by a later one:
                // the deferral names the call by the model's id only.
                if pending
                    .get(&call.call_id)
                    .is_some_and(|&(_, legacy)| legacy)
                {
                    pending.remove(&call.call_id);
                    done.insert(call.call_id.clone());
                }
            }
        }
    }
    let waiting: Vec<String> = pending.keys().map(|k| format!("{k:?}")).collect();
    tools.pass = format!("{calls} tool call event(s), every deferred call linked");
    if !waiting.is_empty() {
        let msg = format!("deferred call(s) never completed: {}", waiting.join(", "));
        match (ends_finished, status) {
            (true, Some(RunStatus::Paused)) => {
                tools.pass = format!(
                    "{calls} tool call event(s); waiting while paused: {}",
                    waiting.join(", ")
                )
            }
            (true, Some(RunStatus::Finished)) => tools.fail(msg),
            _ => tools.warn(msg),
        }
    }
    tools.done()
}

/// The facts every command's `confinement` record holds (`null` where a fact does not
/// apply, e.g. no bubblewrap), as paths of keys.
const CONFINEMENT_FACTS: &[&[&str]] = &[
    &["mode"],
    &["missing"],
    &["landlock", "status"],
    &["landlock", "abi"],
    &["landlock", "abi_wanted"],
    &["landlock", "unenforced"],
    &["seccomp", "applied"],
    &["seccomp", "filter_sha256"],
    &["bubblewrap"],
    &["namespaces"],
    &["host_uid"],
    &["limits", "timeout_ms"],
    &["limits", "cpu_s"],
    &["limits", "memory_bytes"],
    &["limits", "processes"],
    &["limits", "process_limit"],
    &["limits", "file_size_bytes"],
    &["limits", "output_bytes"],
    &["limits", "quota_bytes"],
    &["limits", "quota_files"],
];

/// What is wrong with a completed call's confinement record, in a log that records one
/// per command: a call of a command tool (`runs_program`) its tool decided must have one,
/// and every record (of any tool) must hold every fact unless it says the program never
/// ran.
fn confinement_problem(call: &ToolCalled, runs_program: bool) -> Option<String> {
    if call.deferred {
        return None;
    }
    let record = match &call.confinement {
        None if runs_program && call.decided_by.as_deref() == Some("tool") => {
            return Some("a command's event without its confinement record".to_owned());
        }
        None => return None,
        Some(r) => r,
    };
    let Some(object) = record.as_object() else {
        return Some("the confinement record is not an object".to_owned());
    };
    if object.get("ran") == Some(&Value::Bool(false)) {
        return None;
    }
    let missing: Vec<String> = CONFINEMENT_FACTS
        .iter()
        .filter(|path| {
            let mut at = record;
            for key in path.iter() {
                match at.get(key) {
                    Some(v) => at = v,
                    None => return true,
                }
            }
            false
        })
        .map(|path| path.join("."))
        .collect();
    (!missing.is_empty()).then(|| format!("the confinement record lacks {}", missing.join(", ")))
}
