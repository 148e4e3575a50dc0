//! The run index: one JSON line per ended run segment (finished, failed, cancelled or
//! paused), appended to `index.jsonl` in the store's folder (a bucket store's index is in
//! the server's work folder: objects cannot be appended to). `GET /runs` reads it instead
//! of opening every bundle, and a restarted server finds each thread's last run in it.
//!
//! A line (format 1; docs/serve.md): `{"v":1, "id", "agent", "thread", "status",
//! "started", "ended", "duration_ms", "verified", "statement_sha256"}`. `verified` is the
//! verdict of `verify` on the bundle whose `statement.json` has that SHA-256: a reader that
//! finds another digest verifies again. The last line of an id wins.

use std::collections::HashMap;
use std::io::Write;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::ServeError;

/// The index file's name.
pub const INDEX_FILE: &str = "index.jsonl";
/// Runs in a `GET /runs` page by default, and at most.
pub const PAGE: usize = 100;

/// One ended run segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The format (1).
    pub v: u32,
    /// The bundle's id.
    pub id: String,
    /// The agent (its file name in the agents folder, without `.toml`).
    pub agent: String,
    /// The AG-UI thread.
    pub thread: String,
    /// `finished`, `failed`, `cancelled` or `paused`.
    pub status: String,
    /// When the run started (RFC 3339, UTC), as its `run_started` says.
    pub started: String,
    /// When this segment ended (RFC 3339, UTC).
    pub ended: String,
    /// Milliseconds from the start to this end (a paused run's wait included).
    pub duration_ms: u64,
    /// Whether the bundle verified when the segment ended.
    pub verified: bool,
    /// Hex SHA-256 of the bundle's `statement.json` then.
    pub statement_sha256: String,
}

/// The index of a store, appended to under a lock.
#[derive(Debug)]
pub struct Index {
    path: PathBuf,
    write: Mutex<()>,
}

impl Index {
    /// The index at `path` (made when the first line is appended).
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            write: Mutex::new(()),
        }
    }

    /// Where it is.
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry (one `write` of the line, on a file opened for appending).
    pub fn append(&self, entry: &Entry) -> Result<(), ServeError> {
        let mut line = serde_json::to_string(entry).map_err(|e| ServeError::Io {
            action: "write",
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
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
            .map_err(|source| ServeError::Io {
                action: "append to",
                path: self.path.clone(),
                source,
            })
    }

    /// Every run's latest entry, in the order they last ended (lines that do not parse
    /// are left out: the index is a cache, the bundles are the record).
    pub fn read(&self) -> Result<Vec<Entry>, ServeError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(ServeError::Io {
                    action: "read",
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let mut latest: HashMap<String, (usize, Entry)> = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            if let Ok(e) = serde_json::from_str::<Entry>(line) {
                latest.insert(e.id.clone(), (n, e));
            }
        }
        let mut entries: Vec<(usize, Entry)> = latest.into_values().collect();
        entries.sort_by_key(|(n, _)| *n);
        Ok(entries.into_iter().map(|(_, e)| e).collect())
    }
}

/// One page of runs, newest first (by start, then id), after the run `after` names.
/// `Err` names a cursor that is no run of the index.
pub fn page(
    mut entries: Vec<Entry>,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<Entry>, Option<String>), String> {
    entries.sort_by(|a, b| b.started.cmp(&a.started).then_with(|| b.id.cmp(&a.id)));
    let from = match after {
        None => 0,
        Some(cursor) => {
            entries
                .iter()
                .position(|e| e.id == cursor)
                .ok_or_else(|| format!("no run `{cursor}` to continue after"))?
                + 1
        }
    };
    let rest: Vec<Entry> = entries.into_iter().skip(from).collect();
    let next = (rest.len() > limit).then(|| rest[limit - 1].id.clone());
    Ok((rest.into_iter().take(limit).collect(), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, started: &str, status: &str) -> Entry {
        Entry {
            v: 1,
            id: id.into(),
            agent: "a".into(),
            thread: "t".into(),
            status: status.into(),
            started: started.into(),
            ended: started.into(),
            duration_ms: 1,
            verified: true,
            statement_sha256: "00".into(),
        }
    }

    #[test]
    fn the_last_line_of_a_run_wins_and_pages_go_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::at(dir.path().join(INDEX_FILE));
        assert!(index.read().unwrap().is_empty());
        index
            .append(&entry("r1", "2026-01-01T00:00:01Z", "paused"))
            .unwrap();
        index
            .append(&entry("r2", "2026-01-01T00:00:02Z", "finished"))
            .unwrap();
        index
            .append(&entry("r3", "2026-01-01T00:00:03Z", "finished"))
            .unwrap();
        index
            .append(&entry("r1", "2026-01-01T00:00:01Z", "finished"))
            .unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(index.path())
            .unwrap()
            .write_all(b"{torn\n")
            .unwrap();
        let all = index.read().unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(
            all.iter().find(|e| e.id == "r1").unwrap().status,
            "finished"
        );

        let (first, next) = page(all.clone(), None, 2).unwrap();
        let ids: Vec<&str> = first.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["r3", "r2"]);
        assert_eq!(next.as_deref(), Some("r2"));
        let (second, next) = page(all.clone(), Some("r2"), 2).unwrap();
        assert_eq!(second[0].id, "r1");
        assert_eq!(next, None);
        assert!(page(all, Some("nope"), 2).is_err());
    }
}
