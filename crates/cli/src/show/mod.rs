//! `provrun show BUNDLE`: the run as a readable timeline — who ran what, each model step
//! with its tokens and time, each tool call with ok/failed and its duration, the files it
//! produced, how it ended — and whether the bundle verifies.

use std::path::PathBuf;

use provrun_evidence::{
    ConnectionHandled, Declared, Event, EventPayload, EventType, HttpExchanged, ModelCalled,
    OutputSkipped, ProgramExited, RunFinished, RunStarted, RunStatus, Steered, ToolCalled,
    TraceImported, read_events,
};
use serde_json::Value;

mod json;
mod observed;

use crate::inert::{self, inert};
use crate::style::Painter;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// Arguments of `provrun show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The bundle: a folder, a .tar of one (as `batch` uploads), or its URL
    /// (s3://BUCKET/PREFIX/ID.tar, file:///…/ID.tar).
    bundle: PathBuf,
    /// Print one JSON object instead of the timeline: the run's header, status, usage,
    /// inputs, outputs, steps with their tool calls, and the verify report.
    #[arg(long)]
    json: bool,
}

pub(crate) fn show(args: &ShowArgs) -> u8 {
    let loaded = match crate::open::for_reading(&args.bundle, "", EXIT_USAGE) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let bundle = loaded.dir();
    let events = match read_events(bundle) {
        Ok(e) => e,
        Err(e) => {
            return fail(
                EXIT_FAILED,
                format!(
                    "cannot read the evidence log of `{}`: {e}",
                    args.bundle.display()
                ),
            );
        }
    };
    let log = match events
        .iter()
        .map(Event::typed)
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(log) => log,
        Err(e) => {
            return fail(
                EXIT_FAILED,
                format!(
                    "cannot read the evidence log of `{}`: {e}",
                    args.bundle.display()
                ),
            );
        }
    };
    let report = provrun_evidence::verify(bundle);
    if args.json {
        let name = args.bundle.display().to_string();
        let value = json::show_json(&name, &events, &log, &report);
        out!("{}", inert::inert_json(&value.to_string()));
        return EXIT_OK;
    }
    let paint = Painter::stdout();
    for line in timeline(bundle, &events, &log, paint) {
        out!("{line}");
    }
    out!("{}", crate::verify::summary(&report, paint));
    EXIT_OK
}

/// A string field, made inert for the terminal (it is whatever the run recorded).
fn text(v: &Value) -> String {
    inert(v.as_str().unwrap_or("")).into_owned()
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}

fn short(value: &Value, max: usize) -> String {
    let s = match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let s = s.replace(['\n', '\t'], " ");
    let s = if s.chars().count() > max {
        s.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    } else {
        s
    };
    inert(&s).into_owned()
}

