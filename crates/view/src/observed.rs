//! The page's entries for what the runtime observed a program do besides its traffic:
//! each process of a trail, how the trail ended, each change to a wrapped program's
//! workspace and the change as a whole, each tool call seen on the wire; and the claims
//! of a session log matched against the processes. All of it is bundle text, put into
//! the page as text by the script.

use provrun_evidence::{
    Event, FileChanged, ProcessRan, ToolCallSeen, TrailOwner, TrailRecorded, WorkspaceChanged,
};
use serde_json::{Value, json};

fn owner(o: &TrailOwner) -> String {
    match o.kind.as_str() {
        "command" => format!(
            "call {}",
            o.run_call_id
                .as_deref()
                .or(o.call_id.as_deref())
                .unwrap_or("?")
        ),
        "mcp_server" => format!("MCP server {}", o.server.as_deref().unwrap_or("?")),
        "program" => "the wrapped program".to_owned(),
        other => other.to_owned(),
    }
}

/// A `process_ran` entry.
pub(crate) fn process(p: &ProcessRan) -> Value {
    json!({
        "kind": "process",
        "owner": owner(&p.owner),
        "id": p.id,
        "parent": p.parent,
        "pid": p.pid,
        "exec": p.exec,
        "argv": p.argv.join(" "),
        "argv_cut": p.argv_cut.is_some(),
        "exe": p.exe,
        "exe_sha256": p.exe_sha256,
        "exe_error": p.exe_error,
        "cwd": p.cwd,
        "uid": p.uid,
        "started": p.started,
        "ended": p.ended,
        "exit_code": p.exit_code,
        "signal": p.signal,
        "replaced": p.replaced,
    })
}

/// A `trail_recorded` entry.
pub(crate) fn trail(t: &TrailRecorded) -> Value {
    json!({
        "kind": "trail",
        "owner": owner(&t.owner),
        "processes": t.processes,
        "not_recorded": t.not_recorded,
        "execs": t.execs,
        "forks": t.forks,
        "complete": t.complete,
        "error": t.error,
    })
}

/// A `file_changed` entry.
pub(crate) fn change(c: &FileChanged) -> Value {
    json!({
        "kind": "change",
        "path": c.path,
        "change": c.change,
        "entry_kind": c.kind,
        "before_sha256": c.before_sha256,
        "after_sha256": c.after_sha256,
        "before_size": c.before_size,
        "after_size": c.after_size,
    })
}

/// A `workspace_changed` entry; its diff is embedded by the caller (`diff`).
pub(crate) fn workspace(w: &WorkspaceChanged, diff: Value) -> Value {
    json!({
        "kind": "workspace",
        "created": w.created,
        "modified": w.modified,
        "deleted": w.deleted,
        "unhashed": w.unhashed,
        "git": w.git,
        "diff": diff,
        "diff_error": w.diff_error,
    })
}

/// A `tool_call_seen` entry.
pub(crate) fn seen(c: &ToolCallSeen) -> Value {
    json!({
        "kind": "seen",
        "name": c.name,
        "run_call_id": c.run_call_id,
        "call_id": c.call_id,
        "arguments": c.arguments,
        "answered_in": c.answered_in,
        "result": c.result,
        "result_size": c.result_size,
        "result_error": c.result_error,
    })
}

/// The claims of the run's session log against its trail, for the page (`null` when the
/// run has neither).
pub(crate) fn claims(events: &[Event]) -> Value {
    match provrun_evidence::match_claims(events) {
        None => Value::Null,
        Some(r) => json!({
            "claims": r.claims,
            "processes": r.processes,
            "traced": r.traced,
            "trail_complete": r.trail_complete,
            "matched": r.matched.len(),
            "unobserved": r.unobserved.iter().map(|c| json!({
                "name": c.name,
                "call": c.run_call_id.as_deref().unwrap_or(&c.call_id),
                "command": c.command,
            })).collect::<Vec<_>>(),
            "unclaimed": r.unclaimed.iter().map(|p| json!({
                "id": p.id,
                "argv": p.argv.join(" "),
                "exe": p.exe,
            })).collect::<Vec<_>>(),
        }),
    }
}
