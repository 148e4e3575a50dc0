//! The program's own session log, found in its private `HOME` after it exited and
//! imported as the program's account: one `trace_imported` per log file (its bytes
//! verbatim) and one `parsed` `tool_called` per tool call in it, linked to the
//! `model_called` whose response asked for the call.
//!
//! Logs are found by what they hold, not by the program's name (it may have been started
//! through a shell): every `*.jsonl` file under the private `HOME` (no link followed, at
//! most [`MAX_LOG_BYTES`] each, [`MAX_LOGS`] files and [`MAX_TOTAL_LOG_BYTES`] in all) is
//! read, and kept when it is one of the known formats — [`codex`] (the Codex CLI's
//! rollout, under `$CODEX_HOME/sessions`) or [`claude`] (Claude Code's session, under
//! `~/.claude/projects`). Each file is untrusted input: a line that does not parse, or
//! nests deeper than [`lines::MAX_JSON_DEPTH`], is skipped and counted, never an error
//! that stops the run's bundle.
//!
//! The import streams: each log is read one line at a time into raw JSON text
//! ([`lines`]), never built as JSON values whole, and each call is read into a value only
//! when it is recorded, one at a time; at most [`MAX_IMPORTED_CALLS`] calls are imported
//! in a run. What is left out is said by an [`ImportWarning`]. The memory an import takes
//! stays within a small multiple of the largest log.

use std::path::{Path, PathBuf};

use provrun_capture::record_tool_call;
use provrun_evidence::{ToolCalled, TraceImported};
use serde_json::Value;

use crate::record::{AskedCall, Recording};

pub mod claude;
pub mod codex;
pub mod lines;

/// The largest session log imported (a longer one is left out, with a warning).
pub const MAX_LOG_BYTES: u64 = 64 << 20;
/// The most session log files read in a run (in path order; the rest are left out, with
/// a warning).
pub const MAX_LOGS: usize = 64;
/// The most bytes of session logs read in a run, all files together.
pub const MAX_TOTAL_LOG_BYTES: u64 = 256 << 20;
/// The most tool calls imported in a run, all logs together (the rest are counted and
/// left out, with a warning).
pub const MAX_IMPORTED_CALLS: usize = 20_000;

/// Something an import left out or could not read, for the run's warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportWarning {
    /// A log over [`MAX_LOG_BYTES`], not imported.
    TooLarge {
        /// Its path under the private `HOME`.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// Logs beyond [`MAX_LOGS`] or [`MAX_TOTAL_LOG_BYTES`], not read.
    TooManyLogs {
        /// How many were left out.
        left_out: usize,
    },
    /// A log that could not be read.
    Unreadable {
        /// Its path under the private `HOME`.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// Lines of an imported log that are not JSON, skipped.
    UnreadableLines {
        /// Its path under the private `HOME`.
        path: PathBuf,
        /// How many.
        unreadable: u64,
        /// Of how many lines.
        lines: u64,
    },
    /// Lines of an imported log nested deeper than [`lines::MAX_JSON_DEPTH`], skipped.
    TooDeep {
        /// Its path under the private `HOME`.
        path: PathBuf,
        /// How many.
        lines: u64,
    },
    /// Calls beyond [`MAX_IMPORTED_CALLS`], not imported.
    TooManyCalls {
        /// How many were left out.
        left_out: u64,
    },
    /// Calls whose arguments or result were over [`lines::MAX_VALUE_BYTES`], recorded as
    /// their JSON text (a string) rather than as a JSON value.
    LargeValues {
        /// Its path under the private `HOME`.
        path: PathBuf,
        /// How many calls.
        calls: u64,
    },
}

impl std::fmt::Display for ImportWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportWarning::TooLarge { path, size } => write!(
                f,
                "session log `{}` is {size} bytes, over {MAX_LOG_BYTES}: not imported",
                path.display()
            ),
            ImportWarning::TooManyLogs { left_out } => write!(
                f,
                "{left_out} session log file(s) beyond {MAX_LOGS} files or {MAX_TOTAL_LOG_BYTES} \
                 bytes in all: not read"
            ),
            ImportWarning::Unreadable { path, error } => {
                write!(f, "session log `{}`: {error}", path.display())
            }
            ImportWarning::UnreadableLines {
                path,
                unreadable,
                lines,
            } => write!(
                f,
                "session log `{}`: {unreadable} of {lines} lines are not JSON and were skipped",
                path.display()
            ),
            ImportWarning::TooDeep { path, lines } => write!(
                f,
                "session log `{}`: {lines} line(s) nested deeper than {} levels were skipped",
                path.display(),
                lines::MAX_JSON_DEPTH
            ),
            ImportWarning::TooManyCalls { left_out } => write!(
                f,
                "{left_out} tool call(s) beyond {MAX_IMPORTED_CALLS} in the session logs were \
                 not imported"
            ),
            ImportWarning::LargeValues { path, calls } => write!(
                f,
                "session log `{}`: {calls} call(s) with arguments or a result over {} bytes are \
                 recorded with them as JSON text",
                path.display(),
                lines::MAX_VALUE_BYTES
            ),
        }
    }
}
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
    let (files, mut warnings) = candidates(home);
    let mut logs = Vec::new();
    let mut room = MAX_IMPORTED_CALLS;
    for rel in files {
        match read(home, &rel, room) {
            Ok(Some(log)) => {
                room = room.saturating_sub(log.calls.len());
                let (log, log_warnings) = log.into_session_log();
                warnings.extend(log_warnings);
                logs.push(log);
            }
            Ok(None) => {}
            Err(e) => warnings.push(ImportWarning::Unreadable {
                path: rel,
                error: e.to_string(),
            }),
        }
    }
    (logs, warnings.iter().map(ToString::to_string).collect())
}