/// The lines of the timeline, in log order: `events` with their typed payloads `log`.
fn timeline(
    bundle: &std::path::Path,
    events: &[Event],
    log: &[EventPayload],
    paint: Painter,
) -> Vec<String> {
    let mut lines = Vec::new();
    let mut step = 0u32;
    let mut inputs: Vec<String> = Vec::new();
    let mut outputs: Vec<String> = Vec::new();
    let mut paused = false;
    // Tool names are padded to the longest one (at least 16 columns), so the columns
    // after them line up however long an MCP tool's `PREFIX_tool` name is.
    let name_width = log
        .iter()
        .filter_map(EventPayload::as_tool_called)
        .map(|t| inert(&t.name).chars().count())
        .max()
        .unwrap_or(0)
        .max(16);
    let flush_inputs = |inputs: &mut Vec<String>, lines: &mut Vec<String>| {
        if !inputs.is_empty() {
            lines.push(files_line("inputs ", &std::mem::take(inputs), paint));
        }
    };
    for (e, payload) in events.iter().zip(log) {
        if e.kind != EventType::InputStaged {
            flush_inputs(&mut inputs, &mut lines);
        }
        if std::mem::take(&mut paused) {
            lines.push(format!(
                "{} {}",
                paint.strong("resume "),
                paint.dim("the run continues with the decisions given")
            ));
        }
        match payload {
            EventPayload::RunStarted(p) => lines.extend(run_started_lines(e, p, paint)),
            EventPayload::InputStaged(p) => {
                inputs.push(format!("{} ({})", inert(&p.0.path), size(p.0.size)));
            }
            EventPayload::ModelCalled(p) => {
                step += 1;
                lines.push(model_called_line(step, p, paint));
            }
            EventPayload::ToolCalled(p) => {
                lines.push(tool_called_line(p, name_width, paint));
                let confinement = p.confinement.as_ref().unwrap_or(&Value::Null);
                if let Some(summary) = confinement_line(confinement) {
                    lines.push(format!("           {}", paint.dim(&summary)));
                }
            }
            EventPayload::OutputProduced(p) => {
                outputs.push(format!("{} ({})", inert(&p.0.path), size(p.0.size)));
            }
            EventPayload::OutputSkipped(p) => lines.push(output_skipped_line(p, paint)),
            EventPayload::RunFinished(p) => {
                if !outputs.is_empty() {
                    lines.push(files_line("outputs", &std::mem::take(&mut outputs), paint));
                }
                paused = p.status == RunStatus::Paused;
                lines.push(run_finished_line(p, paint));
            }
            EventPayload::Steered(p) => lines.push(steered_line(bundle, p, paint)),
            EventPayload::Declared(p) => lines.push(declared_line(p, paint)),
            EventPayload::HttpExchanged(p) => lines.push(http_exchanged_line(p, paint)),
            EventPayload::ConnectionHandled(p) => lines.push(connection_line(p, paint)),
            EventPayload::ProgramExited(p) => {
                lines.push(program_exited_line(p, paint));
                if let Some(summary) = p.confinement.as_ref().and_then(confinement_line) {
                    lines.push(format!("           {}", paint.dim(&summary)));
                }
            }
            // A history the run left in a file (a wrapped program's session log); the
            // runtime's own history is not shown.
            EventPayload::TraceImported(p) if p.source.is_some() => {
                lines.push(trace_line(p, paint));
            }
            EventPayload::ProcessRan(p) => lines.push(observed::process_line(p, paint)),
            EventPayload::TrailRecorded(p) => lines.push(observed::trail_line(p, paint)),
            EventPayload::FileChanged(p) => lines.push(observed::change_line(p, paint)),
            EventPayload::WorkspaceChanged(p) => {
                lines.push(observed::workspace_line(p, paint));
            }
            EventPayload::ToolCallSeen(p) => lines.push(observed::seen_line(p, paint)),
            _ => {}
        }
    }
    if let Some(report) = provrun_evidence::match_claims(events) {
        lines.extend(observed::claims_lines(&report, paint));
    }
    flush_inputs(&mut inputs, &mut lines);
    if !outputs.is_empty() {
        lines.push(files_line("outputs", &outputs, paint));
    }
    if events.last().map(|e| e.kind) != Some(EventType::RunFinished) {
        lines.push(format!(
            "{} {}",
            paint.strong("end    "),
            paint.warn("the log stops here: the run never finished")
        ));
    }
    lines
}

/// A line of files staged or produced, after its `label`.
fn files_line(label: &str, files: &[String], paint: Painter) -> String {
    format!("{} {}", paint.strong(label), files.join(", "))
}

/// The run's first lines: its id, agent, model and start time, then its tools.
fn run_started_lines(e: &Event, p: &RunStarted, paint: Painter) -> [String; 2] {
    let tools: Vec<String> = p.tools.iter().map(|t| inert(&t.name).into()).collect();
    [
        format!(
            "{} {} · agent {} · model {} · {}",
            paint.strong("run    "),
            inert(&e.run_id),
            inert(&p.agent),
            inert(&p.model),
            inert(&e.ts.to_string())
        ),
        format!(
            "{} {}",
            paint.strong("tools  "),
            if tools.is_empty() {
                "none".to_string()
            } else {
                tools.join(", ")
            }
        ),
    ]
}

/// One model request, the run's `step`th: its time, tokens, finish reason and error.
fn model_called_line(step: u32, p: &ModelCalled, paint: Painter) -> String {
    // `usage` is as the model reported it: free-form JSON.
    let usage = &p.usage;
    let mut line = format!(
        "{} {} ms · {} in / {} out tokens",
        paint.strong(&format!("step {step:<2}")),
        p.duration_ms,
        num(&usage["input_tokens"]),
        num(&usage["output_tokens"]),
    );
    if let Some(reason) = &p.finish_reason {
        line.push_str(&format!(" · {}", inert(reason)));
    }
    if let Some(http) = &p.http {
        line.push_str(&format!(" · {}", http_summary(http)));
    }
    if let Some(err) = &p.error {
        let err = inert(err);
        line.push_str(&format!(" · {}", paint.bad(&format!("error: {err}"))));
    }
    line
}

/// `METHOD PATH STATUS` of an exchange a proxy recorded.
fn http_summary(http: &Value) -> String {
    format!(
        "{} {} {}",
        text(&http["method"]),
        text(&http["path"]),
        http["status"]
            .as_u64()
            .map_or("(no response)".to_owned(), |s| s.to_string())
    )
}

