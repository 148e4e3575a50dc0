//! Finishing a run (or a paused segment of one): the outputs, `run_finished`, and
//! `statement.json`.

use std::fs;
use std::path::PathBuf;

use serde_json::Value;
use sha2::Digest as _;

use super::commit::SyncItem;
use super::{Recorder, STATEMENT_FILE, lock, payload_value};
use crate::error::{EvidenceError, Result};
use crate::event::{Confidence, EventType, OutputProduced, OutputSkipped, RunFinished, RunStatus};
use crate::fsutil::{self, sync_dir, write_atomic};
use crate::outputs::OutputPolicy;
use crate::statement::StatementFacts;

/// How a run ends, given to [`Recorder::finish`].
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// Status written in `run_finished`.
    pub status: RunStatus,
    /// Usage totals written in `run_finished`.
    pub usage: Value,
    /// Error message of a failed run.
    pub error: Option<String>,
}

impl RunEnd {
    /// A run that ended with `status`, no usage and no error.
    pub fn new(status: RunStatus) -> Self {
        RunEnd {
            status,
            usage: Value::Null,
            error: None,
        }
    }
}

/// `step` (a read, or a whole file written again), tried again for up to
/// [`fsutil::DESCRIPTOR_WAIT`] while the process has no descriptor left.
fn with_descriptors<T>(step: impl FnMut() -> Result<T>) -> Result<T> {
    fsutil::with_descriptors(
        fsutil::DESCRIPTOR_WAIT,
        EvidenceError::is_out_of_descriptors,
        step,
    )
}

/// What [`Recorder::finish`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The facts written into `statement.json`.
    pub facts: StatementFacts,
    /// Path of `statement.json`.
    pub statement_path: PathBuf,
}

impl Recorder {
    /// Finish the bundle (or a paused segment of it): record `output_produced` for every
    /// file under `output/` in path order, then `run_finished`, make the log durable (for
    /// every policy but `Flush`), and write `statement.json` atomically. The recorder
    /// (and every clone) refuses further events afterwards and gives up the bundle's
    /// [`BundleLock`](crate::lock::BundleLock); a paused run continues with [`Recorder::reopen`].
    ///
    /// Whatever is under `output/`, the bundle finishes: see [`Recorder::finish_with`],
    /// here with no output quota.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Io`] when `output/` cannot be read or the log or `statement.json`
    /// cannot be written or synced; [`EvidenceError::LogBroken`] after an earlier failed
    /// write or sync; [`EvidenceError::OutOfOrder`] when the bundle is already finished.
    /// When the process has no descriptor left, opening each output folder, digesting the
    /// outputs and writing the statement are each tried again for up to 10 s (the thread
    /// sleeps between tries) before that error ([`EvidenceError::is_out_of_descriptors`])
    /// is returned; an output folder is never left out for want of descriptors.
    pub fn finish(&self, end: RunEnd) -> Result<Finished> {
        self.finish_with(end, &OutputPolicy::default())
    }

    /// [`Recorder::finish`] with an output quota. Entries under `output/` that are not
    /// regular files or folders (symlinks, FIFOs, sockets, device nodes), names that are
    /// not UTF-8, entries nested too deeply and files that do not fit in the quota (by
    /// apparent size, in path order) are removed from the bundle and each recorded by an
    /// `output_skipped` event, written just before the `output_produced` block; set-uid,
    /// set-gid and sticky bits are cleared. No more than the quota is ever read.
    ///
    /// # Errors
    ///
    /// As [`Recorder::finish`].
    pub fn finish_with(&self, end: RunEnd, policy: &OutputPolicy) -> Result<Finished> {
        self.finish_with_left_out(end, policy, Vec::new())
    }

