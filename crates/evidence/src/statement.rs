//! The in-toto Statement v1 (with a SLSA Provenance v1 predicate) written as
//! `statement.json` when a bundle is finished.
//!
//! Everything in it is derived from the event log and the bundle's files, so `verify`
//! rebuilds it and compares bytes.
//!
//! Two formats, chosen by `run_started.statement` (written by [`crate::Recorder::create`],
//! so a bundle says which one its statements follow, under the hash chain):
//! - format 1 (no `statement` member: every bundle written before it existed): the
//!   subjects are the run's output files named by their path under `output/` (none for a
//!   run without outputs: failed, paused and cancelled runs have `"subject": []`), and
//!   `builder.id` is `run_started.builder` as written (`provrun/0.1.0`). Still verified.
//! - format 2 (`"statement": 2`): the subjects are the output files named
//!   `output/PATH` and, always, the event log `events.jsonl`, so every statement has at
//!   least one subject, as in-toto Statement v1 requires; `builder.id` is a URI
//!   ([`builder_uri`]), as SLSA Provenance v1 requires. `verify` fails a format-2 bundle
//!   whose statement has no subject.

use serde_json::{Value, json};

use crate::canonical::to_canonical_string;
use crate::error::Result;
use crate::event::{FileRecord, RunStatus};

/// `_type` of the statement.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// `predicateType` of the statement.
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// `buildDefinition.buildType` of the predicate (a URI, in both formats).
pub const BUILD_TYPE: &str = "https://provrun.invalid/agent-run/v1";
/// The `run_started` payload member that names the statement format.
pub const STATEMENT_FORMAT_KEY: &str = "statement";
/// The statement format new bundles are written with.
pub const STATEMENT_FORMAT: u64 = 2;
/// Where a builder that is not a URI is placed to make `builder.id` one (format 2).
pub const BUILDER_URI_BASE: &str = "https://provrun.invalid/builder/";

/// The statement format a `run_started` payload declares: its `statement` member, 1
/// when it has none (bundles written before format 2).
pub fn format_of(run_started: &Value) -> u64 {
    run_started
        .get(STATEMENT_FORMAT_KEY)
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// `builder.id` of a format-2 statement: `builder` itself when it is already an
/// absolute URI (`scheme://...`), else [`BUILDER_URI_BASE`] followed by `builder` with
/// every byte outside the URI path characters percent-encoded
/// (`provrun/0.1.0` → `https://provrun.invalid/builder/provrun/0.1.0`).
pub fn builder_uri(builder: &str) -> String {
    let is_uri = builder.split_once("://").is_some_and(|(scheme, rest)| {
        !rest.is_empty()
            && scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            && !builder.chars().any(|c| c.is_whitespace() || c.is_control())
    });
    if is_uri {
        return builder.to_string();
    }
    let mut uri = String::from(BUILDER_URI_BASE);
    for b in builder.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/@+:".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// Whether `statement` (the bytes of a `statement.json`) is JSON whose `subject` is
/// missing, not a list, or empty.
pub fn has_no_subject(statement: &[u8]) -> bool {
    serde_json::from_slice::<Value>(statement).is_ok_and(|v| {
        v.get("subject")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    })
}

/// What the statement says, all of it taken from the log.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementFacts {
    /// The statement format (`run_started.statement`; 1 when absent), see the module's
    /// documentation.
    pub format: u64,
    /// The run id (every event's `run_id`).
    pub run_id: String,
    /// `run_started.payload.builder`.
    pub builder: String,
    /// `run_started.payload.agent_spec_digest`.
    pub agent_spec_digest: String,
    /// `ts` of `run_started`.
    pub started_on: String,
    /// `ts` of the last `run_finished`.
    pub finished_on: String,
    /// `status` of the last `run_finished`.
    pub status: RunStatus,
    /// Every `input_staged` payload, sorted by path.
    pub inputs: Vec<FileRecord>,
    /// The `output_produced` payloads since the previous `run_finished`, sorted by path.
    pub outputs: Vec<FileRecord>,
    /// SHA-256 hex of the whole `events.jsonl`.
    pub events_sha256: String,
    /// Number of events (lines) in `events.jsonl`.
    pub event_count: u64,
    /// SHA-256 hex of the last line (the chain's head).
    pub head: String,
}

impl StatementFacts {
    /// The statement as JSON.
    pub fn to_value(&self) -> Value {
        let mut inputs = self.inputs.clone();
        inputs.sort_by(|a, b| a.path.cmp(&b.path));
        let mut outputs = self.outputs.clone();
        outputs.sort_by(|a, b| a.path.cmp(&b.path));
        let v2 = self.format >= 2;
        let mut subject: Vec<Value> = outputs
            .iter()
            .map(|f| {
                let name = if v2 {
                    format!("output/{}", f.path)
                } else {
                    f.path.clone()
                };
                json!({"name": name, "digest": {"sha256": f.sha256}})
            })
            .collect();
        if v2 {
            subject.push(json!({"name": "events.jsonl", "digest": {"sha256": self.events_sha256}}));
        }
        let builder = if v2 {
            builder_uri(&self.builder)
        } else {
            self.builder.clone()
        };
        let deps: Vec<Value> = inputs
            .iter()
            .map(|f| json!({"name": format!("input/{}", f.path), "digest": {"sha256": f.sha256}}))
            .collect();
        json!({
            "_type": STATEMENT_TYPE,
            "subject": subject,
            "predicateType": PREDICATE_TYPE,
            "predicate": {
                "buildDefinition": {
                    "buildType": BUILD_TYPE,
                    "externalParameters": {
                        "agent_spec": {"digest": {"sha256": self.agent_spec_digest}},
                    },
                    "resolvedDependencies": deps,
                },
                "runDetails": {
                    "builder": {"id": builder},
                    "metadata": {
                        "invocationId": self.run_id,
                        "startedOn": self.started_on,
                        "finishedOn": self.finished_on,
                    },
                    "byproducts": [{
                        "name": "events.jsonl",
                        "digest": {"sha256": self.events_sha256},
                        "annotations": {
                            "event_count": self.event_count,
                            "head": self.head,
                            "status": self.status.as_str(),
                        },
                    }],
                },
            },
        })
    }

    /// How many subjects the statement names: the outputs, and in format 2 the log.
    pub fn subject_count(&self) -> usize {
        self.outputs.len() + usize::from(self.format >= 2)
    }

    /// The exact bytes of `statement.json`: canonical JSON followed by one `\n`.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut s = to_canonical_string(&self.to_value())?;
        s.push('\n');
        Ok(s.into_bytes())
    }
}