/// An exchange through a wrapped program's proxy that is not a model request.
fn http_exchanged_line(p: &HttpExchanged, paint: Painter) -> String {
    let mut line = format!(
        "  {} {} · {} · {} ms",
        paint.dim("http   "),
        inert(&p.kind),
        http_summary(&p.http),
        p.duration_ms
    );
    if let Some(err) = &p.error {
        line.push_str(&format!(" · {}", paint.bad(&inert(err))));
    }
    line
}

/// A connection a wrapped program asked its proxy for.
fn connection_line(p: &ConnectionHandled, paint: Painter) -> String {
    let outcome = match p.outcome.as_str() {
        "tunneled" => paint.good("tunneled"),
        other => paint.bad(&inert(other)),
    };
    let mut line = format!(
        "  {} {}:{} via {} {outcome} · {} B sent, {} B received · {} ms",
        paint.dim("connect"),
        inert(&p.host),
        p.port,
        inert(&p.via),
        p.bytes_sent,
        p.bytes_received,
        p.duration_ms
    );
    if let Some(reason) = &p.reason {
        line.push_str(&format!(" · {}", inert(reason)));
    }
    line
}

/// How a wrapped program ended.
fn program_exited_line(p: &ProgramExited, paint: Painter) -> String {
    let code = p
        .exit_code
        .map_or_else(|| "none".to_owned(), |c| c.to_string());
    let mut line = format!(
        "{} {} exited with code {code} after {} ms · stdout {} · stderr {}",
        paint.strong("program"),
        inert(p.argv.first().map_or("?", String::as_str)),
        p.duration_ms,
        size(p.stdout.size),
        size(p.stderr.size),
    );
    if let Some(s) = &p.forwarded_signal {
        line.push_str(&format!(
            " · {}",
            paint.warn(&format!("{} passed on", inert(s)))
        ));
    }
    line
}

/// A session log imported from a wrapped program's private home.
fn trace_line(p: &TraceImported, paint: Painter) -> String {
    format!(
        "{} {} ({}, {} lines; its tool calls are parsed)",
        paint.strong("session"),
        inert(p.source.as_deref().unwrap_or("")),
        inert(&p.format),
        p.messages
    )
}

/// One tool call: its state, name (padded to `name_width`), time and id, its flags and
/// label, then what it waits for or what it returned.
fn tool_called_line(p: &ToolCalled, name_width: usize, paint: Painter) -> String {
    let state = if p.deferred {
        paint.warn("waits ")
    } else if p.ok {
        paint.good("ok    ")
    } else {
        paint.bad("failed")
    };
    let mut flags = Vec::new();
    for (flag, set) in [
        ("output_tool", p.output_tool),
        ("provider_run", p.provider_run),
    ] {
        if set {
            flags.push(flag);
        }
    }
    // The run-unique id (what `resume --approve` takes), and the model's
    // id beside it when it differs; older logs have the model's only.
    let id = match &p.run_call_id {
        Some(run_id) if p.call_id != *run_id => {
            format!("{} (model id {:?})", inert(run_id), inert(&p.call_id))
        }
        _ => inert(&p.call_id).into_owned(),
    };
    let mut line = format!(
        "  {state} {:<name_width$} {:>5} ms  {}",
        inert(&p.name),
        p.duration_ms,
        paint.dim(&id),
    );
    if !flags.is_empty() {
        line.push_str(&format!(" [{}]", flags.join(", ")));
    }
    // The tool's label for the call (`Read /input/a.txt`), where it has one.
    if let Some(summary) = &p.summary {
        line.push_str(&format!("  {}", short(&Value::from(summary.as_str()), 60)));
    }
    line.push_str(&tool_call_ending(p, paint));
    line
}

/// The end of a tool call's line: for a deferred call, the question it waits on and
/// whether a permit holds it; else a short form of its result (empty when it has none).
fn tool_call_ending(p: &ToolCalled, paint: Painter) -> String {
    let mut end = String::new();
    if p.deferred {
        // The tool's question for a person, where it has one.
        if let Some(confirm) = &p.confirm {
            end.push_str(&format!(
                "  ({})",
                short(&Value::from(confirm.as_str()), 80)
            ));
        }
        // Held by a hook in the running process, not paused for a resume.
        if p.waits_for.as_deref() == Some("permit") {
            end.push_str(&format!("  {}", paint.warn("[waits for a permit]")));
        }
    } else {
        let result = match (&p.result, &p.result_blob) {
            (Value::Null, Some(blob)) => {
                format!("({} result in a blob)", size(blob.size))
            }
            (result, _) => short(result, 70),
        };
        if !result.is_empty() {
            end.push_str(&format!("  → {result}"));
        }
    }
    end
}

