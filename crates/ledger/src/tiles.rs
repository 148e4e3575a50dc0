//! The C2SP tlog-tiles layout on disk: tile names, which tiles a tree of a given size has,
//! reading hash tiles and entry bundles (bounded, never following a symlink), and a
//! [`Subtrees`] source that answers perfect-subtree hashes from the tiles of one size.
//!
//! A hash tile `tile/<L>/<N>[.p/<W>]` holds `W` (256 when full) hashes of level `L`:
//! hash `i` of tile `N` is the root of the leaves `[(256N + i)·256^L, (256N + i + 1)·256^L)`.
//! An entry bundle `tile/entries/<N>[.p/<W>]` holds leaves `[256N, 256N + W)`, each as a
//! big-endian `u16` length and its bytes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{LedgerError, Result};
use crate::files::{Folder, LogFiles};
pub use crate::files::{TILE_DIR, list_files};
use crate::merkle::{Hash, Subtrees, perfect_root};

/// Hashes in a full tile.
pub const TILE_WIDTH: u64 = 256;
/// The height of a tile: log2 of [`TILE_WIDTH`].
pub const TILE_HEIGHT: u32 = 8;
/// The largest entry bundle read: 256 entries of the largest length a `u16` allows.
const MAX_BUNDLE_BYTES: u64 = TILE_WIDTH * (2 + 65535);

/// What a tile holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TileKind {
    /// Hashes of a level (0: leaf hashes).
    Hashes(u8),
    /// The leaves themselves.
    Entries,
}

/// One tile (or entry bundle) of a given width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileId {
    /// What it holds.
    pub kind: TileKind,
    /// Its index within its level.
    pub index: u64,
    /// How many hashes (or entries) it holds: 256 for a full tile.
    pub width: u16,
}

impl TileId {
    /// The tile's path below the ledger folder, e.g. `tile/0/x001/234/067.p/12`.
    pub fn path(&self) -> String {
        let level = match self.kind {
            TileKind::Hashes(l) => l.to_string(),
            TileKind::Entries => "entries".to_owned(),
        };
        let mut n = self.index;
        let mut index = format!("{:03}", n % 1000);
        while n >= 1000 {
            n /= 1000;
            index = format!("x{:03}/{index}", n % 1000);
        }
        let partial = if u64::from(self.width) == TILE_WIDTH {
            String::new()
        } else {
            format!(".p/{}", self.width)
        };
        format!("{TILE_DIR}/{level}/{index}{partial}")
    }

    /// Parse a path made by [`TileId::path`]; `None` for anything else (a name that is not
    /// exactly what the layout writes is not a tile).
    pub fn parse(path: &str) -> Option<TileId> {
        let rest = path.strip_prefix(TILE_DIR)?.strip_prefix('/')?;
        let (level, rest) = rest.split_once('/')?;
        let kind = if level == "entries" {
            TileKind::Entries
        } else {
            let l: u8 = level.parse().ok().filter(|l| *l < 64)?;
            (l.to_string() == level).then_some(TileKind::Hashes(l))?
        };
        let (index_part, width) = match rest.split_once(".p/") {
            Some((i, w)) => {
                let width: u16 = w.parse().ok().filter(|w| (1..256).contains(w))?;
                (width.to_string() == w).then_some((i, width))?
            }
            None => (rest, TILE_WIDTH as u16),
        };
        let parts: Vec<&str> = index_part.split('/').collect();
        let (last, upper) = parts.split_last()?;
        let mut index: u64 = 0;
        for (i, p) in upper.iter().enumerate() {
            let digits = p.strip_prefix('x')?;
            if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let d: u64 = digits.parse().ok()?;
            if i == 0 && d == 0 {
                return None;
            }
            index = index.checked_mul(1000)?.checked_add(d)?;
        }
        if last.len() != 3 || !last.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        index = index.checked_mul(1000)?.checked_add(last.parse().ok()?)?;
        let id = TileId { kind, index, width };
        (id.path() == path).then_some(id)
    }

    /// The tile's level (entry bundles are level 0).
    pub fn level(&self) -> u8 {
        match self.kind {
            TileKind::Hashes(l) => l,
            TileKind::Entries => 0,
        }
    }
}

/// How many hashes level `level` has in a tree of `size` leaves.
pub fn level_count(size: u64, level: u8) -> u64 {
    size.checked_shr(u32::from(level) * TILE_HEIGHT)
        .unwrap_or(0)
}

