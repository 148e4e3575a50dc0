//! The checks of the bundle's files: `inputs` (the files under `input/` are the
//! `input_staged` events) and `outputs` (the files under `output/` are the final
//! `output_produced` events, and nothing left out is still there).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::bundle::Bundle;
use super::{Acc, Check, CheckCode};
use crate::event::{EventType, FileRecord, OutputSkipped, escape_path_bytes};
use crate::fsutil::{hash_file, walk_files};

/// `inputs`.
pub(super) fn inputs(b: &Bundle<'_>) -> Check {
    let mut acc = Acc::new(CheckCode::Inputs);
    let files = file_map(&mut acc, b.root, "input");
    compare_files(
        &mut acc,
        ("input", &b.redactions),
        &input_records(b),
        &files,
        b.shape.ends_finished,
    );
    acc.done()
}

/// `outputs`.
pub(super) fn outputs(b: &Bundle<'_>) -> Check {
    let mut acc = Acc::new(CheckCode::Outputs);
    let records = output_records(b);
    let files = file_map(&mut acc, b.root, "output");
    compare_files(
        &mut acc,
        ("output", &b.redactions),
        &records,
        &files,
        b.shape.ends_finished,
    );
    // Entries the recorder left out (`output_skipped`, bundles of this version on): each
    // names its path losslessly, and none of them may still be in the bundle.
    let mut skipped_count = 0usize;
    for (i, ev) in b.log.events.iter().enumerate().skip(b.shape.seg_start) {
        let Some(ev) = ev else { continue };
        if ev.kind != EventType::OutputSkipped {
            continue;
        }
        skipped_count += 1;
        let Ok(p) = serde_json::from_value::<OutputSkipped>(ev.payload.clone()) else {
            continue; // reported by parse
        };
        let raw = match hex::decode(&p.path_hex) {
            Ok(raw) => raw,
            Err(_) => {
                acc.fail(format!(
                    "line {}: output_skipped path_hex is not hex",
                    i + 1
                ));
                continue;
            }
        };
        if escape_path_bytes(&raw) != p.path {
            acc.fail(format!(
                "line {}: output_skipped path does not escape its path_hex",
                i + 1
            ));
        }
        if let Ok(rel) = std::str::from_utf8(&raw)
            && files.contains_key(rel)
        {
            acc.fail(format!(
                "output/{} is recorded as left out but is in the bundle",
                p.path
            ));
        }
    }
    if skipped_count > 0 && acc.fails.is_empty() && acc.warns.is_empty() {
        acc.pass = format!(
            "{} file(s) match their events; {skipped_count} entr{} left out",
            records.len(),
            if skipped_count == 1 { "y" } else { "ies" }
        );
    }
    acc.done()
}

/// The payloads of the parsed events of `kind` from line index `from` on.
fn payloads(b: &Bundle<'_>, kind: EventType, from: usize) -> Vec<FileRecord> {
    b.log
        .events
        .iter()
        .skip(from)
        .flatten()
        .filter(|e| e.kind == kind)
        .filter_map(|e| serde_json::from_value::<FileRecord>(e.payload.clone()).ok())
        .collect()
}

/// The inputs the log records.
pub(super) fn input_records(b: &Bundle<'_>) -> Vec<FileRecord> {
    payloads(b, EventType::InputStaged, 0)
}

/// The outputs the log records. A finished log's outputs are the `outputs`
/// output_produced events directly before the final run_finished (the recorder writes
/// them as one block); an unfinished log's are whatever the final segment recorded so
/// far.
pub(super) fn output_records(b: &Bundle<'_>) -> Vec<FileRecord> {
    match (&b.shape.last_finish, b.shape.ends_finished) {
        (Some((last, p)), true) => {
            let from = usize::try_from(p.outputs)
                .ok()
                .and_then(|n| last.checked_sub(n));
            match from {
                Some(from) => payloads(b, EventType::OutputProduced, from)
                    .into_iter()
                    .take(*last - from)
                    .collect(),
                None => Vec::new(),
            }
        }
        _ => payloads(b, EventType::OutputProduced, b.shape.seg_start),
    }
}

fn valid_rel_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\0')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// The regular files under `sub/`, by relative path; what cannot be walked fails `acc`.
fn file_map(acc: &mut Acc, root: &Path, sub: &str) -> BTreeMap<String, PathBuf> {
    let dir = root.join(sub);
    if !matches!(fs::symlink_metadata(&dir), Ok(m) if m.is_dir()) {
        return BTreeMap::new(); // reported by the layout check
    }
    let walk = walk_files(&dir);
    for p in walk.problems {
        acc.fail(format!("{sub}/{p}"));
    }
    walk.files.into_iter().map(|f| (f.rel, f.path)).collect()
}

/// Compare recorded files with the files present (a file a redaction removed is
/// recorded and absent).
fn compare_files(
    acc: &mut Acc,
    (sub, redactions): (&str, &super::redacted::RedactionsRead),
    records: &[FileRecord],
    files: &BTreeMap<String, PathBuf>,
    strict: bool,
) {
    let mut seen = BTreeSet::new();
    let mut removed = 0usize;
    for r in records {
        if !valid_rel_path(&r.path) {
            acc.fail(format!(
                "recorded path {:?} is not a plain relative path",
                r.path
            ));
            continue;
        }
        if !seen.insert(r.path.as_str()) {
            acc.fail(format!("{sub}/{} is recorded twice", r.path));
            continue;
        }
        match files.get(&r.path) {
            None if redactions.file_removed(sub, r) => removed += 1,
            None => acc.fail(format!("{sub}/{} is recorded but missing", r.path)),
            Some(path) => match hash_file(path, false) {
                Err(e) => acc.fail(format!("{sub}/{}: cannot read: {e}", r.path)),
                Ok((sha, size)) => {
                    if sha != r.sha256 || size != r.size {
                        acc.fail(format!(
                            "{sub}/{} does not match its recorded digest",
                            r.path
                        ));
                    }
                }
            },
        }
    }
    for rel in files.keys() {
        if !seen.contains(rel.as_str()) {
            acc.fail_or_warn(strict, format!("{sub}/{rel} is not recorded"));
        }
    }
    if acc.fails.is_empty() && acc.warns.is_empty() {
        acc.pass = format!("{} file(s) match their events", records.len() - removed);
        if removed > 0 {
            acc.pass.push_str(&format!(
                "; {removed} removed by a redaction (see redactions)"
            ));
        }
    }
}
