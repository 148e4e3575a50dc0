//! Auditing a ledger against a store of bundles: the runs it logged whose bundles are
//! gone (`missing`), and the bundles the store holds that it never logged (`unlogged`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::{LedgerError, Result};
use crate::files::run_blocking;
use crate::ledger::Ledger;
use crate::tiles::{TILE_WIDTH, TileId, TileKind, read_entries_from, width_at};
use crate::verify::is_leaf_line;

/// What an audit found (`provrun ledger audit --json` prints it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Audit {
    /// Logged statement digests (hex) with no bundle in the store, in log order.
    pub missing: Vec<String>,
    /// Bundles (as the store names them) whose statement the log does not hold.
    pub unlogged: Vec<String>,
    /// Bundles whose run never finished (no statement): nothing to log yet, not counted.
    pub unfinished: Vec<String>,
    /// How many leaves the log has.
    pub logged: u64,
    /// How many bundles the store holds.
    pub stored: usize,
}

impl Audit {
    /// Whether the log and the store agree.
    pub fn clean(&self) -> bool {
        self.missing.is_empty() && self.unlogged.is_empty()
    }
}

/// Every leaf of the log at its checkpoint, as statement digests (hex) with their index.
///
/// # Errors
///
/// When an entry bundle cannot be read, or a leaf is not a statement digest line.
pub fn logged_statements(ledger: &Ledger) -> Result<Vec<(u64, String)>> {
    let size = ledger.checkpoint().size;
    let mut out = Vec::with_capacity(size.min(1 << 24) as usize);
    let mut index = 0u64;
    while let Some(width) = width_at(size, 0, index) {
        let id = TileId {
            kind: TileKind::Entries,
            index,
            width,
        };
        for (i, e) in read_entries_from(&**ledger.files(), id)?.iter().enumerate() {
            let leaf = index * TILE_WIDTH + i as u64;
            if !is_leaf_line(e) {
                return Err(LedgerError::BadTile(format!(
                    "leaf {leaf} is not a statement digest line"
                )));
            }
            out.push((leaf, String::from_utf8_lossy(&e[7..71]).into_owned()));
        }
        index += 1;
    }
    Ok(out)
}

/// Audit `ledger` against `store`: each bundle's `statement.json` is read (a bundle in a
/// bucket is fetched) and its digest looked for among the log's leaves.
///
/// # Errors
///
/// When the log's entries cannot be read, or the store cannot be listed or a bundle in
/// it read.
pub fn audit(ledger: &Ledger, store: &provrun_store::Store) -> Result<Audit> {
    let logged = logged_statements(ledger)?;
    let remote = |e: provrun_store::StoreError| LedgerError::Remote(e.to_string());
    let listed = run_blocking(store.list())?.map_err(remote)?;
    let mut stored: BTreeMap<String, String> = BTreeMap::new();
    let mut audit = Audit {
        logged: logged.len() as u64,
        stored: listed.len(),
        ..Audit::default()
    };
    for item in &listed {
        let opened = run_blocking(store.open_bundle(&item.id))?.map_err(remote)?;
        let name = store.bundle_name(&item.id);
        let Some(opened) = opened else { continue };
        match crate::bundle::statement_digest(opened.dir()) {
            Ok(d) => {
                stored.insert(d, name);
            }
            Err(_) => audit.unfinished.push(name),
        }
    }
    let in_log: BTreeSet<&str> = logged.iter().map(|(_, d)| d.as_str()).collect();
    audit.missing = logged
        .iter()
        .filter(|(_, d)| !stored.contains_key(d))
        .map(|(_, d)| d.clone())
        .collect();
    audit.unlogged = stored
        .iter()
        .filter(|(d, _)| !in_log.contains(d.as_str()))
        .map(|(_, name)| name.clone())
        .collect();
    Ok(audit)
}
