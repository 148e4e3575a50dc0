//! What `verify` reads of `redactions.jsonl` before any check runs (the removed strings,
//! blobs and files the other checks excuse), and how it reports each record.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::event::FileRecord;
use crate::log::Substitutions;
use crate::redaction::{Removed, Round, read_redactions, substitutions_of};

/// One redaction record as `verify` read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedactionReport {
    /// The record.
    pub record: crate::redaction::Redaction,
    /// Its signature.
    pub signature: SignatureStatus,
}

/// Whether a redaction record's signature was checked, and how it went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignatureStatus {
    /// Signed by the key the record names, and the signature verifies.
    Verified,
    /// Not signed.
    Unsigned,
    /// Signed, but not checked (a verifier built without the `dsse` feature).
    NotChecked,
    /// A signature that does not verify, or a record and envelope that disagree.
    Invalid,
}

/// `redactions.jsonl` as read.
#[derive(Default)]
pub(super) struct RedactionsRead {
    /// The file is there.
    pub present: bool,
    /// Its records, when they read.
    pub rounds: Vec<Round>,
    /// Why they do not.
    pub error: Option<String>,
    /// The digests of removed strings, by line.
    pub substitutions: Substitutions,
    /// Removed blobs: digest → size.
    pub blobs: BTreeMap<String, u64>,
    /// Removed files: `input/…` or `output/…` → (digest, size).
    pub files: BTreeMap<String, (String, u64)>,
}

impl RedactionsRead {
    /// Read `redactions.jsonl` of the bundle at `root`, if `present`.
    pub(super) fn read(root: &Path, present: bool) -> RedactionsRead {
        if !present {
            return RedactionsRead::default();
        }
        let mut r = RedactionsRead {
            present: true,
            ..RedactionsRead::default()
        };
        match read_redactions(root) {
            Err(e) => r.error = Some(e),
            Ok(rounds) => {
                r.substitutions = substitutions_of(&rounds);
                for item in rounds.iter().flat_map(|r| &r.record.removed) {
                    match item {
                        Removed::Blob { sha256, size, .. } => {
                            r.blobs.insert(sha256.clone(), *size);
                        }
                        Removed::File {
                            path, sha256, size, ..
                        } => {
                            r.files.insert(path.clone(), (sha256.clone(), *size));
                        }
                        Removed::Text { .. } => {}
                    }
                }
                r.rounds = rounds;
            }
        }
        r
    }

    /// The original log's digest, when strings were removed from it (the file differs).
    pub(super) fn original_log_sha256(&self) -> Option<String> {
        (!self.substitutions.is_empty())
            .then(|| self.rounds.first().map(|r| r.record.log.sha256.clone()))
            .flatten()
    }

    /// Whether the file `top/rel` was removed as recorded by `rec`.
    pub(super) fn file_removed(&self, top: &str, rec: &FileRecord) -> bool {
        self.files
            .get(&format!("{top}/{}", rec.path))
            .is_some_and(|(sha, size)| *sha == rec.sha256 && *size == rec.size)
    }

    /// The reports of each record for `VerifyReport::redactions`.
    pub(super) fn reports(&self, statuses: &[SignatureStatus]) -> Vec<RedactionReport> {
        self.rounds
            .iter()
            .zip(statuses)
            .map(|(r, s)| RedactionReport {
                record: r.record.clone(),
                signature: *s,
            })
            .collect()
    }
}
