//! Redaction: a bundle derived from another with chosen content removed (a string of the
//! log, a blob, an input or output file), which still verifies, and the record of what
//! was removed, `redactions.jsonl` (docs/evidence.md §8).
//!
//! The record is one line per redaction (a bundle redacted again gets a second line):
//! the canonical JSON of a DSSE envelope (`payloadType`
//! [`REDACTION_PAYLOAD_TYPE`]) whose payload is the canonical JSON of a [`Redaction`],
//! signed by the redacting party's key or with no signatures. This module reads and
//! checks the record's form ([`read_redactions`]), gives readers the digests of removed
//! strings (`substitutions`), and says which places cannot be redacted ([`protected`]);
//! [`redact`] makes a redacted bundle and `verify` judges one.

mod forms;
mod plan;
mod redact;

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::to_canonical_string;
use crate::dsse::pae;
use crate::event::{BlobRef, Digest};
use crate::fsutil::sha256_hex;
use crate::log::Substitutions;

pub(crate) use plan::ref_places;
pub use redact::{RecordSigner, RedactOutcome, RedactRequest, Selector, redact};

/// The record of a bundle's redactions.
pub const REDACTIONS_FILE: &str = "redactions.jsonl";
/// What a removed string of the log is replaced by.
pub const PLACEHOLDER: &str = "[redacted]";
/// `_type` of a redaction record.
pub const REDACTION_TYPE: &str =
    "https://github.com/provrun/provrun/blob/main/docs/evidence.md#redaction-v1";
/// DSSE `payloadType` of a redaction record.
pub const REDACTION_PAYLOAD_TYPE: &str = "application/vnd.provrun.redaction+json";
/// The largest `redactions.jsonl` read.
const MAX_RECORD_BYTES: u64 = 64 * 1024 * 1024;

/// One redaction: what was removed from a bundle, why, when, and by whom (when signed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redaction {
    /// [`REDACTION_TYPE`].
    #[serde(rename = "_type")]
    pub record_type: String,
    /// The run's id.
    pub run_id: String,
    /// The SHA-256 of `statement.json`, which a redaction leaves as it is.
    pub statement: Digest,
    /// The log as the statement pins it.
    pub log: LogFacts,
    /// The hex SHA-256 of the previous line of `redactions.jsonl` (without its `\n`), or
    /// `null` for the first redaction.
    pub previous: Option<String>,
    /// Why the content was removed, as the redacting party wrote it.
    pub reason: String,
    /// When (RFC 3339, UTC).
    pub redacted_on: String,
    /// The key that signed this record (its envelope's signature), or `null`: unsigned.
    pub signer: Option<Signer>,
    /// What was removed, in the log's order, then blobs, then files.
    pub removed: Vec<Removed>,
}

/// The log a redaction record is about: as the statement pins it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogFacts {
    /// The SHA-256 of the original `events.jsonl` (as the statement names it; once a
    /// string is removed, the file's own digest differs).
    pub sha256: String,
    /// How many lines the log has.
    pub event_count: u64,
    /// The chain head.
    pub head: String,
}

/// Who signed a redaction record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signer {
    /// The key's id, as the envelope's signature names it.
    pub key_id: String,
    /// The public key (SPKI PEM), to check the signature with.
    pub public_key: String,
}

/// Where a blob was named: the line and the JSON Pointer of its blob ref.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Place {
    /// The line's `seq`.
    pub seq: u64,
    /// RFC 6901 pointer from the line's root, e.g. `/payload/response`.
    pub pointer: String,
}

/// One removed piece.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Removed {
    /// A string of the log, now [`PLACEHOLDER`].
    Text {
        /// The line's `seq`.
        seq: u64,
        /// Where in the line (RFC 6901, from the line's root).
        pointer: String,
        /// The hex SHA-256 of the removed string's UTF-8 bytes.
        sha256: String,
    },
    /// A blob, gone from the blob store.
    Blob {
        /// Its hex SHA-256.
        sha256: String,
        /// Its length.
        size: u64,
        /// Its media type, as its refs give it.
        media_type: String,
        /// Every blob ref that names it.
        events: Vec<Place>,
    },
    /// An input or output file, gone from `input/` or `output/`.
    File {
        /// `input/<path>` or `output/<path>`.
        path: String,
        /// Its hex SHA-256.
        sha256: String,
        /// Its length.
        size: u64,
        /// The `input_staged` or `output_produced` line that records it.
        seq: u64,
    },
}

/// One line of `redactions.jsonl`, read and checked for form.
#[derive(Debug, Clone)]
pub struct Round {
    /// The record.
    pub record: Redaction,
    /// The hex SHA-256 of the line (without `\n`): what the next record's `previous` is.
    pub line_sha256: String,
    /// What a signature signs: `PAE(payloadType, payload)`.
    pub message: Vec<u8>,
    /// The envelope's signatures: key id and signature bytes.
    pub signatures: Vec<(String, Vec<u8>)>,
}