/// The width tile `index` of `level` has in a tree of `size` leaves: 256 for a full tile,
/// 1 to 255 for the rightmost partial one, `None` for a tile the tree does not have.
pub fn width_at(size: u64, level: u8, index: u64) -> Option<u16> {
    let count = level_count(size, level);
    let full = count / TILE_WIDTH;
    if index < full {
        Some(TILE_WIDTH as u16)
    } else if index == full && !count.is_multiple_of(TILE_WIDTH) {
        Some((count % TILE_WIDTH) as u16)
    } else {
        None
    }
}

/// Every tile a tree of `size` leaves has (hash tiles of every level, then entry
/// bundles), in order.
pub fn tiles_of(size: u64) -> Vec<TileId> {
    let mut out = Vec::new();
    let mut level = 0u8;
    while level < 64 && level_count(size, level) > 0 {
        let count = level_count(size, level);
        for index in 0..count.div_ceil(TILE_WIDTH) {
            if let Some(width) = width_at(size, level, index) {
                out.push(TileId {
                    kind: TileKind::Hashes(level),
                    index,
                    width,
                });
            }
        }
        level += 1;
    }
    for index in 0..size.div_ceil(TILE_WIDTH) {
        if let Some(width) = width_at(size, 0, index) {
            out.push(TileId {
                kind: TileKind::Entries,
                index,
                width,
            });
        }
    }
    out
}

/// Read hash tile `id` of the ledger folder `dir`: exactly `width` hashes.
///
/// # Errors
///
/// [`LedgerError::Io`] when the tile cannot be read; [`LedgerError::BadTile`] when it is not
/// a regular file or does not hold exactly `width` hashes.
pub fn read_hashes(dir: &Path, id: TileId) -> Result<Vec<Hash>> {
    read_hashes_from(&Folder::new(dir), id)
}

/// The file at `rel` of `files`, which must be there.
fn required(files: &dyn LogFiles, rel: &str, max: u64) -> Result<Vec<u8>> {
    files
        .read(rel, max)?
        .ok_or_else(|| LedgerError::BadTile(format!("{rel} is missing from {}", files.describe())))
}

/// Read hash tile `id` of a ledger wherever it is: exactly `width` hashes.
///
/// # Errors
///
/// As [`read_hashes`], and [`LedgerError::BadTile`] when the tile is missing;
/// [`LedgerError::Remote`] when a remote ledger cannot be read.
pub fn read_hashes_from(files: &dyn LogFiles, id: TileId) -> Result<Vec<Hash>> {
    let rel = id.path();
    let bytes = required(files, &rel, TILE_WIDTH * 32)?;
    if bytes.len() != usize::from(id.width) * 32 {
        return Err(LedgerError::BadTile(format!(
            "{rel} holds {} bytes, not {} hashes",
            bytes.len(),
            id.width
        )));
    }
    Ok(bytes
        .chunks_exact(32)
        .map(|c| c.try_into().expect("32-byte chunks"))
        .collect())
}

/// Read entry bundle `id` of the ledger folder `dir`: exactly `width` length-prefixed
/// entries, nothing after them.
///
/// # Errors
///
/// [`LedgerError::Io`] when the bundle cannot be read; [`LedgerError::BadTile`] when it is
/// not a regular file, is too large, or does not hold exactly `width` whole entries.
pub fn read_entries(dir: &Path, id: TileId) -> Result<Vec<Vec<u8>>> {
    read_entries_from(&Folder::new(dir), id)
}

/// Read entry bundle `id` of a ledger wherever it is.
///
/// # Errors
///
/// As [`read_entries`], and [`LedgerError::BadTile`] when the bundle is missing;
/// [`LedgerError::Remote`] when a remote ledger cannot be read.
pub fn read_entries_from(files: &dyn LogFiles, id: TileId) -> Result<Vec<Vec<u8>>> {
    let rel = id.path();
    let bytes = required(files, &rel, MAX_BUNDLE_BYTES)?;
    let entries = decode_entries(&bytes, &rel)?;
    if entries.len() != usize::from(id.width) {
        return Err(LedgerError::BadTile(format!(
            "{rel} holds {} entries, not {}",
            entries.len(),
            id.width
        )));
    }
    Ok(entries)
}

