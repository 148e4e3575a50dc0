//! The checks of the blob store: `blobs` (every ref resolves, every blob is named) and
//! `pack` (the pack file itself).

use std::collections::BTreeSet;

use super::bundle::{Bundle, LooseRead, PackFacts, PackRead, StoreRead, Weight};
use super::{Acc, Check, CheckCode};
use crate::event::BlobRef;
use crate::log::is_sha256_hex;
use crate::recorder::PACK_FILE;

/// `blobs`: every blob ref of the log resolves with its size; every stored blob is named
/// by some event (a failure in a complete bundle, a warning in an interrupted one).
pub(super) fn blobs(b: &Bundle<'_>) -> Check {
    let mut acc = Acc::new(CheckCode::Blobs);
    let complete = b.shape.complete;
    // A blob a redaction removed (the record names it with the ref's size) is not looked
    // for; the `redactions` check makes sure it is gone and was named where it says.
    let (refs, removed): (Vec<_>, Vec<_>) = b
        .refs
        .iter()
        .cloned()
        .partition(|(_, r)| b.redactions.blobs.get(&r.digest.sha256) != Some(&r.size));
    match &b.store {
        StoreRead::Pack(PackRead::Missing) => missing_all(&mut acc, &refs, "no pack"),
        StoreRead::Pack(PackRead::Unreadable(_)) => {
            missing_all(&mut acc, &refs, "the pack is unreadable")
        }
        StoreRead::Pack(PackRead::Read(p)) => packed_blobs(&mut acc, p, &refs, complete),
        StoreRead::Loose(l) => loose_blobs(&mut acc, l, &refs, complete),
        StoreRead::Absent => loose_blobs(&mut acc, &LooseRead::default(), &refs, complete),
    }
    if !removed.is_empty() {
        let distinct: BTreeSet<&str> = removed
            .iter()
            .map(|(_, r)| r.digest.sha256.as_str())
            .collect();
        acc.pass.push_str(&format!(
            "; {} blob(s) removed by a redaction (see redactions)",
            distinct.len()
        ));
    }
    acc.done()
}

/// `pack`: the pack's header, framing, chunks and tail; passes with nothing to check in
/// a bundle of loose blobs.
pub(super) fn pack(b: &Bundle<'_>) -> Check {
    let mut acc = Acc::new(CheckCode::Pack);
    let complete = b.shape.complete;
    match &b.store {
        StoreRead::Pack(PackRead::Missing) => {
            acc.fail_or_warn(complete, format!("{PACK_FILE} is missing"))
        }
        StoreRead::Pack(PackRead::Unreadable(e)) => acc.fail(e.clone()),
        StoreRead::Pack(PackRead::Read(p)) => {
            for (weight, msg) in &p.problems {
                match weight {
                    Weight::Fail => acc.fail(msg.clone()),
                    Weight::FailIfComplete => acc.fail_or_warn(complete, msg.clone()),
                }
            }
            acc.pass = format!(
                "{PACK_FILE}: {} bytes, {} chunk(s) intact, {} blob record(s)",
                p.good_len,
                p.chunks,
                p.indexed.len()
            );
        }
        StoreRead::Loose(_) | StoreRead::Absent => {
            acc.pass = "no pack: the bundle stores loose blobs (blobs/sha256)".to_owned()
        }
    }
    acc.done()
}

/// Every ref's blob is missing (there is no readable pack).
fn missing_all(acc: &mut Acc, refs: &[(usize, BlobRef)], why: &str) {
    for (i, b) in refs {
        acc.fail(format!(
            "line {}: blob {} is missing ({why})",
            i + 1,
            b.digest.sha256
        ));
    }
}

/// The blobs of a pack: every blob record rebuilt from its chunks and re-hashed (when
/// read), every ref resolved with its size, no blob that no event names.
fn packed_blobs(acc: &mut Acc, p: &PackFacts, refs: &[(usize, BlobRef)], complete: bool) {
    for e in &p.blob_errors {
        acc.fail(e.clone());
    }
    let mut referenced = BTreeSet::new();
    for (i, b) in refs {
        let hex = &b.digest.sha256;
        let mut d = [0u8; 32];
        if !is_sha256_hex(hex) || hex::decode_to_slice(hex, &mut d).is_err() {
            acc.fail(format!(
                "line {}: blob ref digest is not 64 lower-case hex digits",
                i + 1
            ));
            continue;
        }
        referenced.insert(d);
        match (p.good.get(&d), p.known.contains(&d)) {
            (Some(size), _) if *size != b.size => acc.fail(format!(
                "line {}: blob {hex} has {size} bytes, the ref says {}",
                i + 1,
                b.size
            )),
            (Some(_), _) => {}
            (None, true) => acc.fail(format!(
                "line {}: blob {hex} cannot be rebuilt from the pack",
                i + 1
            )),
            (None, false) => acc.fail(format!("line {}: blob {hex} is missing", i + 1)),
        }
    }
    for digest in &p.indexed {
        if !referenced.contains(digest) {
            acc.fail_or_warn(
                complete,
                format!("blob {} is not named by any event", hex::encode(digest)),
            );
        }
    }
    acc.pass = format!(
        "{} blob(s) rebuilt from the pack, {} ref(s), all match",
        p.good.len(),
        refs.len()
    );
}

/// Loose blobs: every file named by its digest, every ref resolved with its size, no
/// blob that no event names.
fn loose_blobs(acc: &mut Acc, l: &LooseRead, refs: &[(usize, BlobRef)], complete: bool) {
    for p in &l.problems {
        acc.fail(p.clone());
    }
    let mut referenced = BTreeSet::new();
    for (i, b) in refs {
        let hex = &b.digest.sha256;
        if !is_sha256_hex(hex) {
            acc.fail(format!(
                "line {}: blob ref digest is not 64 lower-case hex digits",
                i + 1
            ));
            continue;
        }
        referenced.insert(hex.clone());
        match l.stored.get(hex) {
            None if l.mismatched.contains(hex) => acc.fail(format!(
                "line {}: blob {hex}: content does not match its name",
                i + 1
            )),
            None => acc.fail(format!("line {}: blob {hex} is missing", i + 1)),
            Some(size) if *size != b.size => acc.fail(format!(
                "line {}: blob {hex} has {size} bytes, the ref says {}",
                i + 1,
                b.size
            )),
            Some(_) => {}
        }
    }
    for hex in l.stored.keys() {
        if !referenced.contains(hex) {
            acc.fail_or_warn(complete, format!("blob {hex} is not named by any event"));
        }
    }
    // A file no event names whose content is not its digest: in an unfinished bundle,
    // what a power loss leaves of a blob written just before it (empty, cut short or
    // zero-filled); no recorded content depends on it.
    for hex in l.mismatched.iter().filter(|h| !referenced.contains(*h)) {
        acc.fail_or_warn(
            complete,
            format!(
                "blobs/sha256/{hex}: content does not match its name, and no event names it \
                 (a blob being written when the run was interrupted)"
            ),
        );
    }
    acc.pass = format!(
        "{} blob(s), {} ref(s), all match",
        l.stored.len(),
        refs.len()
    );
}
