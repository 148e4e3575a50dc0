//! The program's own session log, found in its private `HOME` after it exited and
//! imported as the program's account: one `trace_imported` per log file (its bytes
//! verbatim) and one `parsed` `tool_called` per tool call in it, linked to the
//! `model_called` whose response asked for the call.
//!
//! Logs are found by what they hold, not by the program's name (it may have been started
//! through a shell): every `*.jsonl` file under the private `HOME` (no link followed, at
//! most [`MAX_LOG_BYTES`] each) is read, and kept when it is one of the known formats —
//! [`codex`] (the Codex CLI's rollout, under `$CODEX_HOME/sessions`) or [`claude`] (Claude
//! Code's session, under `~/.claude/projects`). Each file is untrusted input: a line that
//! does not parse is skipped and counted, never an error that stops the run's bundle.

use std::path::{Path, PathBuf};

use provrun_capture::record_tool_call;
use provrun_evidence::{ToolCalled, TraceImported};
use serde_json::Value;

use crate::record::{AskedCall, Recording};

pub mod claude;
pub mod codex;

/// The largest session log imported (a longer one is left out, with a warning).
pub const MAX_LOG_BYTES: u64 = 64 << 20;
/// How deep under the private `HOME` logs are looked for.
const MAX_DEPTH: usize = 12;

/// A known session log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Codex CLI's rollout JSONL.
    CodexRollout,
    /// Claude Code's session JSONL.
    ClaudeCode,
}

impl Format {
    /// The `trace_imported.format` it is recorded as.
    pub fn name(self) -> &'static str {
        match self {
            Format::CodexRollout => "codex-rollout/1",
            Format::ClaudeCode => "claude-code-session/1",
        }
    }
}

/// One tool call read from a session log.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedCall {
    /// The call's id on the wire (the model's).
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments (a JSON object, or the text as a JSON string when it is not JSON).
    pub arguments: Value,
    /// What the program gave the model back (`null` when the log holds no result).
    pub result: Value,
    /// Whether the program said the call succeeded (false without a result).
    pub ok: bool,
    /// From the call to its result, by the log's timestamps (0 when unknown).
    pub duration_ms: u64,
}

/// One session log read.
#[derive(Debug, Clone)]
pub struct SessionLog {
    /// Its path relative to the private `HOME`.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// Its bytes, as the program left them.
    pub bytes: Vec<u8>,
    /// Its lines.
    pub lines: u64,
    /// Lines that are not JSON.
    pub unreadable_lines: u64,
    /// The tool calls in it, in order.
    pub calls: Vec<LoggedCall>,
}

/// Every `*.jsonl` file under `home` that holds a known session format, in path order;
/// and a warning for each that could not be read or was too long.
pub fn find(home: &Path) -> (Vec<SessionLog>, Vec<String>) {
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    collect(home, home, 0, &mut files, &mut warnings);
    files.sort();
    let mut logs = Vec::new();
    for rel in files {
        match read(home, &rel) {
            Ok(Some(log)) => logs.push(log),
            Ok(None) => {}
            Err(e) => warnings.push(format!("session log `{}`: {e}", rel.display())),
        }
    }
    (logs, warnings)
}

fn collect(
    home: &Path,
    dir: &Path,
    depth: usize,
    files: &mut Vec<PathBuf>,
    warnings: &mut Vec<String>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && depth < MAX_DEPTH {
            collect(home, &path, depth + 1, files, warnings);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
            let size = entry.metadata().map_or(0, |m| m.len());
            let rel = path.strip_prefix(home).unwrap_or(&path).to_path_buf();
            if size > MAX_LOG_BYTES {
                warnings.push(format!(
                    "session log `{}` is {size} bytes, over {MAX_LOG_BYTES}: not imported",
                    rel.display()
                ));
            } else {
                files.push(rel);
            }
        }
    }
}

/// Reads `home/rel` and keeps it when it holds a known format.
fn read(home: &Path, rel: &Path) -> std::io::Result<Option<SessionLog>> {
    let bytes = read_no_follow(&home.join(rel))?;
    let mut values = Vec::new();
    let mut unreadable = 0u64;
    let mut lines = 0u64;
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        lines += 1;
        match serde_json::from_slice::<Value>(line) {
            Ok(v) => values.push(v),
            Err(_) => unreadable += 1,
        }
    }
    let format = if codex::looks_like(&values) {
        Format::CodexRollout
    } else if claude::looks_like(rel, &values) {
        Format::ClaudeCode
    } else {
        return Ok(None);
    };
    let calls = match format {
        Format::CodexRollout => codex::calls(&values),
        Format::ClaudeCode => claude::calls(&values),
    };
    Ok(Some(SessionLog {
        path: rel.to_path_buf(),
        format,
        bytes,
        lines,
        unreadable_lines: unreadable,
        calls,
    }))
}

fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    let mut bytes = Vec::new();
    f.by_ref().take(MAX_LOG_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_LOG_BYTES {
        return Err(std::io::Error::other("it grew over the size limit"));
    }
    Ok(bytes)
}

