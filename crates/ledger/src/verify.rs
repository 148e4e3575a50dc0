//! Checking a whole ledger (`provrun ledger verify`): the configuration, the checkpoint's
//! signature, every entry, every tile against the hashes recomputed from the entries, the
//! root, and what else lies in the folder (a torn tail is a warning; files the layout
//! does not know fail).

use std::path::Path;

use serde::Serialize;

use crate::error::LedgerError;
use crate::files::{Folder, LogFiles};
use crate::ledger::{CHECKPOINT_FILE, CONFIG_FILE, Config};
use crate::merkle::{Hash, empty_root, leaf_hash, node_hash, perfect_root};
use crate::note::{Checkpoint, MAX_NOTE_BYTES, VerifierKey};
use crate::tiles::{
    FileRole, TILE_WIDTH, TileId, TileKind, level_count, list_files, read_entries_from,
    read_hashes_from, role_of, width_at,
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
    verify_ledger_at(&Folder::new(dir), key)
}

/// [`verify_ledger`] of a ledger wherever it is (a folder or a URL, [`LogFiles`]). A
/// ledger that cannot be listed (a web server) has its `files` check skipped, with a
/// warning; one without a readable `ledger.json` is checked with `key`.
pub fn verify_ledger_at(files: &dyn LogFiles, key: Option<&VerifierKey>) -> LedgerReport {
    let mut checks = Vec::new();
    let config = Config::read_from(files).and_then(|c| c.key().map(|k| (c, k)));
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
        // A ledger published without its configuration, checked with the key given.
        (Err(LedgerError::NotALedger(_)), Some(given)) if files.folder().is_none() => {
            checks.push(LedgerCheck {
                code: "config",
                status: Status::Warn,
                detail: format!("no {CONFIG_FILE}; checked with the key given"),
            });
            Some(given.clone())
        }
        (Err(e), given) => {
            checks.push(check("config", Err(e.to_string())));
            given.cloned()
        }
    };
    let checkpoint = vkey
        .ok_or_else(|| "no key to check the checkpoint with".to_owned())
        .and_then(|k| {
            files
                .read(CHECKPOINT_FILE, MAX_NOTE_BYTES as u64)
                .and_then(|note| {
                    note.ok_or_else(|| LedgerError::BadNote("there is no checkpoint".into()))
                })
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
    let tree = recompute(files, cp.size, &cp.root);
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
    checks.push(match files.folder() {
        Some(dir) => folder_files(dir, cp.size, &tree.levels),
        None => listed_files(files, cp.size, &tree.levels),
    });
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

fn recompute(files: &dyn LogFiles, size: u64, signed: &Hash) -> Tree {
    let mut problems = Vec::new();
    let mut leaves: Vec<Hash> = Vec::with_capacity(size.min(1 << 24) as usize);
    let mut index = 0u64;
    while let Some(width) = width_at(size, 0, index) {
        let id = TileId {
            kind: TileKind::Entries,
            index,
            width,
        };
        match read_entries_from(files, id) {
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
    let levels = levels_of(leaves);
    let stored = read_stored(files, size);
    let changed_leaves = blame_leaves(&stored, &levels, size, signed);
    let tiles = match &changed_leaves {
        // The hash tiles hold the signed tree: the leaves that differ changed.
        Some(_) => Ok(format!(
            "{} tile(s) hold the tree the checkpoint signs",
            stored.tiles.len()
        )),
        None => compare_tiles(&stored, &levels),
    };
    if let Some(changed) = changed_leaves.filter(|c| !c.is_empty()) {
        let n = changed.len();
        let shown: Vec<String> = changed
            .iter()
            .take(5)
            .map(|leaf| {
                let bundle = TileId {
                    kind: TileKind::Entries,
                    index: leaf / TILE_WIDTH,
                    width: width_at(size, 0, leaf / TILE_WIDTH).unwrap_or(TILE_WIDTH as u16),
                };
                format!(
                    "leaf {leaf} ({}, entry {}) does not hash to the leaf the signed tree holds",
                    bundle.path(),
                    leaf % TILE_WIDTH
                )
            })
            .collect();
        problems.insert(
            0,
            format!(
                "{n} leaf/leaves changed, the hash tiles intact: {}{}",
                shown.join("; "),
                if n > 5 { "; …" } else { "" }
            ),
        );
    }
    let entries = if problems.is_empty() {
        Ok(format!("{size} leaves, each a statement digest"))
    } else {
        Err(problems.join("; "))
    };
    let root = Some(root_of(&levels, size));
    Tree {
        entries,
        tiles,
        root,
        levels,
    }
}

/// The hash tiles as stored: each tile the tree of `size` has, read (or why not).
struct Stored {
    tiles: Vec<(TileId, Result<Vec<Hash>, String>)>,
}

fn read_stored(files: &dyn LogFiles, size: u64) -> Stored {
    let mut tiles = Vec::new();
    let mut level = 0u8;
    while level < 64 && level_count(size, level) > 0 {
        let count = level_count(size, level);
        for index in 0..count.div_ceil(TILE_WIDTH) {
            if let Some(width) = width_at(size, level, index) {
                let id = TileId {
                    kind: TileKind::Hashes(level),
                    index,
                    width,
                };
                tiles.push((id, read_hashes_from(files, id).map_err(|e| e.to_string())));
            }
        }
        level += 1;
    }
    Stored { tiles }
}

/// When the stored hash tiles are whole, agree with each other (each full tile's root is
/// the hash above it) and give the signed root, they are the signed tree: the leaves
/// whose recomputed hashes differ from them changed. `None` when the tiles are not that
/// (then the tiles are what is blamed).
fn blame_leaves(
    stored: &Stored,
    levels: &[Vec<Hash>],
    size: u64,
    signed: &Hash,
) -> Option<Vec<u64>> {
    let mut by_level: Vec<Vec<Hash>> = Vec::new();
    for (id, hashes) in &stored.tiles {
        let hashes = hashes.as_ref().ok()?;
        let level = usize::from(id.level());
        if by_level.len() <= level {
            by_level.resize(level + 1, Vec::new());
        }
        if by_level[level].len() as u64 != id.index * TILE_WIDTH {
            return None;
        }
        by_level[level].extend_from_slice(hashes);
    }
    if by_level.is_empty() {
        by_level.push(Vec::new());
    }
    for l in 1..by_level.len() {
        let below = &by_level[l - 1];
        let full = below.len() / TILE_WIDTH as usize;
        if by_level[l].len() < full {
            return None;
        }
        for (i, chunk) in below.chunks_exact(TILE_WIDTH as usize).enumerate() {
            if perfect_root(chunk) != by_level[l][i] {
                return None;
            }
        }
    }
    if root_of(&by_level, size) != *signed {
        return None;
    }
    let recomputed = levels.first()?;
    Some(
        recomputed
            .iter()
            .zip(&by_level[0])
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i as u64)
            .collect(),
    )
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
fn compare_tiles(stored: &Stored, levels: &[Vec<Hash>]) -> Result<String, String> {
    let mut problems = Vec::new();
    let mut checked = 0usize;
    for (id, hashes) in &stored.tiles {
        let start = (id.index * TILE_WIDTH) as usize;
        let want = levels
            .get(usize::from(id.level()))
            .and_then(|l| l.get(start..start + usize::from(id.width)));
        match (hashes, want) {
            (Ok(stored), Some(want)) if stored == want => checked += 1,
            (Ok(_), _) => problems.push(format!("{} differs from the entries", id.path())),
            (Err(e), _) => problems.push(e.clone()),
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
fn folder_files(dir: &Path, size: u64, levels: &[Vec<Hash>]) -> LedgerCheck {
    let mut found = Found::default();
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
                n if n.starts_with(&format!(".{CHECKPOINT_FILE}.tmp-")) => found.torn.push(name),
                _ => found.bad.push(format!("unexpected entry {name}")),
            }
        }
    }
    found.classify(&Folder::new(dir), listed, size, levels);
    found.check()
}

/// The `files` check of a ledger at a URL: its objects below `tile/`, as a folder's files
/// are judged (other objects beside the layout are not looked at); a web server that
/// cannot be listed is a warning that says what was not checked.
fn listed_files(files: &dyn LogFiles, size: u64, levels: &[Vec<Hash>]) -> LedgerCheck {
    match files.list_tiles() {
        Ok(Some(listed)) => {
            let mut found = Found::default();
            found.classify(files, listed, size, levels);
            found.check()
        }
        Ok(None) => LedgerCheck {
            code: "files",
            status: Status::Warn,
            detail: format!(
                "{} cannot be listed: the tiles the checkpoint names were checked, nothing else",
                files.describe()
            ),
        },
        Err(e) => check("files", Err(e.to_string())),
    }
}

/// What the files of a ledger beside its tree's tiles are.
#[derive(Default)]
struct Found {
    torn: Vec<String>,
    bad: Vec<String>,
    earlier: usize,
}

impl Found {
    fn classify(
        &mut self,
        files: &dyn LogFiles,
        listed: Vec<String>,
        size: u64,
        levels: &[Vec<Hash>],
    ) {
        for rel in listed {
            match role_of(&rel, size) {
                FileRole::Current(_) => {}
                FileRole::Earlier(id) => match earlier_matches(files, id, levels) {
                    Ok(true) => self.earlier += 1,
                    Ok(false) => self
                        .bad
                        .push(format!("{rel} is not a prefix of the tree's tile")),
                    Err(e) => self.bad.push(e.to_string()),
                },
                FileRole::Beyond(_) | FileRole::Temporary => self.torn.push(rel),
                FileRole::Unknown => self.bad.push(format!("unexpected file {rel}")),
            }
        }
    }

    fn check(mut self) -> LedgerCheck {
        let mut c = if self.bad.is_empty() {
            check(
                "files",
                Ok(format!(
                    "nothing but the tree's tiles{}",
                    if self.earlier > 0 {
                        format!(" and {} partial tile(s) of earlier sizes", self.earlier)
                    } else {
                        String::new()
                    }
                )),
            )
        } else {
            let n = self.bad.len();
            self.bad.truncate(5);
            check(
                "files",
                Err(format!("{n} problem(s): {}", self.bad.join("; "))),
            )
        };
        if !self.torn.is_empty() && c.status == Status::Pass {
            c.status = Status::Warn;
            c.detail = format!(
                "a torn tail: {} file(s) beyond the checkpoint from an add that did not finish \
                 (the next add removes them): {}",
                self.torn.len(),
                self.torn
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        c
    }
}

/// Whether an earlier partial tile (or entry bundle) holds the first hashes (entries) of
/// the tree's tile.
fn earlier_matches(
    files: &dyn LogFiles,
    id: TileId,
    levels: &[Vec<Hash>],
) -> Result<bool, LedgerError> {
    let start = (id.index * TILE_WIDTH) as usize;
    let end = start + usize::from(id.width);
    match id.kind {
        TileKind::Hashes(level) => {
            let stored = read_hashes_from(files, id)?;
            Ok(levels
                .get(usize::from(level))
                .and_then(|l| l.get(start..end))
                .is_some_and(|want| want == stored.as_slice()))
        }
        TileKind::Entries => {
            let stored = read_entries_from(files, id)?;
            let hashes: Vec<Hash> = stored.iter().map(|e| leaf_hash(e)).collect();
            Ok(levels[0]
                .get(start..end)
                .is_some_and(|want| want == hashes.as_slice()))
        }
    }
}