    /// [`Recorder::finish_with`], for a run whose outputs were brought into `output/`
    /// from elsewhere (`provrun wrap` copies a workspace there): `left_out` are the
    /// entries the copy could not bring (a file it may not read, a device node), written
    /// as `output_skipped` events among the recorder's own, all in path order.
    ///
    /// # Errors
    ///
    /// As [`Recorder::finish`].
    pub fn finish_with_left_out(
        &self,
        end: RunEnd,
        policy: &OutputPolicy,
        left_out: Vec<OutputSkipped>,
    ) -> Result<Finished> {
        let out_dir = self.inner.root.join("output");
        // `collect` waits for descriptors itself, where it opens folders: it removes what
        // it leaves out, so it cannot be started again from the top.
        let mut collected = crate::outputs::collect(&out_dir, policy)
            .map_err(|e| EvidenceError::io("collect the outputs in", &out_dir, e))?;
        if !left_out.is_empty() {
            collected.skipped.extend(left_out);
            // Hex of the raw bytes sorts as the bytes do.
            collected
                .skipped
                .sort_by(|a, b| a.path_hex.cmp(&b.path_hex));
        }
        for s in &collected.skipped {
            tracing::warn!(path = %s.path, kind = %s.kind, reason = %s.reason, "an entry in the outputs is left out");
        }
        let skipped_json = collected
            .skipped
            .iter()
            .map(payload_value)
            .collect::<Result<Vec<_>>>()?;
        let files: Vec<(fsutil::FoundFile, Option<u64>)> = collected
            .files
            .into_iter()
            .map(|a| {
                (
                    fsutil::FoundFile {
                        rel: a.rel,
                        path: a.path,
                    },
                    Some(a.size),
                )
            })
            .collect();
        let outputs = with_descriptors(|| self.digest_files(out_dir.clone(), files.clone()))?;
        let finished = RunFinished {
            status: end.status,
            event_count: 0, // set to seq + 1 when written
            outputs: outputs.len() as u64,
            usage: end.usage,
            error: end.error,
        };
        let finished = payload_value(&finished)?;
        let outputs_json = outputs
            .iter()
            .map(|r| payload_value(&OutputProduced(r.clone())))
            .collect::<Result<Vec<_>>>()?;
        // The outputs and run_finished go in as one block: nothing can slip in between
        // or after them.
        let facts = {
            let mut st = self.lock_open()?;
            for p in skipped_json {
                self.write_locked(&mut st, EventType::OutputSkipped, Confidence::Observed, p)?;
            }
            for p in outputs_json {
                self.write_locked(&mut st, EventType::OutputProduced, Confidence::Observed, p)?;
            }
            self.write_locked(
                &mut st,
                EventType::RunFinished,
                Confidence::Observed,
                finished,
            )?;
            StatementFacts {
                format: st.facts.statement_format,
                run_id: self.inner.run_id.clone(),
                builder: st.facts.builder.clone(),
                agent_spec_digest: st.facts.agent_spec_digest.clone(),
                started_on: st.facts.started_on.clone(),
                finished_on: st.last_ts.clone(),
                status: end.status,
                inputs: st.facts.inputs.clone(),
                outputs,
                events_sha256: hex::encode(st.hasher.clone().finalize()),
                event_count: st.next_seq,
                head: st.head.clone().unwrap_or_default(),
            }
        };
        let bytes = facts.to_bytes()?;
        with_descriptors(|| self.write_statement(&bytes))?;
        let root = &self.inner.root;
        // The writer is done with the bundle: its lock goes now, not when the last clone
        // of the recorder (or the committer's copy of the log descriptor) goes, so a
        // paused run can be resumed at once, in this process or another.
        crate::lock::release(&lock(&self.inner.log).file);
        tracing::debug!(root = %root.display(), events = facts.event_count, status = end.status.as_str(), "evidence bundle finished");
        Ok(Finished {
            facts,
            statement_path: root.join(STATEMENT_FILE),
        })
    }

    /// Write `statement.json` atomically; under a syncing policy its bytes are synced in
    /// the same batch as the log, and it is renamed into place once the log is durable.
    fn write_statement(&self, bytes: &[u8]) -> Result<()> {
        let root = &self.inner.root;
        let statement_err = |e| EvidenceError::io("write", root.join(STATEMENT_FILE), e);
        if self.inner.durability.syncs() {
            // The statement's bytes go to a temporary file synced in the same batch as
            // the log (so one sync, not two, before the rename); the rename, and the
            // folder's sync that makes it durable, come after the log is durable.
            let (tmp, file) =
                fsutil::write_temp(root, STATEMENT_FILE, bytes).map_err(statement_err)?;
            // Named by its final name: that is the name its content is durable under.
            self.defer_sync(
                vec![SyncItem::File(file, root.join(STATEMENT_FILE))],
                Vec::new(),
            );
            let synced = self.sync_all().wait();
            let renamed = synced.and_then(|()| {
                fs::rename(&tmp, root.join(STATEMENT_FILE))
                    .and_then(|()| sync_dir(root))
                    .map_err(statement_err)
            });
            if let Err(e) = renamed {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        } else {
            write_atomic(root, STATEMENT_FILE, bytes, false).map_err(statement_err)?;
        }
        Ok(())
    }
}
