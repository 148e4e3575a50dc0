//! Adding leaves: under the writer's lock, the torn tail of an interrupted add removed,
//! the new leaves' tiles written and synced, then the new checkpoint renamed into place,
//! then the partial tiles the new full tiles replace removed.
//!
//! Why a kill at any moment leaves a log that verifies: committed tiles are never written
//! again (a tile grows by a new file, `.p/<W>` or the full tile, never in place), every
//! new tile and its folder entry is synced before the checkpoint that names it is renamed
//! over the old one, and the checkpoint is written to a temporary file, synced and renamed
//! (and its folder synced). Until the rename, readers and `verify` see the old checkpoint
//! and its tiles, whole; what the interrupted add wrote lies beyond that checkpoint and is
//! removed by the next add before it writes.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use provrun_evidence::dsse::PrivateKey;

use crate::error::{LedgerError, Result};
use crate::files::{Folder, LogFiles, read_bounded};
use crate::index::LeafIndex;
use crate::ledger::{CHECKPOINT_FILE, Config, LedgerLock, find_leaves, load_signing_key, sync_dir};
use crate::merkle::{Hash, Subtrees as _, empty_root, leaf_hash, node_hash, perfect_root};
use crate::note::{Checkpoint, MAX_NOTE_BYTES, sign_note};
use crate::probe::{self, Op};
use crate::tiles::{
    FileRole, TILE_WIDTH, TileId, TileKind, TileReader, encode_entries, level_count, list_files,
    read_entries_from, read_hashes_from, role_of, width_at, write_tile,
};

pub use crate::outcome::{AddOutcome, Added};

/// Append `leaves` to the ledger at `dir`, signing the new checkpoint with `key` (by
/// default the key file `ledger.json` names). A leaf the tree already holds (or that
/// comes twice in `leaves`) is not appended again: its index is reported. An entry is at
/// most 65535 bytes.
///
/// # Errors
///
/// [`LedgerError::BadProof`] for an entry over 65535 bytes; [`LedgerError::NotALedger`] or
/// [`LedgerError::BadConfig`] when `ledger.json` is missing or wrong; [`LedgerError::Locked`]
/// when another writer holds the ledger too long; [`LedgerError::Key`] or
/// [`LedgerError::KeyType`] when the key cannot be read or is not the ledger's Ed25519 key;
/// the note and tile errors when the current checkpoint or a tile does not check; and
/// [`LedgerError::Io`] when a file cannot be read, written or synced.
///
/// Adds from several threads of one process at once share their work: while one add
/// writes, the others queue, and the next writer adds every queued leaf in one add — one
/// set of tiles, one checkpoint and one round of syncs for all of them.
/// Each caller still gets the indexes of its own leaves, and returns only once they are
/// durable under a signed checkpoint.
pub fn add_leaves(dir: &Path, leaves: &[Vec<u8>], key: Option<&PrivateKey>) -> Result<AddOutcome> {
    if let Some(big) = leaves.iter().find(|l| l.len() > usize::from(u16::MAX)) {
        return Err(LedgerError::BadProof(format!(
            "an entry of {} bytes is longer than a tile entry may be",
            big.len()
        )));
    }
    let config = Config::read(dir)?;
    let key = match key {
        Some(k) => k.clone(),
        None => load_signing_key(&config.key_file)?,
    };
    let vkey = config.key()?;
    if crate::ledger::ed25519_public(&key)? != vkey.public {
        return Err(LedgerError::Key(format!(
            "the signing key is not the ledger's key {}",
            vkey.to_text()
        )));
    }
    let target = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    crate::group::submit_to(
        format!("folder:{}", target.display()),
        leaves.to_vec(),
        &|all, index| add_now(dir, all, &key, index),
    )
}

/// One add, under the writer's lock, of leaves already checked, signed with the ledger's
/// own `key`.
pub(crate) fn add_now(
    dir: &Path,
    leaves: &[Vec<u8>],
    key: &PrivateKey,
    index: &mut Option<LeafIndex>,
) -> Result<AddOutcome> {
    // The index is trusted only for the add it is refreshed for; a failed add drops it.
    let result = add_indexed(dir, leaves, key, index);
    if result.is_err() {
        *index = None;
    }
    result
}

