//! Appending events: each line written with one `write(2)` under the log's lock, then
//! made durable as the policy says (inline, or by the committer).

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, MutexGuard};

use serde_json::{Value, json};
use sha2::Digest as _;

use super::commit::SyncItem;
use super::durability::DurableState;
use super::{
    Durability, Durable, EVENTS_FILE, LogState, Recorder, lock, now_rfc3339, payload_value, rfc3339,
};
use crate::canonical::write_canonical;
use crate::chain::Envelope;
use crate::error::{EvidenceError, Result};
use crate::event::{Confidence, EventType, FORMAT_VERSION, FileRecord, Payload, RunStarted};
#[cfg(feature = "sync-probe")]
use crate::fsutil;
use crate::fsutil::sha256_hex;

impl Recorder {
    /// Record an event and return its seq once it is as durable as the policy promises
    /// (`PerEvent`, `GroupCommit`: on stable storage; others: written to the file).
    ///
    /// This blocks for the fsync under `PerEvent` and `GroupCommit`; from async code use
    /// [`Recorder::record_async`]. `run_started`, `output_produced` and `run_finished`
    /// are written only by [`Recorder::create`] and [`Recorder::finish`].
    ///
    /// # Errors
    ///
    /// [`EvidenceError::OutOfOrder`] for a type only the recorder writes, or once the
    /// bundle is finished; [`EvidenceError::LogBroken`] after an earlier failed write or
    /// sync; [`EvidenceError::Io`] when the line cannot be written or synced;
    /// [`EvidenceError::Payload`] or [`EvidenceError::Canonical`] when the payload cannot
    /// be serialised.
    pub fn record<P: Payload>(&self, payload: &P) -> Result<u64> {
        self.record_inner(payload, true)?.wait()
    }

    /// Record an event without blocking on fsync: the line is written (its place in
    /// the order fixed) before this returns; the returned future resolves with its seq
    /// once it is durable, the fsync running on the process's sync thread.
    pub fn record_async<P: Payload>(&self, payload: &P) -> Durable<u64> {
        match self.record_inner(payload, false) {
            Ok(d) => d,
            Err(e) => Durable::ready(Err(e)),
        }
    }

    /// [`Recorder::record_async`] with confidence `parsed` instead of what the payload
    /// would claim: for a `model_called` or `tool_called` the runtime did not see itself
    /// (a foreign loop handed over its parsed request, or a trace was imported), and for
    /// `trace_imported`. Any other type is refused ([`EvidenceError::OutOfOrder`]).
    pub fn record_parsed_async<P: Payload>(&self, payload: &P) -> Durable<u64> {
        let run = || -> Result<Durable<u64>> {
            match P::TYPE {
                EventType::ModelCalled | EventType::ToolCalled | EventType::TraceImported => {}
                other => {
                    return Err(EvidenceError::OutOfOrder(format!(
                        "{} cannot be recorded as parsed",
                        other.as_str()
                    )));
                }
            }
            self.append(P::TYPE, Confidence::Parsed, payload_value(payload)?, false)
        };
        match run() {
            Ok(d) => d,
            Err(e) => Durable::ready(Err(e)),
        }
    }

    pub(super) fn record_inner<P: Payload>(
        &self,
        payload: &P,
        blocking: bool,
    ) -> Result<Durable<u64>> {
        match P::TYPE {
            EventType::RunStarted
            | EventType::RunFinished
            | EventType::OutputProduced
            | EventType::OutputSkipped => {
                return Err(EvidenceError::OutOfOrder(format!(
                    "{} is written by the recorder itself",
                    P::TYPE.as_str()
                )));
            }
            _ => {}
        }
        self.append(
            P::TYPE,
            payload.confidence(),
            payload_value(payload)?,
            blocking,
        )
    }

    /// Append one line. `blocking` selects an inline fsync for `PerEvent`.
    pub(super) fn append(
        &self,
        kind: EventType,
        confidence: Confidence,
        payload: Value,
        blocking: bool,
    ) -> Result<Durable<u64>> {
        let inner = &*self.inner;
        let mut st = self.lock_open()?;
        let seq = self.write_locked(&mut st, kind, confidence, payload)?;
        if !inner.durability.syncs_each_event() {
            return Ok(Durable::ready(Ok(seq)));
        }
        if blocking && inner.durability == Durability::PerEvent {
            if let Err(e) = st.file.sync_data() {
                let log_path = inner.root.join(EVENTS_FILE);
                st.broken = Some(format!("fsync {}: {e}", log_path.display()));
                return Err(EvidenceError::io("sync", log_path, e));
            }
            #[cfg(feature = "sync-probe")]
            fsutil::synced_log(&inner.root.join(EVENTS_FILE), st.bytes);
            return Ok(Durable::ready(Ok(seq)));
        }
        drop(st);
        Ok(self.durable_after_sync(seq))
    }

