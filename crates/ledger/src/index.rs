//! Which leaves a ledger already holds, kept in memory by the process that adds to it, so
//! that an add need not read every level-0 tile to find duplicates. The index is tied to
//! the checkpoint it was built for (size and root): when another writer has added since,
//! it is extended after a consistency proof from its checkpoint to the new one (the tiles
//! it covers are never written again), and rebuilt from the tiles otherwise.
//!
//! It keeps the first 8 bytes of each leaf hash (a match is confirmed against the tile)
//! and covers at most [`MAX_INDEXED`] leaves; a larger log is searched tile by tile.

use std::collections::HashMap;

use crate::error::Result;
use crate::files::LogFiles;
use crate::ledger::find_leaves_in;
use crate::merkle::{Hash, verify_consistency};
use crate::note::Checkpoint;
use crate::tiles::{TILE_WIDTH, TileId, TileKind, TileReader, read_hashes_from, width_at};

/// The most leaves an index covers (about 40 bytes each in memory).
pub(crate) const MAX_INDEXED: u64 = 4 << 20;

/// The leaves of the tree of one checkpoint, by the first 8 bytes of their hash.
#[derive(Debug, Default)]
pub(crate) struct LeafIndex {
    size: u64,
    root: Hash,
    by_prefix: HashMap<u64, u64>,
    /// A prefix two leaves share: such lookups read the tiles.
    ambiguous: bool,
}

fn prefix(h: &Hash) -> u64 {
    u64::from_be_bytes(h[..8].try_into().expect("8 bytes"))
}

impl LeafIndex {
    fn insert(&mut self, hash: &Hash, index: u64) {
        if let Some(&other) = self.by_prefix.get(&prefix(hash)) {
            if other != index {
                self.ambiguous = true;
            }
            return;
        }
        self.by_prefix.insert(prefix(hash), index);
    }

    /// Read level-0 hashes of leaves `[from, to)` of the tree of `size` into the index.
    fn read_range(&mut self, files: &dyn LogFiles, size: u64, from: u64, to: u64) -> Result<()> {
        let mut tile = from / TILE_WIDTH;
        while tile * TILE_WIDTH < to {
            let Some(width) = width_at(size, 0, tile) else {
                break;
            };
            let hashes = read_hashes_from(
                files,
                TileId {
                    kind: TileKind::Hashes(0),
                    index: tile,
                    width,
                },
            )?;
            for (i, h) in hashes.iter().enumerate() {
                let index = tile * TILE_WIDTH + i as u64;
                if (from..to).contains(&index) {
                    self.insert(h, index);
                }
            }
            tile += 1;
        }
        Ok(())
    }

    /// Make `slot` an index of the tree `cp` names in `files` (extending or rebuilding it),
    /// unless the tree is larger than [`MAX_INDEXED`] (then `slot` is emptied).
    pub(crate) fn refresh(
        slot: &mut Option<LeafIndex>,
        files: &dyn LogFiles,
        cp: &Checkpoint,
    ) -> Result<()> {
        if cp.size > MAX_INDEXED {
            *slot = None;
            return Ok(());
        }
        if let Some(ix) = slot.as_mut() {
            if ix.size == cp.size && ix.root == cp.root {
                return Ok(());
            }
            if ix.size < cp.size && ix.size > 0 {
                let mut tiles = TileReader::over(Box::new(files), cp.size);
                let proof = crate::merkle::consistency_proof(&mut tiles, ix.size, cp.size)?;
                if verify_consistency(ix.size, cp.size, &ix.root, &cp.root, &proof) {
                    let from = ix.size;
                    ix.read_range(files, cp.size, from, cp.size)?;
                    ix.size = cp.size;
                    ix.root = cp.root;
                    return Ok(());
                }
            }
        }
        let mut ix = LeafIndex {
            size: cp.size,
            root: cp.root,
            ..LeafIndex::default()
        };
        ix.read_range(files, cp.size, 0, cp.size)?;
        *slot = Some(ix);
        Ok(())
    }

    /// For each of `wanted`, its index in the indexed tree, if there: each candidate is
    /// confirmed against its tile, and anything unsure is searched in the tiles.
    pub(crate) fn find(&self, files: &dyn LogFiles, wanted: &[Hash]) -> Result<Vec<Option<u64>>> {
        let mut found = vec![None; wanted.len()];
        let mut unsure = Vec::new();
        for (slot, w) in wanted.iter().enumerate() {
            let Some(&index) = self.by_prefix.get(&prefix(w)) else {
                if self.ambiguous {
                    unsure.push(slot);
                }
                continue;
            };
            let tile = index / TILE_WIDTH;
            let width = width_at(self.size, 0, tile).unwrap_or(TILE_WIDTH as u16);
            let hashes = read_hashes_from(
                files,
                TileId {
                    kind: TileKind::Hashes(0),
                    index: tile,
                    width,
                },
            )?;
            if hashes.get((index % TILE_WIDTH) as usize) == Some(w) {
                found[slot] = Some(index);
            } else {
                unsure.push(slot);
            }
        }
        if !unsure.is_empty() {
            let hashes: Vec<Hash> = unsure.iter().map(|&i| wanted[i]).collect();
            for (slot, hit) in unsure
                .into_iter()
                .zip(find_leaves_in(files, self.size, &hashes)?)
            {
                found[slot] = hit;
            }
        }
        Ok(found)
    }

    /// The tree grew by `leaves` (their hashes and indexes) to checkpoint `cp`.
    pub(crate) fn grown(&mut self, leaves: &[(Hash, u64)], cp: &Checkpoint) {
        for (h, i) in leaves {
            self.insert(h, *i);
        }
        self.size = cp.size;
        self.root = cp.root;
    }
}