/// The `*.jsonl` files under `home` to read, in path order, within [`MAX_LOGS`] and
/// [`MAX_TOTAL_LOG_BYTES`]; and warnings for those left out.
fn candidates(home: &Path) -> (Vec<PathBuf>, Vec<ImportWarning>) {
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    collect(home, home, 0, &mut files, &mut warnings);
    files.sort();
    let mut total = 0u64;
    let mut kept = Vec::new();
    let mut left_out = 0usize;
    for (rel, size) in files {
        if kept.len() >= MAX_LOGS || total + size > MAX_TOTAL_LOG_BYTES {
            left_out += 1;
            continue;
        }
        total += size;
        kept.push(rel);
    }
    if left_out > 0 {
        warnings.push(ImportWarning::TooManyLogs { left_out });
    }
    (kept, warnings)
}

fn collect(
    home: &Path,
    dir: &Path,
    depth: usize,
    files: &mut Vec<(PathBuf, u64)>,
    warnings: &mut Vec<ImportWarning>,
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
                warnings.push(ImportWarning::TooLarge { path: rel, size });
            } else {
                files.push((rel, size));
            }
        }
    }
}

/// One log read, its calls still raw.
struct RawLog {
    path: PathBuf,
    format: Format,
    bytes: Vec<u8>,
    lines: u64,
    unreadable: u64,
    too_deep: u64,
    calls: Vec<lines::RawCall>,
    left_out: u64,
}

impl RawLog {
    /// Its warnings (lines skipped; calls over the bound are said once per import).
    fn warnings(&self) -> Vec<ImportWarning> {
        let mut w = Vec::new();
        if self.unreadable > 0 {
            w.push(ImportWarning::UnreadableLines {
                path: self.path.clone(),
                unreadable: self.unreadable,
                lines: self.lines,
            });
        }
        if self.too_deep > 0 {
            w.push(ImportWarning::TooDeep {
                path: self.path.clone(),
                lines: self.too_deep,
            });
        }
        w
    }

