//! One run in a line: [`RunSummary`], what a listing shows of a bundle (agent, model,
//! status, verdict with the failing checks, times, steps, tool calls, tokens, the tools
//! used, and a short text to search), read from its log and its verdict.

use std::path::Path;

use provrun_evidence::{CheckStatus, Event, EventPayload, EventType, VerifyReport};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::data::cut;
use crate::steps::num;

/// The most bytes of a run's search text ([`RunSummary::text`]).
pub const SEARCH_TEXT_LIMIT: usize = 1024;

/// A run as one row of a listing. Every string is bundle text (untrusted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run id of the log (`run_started`).
    #[serde(default)]
    pub run_id: String,
    /// The agent's name, as `run_started` records it.
    #[serde(default)]
    pub agent: String,
    /// The model, as `run_started` records it.
    #[serde(default)]
    pub model: String,
    /// `finished`, `failed`, `cancelled`, `paused`, or `never finished`.
    #[serde(default)]
    pub status: String,
    /// `verifies`, `incomplete` or `fails`: the verdict of `provrun verify`.
    #[serde(default)]
    pub verdict: String,
    /// The codes of the checks that failed, with their detail (`code: detail`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<String>,
    /// When the run started (its first event's time).
    #[serde(default)]
    pub started: String,
    /// When its log ends (its last event's time).
    #[serde(default)]
    pub ended: String,
    /// Milliseconds from the first event to the last.
    #[serde(default)]
    pub duration_ms: u64,
    /// Model requests.
    #[serde(default)]
    pub steps: u64,
    /// Tool calls the run made.
    #[serde(default)]
    pub tool_calls: u64,
    /// Input plus output tokens.
    #[serde(default)]
    pub tokens: u64,
    /// The names of the tools called, each once, in the order first called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The run's error, if it ended with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A short text to search in: the error, tool names and arguments, declared data,
    /// cut to [`SEARCH_TEXT_LIMIT`] bytes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
}

/// The verdict word for a report: `fails`, `incomplete` or `verifies`.
pub fn verdict_word(report: &VerifyReport) -> &'static str {
    if report.failures().next().is_some() {
        "fails"
    } else if !report.complete {
        "incomplete"
    } else {
        "verifies"
    }
}

/// Milliseconds between two RFC 3339 times (0 when either does not parse or they are in
/// the wrong order).
pub(crate) fn millis_between(from: &str, to: &str) -> u64 {
    match (humantime::parse_rfc3339(from), humantime::parse_rfc3339(to)) {
        (Ok(from), Ok(to)) => to
            .duration_since(from)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        _ => 0,
    }
}

/// The summary of a bundle folder: its log read and the bundle verified here.
pub fn summarize(dir: &Path) -> RunSummary {
    // One read of the log serves both the checks and the summary.
    let (report, events) =
        provrun_evidence::verify_with_events(dir, &provrun_evidence::VerifyOptions::default());
    summarize_events(events.as_deref().unwrap_or(&[]), &report)
}

/// The summary of a log already read and its verdict.
pub fn summarize_events(events: &[Event], report: &VerifyReport) -> RunSummary {
    let mut s = RunSummary {
        verdict: verdict_word(report).to_owned(),
        failed_checks: report
            .checks
            .iter()
            .filter(|c| c.status == CheckStatus::Fail)
            .map(|c| format!("{}: {}", c.code.as_str(), c.detail))
            .collect(),
        status: "never finished".to_owned(),
        ..RunSummary::default()
    };
    let (mut input, mut output) = (0, 0);
    let mut usage = Value::Null;
    let mut text = String::new();
    for e in events {
        let Ok(payload) = e.typed() else { continue };
        match payload {
            EventPayload::RunStarted(p) => {
                s.run_id = e.run_id.clone();
                s.agent = p.agent;
                s.model = p.model;
            }
            EventPayload::ModelCalled(p) => {
                s.steps += 1;
                input += num(&p.usage["input_tokens"]);
                output += num(&p.usage["output_tokens"]);
                if let Some(err) = p.error {
                    text.push_str(&err);
                    text.push('\n');
                }
            }
            EventPayload::ToolCalled(p) => {
                if !p.deferred && !p.provider_run {
                    s.tool_calls += 1;
                }
                text.push_str(&p.name);
                text.push(' ');
                text.push_str(&p.arguments.to_string());
                text.push('\n');
                if !s.tools.contains(&p.name) {
                    s.tools.push(p.name);
                }
            }
            EventPayload::Declared(p) => {
                text.push_str(&p.data.to_string());
                text.push('\n');
            }
            EventPayload::RunFinished(p) => {
                s.status = p.status.as_str().to_owned();
                s.error = p.error.clone();
                usage = p.usage;
                if let Some(err) = p.error {
                    text.insert_str(0, &format!("{err}\n"));
                }
            }
            _ => {}
        }
    }
    if events.last().map(|e| e.kind) != Some(EventType::RunFinished) {
        s.status = "never finished".to_owned();
        usage = Value::Null;
    }
    let pick = |key: &str, counted: u64| usage[key].as_u64().unwrap_or(counted);
    s.steps = pick("requests", s.steps);
    s.tool_calls = pick("tool_calls", s.tool_calls);
    s.tokens = pick("input_tokens", input) + pick("output_tokens", output);
    s.started = events.first().map(|e| e.ts.clone()).unwrap_or_default();
    s.ended = events.last().map(|e| e.ts.clone()).unwrap_or_default();
    s.duration_ms = millis_between(&s.started, &s.ended);
    s.text = cut(&text, SEARCH_TEXT_LIMIT).0;
    s
}

#[cfg(test)]
mod tests {
    use super::millis_between;

    #[test]
    fn durations_come_from_recorder_times() {
        assert_eq!(
            millis_between("2026-01-02T03:04:05.100Z", "2026-01-02T03:04:06.678901Z"),
            1578
        );
        assert_eq!(
            millis_between("2026-01-02T03:04:06Z", "2026-01-02T03:04:05Z"),
            0
        );
        assert_eq!(millis_between("nonsense", "2026-01-02T03:04:05Z"), 0);
    }
}
