//! Digesting the bundle's files (staged inputs, and outputs at the end) and handing
//! them to the committer as the durability policy asks.

use std::path::{Path, PathBuf};

use super::commit::SyncItem;
use super::{Recorder, payload_value};
use crate::error::{EvidenceError, Result};
use crate::event::{Confidence, EventType, FileRecord, InputStaged};
use crate::fsutil::{self, walk_files};

impl Recorder {
    /// Record an `input_staged` event for every regular file under `input/`, in path
    /// order, as one uninterrupted block. Call it once, after staging. Symlinks and
    /// special files are refused, never followed.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::UnsupportedFile`] for a symlink, a special file or a name that is
    /// not UTF-8 under `input/`; [`EvidenceError::Io`] when a file cannot be read or the
    /// log written; and as [`Recorder::record`] once the log is broken or the bundle
    /// finished.
    pub fn record_inputs(&self) -> Result<Vec<FileRecord>> {
        let records = self.digest_tree("input")?;
        let payloads = records
            .iter()
            .map(|r| payload_value(&InputStaged(r.clone())))
            .collect::<Result<Vec<_>>>()?;
        {
            // One block, and (under the per-event policies) one sync for all of it.
            let mut st = self.lock_open()?;
            for p in payloads {
                self.write_locked(&mut st, EventType::InputStaged, Confidence::Observed, p)?;
            }
        }
        if self.inner.durability.syncs_each_event() {
            self.sync_all().wait()?;
        }
        Ok(records)
    }

    pub(super) fn digest_tree(&self, sub: &str) -> Result<Vec<FileRecord>> {
        let dir = self.inner.root.join(sub);
        let walk = walk_files(&dir);
        if let Some(problem) = walk.problems.first() {
            return Err(EvidenceError::UnsupportedFile {
                path: dir,
                reason: problem.clone(),
            });
        }
        let files = walk.files.into_iter().map(|f| (f, None)).collect();
        self.digest_files(dir, files)
    }

    /// Digest `files` (each read to at most its bound, when it has one) and hand them
    /// and their folders to the committer as the durability policy asks.
    pub(super) fn digest_files(
        &self,
        dir: PathBuf,
        files: Vec<(fsutil::FoundFile, Option<u64>)>,
    ) -> Result<Vec<FileRecord>> {
        let durability = self.inner.durability;
        let sync = durability.syncs();
        // Synced now (per-event policies) and few: keep them open for the committer
        // instead of reopening them.
        let keep_open = durability.syncs_each_event() && files.len() <= 256;
        let mut items = Vec::new();
        let mut records = Vec::with_capacity(files.len());
        for (f, bound) in &files {
            let (sha256, size, file) = fsutil::hash_open_bounded(&f.path, *bound)
                .map_err(|e| EvidenceError::io("hash", &f.path, e))?;
            if sync {
                items.push(if keep_open {
                    SyncItem::File(file, f.path.clone())
                } else {
                    SyncItem::Path(f.path.clone())
                });
            }
            records.push(FileRecord {
                path: f.rel.clone(),
                sha256,
                size,
            });
        }
        if sync {
            // The files and their names must be as durable as the digests that the log
            // records. Per-event policies: one batch of the committer syncs them all
            // before any line naming them is written. `PerStep` and `AtEnd`: they are
            // synced with (before) the log at the next step or at the end, which is
            // when those lines become durable.
            let mut dirs: Vec<PathBuf> = files
                .iter()
                .filter_map(|(f, _)| f.path.parent().map(Path::to_path_buf))
                .collect();
            dirs.push(dir.clone());
            dirs.sort();
            dirs.dedup();
            self.defer_sync(items, dirs);
            if durability.syncs_each_event() {
                self.sync_all().wait()?;
            }
        }
        Ok(records)
    }
}