/// The run-unique id (`STEP.N`) of the call `call_id`: the N-th call the response to
/// model request STEP asked for, when a recorded response asked for it.
pub fn run_call_id(steps: &[Vec<AskedCall>], call_id: &str) -> Option<String> {
    steps.iter().enumerate().find_map(|(s, calls)| {
        calls
            .iter()
            .position(|c| c.call_id == call_id)
            .map(|n| format!("{}.{}", s + 1, n + 1))
    })
}

/// What an import wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// Session logs imported.
    pub logs: u64,
    /// Tool calls recorded from them.
    pub calls: u64,
    /// Of those, linked to the model exchange that asked for them.
    pub linked: u64,
}

/// Imports every session log under `home` into `recording`'s bundle; returns what it
/// wrote and warnings for the logs it could not read.
///
/// # Errors
///
/// [`CaptureError`](provrun_capture::CaptureError) when a log's blob, its `trace_imported`
/// event or one of its tool calls cannot be recorded (an unreadable log is only a warning).
pub async fn import(
    recording: &Recording,
    home: &Path,
) -> Result<(Imported, Vec<String>), provrun_capture::CaptureError> {
    let (logs, mut warnings) = find(home);
    let steps = recording.steps().await;
    let recorder = recording.capture().recorder();
    let mut done = Imported::default();
    for log in logs {
        if log.unreadable_lines > 0 {
            warnings.push(format!(
                "session log `{}`: {} of {} lines are not JSON and were skipped",
                log.path.display(),
                log.unreadable_lines,
                log.lines
            ));
        }
        let trace = recorder
            .put_blob_for_next_event(&log.bytes, "application/x-ndjson")
            .await?;
        recorder
            .record_async(&TraceImported {
                trace,
                format: log.format.name().to_owned(),
                messages: log.lines,
                source: Some(log.path.display().to_string()),
            })
            .await?;
        done.logs += 1;
        for call in log.calls {
            let run_call_id = run_call_id(&steps, &call.call_id);
            done.linked += u64::from(run_call_id.is_some());
            done.calls += 1;
            let result_missing = call.result.is_null();
            record_tool_call(
                recorder,
                ToolCalled {
                    name: call.name,
                    call_id: call.call_id,
                    run_call_id,
                    arguments: call.arguments,
                    result: if result_missing {
                        Value::String("the session log holds no result for this call".into())
                    } else {
                        call.result
                    },
                    ok: call.ok && !result_missing,
                    duration_ms: call.duration_ms,
                    mode: Some("program".into()),
                    decided_by: Some(if result_missing { "runtime" } else { "tool" }.into()),
                    ..ToolCalled::default()
                },
                true,
            )
            .await?;
        }
    }
    Ok((done, warnings))
}

/// Milliseconds between two RFC 3339 timestamps of a log (0 when either is missing or
/// malformed, or the second comes first).
pub(crate) fn millis_between(from: Option<&str>, to: Option<&str>) -> u64 {
    match (from.and_then(parse_ts), to.and_then(parse_ts)) {
        (Some(a), Some(b)) if b >= a => b - a,
        _ => 0,
    }
}

/// `YYYY-MM-DDTHH:MM:SS(.fff)Z` as milliseconds since the epoch (UTC only).
fn parse_ts(ts: &str) -> Option<u64> {
    let b = ts.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !ts.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<u64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let frac = ts.get(19..ts.len() - 1)?;
    let frac = frac.strip_prefix('.').unwrap_or(frac);
    let ms = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<3}").get(0..3)?.parse::<u64>().ok()?
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, mo) = if mo <= 2 {
        (y.checked_sub(1)?, mo + 12)
    } else {
        (y, mo)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * (mo - 3) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms)
}

/// A tool call's arguments as recorded: the JSON the text holds, or the text itself.
pub(crate) fn arguments_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_read_to_the_millisecond() {
        assert_eq!(parse_ts("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_ts("1970-01-02T00:00:01.5Z"), Some(86_401_500));
        assert_eq!(
            millis_between(
                Some("2026-12-05T09:17:43.266Z"),
                Some("2026-12-05T09:17:43.319Z")
            ),
            53
        );
        assert_eq!(
            millis_between(Some("garbage"), Some("2026-12-05T09:17:43Z")),
            0
        );
        assert_eq!(parse_ts("2000-03-01T00:00:00Z"), Some(951_868_800_000));
        for bad in [
            "0000-01-01T00:00:00Z",
            "2026-00-05T09:17:43Z",
            "2026-12-05T09:17:4\u{e9}Z",
            "2026-12-05T09:17:43.xZ",
        ] {
            assert_eq!(parse_ts(bad), None, "{bad}");
        }
    }

    #[test]
    fn calls_are_linked_to_the_response_that_asked_for_them() {
        let ask = |ids: &[&str]| {
            ids.iter()
                .map(|i| AskedCall {
                    call_id: i.to_string(),
                    name: "t".into(),
                })
                .collect::<Vec<_>>()
        };
        let steps = vec![ask(&[]), ask(&["a", "b"]), ask(&["c"])];
        assert_eq!(run_call_id(&steps, "b").as_deref(), Some("2.2"));
        assert_eq!(run_call_id(&steps, "c").as_deref(), Some("3.1"));
        assert_eq!(run_call_id(&steps, "zz"), None);
    }
}