/// How the run ended: its status, counts and tokens, and its error.
fn run_finished_line(p: &RunFinished, paint: Painter) -> String {
    let status = p.status.as_str();
    let painted = match p.status {
        RunStatus::Finished => paint.good(status),
        RunStatus::Paused => paint.warn(status),
        _ => paint.bad(status),
    };
    let usage = &p.usage;
    let mut line = format!(
        "{} {painted} · {} model requests · {} tool calls · {} in / {} out tokens · {} events",
        paint.strong("end    "),
        num(&usage["requests"]),
        num(&usage["tool_calls"]),
        num(&usage["input_tokens"]),
        num(&usage["output_tokens"]),
        p.event_count,
    );
    if let Some(err) = &p.error {
        line.push_str(&format!(" · {}", inert(err)));
    }
    line
}

/// A file the run produced but left out of the bundle, and why.
fn output_skipped_line(p: &OutputSkipped, paint: Painter) -> String {
    format!(
        "  {} {} ({}: {})",
        paint.warn("left out"),
        inert(&p.path),
        inert(&p.kind),
        inert(&p.reason),
    )
}

/// Something a tool declared (its kind and data), and who declared it.
fn declared_line(p: &Declared, paint: Painter) -> String {
    format!(
        "  {} {} by {}: {}",
        paint.dim("declared"),
        inert(&p.kind),
        inert(p.source.as_deref().unwrap_or("a tool")),
        short(&p.data, 70)
    )
}

/// A message the caller sent into the run, read from its blob in `bundle`.
fn steered_line(bundle: &std::path::Path, p: &Steered, paint: Painter) -> String {
    // The caller's message, from its blob (made inert: it is recorded text).
    let said = provrun_evidence::read_blob(bundle, &p.text)
        .ok()
        .map_or_else(
            || "(its text cannot be read)".to_owned(),
            |bytes| short(&Value::from(String::from_utf8_lossy(&bytes)), 80),
        );
    format!(
        "  {} before request {}: {said}",
        paint.warn("steered"),
        p.before_request,
    )
}

/// One line saying how a command was confined (`None` when the call ran no program).
fn confinement_line(c: &Value) -> Option<String> {
    if !c.is_object() {
        return None;
    }
    if c["ran"] == false {
        return Some("sandbox: the program did not start".to_owned());
    }
    let opt_num = |v: &Value| v.as_u64().map_or("-".to_owned(), |n| n.to_string());
    let list = |v: &Value| {
        let items: Vec<String> = v
            .as_array()
            .map(|a| a.iter().map(text).collect())
            .unwrap_or_default();
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(",")
        }
    };
    let mut mode = text(&c["mode"]);
    if mode != "full" {
        mode = format!("{mode} (missing {})", list(&c["missing"]));
    }
    let landlock = &c["landlock"];
    let mut ll = format!(
        "landlock {} ABI {}/{}",
        text(&landlock["status"]),
        opt_num(&landlock["abi"]),
        opt_num(&landlock["abi_wanted"])
    );
    if landlock["unenforced"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        ll.push_str(&format!(" unenforced {}", list(&landlock["unenforced"])));
    }
    let seccomp = &c["seccomp"];
    let seccomp = match (
        seccomp["applied"] == true,
        seccomp["filter_sha256"].as_str(),
    ) {
        (true, Some(d)) => format!("seccomp {}", inert(&d.chars().take(12).collect::<String>())),
        (true, None) => "seccomp on".to_owned(),
        (false, _) => "seccomp off".to_owned(),
    };
    let bwrap = c["bubblewrap"]
        .as_str()
        .map_or("no bubblewrap".to_owned(), |v| inert(v).into_owned());
    let limits = &c["limits"];
    let bytes = |v: &Value| v.as_u64().map_or("-".to_owned(), size);
    Some(format!(
        "sandbox {mode} · {ll} · {seccomp} · {bwrap} · ns {} · uid {} · limits {} ms, cpu {} s, mem {}, {} procs ({}), file {}, out {}, quota {}/{} files",
        list(&c["namespaces"]),
        opt_num(&c["host_uid"]),
        opt_num(&limits["timeout_ms"]),
        opt_num(&limits["cpu_s"]),
        bytes(&limits["memory_bytes"]),
        opt_num(&limits["processes"]),
        text(&limits["process_limit"]),
        bytes(&limits["file_size_bytes"]),
        bytes(&limits["output_bytes"]),
        bytes(&limits["quota_bytes"]),
        opt_num(&limits["quota_files"]),
    ))
}
