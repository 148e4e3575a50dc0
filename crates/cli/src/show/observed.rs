//! What `show` prints of what the runtime observed a program do besides its traffic: the
//! processes of each trail, the workspace's changes, the tool calls seen on the wire, and
//! the claims of a session log matched against the processes — as timeline lines, and as
//! the members `show --json` adds (`processes`, `file_changes`, `claims`, `tool_calls_seen`).

use provrun_evidence::claims::ClaimsReport;
use provrun_evidence::{
    Event, EventPayload, FileChanged, ProcessRan, ToolCallSeen, TrailRecorded, WorkspaceChanged,
};
use serde_json::{Value, json};

use super::{short, size};
use crate::inert::inert;
use crate::style::Painter;

/// What a trail belongs to, for a person.
fn owner_text(p: &provrun_evidence::TrailOwner) -> String {
    match p.kind.as_str() {
        "command" => format!(
            "call {}",
            inert(
                p.run_call_id
                    .as_deref()
                    .or(p.call_id.as_deref())
                    .unwrap_or("?")
            )
        ),
        "mcp_server" => format!("server {}", inert(p.server.as_deref().unwrap_or("?"))),
        other => inert(other).into_owned(),
    }
}

/// One process of a trail.
pub(super) fn process_line(p: &ProcessRan, paint: Painter) -> String {
    let argv = short(&Value::from(p.argv.join(" ")), 70);
    let how = match (p.exit_code, p.signal, p.replaced, &p.ended) {
        (Some(0), ..) => paint.good("exit 0"),
        (Some(c), ..) => paint.bad(&format!("exit {c}")),
        (None, Some(s), ..) => paint.bad(&format!("signal {s}")),
        (None, None, true, _) => paint.dim("exec'd another image"),
        (None, None, false, None) => paint.warn("still running when the trail ended"),
        _ => paint.dim("ended"),
    };
    let parent = p.parent.map_or(String::new(), |id| format!(" ← #{id}"));
    let what = if p.exec {
        let digest = p
            .exe_sha256
            .as_deref()
            .map_or_else(|| "not hashed".to_owned(), |d| d.chars().take(12).collect());
        format!("{} {}", inert(&p.exe), inert(&digest))
    } else {
        "forked, no exec".to_owned()
    };
    format!(
        "  {} #{}{parent} {argv} · {how} · {}",
        paint.dim("process"),
        p.id,
        paint.dim(&what)
    )
}

/// How a trail ended.
pub(super) fn trail_line(t: &TrailRecorded, paint: Painter) -> String {
    let mut line = format!(
        "  {} {} · {} processes ({} execs, {} forks)",
        paint.dim("trail  "),
        owner_text(&t.owner),
        t.processes,
        t.execs,
        t.forks
    );
    if t.not_recorded > 0 {
        line.push_str(&format!(
            " · {}",
            paint.warn(&format!("{} more counted, not recorded", t.not_recorded))
        ));
    }
    if !t.complete {
        let why = t.error.as_deref().unwrap_or("incomplete");
        line.push_str(&format!(" · {}", paint.warn(&inert(why))));
    }
    line
}

/// One changed entry of a workspace.
pub(super) fn change_line(c: &FileChanged, paint: Painter) -> String {
    let sizes = match (c.before_size, c.after_size) {
        (Some(b), Some(a)) => format!("{} → {}", size(b), size(a)),
        (None, Some(a)) => size(a),
        (Some(b), None) => size(b),
        (None, None) => String::new(),
    };
    format!(
        "  {} {:<8} {} ({}{})",
        paint.dim("change "),
        inert(&c.change),
        inert(&c.path),
        inert(&c.kind),
        if sizes.is_empty() {
            String::new()
        } else {
            format!(", {sizes}")
        }
    )
}

/// A workspace's changes as a whole.
pub(super) fn workspace_line(w: &WorkspaceChanged, paint: Painter) -> String {
    let mut line = format!(
        "{} {} created, {} modified, {} deleted",
        paint.strong("changes"),
        w.created,
        w.modified,
        w.deleted
    );
    if w.unhashed > 0 {
        line.push_str(&format!(" · {} not hashed", w.unhashed));
    }
    match (&w.diff, &w.diff_error) {
        (Some(d), _) => line.push_str(&format!(" · git diff {} (in a blob)", size(d.size))),
        (None, Some(e)) => line.push_str(&format!(" · {}", paint.warn(&inert(e)))),
        _ => {}
    }
    line
}

