//! The in-toto Statement v1 (with a SLSA Provenance v1 predicate) written as
//! `statement.json` when a bundle is finished.
//!
//! Everything in it is derived from the event log and the bundle's files, so `verify`
//! rebuilds it and compares bytes.

use serde_json::{Value, json};

use crate::canonical::to_canonical_string;
use crate::error::Result;
use crate::event::{FileRecord, RunStatus};

/// `_type` of the statement.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// `predicateType` of the statement.
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// `buildDefinition.buildType` of the predicate.
pub const BUILD_TYPE: &str = "https://provrun.invalid/agent-run/v1";

/// What the statement says, all of it taken from the log.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementFacts {
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
        let subject: Vec<Value> = outputs
            .iter()
            .map(|f| json!({"name": f.path, "digest": {"sha256": f.sha256}}))
            .collect();
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
                    "builder": {"id": self.builder},
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

    /// The exact bytes of `statement.json`: canonical JSON followed by one `\n`.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut s = to_canonical_string(&self.to_value())?;
        s.push('\n');
        Ok(s.into_bytes())
    }
}