fn add_indexed(
    dir: &Path,
    leaves: &[Vec<u8>],
    key: &PrivateKey,
    index: &mut Option<LeafIndex>,
) -> Result<AddOutcome> {
    let config = Config::read(dir)?;
    let _lock = LedgerLock::take(dir, true)?;
    let key = key.clone();
    let vkey = config.key()?;
    let note = read_bounded(&dir.join(CHECKPOINT_FILE), MAX_NOTE_BYTES as u64)?;
    let old = Checkpoint::open(&note, &vkey)?;
    let repaired = repair(dir, old.size)?;
    let hashes: Vec<Hash> = leaves.iter().map(|l| leaf_hash(l)).collect();
    let folder = Folder::new(dir);
    LeafIndex::refresh(index, &folder, &old)?;
    let existing = match index.as_ref() {
        Some(ix) => ix.find(&folder, &hashes)?,
        None => find_leaves(dir, old.size, &hashes)?,
    };
    let mut state = State::load(&Folder::new(dir), old.size)?;
    let mut writes: Vec<(TileId, Vec<u8>)> = Vec::new();
    let mut this_add: HashMap<Hash, u64> = HashMap::new();
    let mut added = Vec::with_capacity(leaves.len());
    for ((leaf, hash), known) in leaves.iter().zip(&hashes).zip(existing) {
        if let Some(index) = known.or_else(|| this_add.get(hash).copied()) {
            added.push(Added { index, new: false });
            continue;
        }
        let index = state.push(leaf, *hash, &mut writes);
        this_add.insert(*hash, index);
        added.push(Added { index, new: true });
    }
    if state.size == old.size {
        return Ok(AddOutcome {
            added,
            checkpoint: old,
            repaired,
        });
    }
    state.finish(old.size, &mut writes);
    let new = Checkpoint {
        origin: old.origin.clone(),
        size: state.size,
        root: state.root(),
    };
    commit(dir, &writes, &new, &key)?;
    tracing::debug!(ledger = %dir.display(), size = new.size, "ledger checkpoint written");
    if let Some(ix) = index.as_mut() {
        let appended: Vec<(Hash, u64)> = this_add.iter().map(|(h, i)| (*h, *i)).collect();
        ix.grown(&appended, &new);
    }
    remove_replaced_partials(dir, &writes);
    Ok(AddOutcome {
        added,
        checkpoint: new,
        repaired,
    })
}

/// Write the tiles and the new checkpoint beside the old one; sync them all and the
/// folders of the new tiles (the first sync commits the file system's journal for all of
/// them, the others find little left to do); only then rename the checkpoint over the old
/// one and sync the ledger folder.
fn commit(
    dir: &Path,
    writes: &[(TileId, Vec<u8>)],
    cp: &Checkpoint,
    key: &PrivateKey,
) -> Result<()> {
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut files = Vec::with_capacity(writes.len() + 1);
    // The files' syncs are issued together from a few threads (the file system flushes
    // many at once for about the price of one), then the folders' the same way.
    let sync = |files: &mut Vec<(std::fs::File, PathBuf)>| -> Result<()> {
        let files = std::mem::take(files);
        together(&files, |(file, path)| {
            file.sync_data()
                .map_err(|e| LedgerError::io("sync", path, e))
        })?;
        for (_, path) in files {
            probe::note(Op::SyncFile(path));
        }
        Ok(())
    };
    for (id, bytes) in writes {
        files.push(write_tile(dir, *id, bytes, &mut dirs)?);
        // A large add makes many tiles: sync them in groups, holding few descriptors.
        if files.len() >= 256 {
            sync(&mut files)?;
        }
    }
    let note = sign_note(&cp.to_text(), &cp.origin, key)?;
    let temp = dir.join(format!(".{CHECKPOINT_FILE}.tmp-{}", std::process::id()));
    files.push((write_unsynced(&temp, note.as_bytes())?, temp.clone()));
    sync(&mut files)?;
    let dirs: Vec<PathBuf> = dirs.into_iter().rev().collect();
    together(&dirs, |d| {
        std::fs::File::open(d)
            .and_then(|f| f.sync_all())
            .map_err(|e| LedgerError::io("sync", d, e))
    })?;
    for d in dirs {
        probe::note(Op::SyncDir(d));
    }
    std::fs::rename(&temp, dir.join(CHECKPOINT_FILE))
        .map_err(|e| LedgerError::io("rename into", dir.join(CHECKPOINT_FILE), e))?;
    probe::note(Op::Rename {
        from: temp,
        to: dir.join(CHECKPOINT_FILE),
    });
    sync_dir(dir)
}