/// Read `redactions.jsonl` of `bundle`: `Ok(vec![])` when there is none; an error saying
/// what is wrong with its form (each line canonical JSON of an envelope with exactly
/// `payload`, `payloadType`, `signatures`; a payload that is the canonical JSON of a
/// [`Redaction`]). Signatures are not checked here.
///
/// # Errors
///
/// A message saying what is wrong when `redactions.jsonl` cannot be opened or read, or a
/// line is not of the form above.
pub fn read_redactions(bundle: &Path) -> Result<Vec<Round>, String> {
    let path = bundle.join(REDACTIONS_FILE);
    let bytes = match crate::fsutil::open_regular(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot open {REDACTIONS_FILE}: {e}")),
        Ok(f) => {
            use std::io::Read as _;
            let mut b = Vec::new();
            f.take(MAX_RECORD_BYTES + 1)
                .read_to_end(&mut b)
                .map_err(|e| format!("cannot read {REDACTIONS_FILE}: {e}"))?;
            if b.len() as u64 > MAX_RECORD_BYTES {
                return Err(format!("{REDACTIONS_FILE} is larger than 64 MiB"));
            }
            b
        }
    };
    let text =
        std::str::from_utf8(&bytes).map_err(|_| format!("{REDACTIONS_FILE} is not UTF-8"))?;
    if !text.ends_with('\n') {
        return Err(format!("{REDACTIONS_FILE} does not end with a newline"));
    }
    text.split_terminator('\n')
        .enumerate()
        .map(|(i, line)| {
            read_round(line).map_err(|e| format!("{REDACTIONS_FILE} line {}: {e}", i + 1))
        })
        .collect()
}

fn read_round(line: &str) -> Result<Round, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    if to_canonical_string(&v).map_err(|e| e.to_string())? != line {
        return Err("not canonical JSON".into());
    }
    let obj = v.as_object().ok_or("not an object")?;
    if obj.len() != 3
        || !["payload", "payloadType", "signatures"]
            .iter()
            .all(|k| obj.contains_key(*k))
    {
        return Err("members are not exactly payload, payloadType, signatures".into());
    }
    if obj["payloadType"] != REDACTION_PAYLOAD_TYPE {
        return Err(format!("payloadType is not {REDACTION_PAYLOAD_TYPE}"));
    }
    let payload = obj["payload"]
        .as_str()
        .and_then(|p| B64.decode(p).ok())
        .ok_or("payload is not base64")?;
    let payload_text = std::str::from_utf8(&payload).map_err(|_| "payload is not UTF-8")?;
    let pv: Value =
        serde_json::from_str(payload_text).map_err(|e| format!("payload is not JSON: {e}"))?;
    if to_canonical_string(&pv).map_err(|e| e.to_string())? != payload_text {
        return Err("payload is not canonical JSON".into());
    }
    let record: Redaction = serde_json::from_value(pv)
        .map_err(|e| format!("payload is not a redaction record: {e}"))?;
    if record.record_type != REDACTION_TYPE {
        return Err(format!("_type is not {REDACTION_TYPE}"));
    }
    let mut signatures = Vec::new();
    for (i, s) in obj["signatures"]
        .as_array()
        .ok_or("signatures is not a list")?
        .iter()
        .enumerate()
    {
        let ok = s.as_object().is_some_and(|m| m.len() == 2);
        match (
            ok,
            s["keyid"].as_str(),
            s["sig"].as_str().and_then(|t| B64.decode(t).ok()),
        ) {
            (true, Some(k), Some(sig)) => signatures.push((k.to_owned(), sig)),
            _ => {
                return Err(format!(
                    "signature {i} is not {{\"keyid\": text, \"sig\": base64}}"
                ));
            }
        }
    }
    Ok(Round {
        record,
        line_sha256: sha256_hex(line.as_bytes()),
        message: pae(REDACTION_PAYLOAD_TYPE, &payload),
        signatures,
    })
}

/// The digests of the strings `rounds` removed, by line (what the chain of a redacted
/// log is checked with).
pub(crate) fn substitutions_of(rounds: &[Round]) -> Substitutions {
    let mut out = Substitutions::new();
    for r in rounds {
        for item in &r.record.removed {
            if let Removed::Text {
                seq,
                pointer,
                sha256,
            } = item
            {
                out.entry(*seq)
                    .or_default()
                    .insert(pointer.clone(), sha256.clone());
            }
        }
    }
    out
}

