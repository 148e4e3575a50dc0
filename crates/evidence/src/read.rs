//! Reading a bundle back for replay and display: the events in order and blob bodies,
//! checked against their digests. (Use [`crate::verify`] to check a whole bundle.)

use std::path::Path;

use crate::error::{EvidenceError, Result};
use crate::event::{BlobRef, Event};
use crate::fsutil::{open_regular, sha256_hex};
use crate::log::{is_sha256_hex, parse_line, scan_log};
use crate::recorder::EVENTS_FILE;

/// Every complete event of a bundle's log, in order. A torn last line is skipped; any
/// other line that does not parse, or a broken chain, is an error.
pub fn read_events(bundle: impl AsRef<Path>) -> Result<Vec<Event>> {
    let path = bundle.as_ref().join(EVENTS_FILE);
    let scan = scan_log(&path).map_err(|e| EvidenceError::io("read", &path, e))?;
    let mut events = Vec::with_capacity(scan.lines.len());
    let mut prev: Option<&str> = None;
    for (i, raw) in scan.lines.iter().enumerate() {
        let ev = parse_line(raw).map_err(|reason| EvidenceError::InvalidLog {
            path: path.clone(),
            reason: format!("line {}: {reason}", i + 1),
        })?;
        if ev.prev.as_deref() != prev || ev.seq != i as u64 {
            return Err(EvidenceError::InvalidLog {
                path: path.clone(),
                reason: format!("line {}: breaks the chain", i + 1),
            });
        }
        prev = Some(raw.hash.as_str());
        events.push(ev);
    }
    Ok(events)
}

/// The bytes of a blob, checked against the ref's digest and size. Never follows a
/// symlink.
pub fn read_blob(bundle: impl AsRef<Path>, blob: &BlobRef) -> Result<Vec<u8>> {
    let hex = &blob.digest.sha256;
    let path = bundle.as_ref().join("blobs/sha256").join(hex);
    let bad = |reason: &str| EvidenceError::UnsupportedFile {
        path: path.clone(),
        reason: reason.to_owned(),
    };
    if !is_sha256_hex(hex) {
        return Err(bad("blob digest is not 64 lower-case hex digits"));
    }
    let mut bytes = Vec::new();
    let file = open_regular(&path).map_err(|e| EvidenceError::io("open", &path, e))?;
    std::io::Read::read_to_end(&mut std::io::Read::take(file, blob.size + 1), &mut bytes)
        .map_err(|e| EvidenceError::io("read", &path, e))?;
    if bytes.len() as u64 != blob.size || sha256_hex(&bytes) != *hex {
        return Err(bad("blob content does not match its ref"));
    }
    Ok(bytes)
}