    fn into_session_log(self) -> (SessionLog, Vec<ImportWarning>) {
        let mut warnings = self.warnings();
        let mut large = 0u64;
        let calls = self
            .calls
            .into_iter()
            .map(|c| {
                let (call, big) = c.into_logged();
                large += u64::from(big);
                call
            })
            .collect();
        if large > 0 {
            warnings.push(ImportWarning::LargeValues {
                path: self.path.clone(),
                calls: large,
            });
        }
        let log = SessionLog {
            path: self.path,
            format: self.format,
            bytes: self.bytes,
            lines: self.lines,
            unreadable_lines: self.unreadable + self.too_deep,
            calls,
        };
        (log, warnings)
    }
}

/// Reads `home/rel` one line at a time and keeps it when it holds a known format, with at
/// most `room` of its calls.
fn read(home: &Path, rel: &Path, room: usize) -> std::io::Result<Option<RawLog>> {
    let bytes = read_no_follow(&home.join(rel))?;
    let each_line = || bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    // First pass: the format, and what could not be read.
    let (mut codex, mut claude) = (codex::Detect::default(), claude::Detect::default());
    let (mut lines, mut unreadable, mut too_deep) = (0u64, 0u64, 0u64);
    for line in each_line() {
        lines += 1;
        let read = lines::read(line);
        match read {
            lines::Read::Unreadable => unreadable += 1,
            lines::Read::TooDeep => too_deep += 1,
            _ => {}
        }
        codex.line(&read);
        claude.line(&read);
    }
    let format = if codex.matches() {
        Format::CodexRollout
    } else if claude.matches() {
        Format::ClaudeCode
    } else {
        return Ok(None);
    };
    // Second pass: its calls.
    let (calls, left_out) = match format {
        Format::CodexRollout => {
            let mut c = codex::Collector::new(room);
            for line in each_line() {
                if let lines::Read::Object(l) = lines::read(line) {
                    c.line(&l);
                }
            }
            (c.calls, c.left_out)
        }
        Format::ClaudeCode => {
            let mut c = claude::Collector::new(room);
            for line in each_line() {
                if let lines::Read::Object(l) = lines::read(line) {
                    c.line(&l);
                }
            }
            (c.calls, c.left_out)
        }
    };
    Ok(Some(RawLog {
        path: rel.to_path_buf(),
        format,
        bytes,
        lines,
        unreadable,
        too_deep,
        calls,
        left_out,
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
/// wrote and warnings for what it left out or could not read.
///
/// # Errors
///
/// [`CaptureError`](provrun_capture::CaptureError) when a log's blob, its `trace_imported`
/// event or one of its tool calls cannot be recorded (an unreadable log is only a warning).
pub async fn import(
    recording: &Recording,
    home: &Path,
) -> Result<(Imported, Vec<String>), provrun_capture::CaptureError> {
    let (done, warnings) = import_typed(recording, home).await?;
    Ok((done, warnings.iter().map(ToString::to_string).collect()))
}

/// [`import`], with its warnings typed. One log is read and recorded at a time, and each
/// call read into a JSON value only as it is recorded.
///
/// # Errors
///
/// As [`import`].
pub async fn import_typed(
    recording: &Recording,
    home: &Path,
) -> Result<(Imported, Vec<ImportWarning>), provrun_capture::CaptureError> {
    let (files, mut warnings) = candidates(home);
    let steps = recording.steps().await;
    let recorder = recording.capture().recorder();
    let mut done = Imported::default();
    let mut room = MAX_IMPORTED_CALLS;
    let mut left_out = 0u64;
    for rel in files {
        let log = match read(home, &rel, room) {
            Ok(Some(log)) => log,
            Ok(None) => continue,
            Err(e) => {
                warnings.push(ImportWarning::Unreadable {
                    path: rel,
                    error: e.to_string(),
                });
                continue;
            }
        };
        warnings.extend(log.warnings());
        room = room.saturating_sub(log.calls.len());
        left_out += log.left_out;
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
        let mut large = 0u64;
        for raw in log.calls {
            let (call, big) = raw.into_logged();
            large += u64::from(big);
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
        if large > 0 {
            warnings.push(ImportWarning::LargeValues {
                path: log.path,
                calls: large,
            });
        }
    }
    if left_out > 0 {
        warnings.push(ImportWarning::TooManyCalls { left_out });
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
