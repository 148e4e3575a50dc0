//! A redacted bundle: reading its `redactions.jsonl` for the other checks (the digests of
//! removed strings for `chain`, the removed blobs and files for `blobs`, `inputs` and
//! `outputs`, the original log's digest for `statement`), and the `redactions` check,
//! present only when the bundle has the file: every record well formed, about this run,
//! statement and log, in order, each removed piece where it says and gone, and its
//! signature good.

use std::collections::BTreeSet;

use super::bundle::{Bundle, PackRead, StoreRead};
use super::redacted::{RedactionsRead, SignatureStatus};
use super::{Acc, Check, CheckCode};
use crate::event::{EventType, FileRecord};
use crate::fsutil::sha256_hex;
use crate::recorder::STATEMENT_FILE;
use crate::redaction::{Place, Removed, Round, holds_placeholder, protected};

/// The `redactions` check, when the bundle has `redactions.jsonl`; the signature status
/// of each record.
pub(super) fn redactions(b: &Bundle<'_>) -> Option<(Check, Vec<SignatureStatus>)> {
    let r = &b.redactions;
    if !r.present {
        return None;
    }
    let mut acc = Acc::new(CheckCode::Redactions);
    if let Some(e) = &r.error {
        acc.fail(e.clone());
        return Some((acc.done(), Vec::new()));
    }
    if r.rounds.is_empty() {
        acc.fail("redactions.jsonl holds no record");
    }
    let statement = std::fs::read(b.root.join(STATEMENT_FILE)).ok();
    let mut seen_texts = BTreeSet::new();
    let mut statuses = Vec::new();
    let (mut texts, mut blobs, mut files) = (0usize, 0usize, 0usize);
    for (i, round) in r.rounds.iter().enumerate() {
        let n = i + 1;
        let rec = &round.record;
        about_this_bundle(&mut acc, b, n, round, statement.as_deref());
        let previous = i.checked_sub(1).map(|j| r.rounds[j].line_sha256.clone());
        if rec.previous != previous {
            acc.fail(format!(
                "record {n}: `previous` is not the record before it"
            ));
        }
        for item in &rec.removed {
            match item {
                Removed::Text { seq, pointer, .. } => {
                    texts += 1;
                    if !seen_texts.insert((*seq, pointer.clone())) {
                        acc.fail(format!(
                            "record {n}: line {} {pointer} is listed twice",
                            seq + 1
                        ));
                    }
                    check_text(&mut acc, b, n, *seq, pointer);
                }
                Removed::Blob {
                    sha256,
                    size,
                    media_type,
                    events,
                } => {
                    blobs += 1;
                    check_blob(&mut acc, b, n, (sha256, *size, media_type), events);
                }
                Removed::File {
                    path,
                    sha256,
                    size,
                    seq,
                } => {
                    files += 1;
                    check_file(&mut acc, b, n, path, (sha256, *size), *seq);
                }
            }
        }
        statuses.push(signature(&mut acc, n, round));
    }
    acc.pass = summary(r, &statuses, (texts, blobs, files));
    Some((acc.done(), statuses))
}

/// A record names this run, this statement and this log.
fn about_this_bundle(
    acc: &mut Acc,
    b: &Bundle<'_>,
    n: usize,
    round: &Round,
    statement: Option<&[u8]>,
) {
    let rec = &round.record;
    if b.log.run_started().is_some_and(|e| e.run_id != rec.run_id) {
        acc.fail(format!("record {n} is about another run ({})", rec.run_id));
    }
    if statement.map(sha256_hex) != Some(rec.statement.sha256.clone()) {
        acc.fail(format!("record {n} is about another statement.json"));
    }
    if rec.log.event_count != b.log.lines().len() as u64
        || b.log.head() != Some(rec.log.head.as_str())
    {
        acc.fail(format!(
            "record {n} is about another log (its count or head differs)"
        ));
    }
    let file_digest = b.log.scan.as_ref().map(|s| s.file_sha256.clone());
    if b.redactions.substitutions.is_empty() && file_digest != Some(rec.log.sha256.clone()) {
        acc.fail(format!(
            "record {n}: the log is unchanged but its digest is not the record's"
        ));
    }
}

/// A removed string: its line and pointer exist, hold the placeholder, may be removed,
/// in a log chained by commitments. (Its digest is checked by the chain.)
fn check_text(acc: &mut Acc, b: &Bundle<'_>, n: usize, seq: u64, pointer: &str) {
    let line = seq + 1;
    let Some(Some(ev)) = b.log.events.get(seq as usize) else {
        return acc.fail(format!("record {n}: line {line} is not in the log"));
    };
    if b.log
        .run_started()
        .is_some_and(|e| crate::chain::chain_of(&e.payload) < 2)
    {
        return acc.fail(format!(
            "record {n}: line {line} {pointer}: this log chains its lines' bytes, no string can be removed from it"
        ));
    }
    if protected(ev.kind.as_str(), &ev.payload, pointer) {
        acc.fail(format!(
            "record {n}: line {line} {pointer} may not be removed"
        ));
    } else if !holds_placeholder(&ev.payload, pointer) {
        acc.fail(format!(
            "record {n}: line {line} {pointer} is listed as removed but holds something else"
        ));
    }
}

