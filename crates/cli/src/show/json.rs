//! `provrun show --json`: the run as one JSON object — its header, how it ended, its
//! totals, inputs and outputs, each model step with the tool calls that followed it, the
//! observed processes, workspace changes and wire calls, the claims matched against them,
//! and the verify verdict (docs/cli.md has the shape).

use provrun_evidence::{Event, EventPayload, EventType, ModelCalled, ToolCalled, VerifyReport};
use serde_json::{Map, Value, json};

fn file(p: &provrun_evidence::FileRecord) -> Value {
    json!({"path": p.path, "size": p.size, "sha256": p.sha256})
}

fn step(n: usize, e: Option<&Event>, p: Option<&ModelCalled>) -> Value {
    let usage = p.map_or(&Value::Null, |p| &p.usage);
    json!({
        "step": n,
        "seq": e.map(|e| e.seq),
        "ts": e.map(|e| e.ts.clone()),
        "model": p.map(|p| p.model.clone()),
        "duration_ms": p.map(|p| p.duration_ms),
        "input_tokens": usage["input_tokens"].as_u64(),
        "output_tokens": usage["output_tokens"].as_u64(),
        "finish_reason": p.and_then(|p| p.finish_reason.clone()),
        "error": p.and_then(|p| p.error.clone()),
        "calls": [],
    })
}

fn call(e: &Event, p: &ToolCalled) -> Value {
    json!({
        "seq": e.seq,
        "run_call_id": p.run_call_id,
        "call_id": p.call_id,
        "name": p.name,
        "ok": p.ok,
        "deferred": p.deferred,
        "waits_for": p.waits_for,
        "duration_ms": p.duration_ms,
        "decided_by": p.decided_by,
        "timed_out": p.timed_out,
        "cancelled": p.cancelled,
        "confidence": e.confidence,
    })
}

/// The object `show --json` prints for the bundle named `name`.
pub(super) fn show_json(
    name: &str,
    events: &[Event],
    log: &[EventPayload],
    report: &VerifyReport,
) -> Value {
    let mut run = Map::new();
    run.insert("bundle".into(), json!(name));
    let (mut inputs, mut outputs, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    let mut steps: Vec<Value> = Vec::new();
    let mut counted =
        json!({"requests": 0, "tool_calls": 0, "input_tokens": 0, "output_tokens": 0});
    let mut ended = json!({"status": null, "error": null, "usage": null});
    for (e, payload) in events.iter().zip(log) {
        match payload {
            EventPayload::RunStarted(p) => {
                run.insert("run_id".into(), json!(e.run_id));
                run.insert("agent".into(), json!(p.agent));
                run.insert("model".into(), json!(p.model));
                run.insert("builder".into(), json!(p.builder));
                run.insert(
                    "tools".into(),
                    json!(p.tools.iter().map(|t| &t.name).collect::<Vec<_>>()),
                );
                run.insert("started".into(), json!(e.ts));
            }
            EventPayload::InputStaged(p) => inputs.push(file(&p.0)),
            EventPayload::OutputProduced(p) => outputs.push(file(&p.0)),
            EventPayload::OutputSkipped(p) => {
                skipped.push(json!({"path": p.path, "kind": p.kind, "reason": p.reason}));
            }
            EventPayload::ModelCalled(p) => {
                add(&mut counted, "requests", 1);
                add(
                    &mut counted,
                    "input_tokens",
                    p.usage["input_tokens"].as_u64().unwrap_or(0),
                );
                add(
                    &mut counted,
                    "output_tokens",
                    p.usage["output_tokens"].as_u64().unwrap_or(0),
                );
                steps.push(step(steps.len() + 1, Some(e), Some(p)));
            }
            EventPayload::ToolCalled(p) => {
                if !p.deferred && !p.provider_run {
                    add(&mut counted, "tool_calls", 1);
                }
                if steps.is_empty() {
                    steps.push(step(0, None, None));
                }
                let at = asked_by(p, &steps).unwrap_or(steps.len() - 1);
                if let Some(Value::Array(calls)) = steps.get_mut(at).map(|s| &mut s["calls"]) {
                    calls.push(call(e, p));
                }
            }
            EventPayload::RunFinished(p) => {
                // A resumed run's later segment supersedes the paused one's outputs.
                ended = json!({"status": p.status.as_str(), "error": p.error, "usage": p.usage});
            }
            _ => {}
        }
    }
    let finished = events.last().map(|e| e.kind) == Some(EventType::RunFinished);
    if !finished {
        ended = json!({"status": null, "error": null, "usage": null});
    }
    let usage = match &ended["usage"] {
        Value::Object(u) => {
            let pick = |k: &str| u.get(k).and_then(Value::as_u64).or(counted[k].as_u64());
            json!({"requests": pick("requests"), "tool_calls": pick("tool_calls"),
                   "input_tokens": pick("input_tokens"), "output_tokens": pick("output_tokens")})
        }
        _ => counted,
    };
    run.insert("status".into(), ended["status"].clone());
    run.insert("error".into(), ended["error"].clone());
    run.insert(
        "ended".into(),
        json!(finished.then(|| events.last().map(|e| e.ts.clone()))),
    );
    run.insert("events".into(), json!(events.len()));
    run.insert("usage".into(), usage);
    run.insert("inputs".into(), json!(inputs));
    run.insert("outputs".into(), json!(latest_outputs(events, outputs)));
    run.insert("skipped".into(), json!(skipped));
    run.insert("steps".into(), json!(steps));
    run.insert("processes".into(), super::observed::processes_json(log));
    run.insert(
        "file_changes".into(),
        super::observed::file_changes_json(log),
    );
    run.insert("tool_calls_seen".into(), super::observed::seen_json(log));
    run.insert("claims".into(), super::observed::claims_json(events));
    run.insert(
        "verify".into(),
        serde_json::to_value(report).unwrap_or(Value::Null),
    );
    Value::Object(run)
}

/// The index in `steps` of the step whose response asked for a call a wrapped program
/// ran (`mode: "program"`, imported from its session log after it exited, so recorded
/// after every step): the step `STEP` of its `run_call_id` `STEP.N`. `None` for any other
/// call (it goes under the step before it).
fn asked_by(p: &ToolCalled, steps: &[Value]) -> Option<usize> {
    if p.mode.as_deref() != Some("program") {
        return None;
    }
    let (step, _) = p.run_call_id.as_deref()?.split_once('.')?;
    let step: u64 = step.parse().ok().filter(|n| *n > 0)?;
    steps.iter().position(|s| s["step"].as_u64() == Some(step))
}

fn add(counts: &mut Value, key: &str, n: u64) {
    counts[key] = json!(counts[key].as_u64().unwrap_or(0) + n);
}

/// The outputs of the run's last segment: a paused and resumed run lists its outputs
/// again when it ends, and those are the run's.
fn latest_outputs(events: &[Event], all: Vec<Value>) -> Vec<Value> {
    let segments = events
        .iter()
        .filter(|e| e.kind == EventType::RunFinished)
        .count();
    if segments <= 1 {
        return all;
    }
    // Count the outputs recorded after the last-but-one run_finished.
    let last_but_one = events
        .iter()
        .rposition(|e| e.kind == EventType::RunFinished)
        .and_then(|last| {
            events[..last]
                .iter()
                .rposition(|e| e.kind == EventType::RunFinished)
        })
        .unwrap_or(0);
    let later = events[last_but_one..]
        .iter()
        .filter(|e| e.kind == EventType::OutputProduced)
        .count();
    let skip = all.len().saturating_sub(later);
    all.into_iter().skip(skip).collect()
}
