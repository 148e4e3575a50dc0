//! The run index: one JSON line per ended run (segment), appended beside the bundles
//! (`index.jsonl` by `provrun serve`, `.provrun-index.jsonl` by `provrun batch`), and read by a listing so it
//! need not verify every bundle again. The format is in docs/serve.md ("The run index").
//!
//! A line: `{"v":1, "id", "agent", "thread", "status", "started", "ended",
//! "duration_ms", "verified", "statement_sha256", "summary"?}`. `verified` and `summary`
//! (a [`RunSummary`], with the verdict and the failing checks) hold for the bundle whose
//! `statement.json` has the SHA-256 `statement_sha256`; a reader that finds another digest
//! verifies again. The last line of an id wins; lines that do not parse are left out
//! (the index is a cache, the bundles are the record).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::summary::RunSummary;

/// The index file's name, in the folder of the bundles (`provrun serve`'s store).
pub const INDEX_FILE: &str = "index.jsonl";
/// The name `provrun batch` gives the same index in its `--out`: hidden, so it is never
/// taken for a bundle and cannot clash with a run's id (ids never start with `.`).
pub const BATCH_INDEX_FILE: &str = ".provrun-index.jsonl";

/// One ended run (segment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The format (1; later fields are optional additions).
    pub v: u32,
    /// The bundle's id (its folder's name in the store).
    pub id: String,
    /// The agent (serve: its file name in the agents folder; batch: the agent's name).
    pub agent: String,
    /// The AG-UI thread (serve); empty for a batch's runs.
    #[serde(default)]
    pub thread: String,
    /// `finished`, `failed`, `cancelled` or `paused`.
    pub status: String,
    /// When the run started (RFC 3339, UTC), as its first event says.
    pub started: String,
    /// When this segment ended (RFC 3339, UTC).
    pub ended: String,
    /// Milliseconds from the start to this end (a paused run's wait included).
    pub duration_ms: u64,
    /// Whether the bundle verified (every check passed, the log complete) then.
    pub verified: bool,
    /// Hex SHA-256 of the bundle's `statement.json` then.
    pub statement_sha256: String,
    /// The run as a listing shows it, for the same statement; absent in lines written
    /// before listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<RunSummary>,
}

impl IndexEntry {
    /// The entry for the bundle folder `dir` stored as `id`: the bundle is read and
    /// verified here; `agent` and `thread` are the caller's names for it (an empty
    /// `agent` takes the log's), `ended` the segment's end (else the log's last time).
    pub fn for_bundle(
        dir: &Path,
        id: &str,
        agent: &str,
        thread: &str,
        ended: Option<String>,
    ) -> Self {
        let summary = crate::summary::summarize(dir);
        let ended = ended.unwrap_or_else(|| summary.ended.clone());
        let duration_ms = crate::summary::millis_between(&summary.started, &ended);
        IndexEntry {
            v: 1,
            id: id.to_owned(),
            agent: if agent.is_empty() {
                summary.agent.clone()
            } else {
                agent.to_owned()
            },
            thread: thread.to_owned(),
            status: summary.status.clone(),
            started: summary.started.clone(),
            ended,
            duration_ms,
            verified: summary.verdict == "verifies",
            statement_sha256: statement_sha256(dir).unwrap_or_default(),
            summary: Some(summary),
        }
    }
}

/// Hex SHA-256 of the bundle's `statement.json`, or `None` when it has none.
pub fn statement_sha256(dir: &Path) -> Option<String> {
    let bytes = std::fs::read(dir.join("statement.json")).ok()?;
    Some(hex_of(&Sha256::digest(&bytes)))
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The index of a folder of bundles, appended to under a lock.
#[derive(Debug)]
pub struct RunIndex {
    path: PathBuf,
    write: Mutex<()>,
}

impl RunIndex {
    /// The index at `path` (made when the first line is appended).
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            write: Mutex::new(()),
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry (one `write` of the line, on a file opened for appending).
    ///
    /// # Errors
    ///
    /// The I/O error when the index cannot be opened for appending or written.
    pub fn append(&self, entry: &IndexEntry) -> std::io::Result<()> {
        let mut line = serde_json::to_string(entry).map_err(std::io::Error::other)?;
        line.push('\n');
        let _guard = self
            .write
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
    }

    /// Every run's latest entry, in the order they last ended (a missing index is empty).
    ///
    /// # Errors
    ///
    /// The I/O error when the index exists but cannot be read.
    pub fn read(&self) -> std::io::Result<Vec<IndexEntry>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut latest: HashMap<String, (usize, IndexEntry)> = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            if let Ok(e) = serde_json::from_str::<IndexEntry>(line) {
                latest.insert(e.id.clone(), (n, e));
            }
        }
        let mut entries: Vec<(usize, IndexEntry)> = latest.into_values().collect();
        entries.sort_by_key(|(n, _)| *n);
        Ok(entries.into_iter().map(|(_, e)| e).collect())
    }
}