/// The entries of an entry bundle's bytes (`rel` names it in messages): each a big-endian
/// `u16` length and its bytes, nothing after the last.
///
/// # Errors
///
/// [`LedgerError::BadTile`] for a torn length or an entry that runs past the end.
pub fn decode_entries(bytes: &[u8], rel: &str) -> Result<Vec<Vec<u8>>> {
    let mut entries = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let len = bytes
            .get(at..at + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .ok_or_else(|| {
                LedgerError::BadTile(format!("{rel}: a torn entry length at byte {at}"))
            })?;
        let entry = bytes.get(at + 2..at + 2 + len).ok_or_else(|| {
            LedgerError::BadTile(format!("{rel}: the entry at byte {at} runs past the end"))
        })?;
        entries.push(entry.to_vec());
        at += 2 + len;
    }
    Ok(entries)
}

/// An entry bundle's bytes: each entry as a big-endian `u16` length and its bytes.
pub fn encode_entries<T: AsRef<[u8]>>(entries: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let e = e.as_ref();
        out.extend_from_slice(&(e.len() as u16).to_be_bytes());
        out.extend_from_slice(e);
    }
    out
}

/// The hashes of the tree of one size, read from its tiles (each tile read once).
pub struct TileReader<'a> {
    files: Box<dyn LogFiles + 'a>,
    size: u64,
    cache: HashMap<(u8, u64), Vec<Hash>>,
}

impl<'a> TileReader<'a> {
    /// A reader of the tiles the tree of `size` leaves in the ledger folder `dir` has.
    pub fn new(dir: &'a Path, size: u64) -> TileReader<'a> {
        TileReader::over(Box::new(Folder::new(dir)), size)
    }

    /// A reader of the tiles the tree of `size` leaves has, wherever the ledger is.
    pub fn over(files: Box<dyn LogFiles + 'a>, size: u64) -> TileReader<'a> {
        TileReader {
            files,
            size,
            cache: HashMap::new(),
        }
    }

    /// Hash tile `index` of `level` as the tree of this size has it.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadTile`] when the tree has no such tile or it is malformed;
    /// [`LedgerError::Io`] when it cannot be read.
    pub fn tile(&mut self, level: u8, index: u64) -> Result<&Vec<Hash>> {
        if !self.cache.contains_key(&(level, index)) {
            let width = width_at(self.size, level, index).ok_or_else(|| {
                LedgerError::BadTile(format!(
                    "a tree of {} leaves has no tile {index} at level {level}",
                    self.size
                ))
            })?;
            let id = TileId {
                kind: TileKind::Hashes(level),
                index,
                width,
            };
            let hashes = read_hashes_from(&*self.files, id)?;
            self.cache.insert((level, index), hashes);
        }
        Ok(&self.cache[&(level, index)])
    }
}

impl Subtrees for TileReader<'_> {
    type Error = LedgerError;

    fn perfect(&mut self, start: u64, height: u32) -> Result<Hash> {
        let level = height / TILE_HEIGHT;
        let count = 1usize << (height - level * TILE_HEIGHT);
        let first = start >> (level * TILE_HEIGHT);
        let (index, offset) = (first / TILE_WIDTH, (first % TILE_WIDTH) as usize);
        let tile = self.tile(level as u8, index)?;
        let hashes = tile.get(offset..offset + count).ok_or_else(|| {
            LedgerError::BadTile(format!(
                "tile {index} of level {level} is too narrow for the subtree at {start}"
            ))
        })?;
        Ok(perfect_root(hashes))
    }
}

/// What a file under the ledger folder is, for a tree of a given size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRole {
    /// A tile the tree of this size has.
    Current(TileId),
    /// A partial tile of an earlier size (kept for readers of older checkpoints until
    /// its tile is full, then removable).
    Earlier(TileId),
    /// A tile beyond the checkpoint: written by an add that did not finish.
    Beyond(TileId),
    /// A temporary file of an interrupted write.
    Temporary,
    /// Anything else.
    Unknown,
}

/// The role of the file at `rel` (a `/`-separated path below the ledger folder) in the
/// tree of `size` leaves.
pub fn role_of(rel: &str, size: u64) -> FileRole {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if name.starts_with('.') && name.contains(".tmp-") {
        return FileRole::Temporary;
    }
    let Some(id) = TileId::parse(rel) else {
        return FileRole::Unknown;
    };
    let level = id.level();
    let count = level_count(size, level);
    let full = count / TILE_WIDTH;
    let current = width_at(size, level, id.index);
    if current == Some(id.width) {
        FileRole::Current(id)
    } else if u64::from(id.width) < TILE_WIDTH
        && (id.index < full || (id.index == full && u64::from(id.width) < count % TILE_WIDTH))
    {
        FileRole::Earlier(id)
    } else {
        FileRole::Beyond(id)
    }
}

