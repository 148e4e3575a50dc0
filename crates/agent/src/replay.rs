//! [`replay`]: re-executing a recorded run through the [`Backend`] and comparing it with
//! the recording. The top of the crate's module order: it reads the bundle with
//! [`crate::recorded`] and drives the backend.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use provrun_evidence::{BlobRef, EventPayload, RunStatus, read_events, verify};
use provrun_tools::ToolOutput;
use serde_json::Value;

use crate::backend::Backend;
use crate::control::RunControl;
use crate::error::AgentError;
use crate::recorded::{
    Replaying, blob_of, bundle_err, calls_in, order_difference, recorded_agent,
    recorded_conversation, replay_model, tool_result, typed_log,
};
use crate::remote::RecordedMcp;
use crate::spec::{RunResult, RunSpec};

/// The MCP side of a recording, for a replay that answers `remote_mcp` calls from it
/// instead of the servers: `None` when the run used no MCP server.
fn recorded_mcp(bundle: &Path, log: &[EventPayload]) -> Result<Option<RecordedMcp>, AgentError> {
    let description = match log.first() {
        Some(EventPayload::RunStarted(s)) => s.details["mcp"].clone(),
        _ => Value::Null,
    };
    if description.is_null() {
        return Ok(None);
    }
    let mut results = HashMap::new();
    for p in calls_in(log).filter(|t| t.mode.as_deref() == Some("remote_mcp") && !t.deferred) {
        let output = ToolOutput {
            content: tool_result(bundle, p)?,
            ok: p.ok,
            confinement: None,
        };
        let mcp = match blob_of(bundle, p.mcp_blob.as_ref())? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| bundle_err(bundle, format!("an mcp blob is not JSON: {e}")))?,
            None => p.mcp.clone().unwrap_or(Value::Null),
        };
        results.insert(p.key().to_string(), (output, mcp));
    }
    Ok(Some(RecordedMcp {
        description,
        results,
    }))
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// The new run.
    pub result: RunResult,
    /// Tool calls compared.
    pub tool_calls: usize,
    /// Output files compared.
    pub outputs: usize,
    /// The first difference from the recording, if any.
    pub difference: Option<String>,
    /// Calls answered from the recording instead of run again, because the recording
    /// stopped them: at their time limit, or when the run was cancelled.
    pub answered_from_recording: usize,
}

impl ReplayReport {
    /// Whether every tool result and output file matched.
    pub fn matches(&self) -> bool {
        self.difference.is_none()
    }
}

/// A tool call as replay compares it.
#[derive(Debug, PartialEq)]
struct CallKey {
    name: String,
    call_id: String,
    arguments: Value,
    result: Value,
    ok: bool,
    deferred: bool,
    output_tool: bool,
    decided_by: Option<String>,
}

fn call_keys(log: &[EventPayload]) -> Vec<CallKey> {
    // A value moved to a blob is compared by the blob's digest.
    let inline_or_digest = |inline: &Value, blob: &Option<BlobRef>| match (inline, blob) {
        (Value::Null, Some(b)) => Value::String(b.digest.sha256.clone()),
        (v, _) => v.clone(),
    };
    calls_in(log)
        .map(|p| CallKey {
            name: p.name.clone(),
            call_id: p.call_id.clone(),
            arguments: inline_or_digest(&p.arguments, &p.arguments_blob),
            result: inline_or_digest(&p.result, &p.result_blob),
            ok: p.ok,
            deferred: p.deferred,
            output_tool: p.output_tool,
            decided_by: p.decided_by.clone(),
        })
        .collect()
}

fn describe(k: &CallKey) -> String {
    if k.deferred {
        return format!("{} {} (waiting for a decision)", k.name, k.arguments);
    }
    let mut s = format!("{} {} → {}", k.name, k.arguments, k.result);
    if !k.ok {
        s.push_str(" (failed)");
    }
    if let Some(by) = &k.decided_by {
        s.push_str(&format!(" [decided by {by}]"));
    }
    s
}

fn outputs(log: &[EventPayload]) -> Vec<(String, String)> {
    log.iter()
        .filter_map(|e| match e {
            EventPayload::OutputProduced(o) => Some((o.0.path.clone(), o.0.sha256.clone())),
            _ => None,
        })
        .collect()
}