/// The digests of the strings removed from the bundle's log, as its `redactions.jsonl`
/// records them (empty when it has none): what readers of a redacted log chain with.
pub(crate) fn substitutions(bundle: &Path) -> Result<Substitutions, String> {
    read_redactions(bundle).map(|r| substitutions_of(&r))
}

/// The chain inputs of the bundle at `root`: its redaction records' digests and its
/// salts. An error says what of them cannot be read.
pub(crate) fn chain_inputs(root: &Path) -> Result<crate::log::ChainInputs, String> {
    Ok(crate::log::ChainInputs {
        subst: substitutions(root)?,
        salts: crate::salt::Salts::read(root)?,
    })
}

/// The tokens of an RFC 6901 pointer (`~1` → `/`, `~0` → `~`); `None` unless it starts
/// with `/`.
pub(crate) fn pointer_tokens(pointer: &str) -> Option<Vec<String>> {
    let rest = pointer.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// Whether a string removed at `pointer` of `payload` is the placeholder (for `verify`).
pub(crate) fn holds_placeholder(payload: &Value, pointer: &str) -> bool {
    at_pointer(payload, pointer).and_then(Value::as_str) == Some(PLACEHOLDER)
}

/// The value at `pointer` (from a line's root) in a line whose payload is `payload`.
pub(crate) fn at_pointer<'a>(payload: &'a Value, pointer: &str) -> Option<&'a Value> {
    let tokens = pointer_tokens(pointer)?;
    let (first, rest) = tokens.split_first()?;
    if first != "payload" {
        return None;
    }
    rest.iter().try_fold(payload, |v, t| match v {
        Value::Object(m) => m.get(t),
        Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// Whether the string at `pointer` of a line of type `kind` whose payload is `payload`
/// may not be redacted: it is not in the payload, it belongs to a blob ref, or `verify`
/// or the typed readers rely on it (file records, names, statuses, the sandbox's command
/// tools, a call's confinement record).
pub fn protected(kind: &str, payload: &Value, pointer: &str) -> bool {
    let Some(tokens) = pointer_tokens(pointer) else {
        return true;
    };
    if tokens.first().map(String::as_str) != Some("payload") || tokens.len() < 2 {
        return true;
    }
    let path: Vec<&str> = tokens[1..].iter().map(String::as_str).collect();
    // Any object on the way down that is a blob ref.
    let mut v = payload;
    for t in &path {
        if BlobRef::from_value(v).is_some() {
            return true;
        }
        v = match v {
            Value::Object(m) => match m.get(*t) {
                Some(x) => x,
                None => return true,
            },
            Value::Array(a) => match t.parse::<usize>().ok().and_then(|i| a.get(i)) {
                Some(x) => x,
                None => return true,
            },
            _ => return true,
        };
    }
    let top = path[0];
    match kind {
        "run_started" => {
            ["builder", "agent_spec_digest", "blob_store", "tools"].contains(&top)
                || path.starts_with(&["details", "sandbox", "command_tools"])
        }
        "input_staged" | "output_produced" | "output_skipped" => true,
        "run_finished" => top == "status",
        // A wrapped program's streams are named by digest; its confinement is a record
        // like a tool call's; the proxy's classifications are what readers branch on.
        "program_exited" => ["stdout", "stderr", "confinement"].contains(&top),
        "http_exchanged" => top == "kind",
        // What a process belongs to is what claims and readers match it by.
        "process_ran" | "trail_recorded" => ["owner", "mechanism"].contains(&top),
        "file_changed" => ["change", "kind"].contains(&top),
        "tool_call_seen" => ["run_call_id", "call_id", "name"].contains(&top),
        "connection_handled" => ["via", "outcome"].contains(&top),
        "tool_called" => [
            "name",
            "call_id",
            "run_call_id",
            "mode",
            "decided_by",
            "waits_for",
            "confinement",
        ]
        .contains(&top),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blob_refs_file_records_and_what_verify_reads_are_protected() {
        let p = json!({"name": "read_file", "result": {"text": "secret", "blob": {"digest": {"sha256": "ab"}, "size": 1, "media_type": "x"}}});
        assert!(!protected("tool_called", &p, "/payload/result/text"));
        assert!(protected(
            "tool_called",
            &p,
            "/payload/result/blob/media_type"
        ));
        assert!(protected("tool_called", &p, "/payload/name"));
        assert!(protected("tool_called", &p, "/payload/nothing"));
        assert!(protected("tool_called", &p, "/run_id"));
        assert!(protected(
            "output_produced",
            &json!({"path": "a"}),
            "/payload/path"
        ));
        assert!(!protected(
            "http_exchanged",
            &json!({"url": "u"}),
            "/payload/url"
        ));
        assert_eq!(
            at_pointer(&json!({"a/b": ["x", "y"]}), "/payload/a~1b/1"),
            Some(&json!("y"))
        );
    }
}
