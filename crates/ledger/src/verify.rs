//! Checking a whole ledger (`provrun ledger verify`): the configuration, the checkpoint's
//! signature, every entry, every tile against the hashes recomputed from the entries, the
//! root, and what else lies in the folder (a torn tail is a warning; files the layout
//! does not know fail).

use std::path::Path;

use serde::Serialize;

use crate::error::LedgerError;
use crate::ledger::{CHECKPOINT_FILE, CONFIG_FILE, Config};
use crate::merkle::{Hash, empty_root, leaf_hash, node_hash, perfect_root};
use crate::note::{Checkpoint, MAX_NOTE_BYTES, VerifierKey};
use crate::tiles::{
    FileRole, TILE_WIDTH, TileId, TileKind, level_count, list_files, read_bounded, read_entries,
    read_hashes, role_of, width_at,
};

/// The outcome of one check of a ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Holds.
    Pass,
    /// Does not hold: the log is corrupt or was changed.
    Fail,
    /// Holds, with something worth saying (a torn tail the next add removes).
    Warn,
}

/// One check of a ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerCheck {
    /// `config`, `checkpoint`, `entries`, `tiles`, `root` or `files`.
    pub code: &'static str,
    /// Its outcome.
    pub status: Status,
    /// What was found.
    pub detail: String,
}

/// The report of [`verify_ledger`]: `{"ok", "size", "checks": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerReport {
    /// No check failed.
    pub ok: bool,
    /// The tree size the checkpoint names (0 when it could not be read).
    pub size: u64,
    /// Every check, in order.
    pub checks: Vec<LedgerCheck>,
}

fn check(code: &'static str, result: Result<String, String>) -> LedgerCheck {
    match result {
        Ok(detail) => LedgerCheck {
            code,
            status: Status::Pass,
            detail,
        },
        Err(detail) => LedgerCheck {
            code,
            status: Status::Fail,
            detail,
        },
    }
}

/// Check the whole ledger at `dir` with `key` (by default the key its `ledger.json`
/// names). Never panics; reads each file once, bounded.
pub fn verify_ledger(dir: &Path, key: Option<&VerifierKey>) -> LedgerReport {
    let mut checks = Vec::new();
    let config = Config::read(dir).and_then(|c| c.key().map(|k| (c, k)));
    let vkey = match (&config, key) {
        (Ok((_, own)), Some(given)) if own != given => {
            checks.push(check(
                "config",
                Err(format!(
                    "{CONFIG_FILE} names the key {}, not the one given",
                    own.to_text()
                )),
            ));
            Some(given.clone())
        }
        (Ok((c, own)), _) => {
            checks.push(check(
                "config",
                Ok(format!("origin {}, key {}", c.origin, own.to_text())),
            ));
            Some(key.cloned().unwrap_or_else(|| own.clone()))
        }
        (Err(e), given) => {
            checks.push(check("config", Err(e.to_string())));
            given.cloned()
        }
    };
    let checkpoint = vkey
        .ok_or_else(|| "no key to check the checkpoint with".to_owned())
        .and_then(|k| {
            read_bounded(&dir.join(CHECKPOINT_FILE), MAX_NOTE_BYTES as u64)
                .and_then(|note| Checkpoint::open(&note, &k))
                .map_err(|e| format!("{CHECKPOINT_FILE}: {e}"))
        });
    let cp = match checkpoint {
        Ok(cp) => {
            checks.push(check(
                "checkpoint",
                Ok(format!("signed checkpoint of {} leaves", cp.size)),
            ));
            cp
        }
        Err(e) => {
            checks.push(check("checkpoint", Err(e)));
            for code in ["entries", "tiles", "root", "files"] {
                checks.push(check(code, Err("not checked: no checkpoint".into())));
            }
            return done(0, checks);
        }
    };
    let tree = recompute(dir, cp.size);
    checks.push(check("entries", tree.entries.clone()));
    checks.push(check("tiles", tree.tiles.clone()));
    checks.push(check(
        "root",
        match &tree.root {
            Some(root) if *root == cp.root => {
                Ok("the entries hash to the checkpoint's root".into())
            }
            Some(_) => Err("the entries do not hash to the checkpoint's root".into()),
            None => Err("not checked: the entries cannot be read".into()),
        },
    ));
    checks.push(files(dir, cp.size, &tree.levels));
    done(cp.size, checks)
}

