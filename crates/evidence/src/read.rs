//! Reading a bundle back for replay and display: the events in order and blob bodies,
//! checked against their digests. (Use [`crate::verify`] to check a whole bundle.)

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::chain::Envelope;
use crate::error::{EvidenceError, Result};
use crate::event::{BlobRef, Confidence, Event, EventPayload, TypedEvent, check_confidence};
use crate::fsutil::{open_regular, sha256_hex};
use crate::log::{check_envelope, is_sha256_hex, parse_canonical_form, scan_log, walk};
use crate::pack::{BlobReader, FileSource};
use crate::recorder::{EVENTS_FILE, PACK_FILE};

/// Every complete event of a bundle's log, in order. A torn last line is skipped; any
/// other line that does not parse, or a broken chain, is an error. A redacted bundle's
/// log is chained with the digests its `redactions.jsonl` records.
///
/// # Errors
///
/// [`EvidenceError::Io`] when the log cannot be read; [`EvidenceError::InvalidLog`] when a
/// line (other than a torn last one) does not parse, the chain or the sequence breaks, or
/// `redactions.jsonl` is malformed.
pub fn read_events(bundle: impl AsRef<Path>) -> Result<Vec<Event>> {
    let path = bundle.as_ref().join(EVENTS_FILE);
    let scan = scan_log(&path).map_err(|e| EvidenceError::io("read", &path, e))?;
    let inputs = crate::redaction::chain_inputs(bundle.as_ref()).map_err(|reason| {
        EvidenceError::InvalidLog {
            path: path.clone(),
            reason,
        }
    })?;
    let mut events = Vec::with_capacity(scan.lines.len());
    for line in walk(&scan, &inputs) {
        let i = line.index;
        let ev = line.event.map_err(|reason| EvidenceError::InvalidLog {
            path: path.clone(),
            reason: format!("line {}: {reason}", i + 1),
        })?;
        if !line.chained || !line.in_sequence {
            return Err(EvidenceError::InvalidLog {
                path: path.clone(),
                reason: format!("line {}: breaks the chain", i + 1),
            });
        }
        events.push(ev);
    }
    Ok(events)
}

/// Every complete event of a bundle's log, in order, each with its payload as its type's
/// struct ([`TypedEvent::body`]) beside the JSON ([`TypedEvent::payload`]).
///
/// The same checks as [`read_events`] (a torn last line is skipped; a line that is not
/// a canonical event line, or a broken chain, is an error), with two differences: an
/// event type this version does not know is read as [`EventPayload::Unknown`] instead
/// of refused, so a log a later version wrote still reads; and a known type's payload
/// that does not fit its struct is [`EvidenceError::MalformedPayload`], naming the
/// event's seq and the field.
///
/// # Errors
///
/// As [`read_events`] ([`EvidenceError::Io`], [`EvidenceError::InvalidLog`]), and
/// [`EvidenceError::MalformedPayload`] for a known type's payload that does not fit its
/// struct.
pub fn read_typed_events(bundle: impl AsRef<Path>) -> Result<Vec<TypedEvent>> {
    /// The envelope with the type as a plain string.
    #[derive(serde::Deserialize)]
    struct Line {
        v: u64,
        run_id: String,
        seq: u64,
        prev: Option<String>,
        ts: String,
        #[serde(rename = "type")]
        kind: String,
        confidence: Confidence,
        payload: serde_json::Value,
    }
    let path = bundle.as_ref().join(EVENTS_FILE);
    let scan = scan_log(&path).map_err(|e| EvidenceError::io("read", &path, e))?;
    let inputs = crate::redaction::chain_inputs(bundle.as_ref()).map_err(|reason| {
        EvidenceError::InvalidLog {
            path: path.clone(),
            reason,
        }
    })?;
    let mut events = Vec::with_capacity(scan.lines.len());
    let mut prev: Option<String> = None;
    let mut chain = 1u64;
    for (i, raw) in scan.lines.iter().enumerate() {
        let invalid = |reason: String| EvidenceError::InvalidLog {
            path: path.clone(),
            reason: format!("line {}: {reason}", i + 1),
        };
        let (value, exact) = parse_canonical_form(raw).map_err(invalid)?;
        let line: Line =
            serde_json::from_value(value).map_err(|e| invalid(format!("bad envelope: {e}")))?;
        check_envelope(line.v, line.prev.as_deref(), &line.payload).map_err(invalid)?;
        if line.prev != prev || line.seq != i as u64 {
            return Err(invalid("breaks the chain".to_owned()));
        }
        if i == 0 {
            chain = crate::chain::chain_of(&line.payload);
        }
        let body = EventPayload::parse(line.seq, &line.kind, &line.payload)?;
        if let (Some(kind), Some(want)) = (body.event_type(), body.wanted_confidence()) {
            check_confidence(kind, want, line.confidence).map_err(invalid)?;
        }
        prev = Some(if chain < 2 {
            raw.hash.clone()
        } else {
            if !exact {
                return Err(invalid("not in the exact canonical form".to_owned()));
            }
            let salts = if chain >= crate::chain::SALTED {
                let line_salts = inputs.salts.as_ref().and_then(|s| s.line(line.seq));
                Some(line_salts.ok_or_else(|| {
                    invalid(format!(
                        "no salts for it ({}), in a log chained by salted commitments",
                        crate::salt::SALTS_FILE
                    ))
                })?)
            } else {
                None
            };
            Envelope {
                confidence: line.confidence.as_str(),
                prev: line.prev.as_deref(),
                run_id: &line.run_id,
                seq: line.seq,
                ts: &line.ts,
                kind: &line.kind,
                v: line.v,
            }
            .commitment_hash(&line.payload, inputs.subst.get(&line.seq), salts.as_ref())
            .map_err(|e| invalid(e.to_string()))?
        });
        events.push(TypedEvent {
            run_id: line.run_id,
            seq: line.seq,
            prev: line.prev,
            ts: line.ts,
            confidence: line.confidence,
            payload: line.payload,
            body,
        });
    }
    Ok(events)
}

