//! Crash recovery: reopening a paused or interrupted bundle to continue its chain,
//! after cutting a torn line and removing what no event names.

use std::fs::{self, OpenOptions};
use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::{BlobLayout, Durability, EVENTS_FILE, Facts, PACK_FILE, Recorder, STATEMENT_FILE};
use crate::error::{EvidenceError, Result};
use crate::event::{EventType, InputStaged, RunFinished, RunStarted, RunStatus};
#[cfg(feature = "sync-probe")]
use crate::fsutil;
use crate::fsutil::{sync_dir, walk_files};
use crate::lock::BundleLock;
use crate::log::{ChainInputs, LogScan, scan_log, walk};
use crate::pack::PackWriter;
use crate::salt::Salts;

impl Recorder {
    /// Reopen the log of a bundle whose run paused (or whose process died) to continue
    /// the same chain, e.g. in another process that resumes the run.
    ///
    /// The existing log is validated first (every line parses, the chain and the
    /// sequence hold); a torn last line, which was never reported durable, is cut off,
    /// and blobs no event names (stored just before a crash) are removed.
    /// A log whose last event is a `run_finished` with a status other than `paused` is
    /// refused. An existing `statement.json` (and its signature) is removed: it no longer describes
    /// the log.
    ///
    /// The bundle's [`BundleLock`] is taken first and held for the recorder's life: a
    /// bundle another writer holds is refused ([`EvidenceError::BundleLocked`]) before
    /// anything is read or changed.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::BundleLocked`] when another writer holds the bundle;
    /// [`EvidenceError::InvalidLog`] when the log is not a valid chain;
    /// [`EvidenceError::OutOfOrder`] when the run ended other than `paused`;
    /// [`EvidenceError::Io`] when a file cannot be read, cut or removed.
    pub fn reopen(dir: impl AsRef<Path>, durability: Durability) -> Result<Recorder> {
        Self::reopen_locked(BundleLock::acquire(dir)?, durability)
    }

