//! The checks of what the run's end wrote: `statement` (`statement.json` is the
//! statement derived from the log, byte for byte) and `signature` (its DSSE envelope).

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::bundle::Bundle;
use super::files::{input_records, output_records};
use super::{Acc, Check, CheckCode, VerifyOptions};
use crate::dsse::DSSE_FILE;
use crate::event::{Event, FileRecord, RunFinished, RunStarted};
use crate::fsutil::open_regular;
use crate::recorder::STATEMENT_FILE;
use crate::statement::StatementFacts;

/// Largest `statement.json` read (64 MiB).
const MAX_STATEMENT_BYTES: u64 = 64 * 1024 * 1024;

/// `statement`.
pub(super) fn statement(b: &Bundle<'_>) -> Check {
    let mut statement = Acc::new(CheckCode::Statement);
    let has_statement = b.dir.present.contains(STATEMENT_FILE);
    let ends_finished = b.shape.ends_finished;
    let root = b.root;
    let parsed: Vec<&Event> = b.log.events.iter().flatten().collect();
    if has_statement {
        if !ends_finished {
            statement.fail(
                "statement.json is present but the log does not end with a complete run_finished",
            );
        } else {
            let facts = derive_facts(&parsed, b, input_records(b), output_records(b));
            match (
                facts,
                read_bounded(&root.join(STATEMENT_FILE), MAX_STATEMENT_BYTES),
            ) {
                (_, Err(e)) => statement.fail(format!("cannot read statement.json: {e}")),
                (None, _) => statement.fail("cannot derive the statement from the log"),
                (Some(facts), Ok(actual))
                    if facts.format >= 2 && crate::statement::has_no_subject(&actual) =>
                {
                    statement.fail(
                        "statement.json has no subject: an in-toto Statement v1 needs at least \
                         one (this bundle's statements name the event log at least)",
                    );
                }
                (Some(facts), Ok(actual)) => match facts.to_bytes() {
                    Err(e) => statement.fail(format!("cannot build the expected statement: {e}")),
                    Ok(expected) if expected == actual => {
                        statement.pass = format!(
                            "matches the log: {} events, head {}, {} subject(s), {} input(s)",
                            facts.event_count,
                            facts.head,
                            facts.subject_count(),
                            facts.inputs.len()
                        );
                        if b.redactions.original_log_sha256().is_some() {
                            statement.pass.push_str(
                                " (strings were removed from the log: events.jsonl's digest is \
                                 the original's, from the redaction record; the head is checked)",
                            );
                        }
                    }
                    Ok(expected) => statement.fail(describe_statement_diff(&expected, &actual)),
                },
            }
        }
    } else if ends_finished {
        statement.warn("the log ends with run_finished but statement.json is missing: finishing was interrupted");
    } else {
        statement.warn("no statement.json: the run did not finish");
    }
    statement.done()
}

/// `signature`: an envelope, if present or required (a key given), signs exactly
/// `statement.json` (with the key, when one is given).
pub(super) fn signature(b: &Bundle<'_>, options: &VerifyOptions) -> Check {
    let mut signature = Acc::new(CheckCode::Signature);
    let root = b.root;
    let has_statement = b.dir.present.contains(STATEMENT_FILE);
    let signed = b.dir.present.contains(DSSE_FILE);
    #[cfg(feature = "dsse")]
    let wanted = options
        .key
        .clone()
        .or_else(|| options.public_key.map(crate::dsse::PublicKey::Ed25519));
    #[cfg(not(feature = "dsse"))]
    let wanted = options.public_key;
    match (signed, &wanted) {
        (false, None) => signature.pass = "not signed, no key required".to_owned(),
        (false, Some(_)) => signature.fail("a key was given but statement.dsse.json is missing"),
        (true, _) if !has_statement => signature.fail("statement.dsse.json without statement.json"),
        (true, None) => check_signature_form(&mut signature, root),
        (true, Some(key)) => check_signature(&mut signature, root, key),
    }
    signature.done()
}

#[cfg(feature = "dsse")]
fn check_signature(acc: &mut Acc, root: &Path, key: &crate::dsse::PublicKey) {
    let envelope = match read_bounded(&root.join(DSSE_FILE), MAX_STATEMENT_BYTES) {
        Ok(b) => b,
        Err(e) => return acc.fail(format!("cannot read {DSSE_FILE}: {e}")),
    };
    let statement = match read_bounded(&root.join(STATEMENT_FILE), MAX_STATEMENT_BYTES) {
        Ok(b) => b,
        Err(e) => return acc.fail(format!("cannot read {STATEMENT_FILE}: {e}")),
    };
    match crate::dsse::check_envelope(&envelope, &statement, key) {
        Ok(msg) => acc.pass = msg,
        Err(msg) => acc.fail(msg),
    }
}

