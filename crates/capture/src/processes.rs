//! Recording a process trail: each [`ObservedProcess`] a sandbox's tracer saw as a
//! `process_ran` event, and the trail's end as `trail_recorded`, both `observed` and
//! naming what the processes belong to ([`TrailOwner`]: a tool call's command, a wrapped
//! program, an MCP server). The agent's `run_command` calls and `provrun wrap` write
//! through these functions.

use std::time::{Duration, UNIX_EPOCH};

use provrun_evidence::{ArgvTotal, ProcessRan, Recorder, TrailOwner, TrailRecorded};
use provrun_sandbox::{ObservedProcess, Trail, TrailSummary};

use crate::error::CaptureError;

/// Microseconds since the epoch as RFC 3339 UTC with microseconds.
fn rfc3339_us(us: u64) -> String {
    humantime::format_rfc3339_micros(UNIX_EPOCH + Duration::from_micros(us)).to_string()
}

/// The `process_ran` payload of `p`, in `owner`'s trail.
pub fn process_ran(owner: &TrailOwner, p: &ObservedProcess) -> ProcessRan {
    ProcessRan {
        owner: owner.clone(),
        id: p.id,
        parent: p.parent,
        pid: p.pid,
        exec: p.exec,
        argv: p.argv.clone(),
        argv_cut: p.argv_cut.map(|c| ArgvTotal {
            args: c.args,
            bytes: c.bytes,
        }),
        exe: p.exe.clone(),
        exe_sha256: p.exe_sha256.clone(),
        exe_size: p.exe_size,
        exe_error: p.exe_error.clone(),
        cwd: p.cwd.clone(),
        uid: p.uid,
        started: rfc3339_us(p.started_us),
        ended: p.ended_us.map(rfc3339_us),
        exit_code: p.exit_code,
        signal: p.signal,
        replaced: p.replaced,
    }
}

/// The `trail_recorded` payload of `summary`, for `owner`'s trail.
pub fn trail_recorded(owner: &TrailOwner, summary: &TrailSummary) -> TrailRecorded {
    TrailRecorded {
        owner: owner.clone(),
        mechanism: summary.mechanism.clone(),
        processes: summary.processes,
        not_recorded: summary.not_recorded,
        execs: summary.execs,
        forks: summary.forks,
        complete: summary.complete,
        error: summary.error.clone(),
    }
}

/// Records `processes` of `owner`'s trail, one `process_ran` each, in order.
///
/// # Errors
///
/// [`CaptureError`] when an event cannot be written.
pub async fn record_processes(
    recorder: &Recorder,
    owner: &TrailOwner,
    processes: &[ObservedProcess],
) -> Result<(), CaptureError> {
    for p in processes {
        recorder.record_async(&process_ran(owner, p)).await?;
    }
    Ok(())
}

/// Records a whole finished trail of `owner`: its processes, then `trail_recorded`.
///
/// # Errors
///
/// [`CaptureError`] when an event cannot be written.
pub async fn record_trail(
    recorder: &Recorder,
    owner: &TrailOwner,
    trail: &Trail,
) -> Result<(), CaptureError> {
    record_processes(recorder, owner, &trail.processes).await?;
    recorder
        .record_async(&trail_recorded(owner, &trail.summary))
        .await?;
    Ok(())
}

/// The owner of a tool call's command trail.
pub fn command_owner(call_id: &str, run_call_id: Option<&str>) -> TrailOwner {
    TrailOwner {
        kind: "command".to_owned(),
        call_id: Some(call_id.to_owned()),
        run_call_id: run_call_id.map(str::to_owned),
        server: None,
    }
}

/// The owner of a wrapped program's trail.
pub fn program_owner() -> TrailOwner {
    TrailOwner {
        kind: "program".to_owned(),
        ..TrailOwner::default()
    }
}

/// The owner of an MCP stdio server's trail.
pub fn server_owner(name: &str) -> TrailOwner {
    TrailOwner {
        kind: "mcp_server".to_owned(),
        server: Some(name.to_owned()),
        ..TrailOwner::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_with_microseconds() {
        assert_eq!(rfc3339_us(1_000_001), "1970-01-01T00:00:01.000001Z");
        let p = ObservedProcess {
            id: 2,
            parent: Some(1),
            argv: vec!["true".into()],
            started_us: 5,
            ended_us: Some(6),
            exit_code: Some(0),
            ..ObservedProcess::default()
        };
        let e = process_ran(&program_owner(), &p);
        assert_eq!(e.owner.kind, "program");
        assert_eq!(e.ended.as_deref(), Some("1970-01-01T00:00:00.000006Z"));
        assert_eq!(e.parent, Some(1));
    }
}