/// Re-execute a recorded run from its bundle alone — its agent spec, prompt, staged
/// inputs and recorded model responses — into a new bundle at `out`, and compare every
/// tool call (deferred ones too), tool result, output file and the final status with the
/// recording.
///
/// The source must verify (a tampered or unfinished bundle is refused). What the
/// recording alone decided is taken from it, so that the replay goes the same way:
/// - calls a hook denied or replaced are not run, their recorded result is used; calls
///   whose output an after hook rewrote run (for their effects) and the recorded result is
///   used; the backend's own hooks are not run at all;
/// - a run that paused and was resumed pauses at the same calls, and is resumed (in
///   this process, through [`Backend::resume`]) with the decisions the recording shows:
///   approved, denied with its message, or the caller's result; a recording that ended
///   paused is replayed up to that pause and ends `paused` too;
/// - a cancelled run is replayed up to the model requests it had made and ends
///   `cancelled`;
/// - the messages the run was steered with (`steered`) are added to the history at the
///   same points (the replay's own `control` cannot steer it), and a call a hook held for
///   a permit is recorded waiting again where it was.
///
/// Every other call — the tool ran, or the runtime refused it — runs again and its
/// result is compared. A run that was granted a host folder is replayed without one.
///
/// # Errors
///
/// [`AgentError::Bundle`] when `source` does not verify, never finished or cannot be
/// replayed; [`AgentError::Evidence`] when a bundle cannot be read or `out` written;
/// otherwise as [`Backend::execute`].
pub async fn replay(
    backend: &Backend,
    control: &RunControl,
    source: &Path,
    out: &Path,
) -> Result<ReplayReport, AgentError> {
    let model = replay_model(source)?;
    let report = verify(source);
    if !report.complete {
        return Err(bundle_err(
            source,
            "refusing to replay a run that never finished",
        ));
    }
    let raw_events = read_events(source)?;
    let events = typed_log(&raw_events)?;
    let replaying = Arc::new(Replaying::from_events(source, &events)?);
    let (mut agent, prompt) = recorded_agent(source, &raw_events)?;
    agent.model = format!("replay:{}", source.display());
    let mut run = RunSpec::new(prompt, out);
    // The tools its caller ran and the conversation it started from, as recorded.
    if let Some(EventPayload::RunStarted(started)) = events.first() {
        let conversation = recorded_conversation(source, &started.details)?;
        run.client_tools = conversation.client_tools;
        run.history = conversation.history;
        run.continues = conversation.continues;
    }
    let input = source.join("input");
    let staged_any = std::fs::read_dir(&input)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if staged_any {
        run.inputs.push(input);
    }
    let mut backend = backend
        .clone()
        .without_otlp()
        .with_model(Arc::new(model))
        .replaying(Arc::clone(&replaying));
    if let Some(recorded) = recorded_mcp(source, &events)? {
        // Tools that ran in MCP servers answer from the recording: no server is reached.
        backend = backend.with_recorded_mcp(recorded);
    }
    let mut result = backend.execute(control, &agent, &run).await?;
    while result.status() == RunStatus::Paused {
        let Some(decisions) = replaying.decisions(result.usage.requests, result.deferred()) else {
            break;
        };
        result = backend.resume(control, out, &decisions).await?;
    }
    let new_events = typed_log(&read_events(out)?)?;

    let (old_calls, new_calls) = (call_keys(&events), call_keys(&new_events));
    let mut difference =
        calls_difference(&old_calls, &new_calls).or_else(|| order_difference(&events, &new_events));
    if difference.is_none() {
        difference = crate::steer::steering_difference((source, &events), (out, &new_events))?;
    }
    let (old_out, new_out) = (outputs(&events), outputs(&new_events));
    if difference.is_none() {
        difference = outputs_difference(&old_out, &new_out);
    }
    if difference.is_none() && result.status().as_str() != recorded_status(&events) {
        difference = Some(format!(
            "the recording ended {}, the replay {}",
            recorded_status(&events),
            result.status().as_str()
        ));
    }
    Ok(ReplayReport {
        result,
        tool_calls: old_calls.iter().filter(|c| !c.deferred).count(),
        outputs: old_out.len(),
        difference,
        answered_from_recording: replaying.answered_from_recording(),
    })
}

/// The first tool call the replay made differently from the recording, or a different
/// number of calls.
fn calls_difference(old: &[CallKey], new: &[CallKey]) -> Option<String> {
    for (i, pair) in old.iter().zip(new.iter()).enumerate() {
        if pair.0 != pair.1 {
            return Some(format!(
                "tool call {} differs: recorded {}, replayed {}",
                i + 1,
                describe(pair.0),
                describe(pair.1)
            ));
        }
    }
    (old.len() != new.len()).then(|| {
        format!(
            "the recording has {} tool calls, the replay {}",
            old.len(),
            new.len()
        )
    })
}

/// The first output file (path and digest) the replay wrote differently from the
/// recording, or a different number of files.
fn outputs_difference(old: &[(String, String)], new: &[(String, String)]) -> Option<String> {
    for (o, n) in old.iter().zip(new.iter()) {
        if o != n {
            return Some(if o.0 == n.0 {
                format!(
                    "output `{}` differs (sha256 {} recorded, {} replayed)",
                    o.0, o.1, n.1
                )
            } else {
                format!(
                    "output files differ: `{}` recorded, `{}` replayed",
                    o.0, n.0
                )
            });
        }
    }
    (old.len() != new.len()).then(|| {
        format!(
            "the recording has {} output files, the replay {}",
            old.len(),
            new.len()
        )
    })
}

fn recorded_status(log: &[EventPayload]) -> &str {
    log.iter()
        .rev()
        .find_map(EventPayload::as_run_finished)
        .map_or("unknown", |f| f.status.as_str())
}