/// Run `f` on every item, from up to 8 threads at once; the first error, if any.
fn together<T: Sync>(items: &[T], f: impl Fn(&T) -> Result<()> + Sync) -> Result<()> {
    const THREADS: usize = 8;
    if items.len() <= 1 {
        return items.iter().try_for_each(&f);
    }
    let per = items.len().div_ceil(THREADS);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|chunk| s.spawn(|| chunk.iter().try_for_each(&f)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a sync thread does not panic"))
            .collect::<Result<Vec<()>>>()
            .map(drop)
    })
}

/// Write `bytes` to a new file at `path`, not yet synced; the open file is returned.
fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<std::fs::File> {
    use std::io::Write as _;
    let mut file = std::fs::File::create(path).map_err(|e| LedgerError::io("create", path, e))?;
    file.write_all(bytes)
        .map_err(|e| LedgerError::io("write", path, e))?;
    probe::note(Op::Write(path.to_path_buf()));
    Ok(file)
}

/// Remove what an interrupted add left beyond the checkpoint of `size` (tiles the
/// checkpoint does not name, temporary files) and the partial tiles of tiles now full.
/// Returns the paths removed for being beyond the checkpoint.
fn repair(dir: &Path, size: u64) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let top = std::fs::read_dir(dir).map_err(|e| LedgerError::io("list", dir, e))?;
    for entry in top.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!(".{CHECKPOINT_FILE}.tmp-")) {
            std::fs::remove_file(entry.path())
                .map_err(|e| LedgerError::io("remove", entry.path(), e))?;
            removed.push(name);
        }
    }
    for rel in list_files(dir)? {
        let role = role_of(&rel, size);
        let stale_partial = matches!(&role, FileRole::Earlier(id) if id.index < level_count(size, id.level()) / TILE_WIDTH);
        if matches!(role, FileRole::Beyond(_) | FileRole::Temporary) || stale_partial {
            let path = dir.join(&rel);
            std::fs::remove_file(&path).map_err(|e| LedgerError::io("remove", &path, e))?;
            if !stale_partial {
                removed.push(rel);
            }
        }
    }
    if !removed.is_empty() {
        tracing::warn!(ledger = %dir.display(), files = removed.len(), "removed the torn tail of an interrupted add");
        sync_dir(dir)?;
    }
    Ok(removed)
}

/// After a commit: the partial tiles (of every width) of the tiles this add made full,
/// which no reader of the new checkpoint needs. Best effort: a partial tile left behind is
/// removed by a later add.
fn remove_replaced_partials(dir: &Path, writes: &[(TileId, Vec<u8>)]) {
    for (id, _) in writes
        .iter()
        .filter(|(id, _)| u64::from(id.width) == TILE_WIDTH)
    {
        let folder = dir.join(format!("{}.p", id.path()));
        let _ = std::fs::remove_dir_all(&folder);
    }
}

/// The right edge of the tree, enough to append: the rightmost partial tile of each
/// level, the leaves of the rightmost partial entry bundle, and the tree's compact range
/// (the roots of its perfect subtrees, largest first).
pub(crate) struct State {
    pub(crate) size: u64,
    edges: Vec<Vec<Hash>>,
    counts: Vec<u64>,
    entries: Vec<Vec<u8>>,
    range: Vec<(Hash, u32)>,
}

