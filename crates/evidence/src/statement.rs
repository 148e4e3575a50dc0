//! The in-toto Statement v1 (with a SLSA Provenance v1 predicate) written as
//! `statement.json` when a bundle is finished.
//!
//! Everything in it is derived from the event log and the bundle's files, so `verify`
//! rebuilds it and compares bytes.
//!
//! Three formats, chosen by `run_started.statement` (written by [`crate::Recorder::create`],
//! so a bundle says which one its statements follow, under the hash chain):
//! - format 1 (no `statement` member: every bundle written before it existed): the
//!   subjects are the run's output files named by their path under `output/` (none for a
//!   run without outputs: failed, paused and cancelled runs have `"subject": []`), and
//!   `builder.id` is `run_started.builder` as written (`provrun/0.1.0`). Still verified.
//! - format 2 (`"statement": 2`): the subjects are the output files named
//!   `output/PATH` and, always, the event log `events.jsonl`, so every statement has at
//!   least one subject, as in-toto Statement v1 requires; `builder.id` is a URI under
//!   [`LEGACY_BUILDER_URI_BASE`], as SLSA Provenance v1 requires. `verify` fails a
//!   format-2 (or later) bundle whose statement has no subject. Still verified.
//! - format 3 (`"statement": 3`, written since the project named real URIs): as format 2,
//!   with the project's own `buildType` ([`BUILD_TYPE`]) and builder URIs
//!   ([`BUILDER_URI_BASE`], [`builder_uri`]).
//!
//! Formats 1 and 2 name [`LEGACY_BUILD_TYPE`], a placeholder under `.invalid`: their
//! statements are rebuilt byte for byte as they were written, so they keep verifying.

use serde_json::{Value, json};

use crate::canonical::to_canonical_string;
use crate::error::Result;
use crate::event::{FileRecord, RunStatus};

/// `_type` of the statement.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// `predicateType` of the statement.
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// The project's home, under which its build type and builder ids are named (the
/// workspace's `repository`).
pub const PROJECT_URI: &str = "https://github.com/provrun/provrun";
/// `buildDefinition.buildType` of a format-3 predicate: the page that describes what the
/// build type's fields mean (docs/evidence.md, "Build type agent-run/v1").
pub const BUILD_TYPE: &str =
    "https://github.com/provrun/provrun/blob/main/docs/evidence.md#build-type-agent-run-v1";
/// `buildDefinition.buildType` of formats 1 and 2 (a placeholder URI, kept so that their
/// statements are rebuilt as written).
pub const LEGACY_BUILD_TYPE: &str = "https://provrun.invalid/agent-run/v1";
/// The `run_started` payload member that names the statement format.
pub const STATEMENT_FORMAT_KEY: &str = "statement";
/// The statement format new bundles are written with.
pub const STATEMENT_FORMAT: u64 = 3;
/// Where a builder that is not a URI is placed to make `builder.id` one (format 3).
pub const BUILDER_URI_BASE: &str = "https://github.com/provrun/provrun/builder/";
/// [`BUILDER_URI_BASE`] of format 2 (a placeholder, kept so its statements are rebuilt as
/// written).
pub const LEGACY_BUILDER_URI_BASE: &str = "https://provrun.invalid/builder/";

/// The statement format a `run_started` payload declares: its `statement` member, 1
/// when it has none (bundles written before format 2).
pub(crate) fn format_of(run_started: &Value) -> u64 {
    run_started
        .get(STATEMENT_FORMAT_KEY)
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// Whether `text` is an absolute URI as a builder id may be given: `scheme://rest`, the
/// scheme a letter then letters, digits, `+`, `-` or `.`, no whitespace or control
/// characters anywhere.
pub fn is_absolute_uri(text: &str) -> bool {
    text.split_once("://").is_some_and(|(scheme, rest)| {
        !rest.is_empty()
            && scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            && !text.chars().any(|c| c.is_whitespace() || c.is_control())
    })
}

/// `builder.id` of a format-3 statement: `builder` itself when it is already an
/// absolute URI ([`is_absolute_uri`]), else [`BUILDER_URI_BASE`] followed by `builder`
/// with every byte outside the URI path characters percent-encoded
/// (`provrun/0.1.0` → `https://github.com/provrun/provrun/builder/provrun/0.1.0`).
pub fn builder_uri(builder: &str) -> String {
    builder_uri_under(BUILDER_URI_BASE, builder)
}

/// `builder.id` of a statement of `format`: `builder` as written in format 1, a URI
/// under [`LEGACY_BUILDER_URI_BASE`] in format 2, [`builder_uri`] from format 3 on.
pub fn builder_id(format: u64, builder: &str) -> String {
    match format {
        0 | 1 => builder.to_string(),
        2 => builder_uri_under(LEGACY_BUILDER_URI_BASE, builder),
        _ => builder_uri(builder),
    }
}

/// `buildDefinition.buildType` of a statement of `format`.
pub fn build_type(format: u64) -> &'static str {
    if format >= 3 {
        BUILD_TYPE
    } else {
        LEGACY_BUILD_TYPE
    }
}

fn builder_uri_under(base: &str, builder: &str) -> String {
    if is_absolute_uri(builder) {
        return builder.to_string();
    }
    let mut uri = String::from(base);
    for b in builder.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/@+:".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// The environment variable an organisation sets to name its own builder: an absolute URI
/// that new bundles record as `run_started.builder`, and so as the statement's
/// `builder.id`, instead of the runtime's name (`provrun/VERSION`). Every command that
/// starts a run honours it, through [`builder_id_from_env`].
pub const BUILDER_ID_ENV: &str = "PROVRUN_BUILDER_ID";

/// The builder id [`BUILDER_ID_ENV`] configures: `None` when it is unset or empty, the
/// URI when it is an absolute URI ([`is_absolute_uri`]), else
/// [`crate::EvidenceError::BuilderId`].
///
/// # Errors
///
/// [`crate::EvidenceError::BuilderId`] when the variable is set to something that is not an
/// absolute URI (or not UTF-8).
pub fn builder_id_from_env() -> Result<Option<String>> {
    match std::env::var_os(BUILDER_ID_ENV) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => {
            let text = v.to_string_lossy().into_owned();
            if is_absolute_uri(&text) && v.to_str().is_some() {
                Ok(Some(text))
            } else {
                Err(crate::EvidenceError::BuilderId(text))
            }
        }
    }
}

/// Whether `statement` (the bytes of a `statement.json`) is JSON whose `subject` is
/// missing, not a list, or empty.
pub(crate) fn has_no_subject(statement: &[u8]) -> bool {
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
        let builder = builder_id(self.format, &self.builder);
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
                    "buildType": build_type(self.format),
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
    ///
    /// # Errors
    ///
    /// [`crate::EvidenceError::Canonical`] when a value cannot be written as canonical JSON
    /// (a number that is not finite).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut s = to_canonical_string(&self.to_value())?;
        s.push('\n');
        Ok(s.into_bytes())
    }
}