/// The bytes of a blob, checked against the ref's digest and size, from either blob
/// layout. Never follows a symlink.
///
/// # Errors
///
/// [`EvidenceError::BlobMissing`] when the bundle does not hold the blob;
/// [`EvidenceError::UnsupportedFile`] when the bytes found do not match the ref or the pack
/// is damaged; [`EvidenceError::Io`] when the pack or the loose blob cannot be opened or
/// read.
pub fn read_blob(bundle: impl AsRef<Path>, blob: &BlobRef) -> Result<Vec<u8>> {
    let bytes = read_blob_hex(bundle.as_ref(), &blob.digest.sha256, Some(blob.size))?;
    Ok(bytes)
}

/// The bytes of the blob whose SHA-256 is `hex` (64 lower-case hex digits), from either
/// blob layout, checked against the digest. What `provrun cat` prints.
///
/// # Errors
///
/// [`EvidenceError::UnsupportedFile`] when `hex` is not 64 lower-case hex digits; otherwise
/// as [`read_blob`].
pub fn read_blob_by_digest(bundle: impl AsRef<Path>, hex: &str) -> Result<Vec<u8>> {
    read_blob_hex(bundle.as_ref(), hex, None)
}

fn read_blob_hex(bundle: &Path, hex: &str, size: Option<u64>) -> Result<Vec<u8>> {
    let pack_path = bundle.join(PACK_FILE);
    let loose = bundle.join("blobs/sha256").join(hex);
    let bad = |path: &Path, reason: &str| EvidenceError::UnsupportedFile {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    if !is_sha256_hex(hex) {
        return Err(bad(&loose, "blob digest is not 64 lower-case hex digits"));
    }
    if std::fs::symlink_metadata(&pack_path).is_ok() {
        let reader = pack_reader(&pack_path)?;
        let ordinal = reader
            .index()
            .find_hex(hex)
            .ok_or_else(|| EvidenceError::BlobMissing {
                path: pack_path.clone(),
                digest: hex.to_owned(),
            })?;
        if size.is_some_and(|s| s != reader.index().blobs[ordinal as usize].size) {
            return Err(bad(&pack_path, "blob size does not match its ref"));
        }
        return reader
            .read(ordinal)
            .map_err(|e| bad(&pack_path, &e.to_string()));
    }
    let mut bytes = Vec::new();
    let file = open_regular(&loose).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            EvidenceError::BlobMissing {
                path: loose.clone(),
                digest: hex.to_owned(),
            }
        } else {
            EvidenceError::io("open", &loose, e)
        }
    })?;
    let limit = size.unwrap_or(u64::MAX - 1);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit + 1), &mut bytes)
        .map_err(|e| EvidenceError::io("read", &loose, e))?;
    if size.is_some_and(|s| bytes.len() as u64 != s) || sha256_hex(&bytes) != *hex {
        return Err(bad(&loose, "blob content does not match its ref"));
    }
    Ok(bytes)
}

/// The pack's reader, indexed once per version of the file: a replay reads many blobs,
/// and indexing the pack for each would read its record headers again every time.
fn pack_reader(path: &Path) -> Result<Arc<BlobReader<FileSource>>> {
    use std::os::unix::fs::MetadataExt as _;
    type Key = (PathBuf, u64, u64, u64, i64, i64);
    static LAST: Mutex<Option<(Key, Arc<BlobReader<FileSource>>)>> = Mutex::new(None);
    let src = FileSource::open(path).map_err(|e| EvidenceError::io("open", path, e))?;
    let meta = std::fs::symlink_metadata(path).map_err(|e| EvidenceError::io("stat", path, e))?;
    let key: Key = (
        path.to_path_buf(),
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
    );
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, r)) = last.as_ref()
        && *k == key
    {
        return Ok(Arc::clone(r));
    }
    let reader = Arc::new(
        BlobReader::new(src).map_err(|e| EvidenceError::UnsupportedFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?,
    );
    *last = Some((key, Arc::clone(&reader)));
    Ok(reader)
}