/// A removed blob: exactly the refs that name it, of its size and media type, and gone
/// from the blob store.
fn check_blob(acc: &mut Acc, b: &Bundle<'_>, n: usize, blob: (&str, u64, &str), events: &[Place]) {
    let (sha256, size, media_type) = blob;
    let mut named: Vec<Place> = Vec::new();
    for (i, ev) in b.log.events.iter().enumerate() {
        let Some(ev) = ev else { continue };
        let mut found = Vec::new();
        crate::redaction::ref_places(&ev.payload, &mut found);
        for (pointer, r) in found {
            if r.digest.sha256 == sha256 {
                if r.size != size || r.media_type != media_type {
                    acc.fail(format!(
                        "record {n}: blob {sha256} is not of the size and type line {} names",
                        i + 1
                    ));
                }
                named.push(Place {
                    seq: i as u64,
                    pointer,
                });
            }
        }
    }
    let mut listed = events.to_vec();
    listed.sort();
    named.sort();
    if named.is_empty() {
        acc.fail(format!("record {n}: no event names the blob {sha256}"));
    } else if listed != named {
        acc.fail(format!(
            "record {n}: blob {sha256} is named elsewhere than the record says"
        ));
    }
    let still_there = match &b.store {
        StoreRead::Pack(PackRead::Read(p)) => hex::decode(sha256)
            .ok()
            .and_then(|d| <[u8; 32]>::try_from(d).ok())
            .is_some_and(|d| p.known.contains(&d)),
        StoreRead::Loose(l) => l.stored.contains_key(sha256) || l.mismatched.contains(sha256),
        _ => false,
    };
    if still_there {
        acc.fail(format!(
            "record {n}: blob {sha256} is listed as removed but is still in the bundle"
        ));
    }
}

/// A removed file: the line that records it, with its digest and size, and gone.
fn check_file(acc: &mut Acc, b: &Bundle<'_>, n: usize, path: &str, digest: (&str, u64), seq: u64) {
    let (top, rel) = path.split_once('/').unwrap_or(("", path));
    let kind = match top {
        "input" => EventType::InputStaged,
        "output" => EventType::OutputProduced,
        _ => {
            return acc.fail(format!(
                "record {n}: `{path}` is not under input/ or output/"
            ));
        }
    };
    let recorded = b
        .log
        .events
        .get(seq as usize)
        .and_then(Option::as_ref)
        .filter(|e| e.kind == kind);
    let rec = recorded.and_then(|e| serde_json::from_value::<FileRecord>(e.payload.clone()).ok());
    match rec {
        Some(rec) if rec.path == rel && rec.sha256 == digest.0 && rec.size == digest.1 => {}
        _ => acc.fail(format!(
            "record {n}: line {} does not record `{path}` with that digest",
            seq + 1
        )),
    }
    if std::fs::symlink_metadata(b.root.join(path)).is_ok() {
        acc.fail(format!(
            "record {n}: `{path}` is listed as removed but is still in the bundle"
        ));
    }
}

/// A record's signature: none when it names no signer; else one by the signer's key,
/// whose id is that key's, and good.
fn signature(acc: &mut Acc, n: usize, round: &Round) -> SignatureStatus {
    let Some(signer) = &round.record.signer else {
        if !round.signatures.is_empty() {
            acc.fail(format!("record {n} is signed but names no signer"));
            return SignatureStatus::Invalid;
        }
        return SignatureStatus::Unsigned;
    };
    let [(key_id, sig)] = round.signatures.as_slice() else {
        acc.fail(format!(
            "record {n} names a signer but has not exactly one signature"
        ));
        return SignatureStatus::Invalid;
    };
    check_signature(acc, n, signer, key_id, sig, &round.message)
}

#[cfg(feature = "dsse")]
fn check_signature(
    acc: &mut Acc,
    n: usize,
    signer: &crate::redaction::Signer,
    key_id: &str,
    sig: &[u8],
    message: &[u8],
) -> SignatureStatus {
    let key = match crate::dsse::PublicKey::parse(signer.public_key.as_bytes()) {
        Ok(k) => k,
        Err(e) => {
            acc.fail(format!(
                "record {n}: the signer's public key does not read: {e}"
            ));
            return SignatureStatus::Invalid;
        }
    };
    if key.key_id() != signer.key_id || key_id != signer.key_id {
        acc.fail(format!(
            "record {n}: the signature's key id is not the signer's key"
        ));
        return SignatureStatus::Invalid;
    }
    if key.verify(message, sig) {
        SignatureStatus::Verified
    } else {
        acc.fail(format!(
            "record {n}: the signature by key {key_id} does not verify"
        ));
        SignatureStatus::Invalid
    }
}

#[cfg(not(feature = "dsse"))]
fn check_signature(
    acc: &mut Acc,
    n: usize,
    _signer: &crate::redaction::Signer,
    _key_id: &str,
    _sig: &[u8],
    _message: &[u8],
) -> SignatureStatus {
    acc.warn(format!(
        "record {n} is signed, but the signature is not checked: built without the `dsse` feature"
    ));
    SignatureStatus::NotChecked
}

/// The pass detail: what was removed, why, and by whom.
fn summary(
    r: &RedactionsRead,
    statuses: &[SignatureStatus],
    counts: (usize, usize, usize),
) -> String {
    let rounds: Vec<String> = r
        .rounds
        .iter()
        .zip(statuses)
        .map(|(round, status)| {
            let by = match (status, &round.record.signer) {
                (SignatureStatus::Verified, Some(s)) => format!("signed by key {}", s.key_id),
                _ => "unsigned".to_owned(),
            };
            format!(
                "{:?} on {}, {by}",
                round.record.reason, round.record.redacted_on
            )
        })
        .collect();
    format!(
        "{} redaction(s): {} string(s), {} blob(s), {} file(s) removed; {}",
        r.rounds.len(),
        counts.0,
        counts.1,
        counts.2,
        rounds.join("; ")
    )
}