impl State {
    /// The right edge of the tree of `size` leaves of a ledger, read from its tiles.
    pub(crate) fn load(files: &dyn LogFiles, size: u64) -> Result<State> {
        let mut edges = Vec::new();
        let mut counts = Vec::new();
        let mut level = 0u8;
        while level < 64 && (level == 0 || level_count(size, level) > 0) {
            let count = level_count(size, level);
            counts.push(count);
            let index = count / TILE_WIDTH;
            edges.push(match width_at(size, level, index) {
                Some(width) => read_hashes_from(
                    files,
                    TileId {
                        kind: TileKind::Hashes(level),
                        index,
                        width,
                    },
                )?,
                None => Vec::new(),
            });
            level += 1;
        }
        let entries = match width_at(size, 0, size / TILE_WIDTH) {
            Some(width) => read_entries_from(
                files,
                TileId {
                    kind: TileKind::Entries,
                    index: size / TILE_WIDTH,
                    width,
                },
            )?,
            None => Vec::new(),
        };
        let mut range = Vec::new();
        let mut tiles = TileReader::over(Box::new(files), size);
        let mut start = 0u64;
        for height in (0..64u32).rev() {
            if size & (1 << height) != 0 {
                range.push((tiles.perfect(start, height)?, height));
                start += 1 << height;
            }
        }
        Ok(State {
            size,
            edges,
            counts,
            entries,
            range,
        })
    }

    /// Append a leaf; the full tiles it completes go to `writes`. Returns its index.
    pub(crate) fn push(
        &mut self,
        leaf: &[u8],
        hash: Hash,
        writes: &mut Vec<(TileId, Vec<u8>)>,
    ) -> u64 {
        let index = self.size;
        self.entries.push(leaf.to_vec());
        if self.entries.len() as u64 == TILE_WIDTH {
            let id = TileId {
                kind: TileKind::Entries,
                index: index / TILE_WIDTH,
                width: TILE_WIDTH as u16,
            };
            writes.push((id, encode_entries(&self.entries)));
            self.entries.clear();
        }
        self.push_hash(0, hash, writes);
        let mut node = (hash, 0u32);
        while let Some(&(left, height)) = self.range.last() {
            if height != node.1 {
                break;
            }
            self.range.pop();
            node = (node_hash(&left, &node.0), height + 1);
        }
        self.range.push(node);
        self.size += 1;
        index
    }

    fn push_hash(&mut self, level: usize, hash: Hash, writes: &mut Vec<(TileId, Vec<u8>)>) {
        if self.edges.len() <= level {
            self.edges.push(Vec::new());
            self.counts.push(0);
        }
        self.edges[level].push(hash);
        self.counts[level] += 1;
        if self.edges[level].len() as u64 == TILE_WIDTH {
            let id = TileId {
                kind: TileKind::Hashes(level as u8),
                index: self.counts[level] / TILE_WIDTH - 1,
                width: TILE_WIDTH as u16,
            };
            let full = std::mem::take(&mut self.edges[level]);
            writes.push((id, full.concat()));
            self.push_hash(level + 1, perfect_root(&full), writes);
        }
    }

    /// The partial tiles (and entry bundle) that changed since the tree had `old` leaves.
    pub(crate) fn finish(&self, old: u64, writes: &mut Vec<(TileId, Vec<u8>)>) {
        for (level, edge) in self.edges.iter().enumerate() {
            let level = level as u8;
            if !edge.is_empty() && level_count(old, level) != level_count(self.size, level) {
                let id = TileId {
                    kind: TileKind::Hashes(level),
                    index: level_count(self.size, level) / TILE_WIDTH,
                    width: edge.len() as u16,
                };
                writes.push((id, edge.concat()));
            }
        }
        if !self.entries.is_empty() {
            let id = TileId {
                kind: TileKind::Entries,
                index: self.size / TILE_WIDTH,
                width: self.entries.len() as u16,
            };
            writes.push((id, encode_entries(&self.entries)));
        }
    }

    /// The root of the tree now.
    pub(crate) fn root(&self) -> Hash {
        let mut nodes = self.range.iter().rev();
        let Some(&(mut root, _)) = nodes.next() else {
            return empty_root();
        };
        for (left, _) in nodes {
            root = node_hash(left, &root);
        }
        root
    }
}