    /// [`Recorder::reopen`] with the bundle's lock already taken (by a caller that read
    /// the bundle before deciding to write to it, under the same lock).
    ///
    /// # Errors
    ///
    /// As [`Recorder::reopen`]; also [`EvidenceError::Io`] when the log was moved or
    /// replaced since the lock was taken.
    pub fn reopen_locked(bundle_lock: BundleLock, durability: Durability) -> Result<Recorder> {
        let root = bundle_lock.path().to_path_buf();
        if !bundle_lock.is_current() {
            return Err(EvidenceError::io(
                "lock",
                root.join(EVENTS_FILE),
                std::io::Error::other("the log was moved or replaced while locked"),
            ));
        }
        let log_path = root.join(EVENTS_FILE);
        let invalid = |reason: String| EvidenceError::InvalidLog {
            path: log_path.clone(),
            reason,
        };
        if std::fs::symlink_metadata(root.join(crate::redaction::REDACTIONS_FILE)).is_ok() {
            return Err(invalid(
                "the bundle is a redacted copy: content was removed from it, so its run cannot \
                 go on (resume the original)"
                    .into(),
            ));
        }
        let scan = scan_log(&log_path).map_err(|e| EvidenceError::io("read", &log_path, e))?;
        let inputs = ChainInputs {
            salts: Salts::read(&root).map_err(&invalid)?,
            ..ChainInputs::default()
        };
        let read = read_log(&scan, &inputs).map_err(|e| match e {
            LogProblem::Invalid(reason) => invalid(reason),
            LogProblem::Ended(e) => e,
        })?;
        // The locked descriptor is the one the recorder appends with.
        let file = bundle_lock.into_log();
        if let Some(torn) = scan.torn_len {
            tracing::warn!(
                bytes = torn,
                "cutting a torn last line off the evidence log"
            );
            file.set_len(scan.good_len)
                .map_err(|e| EvidenceError::io("truncate", &log_path, e))?;
            if durability.syncs() {
                file.sync_data()
                    .map_err(|e| EvidenceError::io("sync", &log_path, e))?;
                #[cfg(feature = "sync-probe")]
                fsutil::synced_log(&log_path, scan.good_len);
            }
        }
        remove_leftovers(&root, &read.referenced, durability.syncs())?;
        let pack = match read.layout {
            BlobLayout::Loose => None,
            BlobLayout::Pack => Some(reopen_pack(&root, &read.referenced, durability.syncs())?),
        };
        // The signature first: a crash between the two leaves an unsigned statement,
        // never a signature without its statement.
        for name in [crate::dsse::DSSE_FILE, STATEMENT_FILE] {
            let path = root.join(name);
            match fs::remove_file(&path) {
                Ok(()) => {
                    if durability.syncs() {
                        sync_dir(&root).map_err(|e| EvidenceError::io("sync", &root, e))?;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(EvidenceError::io("remove", &path, e)),
            }
        }
        let n = scan.lines.len() as u64;
        tracing::debug!(root = %root.display(), events = n, "evidence log reopened");
        Recorder::with_state(
            root,
            read.run_id,
            durability,
            file,
            n,
            read.head,
            read.hasher,
            scan.good_len,
            read.facts,
            read.layout,
            pack,
        )
    }
}

/// What reopening learns from a valid log.
struct LogRead {
    run_id: String,
    head: Option<String>,
    hasher: Sha256,
    facts: Facts,
    layout: BlobLayout,
    /// Digests of every blob an event names.
    referenced: std::collections::BTreeSet<String>,
}

/// Why a log cannot be continued.
enum LogProblem {
    /// The log is not a valid log (the reason, for [`EvidenceError::InvalidLog`]).
    Invalid(String),
    /// The run already ended.
    Ended(EvidenceError),
}

/// Read a log to continue it: every line must parse, chain and be in sequence (checked
/// by the walker verification uses too), `run_started` first, one run id; a log whose
/// last event is a `run_finished` other than `paused` is refused.
fn read_log(scan: &LogScan, inputs: &ChainInputs) -> std::result::Result<LogRead, LogProblem> {
    let invalid = LogProblem::Invalid;
    let mut read = LogRead {
        run_id: String::new(),
        head: None,
        hasher: Sha256::new(),
        facts: Facts::default(),
        layout: BlobLayout::Loose,
        referenced: std::collections::BTreeSet::new(),
    };
    let mut last = None;
    for line in walk(scan, inputs) {
        let i = line.index;
        let ev = line
            .event
            .map_err(|e| invalid(format!("line {}: {e}", i + 1)))?;
        if !line.in_sequence {
            return Err(invalid(format!("line {} has seq {}", i + 1, ev.seq)));
        }
        if !line.chained {
            return Err(invalid(format!(
                "line {} does not chain to the line before",
                i + 1
            )));
        }
        if i == 0 {
            if ev.kind != EventType::RunStarted {
                return Err(invalid("first event is not run_started".into()));
            }
            let p: RunStarted =
                serde_json::from_value(ev.payload.clone()).map_err(|e| invalid(e.to_string()))?;
            read.facts.statement_format = crate::statement::format_of(&ev.payload);
            read.facts.chain = crate::chain::chain_of(&ev.payload);
            read.facts.secret = match &inputs.salts {
                Some(Salts::Secret(s)) => Some(*s),
                _ => None,
            };
            read.facts.builder = p.builder;
            read.facts.agent_spec_digest = p.agent_spec_digest;
            read.facts.started_on = ev.ts.clone();
            read.run_id = ev.run_id.clone();
            read.layout = BlobLayout::of_run_started(&ev.payload)
                .ok_or_else(|| invalid("run_started names an unknown blob_store".into()))?;
        } else if ev.run_id != read.run_id {
            return Err(invalid(format!("line {} belongs to another run", i + 1)));
        }
        if ev.kind == EventType::InputStaged {
            let p: InputStaged =
                serde_json::from_value(ev.payload.clone()).map_err(|e| invalid(e.to_string()))?;
            read.facts.inputs.push(p.0);
        }
        if let Some(bytes) = &line.raw.bytes {
            read.hasher.update(bytes);
            read.hasher.update(b"\n");
        }
        let mut refs = Vec::new();
        crate::event::collect_refs(&ev.payload, &mut refs);
        read.referenced
            .extend(refs.into_iter().map(|b| b.digest.sha256));
        read.head = line.hash.clone();
        last = Some(ev);
    }
    let Some(last) = last else {
        return Err(invalid("the log has no events".into()));
    };
    if last.kind == EventType::RunFinished {
        let p: RunFinished =
            serde_json::from_value(last.payload).map_err(|e| invalid(e.to_string()))?;
        if p.status != RunStatus::Paused {
            return Err(LogProblem::Ended(EvidenceError::OutOfOrder(format!(
                "the run already ended with status {}",
                p.status.as_str()
            ))));
        }
    }
    Ok(read)
}

/// Remove what an interrupted run leaves besides its log: blobs that no event names
/// (a blob is stored before the event naming it) and temporary files of unfinished
/// writes. The log itself is untouched.
pub(super) fn remove_leftovers(
    root: &Path,
    referenced: &std::collections::BTreeSet<String>,
    sync: bool,
) -> Result<()> {
    let blob_dir = root.join("blobs/sha256");
    let mut removed = 0usize;
    for f in walk_files(&blob_dir).files {
        let temp = f.rel.starts_with('.') && f.rel.contains(".tmp-");
        let orphan = crate::log::is_sha256_hex(&f.rel) && !referenced.contains(&f.rel);
        if temp || orphan {
            fs::remove_file(&f.path).map_err(|e| EvidenceError::io("remove", &f.path, e))?;
            removed += 1;
        }
    }
    if removed > 0 && sync {
        sync_dir(&blob_dir).map_err(|e| EvidenceError::io("sync", &blob_dir, e))?;
    }
    // A pack being rewritten when the run was interrupted.
    if let Ok(entries) = fs::read_dir(root.join("blobs")) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with(".pack.tmp-")
                && entry.file_type().is_ok_and(|t| t.is_file())
            {
                let path = entry.path();
                fs::remove_file(&path).map_err(|e| EvidenceError::io("remove", &path, e))?;
            }
        }
    }
    let entries = fs::read_dir(root).map_err(|e| EvidenceError::io("list", root, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_temp = [STATEMENT_FILE, crate::dsse::DSSE_FILE]
            .iter()
            .any(|f| name.starts_with(&format!(".{f}.tmp-")));
        if is_temp && entry.file_type().is_ok_and(|t| t.is_file()) {
            let path = entry.path();
            fs::remove_file(&path).map_err(|e| EvidenceError::io("remove", &path, e))?;
        }
    }
    if removed > 0 {
        tracing::info!(
            removed,
            "removed blobs left unreferenced by an interrupted run"
        );
    }
    Ok(())
}

/// Make a reopened bundle's pack hold exactly what its log names, and open it to append:
/// a torn tail is cut, and blobs no event names (stored just before a crash), with the
/// chunks only they used, are removed: by cutting the pack when they are all at its end
/// (the usual case), else by rewriting it to a temporary file renamed into place.
pub(super) fn reopen_pack(
    root: &Path,
    referenced: &std::collections::BTreeSet<String>,
    sync: bool,
) -> Result<PackWriter> {
    use crate::pack::{BlobReader, FileSource};
    let path = root.join(PACK_FILE);
    let dir = root.join("blobs");
    let bad = |reason: String| EvidenceError::UnsupportedFile {
        path: path.clone(),
        reason,
    };
    if matches!(fs::symlink_metadata(&path), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
        // Lost before it was ever synced (no event names a blob in it, or the log would
        // not have been durable): start an empty one.
        let mut w = PackWriter::create(&path).map_err(|e| EvidenceError::io("create", &path, e))?;
        if sync {
            w.handle()
                .and_then(|f| f.sync_data())
                .and_then(|()| sync_dir(&dir))
                .map_err(|e| EvidenceError::io("sync", &path, e))?;
        }
        return Ok(w);
    }
    let src = FileSource::open(&path).map_err(|e| EvidenceError::io("open", &path, e))?;
    let reader = BlobReader::new(src).map_err(|e| bad(e.to_string()))?;
    let index = reader.index();
    let mut needed: Vec<u32> = referenced
        .iter()
        .filter_map(|hex| index.find_hex(hex))
        .collect();
    needed.sort_unstable();
    let mut used = vec![false; index.chunks.len()];
    for &b in &needed {
        for c in index.chunk_list(b) {
            used[c as usize] = true;
        }
    }
    let cut = needed
        .last()
        .map_or(crate::pack::HEADER.len() as u64, |&b| {
            index.blobs[b as usize].end
        });
    let clean = index.blobs.len() == needed.len()
        && used.iter().all(|u| *u)
        && index.torn.is_none()
        && index.good_len > 0;
    if !clean {
        let prefix_whole = index.good_len > 0
            && index
                .blobs
                .iter()
                .enumerate()
                .filter(|(_, b)| b.end <= cut)
                .all(|(i, _)| needed.binary_search(&(i as u32)).is_ok())
            && index
                .chunks
                .iter()
                .zip(&used)
                .filter(|(c, _)| c.offset < cut)
                .all(|(_, u)| *u);
        if prefix_whole {
            // Everything past `cut` is unneeded: cut it off (append-only otherwise).
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| EvidenceError::io("open", &path, e))?;
            f.set_len(cut)
                .map_err(|e| EvidenceError::io("truncate", &path, e))?;
            if sync {
                f.sync_data()
                    .map_err(|e| EvidenceError::io("sync", &path, e))?;
                #[cfg(feature = "sync-probe")]
                fsutil::synced_log(&path, cut);
            }
        } else {
            let tmp = crate::pack::rewrite(&reader, &needed, &dir, sync)
                .map_err(|e| EvidenceError::io("rewrite", &path, e))?;
            fs::rename(&tmp, &path).map_err(|e| EvidenceError::io("rename", &tmp, e))?;
            if sync {
                sync_dir(&dir).map_err(|e| EvidenceError::io("sync", &dir, e))?;
            }
        }
        tracing::info!(
            kept = needed.len(),
            indexed = index.blobs.len(),
            "pack trimmed to the blobs its log names"
        );
    }
    let src = FileSource::open(&path).map_err(|e| EvidenceError::io("open", &path, e))?;
    let index = crate::pack::read_index(&src).map_err(|e| bad(e.to_string()))?;
    PackWriter::resume(&path, &index).map_err(|e| EvidenceError::io("open", &path, e))
}
