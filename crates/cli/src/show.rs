//! `provrun show BUNDLE`: the run as a readable timeline — who ran what, each model step
//! with its tokens and time, each tool call with ok/failed and its duration, the files it
//! produced, how it ended — and whether the bundle verifies.

use std::path::PathBuf;

use provrun_evidence::{Event, EventType, read_events};
use serde_json::Value;

use crate::inert::inert;
use crate::style::Painter;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// Arguments of `provrun show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The bundle: a folder, a .tar of one (as `batch` uploads), or its URL
    /// (s3://BUCKET/PREFIX/ID.tar, file:///…/ID.tar).
    bundle: PathBuf,
}

pub(crate) fn show(args: &ShowArgs) -> u8 {
    let loaded = match crate::store::load_bundle(&args.bundle) {
        Ok(l) => l,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let bundle = &loaded.path;
    if !bundle.is_dir() {
        return fail(
            EXIT_USAGE,
            format!("no bundle at `{}`", args.bundle.display()),
        );
    }
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
    let paint = Painter::stdout();
    let report = provrun_evidence::verify(bundle);
    for line in timeline(bundle, &events, paint) {
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

/// The lines of the timeline, in log order.
fn timeline(bundle: &std::path::Path, events: &[Event], paint: Painter) -> Vec<String> {
    let mut lines = Vec::new();
    let mut step = 0u32;
    let mut inputs: Vec<String> = Vec::new();
    let mut outputs: Vec<String> = Vec::new();
    let mut paused = false;
    // Tool names are padded to the longest one (at least 16 columns), so the columns
    // after them line up however long an MCP tool's `PREFIX_tool` name is.
    let name_width = events
        .iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| text(&e.payload["name"]).chars().count())
        .max()
        .unwrap_or(0)
        .max(16);
    let flush_inputs = |inputs: &mut Vec<String>, lines: &mut Vec<String>| {
        if !inputs.is_empty() {
            lines.push(format!(
                "{} {}",
                paint.strong("inputs "),
                std::mem::take(inputs).join(", ")
            ));
        }
    };
    for e in events {
        let p = &e.payload;
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
        match e.kind {
            EventType::RunStarted => {
                let tools: Vec<String> = p["tools"]
                    .as_array()
                    .map(|a| a.iter().map(|t| text(&t["name"])).collect())
                    .unwrap_or_default();
                lines.push(format!(
                    "{} {} · agent {} · model {} · {}",
                    paint.strong("run    "),
                    inert(&e.run_id),
                    text(&p["agent"]),
                    text(&p["model"]),
                    inert(&e.ts.to_string())
                ));
                lines.push(format!(
                    "{} {}",
                    paint.strong("tools  "),
                    if tools.is_empty() {
                        "none".to_string()
                    } else {
                        tools.join(", ")
                    }
                ));
            }
            EventType::InputStaged => {
                inputs.push(format!("{} ({})", text(&p["path"]), size(num(&p["size"]))));
            }
            EventType::ModelCalled => {
                step += 1;
                let usage = &p["usage"];
                let mut line = format!(
                    "{} {} ms · {} in / {} out tokens",
                    paint.strong(&format!("step {step:<2}")),
                    num(&p["duration_ms"]),
                    num(&usage["input_tokens"]),
                    num(&usage["output_tokens"]),
                );
                if let Some(reason) = p["finish_reason"].as_str() {
                    line.push_str(&format!(" · {}", inert(reason)));
                }
                if let Some(err) = p["error"].as_str() {
                    let err = inert(err);
                    line.push_str(&format!(" · {}", paint.bad(&format!("error: {err}"))));
                }
                lines.push(line);
            }
            EventType::ToolCalled => {
                let state = if p["deferred"] == true {
                    paint.warn("waits ")
                } else if p["ok"] == true {
                    paint.good("ok    ")
                } else {
                    paint.bad("failed")
                };
                let mut flags = Vec::new();
                for flag in ["output_tool", "provider_run"] {
                    if p[flag] == true {
                        flags.push(flag);
                    }
                }
                // The run-unique id (what `resume --approve` takes), and the model's
                // id beside it when it differs; older logs have the model's only.
                let id = match p["run_call_id"].as_str() {
                    Some(run_id) if p["call_id"].as_str() != Some(run_id) => {
                        format!("{} (model id {:?})", inert(run_id), text(&p["call_id"]))
                    }
                    _ => text(&p["call_id"]),
                };
                let mut line = format!(
                    "  {state} {:<name_width$} {:>5} ms  {}",
                    text(&p["name"]),
                    num(&p["duration_ms"]),
                    paint.dim(&id),
                );
                if !flags.is_empty() {
                    line.push_str(&format!(" [{}]", flags.join(", ")));
                }
                // The tool's label for the call (`Read /input/a.txt`), where it has one.
                if let Some(summary) = p["summary"].as_str() {
                    line.push_str(&format!("  {}", short(&Value::from(summary), 60)));
                }
                if p["deferred"] == true {
                    // The tool's question for a person, where it has one.
                    if let Some(confirm) = p["confirm"].as_str() {
                        line.push_str(&format!("  ({})", short(&Value::from(confirm), 80)));
                    }
                    // Held by a hook in the running process, not paused for a resume.
                    if p["waits_for"] == "permit" {
                        line.push_str(&format!("  {}", paint.warn("[waits for a permit]")));
                    }
                } else {
                    let result = if p["result"].is_null() && !p["result_blob"].is_null() {
                        format!(
                            "({} result in a blob)",
                            size(num(&p["result_blob"]["size"]))
                        )
                    } else {
                        short(&p["result"], 70)
                    };
                    if !result.is_empty() {
                        line.push_str(&format!("  → {result}"));
                    }
                }
                lines.push(line);
                if let Some(summary) = confinement_line(&p["confinement"]) {
                    lines.push(format!("           {}", paint.dim(&summary)));
                }
            }
            EventType::OutputProduced => {
                outputs.push(format!("{} ({})", text(&p["path"]), size(num(&p["size"]))));
            }
            EventType::OutputSkipped => {
                lines.push(format!(
                    "  {} {} ({}: {})",
                    paint.warn("left out"),
                    text(&p["path"]),
                    text(&p["kind"]),
                    text(&p["reason"]),
                ));
            }
            EventType::RunFinished => {
                if !outputs.is_empty() {
                    lines.push(format!(
                        "{} {}",
                        paint.strong("outputs"),
                        std::mem::take(&mut outputs).join(", ")
                    ));
                }
                let status = text(&p["status"]);
                paused = status == "paused";
                let painted = match status.as_str() {
                    "finished" => paint.good(&status),
                    "paused" => paint.warn(&status),
                    _ => paint.bad(&status),
                };
                let usage = &p["usage"];
                let mut line = format!(
                    "{} {painted} · {} model requests · {} tool calls · {} in / {} out tokens · {} events",
                    paint.strong("end    "),
                    num(&usage["requests"]),
                    num(&usage["tool_calls"]),
                    num(&usage["input_tokens"]),
                    num(&usage["output_tokens"]),
                    num(&p["event_count"]),
                );
                if let Some(err) = p["error"].as_str() {
                    line.push_str(&format!(" · {}", inert(err)));
                }
                lines.push(line);
            }
            EventType::Steered => {
                // The caller's message, from its blob (made inert: it is recorded text).
                let said = serde_json::from_value::<provrun_evidence::BlobRef>(p["text"].clone())
                    .ok()
                    .and_then(|b| provrun_evidence::read_blob(bundle, &b).ok())
                    .map_or_else(
                        || "(its text cannot be read)".to_owned(),
                        |bytes| short(&Value::from(String::from_utf8_lossy(&bytes)), 80),
                    );
                lines.push(format!(
                    "  {} before request {}: {said}",
                    paint.warn("steered"),
                    num(&p["before_request"]),
                ));
            }
            EventType::Declared => {
                lines.push(format!(
                    "  {} {} by {}: {}",
                    paint.dim("declared"),
                    text(&p["kind"]),
                    inert(p["source"].as_str().unwrap_or("a tool")),
                    short(&p["data"], 70)
                ));
            }
            _ => {}
        }
    }
    flush_inputs(&mut inputs, &mut lines);
    if !outputs.is_empty() {
        lines.push(format!(
            "{} {}",
            paint.strong("outputs"),
            outputs.join(", ")
        ));
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