    /// Lock the log, refusing if it is broken or closed.
    pub(super) fn lock_open(&self) -> Result<MutexGuard<'_, LogState>> {
        let inner = &*self.inner;
        let st = lock(&inner.log);
        if let Some(e) = &st.broken {
            return Err(EvidenceError::LogBroken(e.clone()));
        }
        if let Some(sync) = &inner.sync
            && let Some(e) = &lock(&sync.state).error
        {
            return Err(EvidenceError::LogBroken(e.clone()));
        }
        if let Some(why) = st.closed {
            return Err(EvidenceError::OutOfOrder(format!(
                "the recorder is closed: {why}"
            )));
        }
        Ok(st)
    }

    /// Write one line with the log locked; no sync. Returns its seq.
    pub(super) fn write_locked(
        &self,
        st: &mut LogState,
        kind: EventType,
        confidence: Confidence,
        mut payload: Value,
    ) -> Result<u64> {
        let inner = &*self.inner;
        let seq = st.next_seq;
        if kind == EventType::RunFinished
            && let Some(obj) = payload.as_object_mut()
        {
            obj.insert("event_count".into(), json!(seq + 1));
        }
        let ts = st.clock.map_or_else(now_rfc3339, rfc3339);
        let observed = self
            .observer()
            .map(|o| (o, payload.clone(), st.head.clone()));
        // The envelope's canonical JSON written around the payload's (its keys in RFC
        // 8785 order), instead of building a `Value` around the payload and sorting it.
        let mut payload_text = String::with_capacity(256);
        write_canonical(&payload, &mut payload_text)?;
        let envelope = Envelope {
            confidence: confidence.as_str(),
            prev: st.head.as_deref(),
            run_id: &inner.run_id,
            seq,
            ts: &ts,
            kind: kind.as_str(),
            v: FORMAT_VERSION,
        };
        let mut line = envelope.text(&payload_text).into_bytes();
        // The line's chain hash, by the scheme `run_started` declares (its own line too).
        let chain = match kind {
            EventType::RunStarted => crate::chain::chain_of(&payload),
            _ => st.facts.chain,
        };
        let head = if chain >= crate::chain::SALTED {
            let secret = st.facts.secret.ok_or_else(|| {
                EvidenceError::Canonical(
                    "a log chained by salted commitments, and no secret to salt with".into(),
                )
            })?;
            let salts = crate::salt::LineSalts::Seed(crate::salt::line_seed(&secret, seq));
            envelope.commitment_hash(&payload, None, Some(&salts))?
        } else if chain >= 2 {
            envelope.commitment_hash(&payload, None, None)?
        } else {
            sha256_hex(&line)
        };
        line.push(b'\n');
        if let Err(e) = (&*st.file).write_all(&line) {
            let log_path = inner.root.join(EVENTS_FILE);
            // Try to cut a partial line so the file stays a valid prefix.
            let _ = st.file.set_len(st.bytes);
            st.broken = Some(format!("write {}: {e}", log_path.display()));
            tracing::error!(error = %e, "evidence write failed");
            return Err(EvidenceError::io("write", log_path, e));
        }
        if let Some(sync) = &inner.sync {
            lock(&sync.state).dirty = true;
        }
        st.hasher.update(&line);
        st.bytes += line.len() as u64;
        st.head = Some(head);
        st.next_seq += 1;
        match kind {
            EventType::RunStarted => {
                st.facts.statement_format = crate::statement::format_of(&payload);
                st.facts.chain = crate::chain::chain_of(&payload);
                if let Ok(p) = serde_json::from_value::<RunStarted>(payload) {
                    st.facts.builder = p.builder;
                    st.facts.agent_spec_digest = p.agent_spec_digest;
                }
                st.facts.started_on = ts.clone();
            }
            EventType::InputStaged => {
                if let Ok(p) = serde_json::from_value::<FileRecord>(payload) {
                    st.facts.inputs.push(p);
                }
            }
            EventType::RunFinished => st.closed = Some("the run has ended (or paused)"),
            _ => {}
        }
        if let Some((observer, payload, prev)) = observed {
            observer.event(&crate::event::Event {
                v: FORMAT_VERSION,
                run_id: inner.run_id.clone(),
                seq,
                prev,
                ts: ts.clone(),
                kind,
                confidence,
                payload,
            });
        }
        st.last_ts = ts;
        Ok(seq)
    }

    /// Mark a step boundary: under `PerStep` (and the per-event policies) every event
    /// and blob recorded so far is on stable storage when this returns. A no-op under
    /// `Flush` and `AtEnd`.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Io`] or [`EvidenceError::LogBroken`] when syncing fails (now or
    /// earlier).
    pub fn step(&self) -> Result<()> {
        self.step_async().wait()
    }

    /// Like [`Recorder::step`], waiting without blocking the thread.
    pub fn step_async(&self) -> Durable<()> {
        match self.inner.durability {
            Durability::Flush | Durability::AtEnd => Durable::ready(Ok(())),
            _ => self.sync_all(),
        }
    }

    pub(super) fn sync_all(&self) -> Durable<()> {
        self.durable_after_sync(())
    }

    /// `value`, once a sync requested now (covering everything written so far) is done;
    /// at once under `Flush`.
    pub(super) fn durable_after_sync<T>(&self, value: T) -> Durable<T> {
        let Some(shared) = &self.inner.sync else {
            return Durable::ready(Ok(value));
        };
        let ticket = shared.request();
        Durable {
            state: DurableState::Waiting {
                shared: Arc::clone(shared),
                ticket,
                value: Some(value),
            },
        }
    }

    /// Hand files and directories to the committer, to be synced with the next batch
    /// (and before the log data of that batch).
    pub(super) fn defer_sync(&self, files: Vec<SyncItem>, dirs: Vec<PathBuf>) {
        if let Some(shared) = &self.inner.sync {
            let mut st = lock(&shared.state);
            st.pending_files.extend(files);
            st.pending_dirs.extend(dirs);
            st.dirty = true;
        }
    }
}