/// A tool call seen on the wire.
pub(super) fn seen_line(c: &ToolCallSeen, paint: Painter) -> String {
    let answered = match (c.answered_in, c.result_size) {
        (Some(step), Some(n)) => format!("result in request {step} ({})", size(n)),
        _ => paint.warn("no result seen on the wire"),
    };
    format!(
        "  {} {} {} {} · {answered}",
        paint.dim("wire   "),
        inert(&c.name),
        paint.dim(&inert(&c.run_call_id)),
        short(&Value::from(c.arguments.as_str()), 50),
    )
}

/// The claims' lines, after the timeline.
pub(super) fn claims_lines(report: &ClaimsReport, paint: Painter) -> Vec<String> {
    let mut lines = Vec::new();
    if report.claims > 0 && !report.traced {
        lines.push(format!(
            "{} {} claimed commands; no process trail to match them against",
            paint.strong("claims "),
            report.claims
        ));
        return lines;
    }
    let head = format!(
        "{} {} claimed commands, {} matched; {} processes observed",
        paint.strong("claims "),
        report.claims,
        report.matched.len(),
        report.processes
    );
    lines.push(if report.all_accounted() {
        format!("{head} · {}", paint.good("all accounted for"))
    } else {
        head
    });
    for c in &report.unobserved {
        lines.push(format!(
            "  {} {} {}: {}",
            paint.warn("claimed, not observed"),
            inert(&c.name),
            paint.dim(&inert(c.run_call_id.as_deref().unwrap_or(&c.call_id))),
            short(&Value::from(c.command.as_str()), 70)
        ));
    }
    for p in &report.unclaimed {
        lines.push(format!(
            "  {} #{} {}",
            paint.warn("observed, not claimed"),
            p.id,
            short(&Value::from(p.argv.join(" ")), 70)
        ));
    }
    lines
}

/// `show --json`'s `processes`: every process of every trail, with what it belongs to.
pub(super) fn processes_json(log: &[EventPayload]) -> Value {
    let list: Vec<Value> = log
        .iter()
        .filter_map(|p| match p {
            EventPayload::ProcessRan(p) => Some(p),
            _ => None,
        })
        .map(|p| {
            let mut v = json!({
                "id": p.id,
                "parent": p.parent,
                "pid": p.pid,
                "exec": p.exec,
                "argv": p.argv,
                "argv_cut": p.argv_cut,
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
                "belongs_to": p.owner,
            });
            if p.owner.kind == "command" {
                v["call_id"] = json!(p.owner.call_id);
                v["run_call_id"] = json!(p.owner.run_call_id);
            }
            v
        })
        .collect();
    Value::Array(list)
}

/// `show --json`'s `file_changes`.
pub(super) fn file_changes_json(log: &[EventPayload]) -> Value {
    Value::Array(
        log.iter()
            .filter_map(|p| match p {
                EventPayload::FileChanged(c) => serde_json::to_value(c).ok(),
                _ => None,
            })
            .collect(),
    )
}

/// `show --json`'s `tool_calls_seen`.
pub(super) fn seen_json(log: &[EventPayload]) -> Value {
    Value::Array(
        log.iter()
            .filter_map(|p| match p {
                EventPayload::ToolCallSeen(c) => serde_json::to_value(c).ok(),
                _ => None,
            })
            .collect(),
    )
}

/// `show --json`'s `claims`: `null` when the run has neither claims nor a program trail.
pub(super) fn claims_json(events: &[Event]) -> Value {
    match provrun_evidence::match_claims(events) {
        None => Value::Null,
        Some(r) => json!({
            "claims": r.claims,
            "processes": r.processes,
            "traced": r.traced,
            "trail_complete": r.trail_complete,
            "matched": r.matched.iter().map(|(call, id)| json!({"call": call, "process": id})).collect::<Vec<_>>(),
            "unobserved": r.unobserved,
            "unclaimed": r.unclaimed,
        }),
    }
}