/// Without a key: the envelope must still be a well-formed DSSE envelope of exactly
/// `statement.json` (garbage or a stale envelope fails); its signature cannot be checked,
/// so the check warns and names the key ids the envelope claims.
#[cfg(feature = "dsse")]
fn check_signature_form(acc: &mut Acc, root: &Path) {
    let envelope = match read_bounded(&root.join(DSSE_FILE), MAX_STATEMENT_BYTES) {
        Ok(b) => b,
        Err(e) => return acc.fail(format!("cannot read {DSSE_FILE}: {e}")),
    };
    let statement = match read_bounded(&root.join(STATEMENT_FILE), MAX_STATEMENT_BYTES) {
        Ok(b) => b,
        Err(e) => return acc.fail(format!("cannot read {STATEMENT_FILE}: {e}")),
    };
    match crate::dsse::check_envelope_form(&envelope, &statement) {
        Ok(env) => acc.warn(format!(
            "signed (key id {}), but the signature is not checked: no key given",
            env.key_ids().join(", ")
        )),
        Err(msg) => acc.fail(msg),
    }
}

#[cfg(not(feature = "dsse"))]
fn check_signature_form(acc: &mut Acc, _root: &Path) {
    acc.warn("signed, but the envelope is not checked: built without the `dsse` feature");
}

#[cfg(not(feature = "dsse"))]
fn check_signature(acc: &mut Acc, _root: &Path, _key: &[u8; 32]) {
    acc.fail("cannot check the signature: built without the `dsse` feature");
}

fn derive_facts(
    events: &[&Event],
    b: &Bundle<'_>,
    inputs: Vec<FileRecord>,
    outputs: Vec<FileRecord>,
) -> Option<StatementFacts> {
    let scan = b.log.scan.as_ref()?;
    let first = events.first()?;
    let last = events.last()?;
    let started: RunStarted = serde_json::from_value(first.payload.clone()).ok()?;
    let finished: RunFinished = serde_json::from_value(last.payload.clone()).ok()?;
    Some(StatementFacts {
        format: crate::statement::format_of(&first.payload),
        run_id: first.run_id.clone(),
        builder: started.builder,
        agent_spec_digest: started.agent_spec_digest,
        started_on: first.ts.clone(),
        finished_on: last.ts.clone(),
        status: finished.status,
        inputs,
        outputs,
        // A log with strings removed is not the file the statement names: the original's
        // digest comes from the redaction record; the chain head (checked) is the same.
        events_sha256: b
            .redactions
            .original_log_sha256()
            .unwrap_or_else(|| scan.file_sha256.clone()),
        event_count: scan.lines.len() as u64,
        head: b.log.head()?.to_owned(),
    })
}

/// Say where a statement differs from the expected one, naming the field if possible.
fn describe_statement_diff(expected: &[u8], actual: &[u8]) -> String {
    let at = expected
        .iter()
        .zip(actual)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(actual.len()));
    let field = serde_json::from_slice::<Value>(actual)
        .ok()
        .and_then(|act| {
            let exp: Value = serde_json::from_slice(expected).ok()?;
            first_difference(&exp, &act, String::new())
        });
    match field {
        Some(f) => format!("statement.json differs from the statement derived from the log at {f}"),
        None => {
            format!("statement.json differs from the statement derived from the log at byte {at}")
        }
    }
}

fn first_difference(exp: &Value, act: &Value, path: String) -> Option<String> {
    match (exp, act) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}/{k}");
                match a.get(k) {
                    None => return Some(p),
                    Some(av) => {
                        if let Some(d) = first_difference(ev, av, p) {
                            return Some(d);
                        }
                    }
                }
            }
            a.keys()
                .find(|k| !e.contains_key(*k))
                .map(|k| format!("{path}/{k}"))
        }
        (Value::Array(e), Value::Array(a)) => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                if let Some(d) = first_difference(ev, av, format!("{path}/{i}")) {
                    return Some(d);
                }
            }
            (e.len() != a.len()).then(|| format!("{path} (length)"))
        }
        _ if exp == act => None,
        _ => Some(if path.is_empty() { "/".into() } else { path }),
    }
}

fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "file too large",
        ));
    }
    Ok(bytes)
}