fn done(size: u64, checks: Vec<LedgerCheck>) -> LedgerReport {
    LedgerReport {
        ok: checks.iter().all(|c| c.status != Status::Fail),
        size,
        checks,
    }
}

/// The tree recomputed from the entries, and how the stored tiles compare.
struct Tree {
    entries: Result<String, String>,
    tiles: Result<String, String>,
    root: Option<Hash>,
    /// Every hash of every level, as recomputed.
    levels: Vec<Vec<Hash>>,
}

/// Whether `entry` is a leaf line: `sha256:<64 lower-case hex>\n`.
pub fn is_leaf_line(entry: &[u8]) -> bool {
    entry.len() == 72
        && entry.starts_with(b"sha256:")
        && entry[71] == b'\n'
        && entry[7..71]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

fn recompute(dir: &Path, size: u64) -> Tree {
    let mut problems = Vec::new();
    let mut leaves: Vec<Hash> = Vec::with_capacity(size.min(1 << 24) as usize);
    let mut index = 0u64;
    while let Some(width) = width_at(size, 0, index) {
        let id = TileId {
            kind: TileKind::Entries,
            index,
            width,
        };
        match read_entries(dir, id) {
            Ok(entries) => {
                for (i, e) in entries.iter().enumerate() {
                    if !is_leaf_line(e) && problems.len() < 5 {
                        problems.push(format!(
                            "leaf {} is not a line `sha256:<hex>`",
                            index * TILE_WIDTH + i as u64
                        ));
                    }
                    leaves.push(leaf_hash(e));
                }
            }
            Err(e) => {
                return Tree {
                    entries: Err(e.to_string()),
                    tiles: Err("not checked: the entries cannot be read".into()),
                    root: None,
                    levels: Vec::new(),
                };
            }
        }
        index += 1;
    }
    let entries = if problems.is_empty() {
        Ok(format!("{size} leaves, each a statement digest"))
    } else {
        Err(problems.join("; "))
    };
    let levels = levels_of(leaves);
    let tiles = compare_tiles(dir, size, &levels);
    let root = Some(root_of(&levels, size));
    Tree {
        entries,
        tiles,
        root,
        levels,
    }
}

/// Every level's hashes: level 0 the leaf hashes, level `l` the roots of the full tiles
/// of level `l - 1`.
fn levels_of(leaves: Vec<Hash>) -> Vec<Vec<Hash>> {
    let mut levels = vec![leaves];
    loop {
        let below = levels.last().expect("level 0");
        if (below.len() as u64) < TILE_WIDTH {
            break;
        }
        let up: Vec<Hash> = below
            .chunks_exact(TILE_WIDTH as usize)
            .map(perfect_root)
            .collect();
        levels.push(up);
    }
    levels
}

/// The root of the tree of `size` leaves, from the recomputed levels (RFC 6962: fold the
/// perfect subtrees, largest first, from the right).
fn root_of(levels: &[Vec<Hash>], size: u64) -> Hash {
    let mut subtrees = Vec::new();
    let mut start = 0u64;
    for height in (0..64u32).rev() {
        if size & (1 << height) != 0 {
            let level = (height / 8) as usize;
            let count = 1usize << (height - 8 * level as u32);
            let first = (start >> (8 * level)) as usize;
            subtrees.push(perfect_root(&levels[level][first..first + count]));
            start += 1 << height;
        }
    }
    let mut nodes = subtrees.iter().rev();
    let Some(mut root) = nodes.next().copied() else {
        return empty_root();
    };
    for left in nodes {
        root = node_hash(left, &root);
    }
    root
}

/// Every hash tile the tree has, byte for byte what the entries give.
fn compare_tiles(dir: &Path, size: u64, levels: &[Vec<Hash>]) -> Result<String, String> {
    let mut problems = Vec::new();
    let mut checked = 0usize;
    for (level, hashes) in levels.iter().enumerate() {
        let level = level as u8;
        let count = level_count(size, level);
        for index in 0..count.div_ceil(TILE_WIDTH) {
            let Some(width) = width_at(size, level, index) else {
                continue;
            };
            let id = TileId {
                kind: TileKind::Hashes(level),
                index,
                width,
            };
            let start = (index * TILE_WIDTH) as usize;
            let want = &hashes[start..start + usize::from(width)];
            match read_hashes(dir, id) {
                Ok(stored) if stored == want => checked += 1,
                Ok(_) => problems.push(format!("{} differs from the entries", id.path())),
                Err(e) => problems.push(e.to_string()),
            }
        }
    }
    if problems.is_empty() {
        Ok(format!("{checked} tile(s) match the entries"))
    } else {
        let n = problems.len();
        problems.truncate(5);
        Err(format!("{n} tile(s) wrong: {}", problems.join("; ")))
    }
}

/// What else is in the folder: earlier partial tiles must be prefixes of the tree's
/// tiles; tiles beyond the checkpoint and temporary files are a torn tail (a warning);
/// anything else fails.
fn files(dir: &Path, size: u64, levels: &[Vec<Hash>]) -> LedgerCheck {
    let mut torn = Vec::new();
    let mut bad = Vec::new();
    let mut earlier = 0usize;
    let listed = match list_files(dir) {
        Ok(l) => l,
        Err(e) => return check("files", Err(e.to_string())),
    };
    if let Ok(top) = std::fs::read_dir(dir) {
        for entry in top.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            match name.as_str() {
                CONFIG_FILE | CHECKPOINT_FILE => {}
                "tile" if is_dir => {}
                n if n.starts_with(&format!(".{CHECKPOINT_FILE}.tmp-")) => torn.push(name),
                _ => bad.push(format!("unexpected entry {name}")),
            }
        }
    }
    for rel in listed {
        match role_of(&rel, size) {
            FileRole::Current(_) => {}
            FileRole::Earlier(id) => match earlier_matches(dir, id, levels) {
                Ok(true) => earlier += 1,
                Ok(false) => bad.push(format!("{rel} is not a prefix of the tree's tile")),
                Err(e) => bad.push(e.to_string()),
            },
            FileRole::Beyond(_) | FileRole::Temporary => torn.push(rel),
            FileRole::Unknown => bad.push(format!("unexpected file {rel}")),
        }
    }
    let mut c = if bad.is_empty() {
        check(
            "files",
            Ok(format!(
                "nothing but the tree's tiles{}",
                if earlier > 0 {
                    format!(" and {earlier} partial tile(s) of earlier sizes")
                } else {
                    String::new()
                }
            )),
        )
    } else {
        let n = bad.len();
        bad.truncate(5);
        check("files", Err(format!("{n} problem(s): {}", bad.join("; "))))
    };
    if !torn.is_empty() && c.status == Status::Pass {
        c.status = Status::Warn;
        c.detail = format!(
            "a torn tail: {} file(s) beyond the checkpoint from an add that did not finish \
             (the next add removes them): {}",
            torn.len(),
            torn.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
        );
    }
    c
}

/// Whether an earlier partial tile (or entry bundle) holds the first hashes (entries) of
/// the tree's tile.
fn earlier_matches(dir: &Path, id: TileId, levels: &[Vec<Hash>]) -> Result<bool, LedgerError> {
    let start = (id.index * TILE_WIDTH) as usize;
    let end = start + usize::from(id.width);
    match id.kind {
        TileKind::Hashes(level) => {
            let stored = read_hashes(dir, id)?;
            Ok(levels
                .get(usize::from(level))
                .and_then(|l| l.get(start..end))
                .is_some_and(|want| want == stored.as_slice()))
        }
        TileKind::Entries => {
            let stored = read_entries(dir, id)?;
            let hashes: Vec<Hash> = stored.iter().map(|e| leaf_hash(e)).collect();
            Ok(levels[0]
                .get(start..end)
                .is_some_and(|want| want == hashes.as_slice()))
        }
    }
}
