//! The run index: one JSON line per ended run segment (finished, failed, cancelled or
//! paused), appended to `index.jsonl` in the store's folder (a bucket store's index is in
//! the server's work folder: objects cannot be appended to). `GET /runs` reads it instead
//! of opening every bundle, and a restarted server finds each thread's last run in it.
//!
//! The format is the view crate's ([`provrun_view::IndexEntry`], docs/serve.md), the same
//! that `provrun batch` writes and a listing (`provrun view DIR`) reads: each line carries
//! the run's summary for the listing, valid while the bundle's `statement.json` keeps its
//! SHA-256. The last line of an id wins.

#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

use provrun_view::RunIndex;

use crate::error::ServeError;

/// The index file's name.
pub use provrun_view::INDEX_FILE;
/// One ended run segment: the view crate's index entry, one format for `serve` and
/// `batch`.
pub use provrun_view::IndexEntry as Entry;
/// Runs in a `GET /runs` page by default, and at most.
pub(crate) const PAGE: usize = 100;

/// The index of a store, appended to under a lock.
#[derive(Debug)]
pub(crate) struct Index {
    inner: RunIndex,
}

impl Index {
    /// The index at `path` (made when the first line is appended).
    pub(crate) fn at(path: impl Into<PathBuf>) -> Self {
        Self {
            inner: RunIndex::at(path),
        }
    }

    /// Where it is.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        self.inner.path()
    }

    fn error(&self, action: &'static str, source: std::io::Error) -> ServeError {
        ServeError::Io {
            action,
            path: self.inner.path().to_path_buf(),
            source,
        }
    }

    /// Append one entry (one `write` of the line, on a file opened for appending).
    pub(crate) fn append(&self, entry: &Entry) -> Result<(), ServeError> {
        self.inner
            .append(entry)
            .map_err(|e| self.error("append to", e))
    }

    /// Every run's latest entry, in the order they last ended (lines that do not parse
    /// are left out: the index is a cache, the bundles are the record).
    pub(crate) fn read(&self) -> Result<Vec<Entry>, ServeError> {
        self.inner.read().map_err(|e| self.error("read", e))
    }
}

/// One page of runs, newest first (by start, then id), after the run `after` names.
/// `Err` names a cursor that is no run of the index.
pub(crate) fn page(
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
    use std::io::Write as _;

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
            summary: None,
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