/// Write a new tile file (its folders made as needed), not yet synced: the open file is
/// returned with its path, and the folders whose entries changed are added to `dirs` (to
/// be synced before a checkpoint names the tile).
pub(crate) fn write_tile(
    dir: &Path,
    id: TileId,
    bytes: &[u8],
    dirs: &mut std::collections::BTreeSet<PathBuf>,
) -> Result<(std::fs::File, PathBuf)> {
    use std::io::Write as _;
    let path = dir.join(id.path());
    let parent = path.parent().unwrap_or(dir).to_path_buf();
    // Each folder made is an entry in its parent: sync the parents up to the ledger.
    let mut missing = Vec::new();
    let mut p = parent.as_path();
    while p != dir && std::fs::symlink_metadata(p).is_err() {
        missing.push(p.to_path_buf());
        p = p.parent().unwrap_or(dir);
    }
    std::fs::create_dir_all(&parent).map_err(|e| LedgerError::io("make", &parent, e))?;
    for m in missing {
        if let Some(up) = m.parent() {
            dirs.insert(up.to_path_buf());
        }
    }
    dirs.insert(parent);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| LedgerError::io("create", &path, e))?;
    file.write_all(bytes)
        .map_err(|e| LedgerError::io("write", &path, e))?;
    crate::probe::note(crate::probe::Op::Write(path.clone()));
    Ok((file, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_paths_follow_the_specification() {
        let id = |kind, index, width| TileId { kind, index, width };
        let cases = [
            (
                id(TileKind::Hashes(0), 1_234_067, 256),
                "tile/0/x001/x234/067",
            ),
            (id(TileKind::Hashes(2), 5, 17), "tile/2/005.p/17"),
            (id(TileKind::Entries, 1000, 256), "tile/entries/x001/000"),
            (id(TileKind::Entries, 0, 1), "tile/entries/000.p/1"),
        ];
        for (tile, path) in cases {
            assert_eq!(tile.path(), path);
            assert_eq!(TileId::parse(path), Some(tile), "{path}");
        }
        for bad in [
            "tile/0/1",
            "tile/0/x000/001",
            "tile/00/001",
            "tile/0/001.p/0",
            "tile/0/001.p/256",
            "tile/0/001.p/07",
            "tile/64/001",
            "tiles/0/001",
            "tile/0/x01/001",
        ] {
            assert_eq!(TileId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_tree_of_70000_has_the_tiles_the_specification_lists() {
        // c2sp.org/tlog-tiles: 273 full level-0 tiles, a partial one of width 112, one
        // full level-1 tile, a partial one of width 17, a partial level-2 tile of width 1.
        let tiles = tiles_of(70_000);
        let hashes: Vec<_> = tiles
            .iter()
            .filter(|t| matches!(t.kind, TileKind::Hashes(_)))
            .collect();
        let full0 = hashes
            .iter()
            .filter(|t| t.kind == TileKind::Hashes(0) && t.width == 256)
            .count();
        assert_eq!(full0, 273);
        let partial: Vec<_> = hashes
            .iter()
            .filter(|t| t.width < 256)
            .map(|t| (t.level(), t.width))
            .collect();
        assert_eq!(partial, [(0, 112), (1, 17), (2, 1)]);
        assert_eq!(hashes.iter().filter(|t| t.level() == 1).count(), 2);
        assert_eq!(
            tiles_of(256).len(),
            3,
            "a full level-0 tile, a level-1 tile of 1, a bundle"
        );
    }

    #[test]
    fn files_are_placed_against_the_size() {
        assert!(matches!(role_of("tile/0/000.p/5", 5), FileRole::Current(_)));
        assert!(matches!(role_of("tile/0/000.p/3", 5), FileRole::Earlier(_)));
        assert!(matches!(role_of("tile/0/000.p/6", 5), FileRole::Beyond(_)));
        assert!(matches!(role_of("tile/0/000", 5), FileRole::Beyond(_)));
        assert!(matches!(
            role_of("tile/0/000.p/7", 300),
            FileRole::Earlier(_)
        ));
        assert!(matches!(
            role_of("tile/1/000.p/1", 300),
            FileRole::Current(_)
        ));
        assert!(matches!(
            role_of("tile/1/000.p/2", 300),
            FileRole::Beyond(_)
        ));
        assert_eq!(role_of("tile/0/.000.tmp-1", 3), FileRole::Temporary);
        assert_eq!(role_of("tile/0/junk", 3), FileRole::Unknown);
    }
}
