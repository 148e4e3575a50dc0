//! Reading a bundle for verification: the folders, the log (walked line by line), the
//! shape of the run the log describes, and the blob store. Reading records what it
//! finds; the checks (one per [`CheckCode`](super::CheckCode)) judge it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use crate::dsse::DSSE_FILE;
use crate::event::{BlobRef, Event, EventType, RunFinished, RunStatus, collect_refs};
use crate::fsutil::{hash_file, walk_files};
use crate::log::{ChainInputs, LogScan, is_sha256_hex, scan_log, walk};
use crate::pack::{BlobReader, FileSource, read_chunk};
use crate::recorder::{BlobLayout, EVENTS_FILE, PACK_FILE, STATEMENT_FILE};
use crate::redaction::REDACTIONS_FILE;
use crate::salt::{SALTS_FILE, Salts};

/// Everything verification read from a bundle whose path is a folder.
pub(super) struct Bundle<'a> {
    /// The bundle's folder.
    pub root: &'a Path,
    /// The folders' listing.
    pub dir: DirRead,
    /// The log.
    pub log: LogRead,
    /// What the log says about the run as a whole.
    pub shape: Shape,
    /// The blob layout `run_started` declares: `None` without a `run_started`,
    /// `Some(None)` for an unknown one.
    pub declared: Option<Option<BlobLayout>>,
    /// The layout the blobs are judged by: the declared one, else what is on disk.
    pub blob_layout: BlobLayout,
    /// Every blob ref of every parsed event, with its line index.
    pub refs: Vec<(usize, BlobRef)>,
    /// The blob store as read.
    pub store: StoreRead,
    /// `redactions.jsonl`, as read (nothing when absent).
    pub redactions: super::redacted::RedactionsRead,
    /// What is wrong with `salts.json` for the log's chain: missing where the chain
    /// salts its commitments, unreadable, or there where it does not.
    pub salts_problem: Option<String>,
}

/// The listing of the bundle's folder and of `blobs/`.
#[derive(Default)]
pub(super) struct DirRead {
    /// What is wrong with the listing, in the order found.
    pub problems: Vec<String>,
    /// The expected entries present with the right kind.
    pub present: BTreeSet<&'static str>,
    /// Temporary files of unfinished writes (`statement.json`, its signature, a pack
    /// being rewritten).
    pub leftovers: Vec<String>,
    /// `blobs/sha256/` is a folder.
    pub has_sha_dir: bool,
    /// `blobs/pack` is a regular file.
    pub has_pack: bool,
}

/// The log, split and parsed.
pub(super) struct LogRead {
    /// The scan, when the log could be read.
    pub scan: Option<LogScan>,
    /// Why the log could not be read (missing, or an I/O error).
    pub unreadable: Option<String>,
    /// Each line's event, `None` where it did not parse.
    pub events: Vec<Option<Event>>,
    /// Why each unparsed line did not parse: (line index, reason), in line order.
    pub errors: Vec<(usize, String)>,
    /// Each line: whether it parsed and its `prev` is the hash of the line before.
    pub chained: Vec<bool>,
    /// Each line's chain hash (`None` where it cannot be computed).
    pub hashes: Vec<Option<String>>,
    /// Every line's `seq` follows the line before's.
    pub in_sequence: bool,
}

impl LogRead {
    /// The log's complete lines.
    pub(super) fn lines(&self) -> &[crate::log::RawLine] {
        self.scan
            .as_ref()
            .map(|s| s.lines.as_slice())
            .unwrap_or(&[])
    }

    /// Length of a torn last line, if any.
    pub(super) fn torn(&self) -> Option<u64> {
        self.scan.as_ref().and_then(|s| s.torn_len)
    }

    /// The log was read and every line parsed.
    pub(super) fn all_parsed(&self) -> bool {
        self.scan.is_some() && self.events.iter().all(Option::is_some)
    }

    /// The chain head: the last line's chain hash.
    pub(super) fn head(&self) -> Option<&str> {
        self.hashes.last().and_then(Option::as_deref)
    }

    /// The parsed `run_started` on the first line, if that is what it holds.
    pub(super) fn run_started(&self) -> Option<&Event> {
        self.events
            .first()
            .and_then(Option::as_ref)
            .filter(|e| e.kind == EventType::RunStarted)
    }
}

/// The run as the log's `run_finished` events delimit it.
pub(super) struct Shape {
    /// The last `run_finished` whose payload parses, with its line index.
    pub last_finish: Option<(usize, RunFinished)>,
    /// Index of the first line of the last segment (after the `run_finished` before
    /// the last one; a paused run resumed starts a segment).
    pub seg_start: usize,
    /// The log ends with that `run_finished`, every line parsed and none is torn.
    pub ends_finished: bool,
    /// The status of the last `run_finished`.
    pub status: Option<RunStatus>,
    /// The run ended and `statement.json` exists.
    pub complete: bool,
}

/// The blob store as read, per the layout the blobs are judged by.
pub(super) enum StoreRead {
    /// Loose blobs whose folder is missing (reported by the layout check).
    Absent,
    /// Loose blobs, `blobs/sha256/<hex>`.
    Loose(LooseRead),
    /// A pack, `blobs/pack`.
    Pack(PackRead),
}

/// The files of `blobs/sha256/`.
#[derive(Default)]
pub(super) struct LooseRead {
    /// Problems walking the folder, then files that are not blobs or cannot be read,
    /// in the order found.
    pub problems: Vec<String>,
    /// Temporary files of unfinished writes (`blobs/sha256/.…tmp-…`).
    pub leftovers: Vec<String>,
    /// Blobs whose content matches their name, with their sizes.
    pub stored: BTreeMap<String, u64>,
    /// Files named by a digest their content does not have.
    pub mismatched: BTreeSet<String>,
}

/// How much a pack problem weighs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Weight {
    /// Always a failure.
    Fail,
    /// A failure in a complete bundle, a warning in an interrupted one.
    FailIfComplete,
}

/// The pack as read.
pub(super) enum PackRead {
    /// `blobs/pack` is not there.
    Missing,
    /// It cannot be opened or its index not read.
    Unreadable(String),
    /// Read: the index checked, every chunk and every blob re-hashed.
    Read(PackFacts),
}

/// What reading a pack found.
pub(super) struct PackFacts {
    /// Problems of the pack itself (torn tail, bad chunks, unused chunks), in order.
    pub problems: Vec<(Weight, String)>,
    /// Blobs that could not be rebuilt for a reason other than a bad chunk.
    pub blob_errors: Vec<String>,
    /// Blobs rebuilt and re-hashed: digest → size.
    pub good: BTreeMap<[u8; 32], u64>,
    /// Every blob record's digest, in pack order.
    pub indexed: Vec<[u8; 32]>,
    /// Digests the index knows.
    pub known: BTreeSet<[u8; 32]>,
    /// Bytes up to the last whole record.
    pub good_len: u64,
    /// Number of chunks.
    pub chunks: usize,
}

impl<'a> Bundle<'a> {
    /// Read the bundle at `root`, a folder.
    pub(super) fn read(root: &'a Path) -> Bundle<'a> {
        let dir = read_dir(root);
        let redactions =
            super::redacted::RedactionsRead::read(root, dir.present.contains(REDACTIONS_FILE));
        let salts = if dir.present.contains(SALTS_FILE) {
            Salts::read(root)
        } else {
            Ok(None)
        };
        let inputs = ChainInputs {
            subst: redactions.substitutions.clone(),
            salts: salts.as_ref().ok().cloned().flatten(),
        };
        let log = read_log(root, dir.present.contains(EVENTS_FILE), &inputs);
        let chain = log
            .run_started()
            .map(|e| crate::chain::chain_of(&e.payload));
        // Salts matter only to a log that has lines to chain: a bundle interrupted as it
        // was made may hold an empty or partial salts.json and no line.
        let salts_problem = match (salts, chain) {
            (Err(e), Some(_)) => Some(e),
            (Ok(None), Some(c)) if c >= crate::chain::SALTED => Some(format!(
                "{SALTS_FILE} is missing: the log is chained by salted commitments (chain {c})"
            )),
            (Ok(Some(_)), Some(c)) if c < crate::chain::SALTED => Some(format!(
                "{SALTS_FILE} in a bundle whose log is chained without salts (chain {c})"
            )),
            _ => None,
        };
        let declared = log
            .run_started()
            .map(|e| BlobLayout::of_run_started(&e.payload));
        let blob_layout = match declared {
            Some(Some(l)) => l,
            Some(None) | None if dir.has_pack => BlobLayout::Pack,
            Some(None) | None => BlobLayout::Loose,
        };
        let shape = shape(&log, dir.present.contains(STATEMENT_FILE));
        let mut refs = Vec::new();
        for (i, ev) in log.events.iter().enumerate() {
            if let Some(ev) = ev {
                let mut found = Vec::new();
                collect_refs(&ev.payload, &mut found);
                refs.extend(found.into_iter().map(|b| (i, b)));
            }
        }
        let blob_dir = root.join("blobs/sha256");
        let store = if blob_layout == BlobLayout::Pack {
            StoreRead::Pack(if dir.has_pack && dir.present.contains("blobs") {
                read_pack(root)
            } else {
                PackRead::Missing
            })
        } else if matches!(fs::symlink_metadata(&blob_dir), Ok(m) if m.is_dir()) {
            StoreRead::Loose(read_loose(&blob_dir))
        } else {
            StoreRead::Absent
        };
        Bundle {
            root,
            dir,
            log,
            shape,
            declared,
            blob_layout,
            refs,
            store,
            redactions,
            salts_problem,
        }
    }

    /// Every leftover temporary file: the bundle's and `blobs/`'s, then `blobs/sha256/`'s.
    pub(super) fn leftovers(&self) -> impl Iterator<Item = &String> {
        let loose = match &self.store {
            StoreRead::Loose(l) => l.leftovers.as_slice(),
            _ => &[],
        };
        self.dir.leftovers.iter().chain(loose)
    }
}

fn is_statement_temp(name: &str) -> bool {
    name.starts_with(&format!(".{STATEMENT_FILE}.tmp-"))
}

/// List the bundle's folder and `blobs/`.
fn read_dir(root: &Path) -> DirRead {
    let mut d = DirRead::default();
    match fs::read_dir(root) {
        Err(e) => d.problems.push(format!("cannot list the bundle: {e}")),
        Ok(entries) => {
            for entry in entries {
                let Ok(entry) = entry else {
                    d.problems.push("cannot list the bundle".to_owned());
                    continue;
                };
                read_entry(&mut d, &entry);
            }
        }
    }
    for required in [EVENTS_FILE, "input", "output", "blobs"] {
        if !d.present.contains(required) {
            d.problems.push(format!("{required} is missing"));
        }
    }
    if d.present.contains("blobs")
        && let Ok(entries) = fs::read_dir(root.join("blobs"))
    {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let ft = entry.file_type().ok();
            let is_dir = ft.is_some_and(|t| t.is_dir());
            let is_file = ft.is_some_and(|t| t.is_file());
            if name == "sha256" && is_dir {
                d.has_sha_dir = true;
            } else if name == "pack" && is_file {
                d.has_pack = true;
            } else if is_file && name.to_string_lossy().starts_with(".pack.tmp-") {
                d.leftovers
                    .push(format!("blobs/{}", name.to_string_lossy()));
            } else {
                d.problems
                    .push(format!("unexpected entry blobs/{}", name.to_string_lossy()));
            }
        }
    }
    d
}

/// One entry of the bundle's folder.
fn read_entry(d: &mut DirRead, entry: &fs::DirEntry) {
    let name_os = entry.file_name();
    let Some(name) = name_os.to_str() else {
        d.problems
            .push(format!("unexpected entry {:?} (name not UTF-8)", name_os));
        return;
    };
    let Ok(ft) = entry.file_type() else {
        d.problems.push(format!("{name}: cannot stat"));
        return;
    };
    let kind_ok = |want_dir: bool| if want_dir { ft.is_dir() } else { ft.is_file() };
    match name {
        EVENTS_FILE | STATEMENT_FILE | DSSE_FILE | REDACTIONS_FILE | SALTS_FILE | "input"
        | "output" | "blobs" => {
            let want_dir = !name.ends_with(".json") && !name.ends_with(".jsonl");
            if ft.is_symlink() {
                d.problems
                    .push(format!("{name} is a symlink (not followed)"));
            } else if !kind_ok(want_dir) {
                d.problems.push(format!(
                    "{name} is not a {}",
                    if want_dir {
                        "directory"
                    } else {
                        "regular file"
                    }
                ));
            } else {
                d.present.insert(match name {
                    EVENTS_FILE => EVENTS_FILE,
                    STATEMENT_FILE => STATEMENT_FILE,
                    DSSE_FILE => DSSE_FILE,
                    REDACTIONS_FILE => REDACTIONS_FILE,
                    SALTS_FILE => SALTS_FILE,
                    "input" => "input",
                    "output" => "output",
                    _ => "blobs",
                });
            }
        }
        n if (is_statement_temp(n) || n.starts_with(&format!(".{DSSE_FILE}.tmp-")))
            && ft.is_file() =>
        {
            d.leftovers.push(n.to_owned())
        }
        n => d.problems.push(format!("unexpected entry {n}")),
    }
}

/// Read and walk the log (when it is there), chained with the digests of the strings a
/// redaction removed and the run's salts.
fn read_log(root: &Path, present: bool, inputs: &ChainInputs) -> LogRead {
    let (scan, unreadable) = if present {
        match scan_log(&root.join(EVENTS_FILE)) {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(format!("cannot read {EVENTS_FILE}: {e}"))),
        }
    } else {
        (None, Some(format!("{EVENTS_FILE} is missing")))
    };
    let mut log = LogRead {
        scan: None,
        unreadable,
        events: Vec::new(),
        errors: Vec::new(),
        chained: Vec::new(),
        hashes: Vec::new(),
        in_sequence: true,
    };
    if let Some(scan) = &scan {
        for line in walk(scan, inputs) {
            log.in_sequence &= line.in_sequence;
            log.chained.push(line.chained);
            log.hashes.push(line.hash);
            match line.event {
                Ok(ev) => log.events.push(Some(ev)),
                Err(e) => {
                    log.errors.push((line.index, e));
                    log.events.push(None);
                }
            }
        }
    }
    log.scan = scan;
    log
}

/// The run's shape: where its `run_finished` events are and whether it ended.
fn shape(log: &LogRead, has_statement: bool) -> Shape {
    let mut last_finish: Option<(usize, RunFinished)> = None;
    let mut seg_start = 0usize;
    for (i, ev) in log.events.iter().enumerate() {
        let Some(ev) = ev else { continue };
        if ev.kind != EventType::RunFinished {
            continue;
        }
        if let Ok(p) = serde_json::from_value::<RunFinished>(ev.payload.clone()) {
            if let Some((j, _)) = &last_finish {
                seg_start = j + 1;
            }
            last_finish = Some((i, p));
        }
    }
    let ends_finished = matches!(
        (&last_finish, log.lines().len()),
        (Some((i, _)), n) if *i + 1 == n
    ) && log.torn().is_none()
        && log.all_parsed();
    let status = last_finish.as_ref().map(|(_, p)| p.status);
    Shape {
        last_finish,
        seg_start,
        ends_finished,
        status,
        complete: ends_finished && has_statement,
    }
}

/// Walk `blobs/sha256/`, hashing every blob.
fn read_loose(blob_dir: &Path) -> LooseRead {
    let mut l = LooseRead::default();
    let walk = walk_files(blob_dir);
    l.problems = walk
        .problems
        .into_iter()
        .map(|p| format!("blobs/sha256/{p}"))
        .collect();
    for f in walk.files {
        if f.rel.starts_with('.') && f.rel.contains(".tmp-") {
            l.leftovers.push(format!("blobs/sha256/{}", f.rel));
            continue;
        }
        if !is_sha256_hex(&f.rel) {
            l.problems
                .push(format!("unexpected file blobs/sha256/{}", f.rel));
            continue;
        }
        match hash_file(&f.path, false) {
            Err(e) => l
                .problems
                .push(format!("blobs/sha256/{}: cannot read: {e}", f.rel)),
            Ok((sha, size)) => {
                if sha != f.rel {
                    // Judged by the blobs check: tampering when an event names it, a
                    // blob cut short by a crash when none does and the run is unfinished.
                    l.mismatched.insert(f.rel);
                } else {
                    l.stored.insert(f.rel, size);
                }
            }
        }
    }
    l
}

/// Read the pack: its header and index, every chunk's data (decompressed and
/// re-hashed), every blob rebuilt and re-hashed.
fn read_pack(root: &Path) -> PackRead {
    let path = root.join(PACK_FILE);
    let reader = match FileSource::open(&path)
        .map_err(|e| format!("cannot open {PACK_FILE}: {e}"))
        .and_then(|src| BlobReader::new(src).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => return PackRead::Unreadable(e),
    };
    let index = reader.index();
    let mut problems = Vec::new();
    if let Some(t) = index.torn {
        let what = if t.offset == 0 {
            "its header is incomplete".to_owned()
        } else if t.zeros {
            format!(
                "it ends in {} zero bytes after its last whole record (space allocated but \
                 not written when the machine stopped)",
                t.len
            )
        } else {
            format!(
                "its last record is torn ({} bytes at byte {})",
                t.len, t.offset
            )
        };
        problems.push((Weight::FailIfComplete, format!("{PACK_FILE}: {what}")));
    }
    // Every chunk's data, once.
    for c in &index.chunks {
        if let Err(e) = read_chunk(reader.source(), c) {
            problems.push((Weight::Fail, e.to_string()));
        }
    }
    // Every blob rebuilt and re-hashed (a bad chunk is already reported under `pack`).
    let mut good: BTreeMap<[u8; 32], u64> = BTreeMap::new();
    let mut blob_errors = Vec::new();
    // Every chunk some blob uses: its own chunks, and its base's leading ones (which
    // are the base's own or, further down, its base's).
    let mut used = vec![false; index.chunks.len()];
    for b in &index.blobs {
        for c in &b.own {
            used[*c as usize] = true;
        }
    }
    reader.check_all(|i, result| {
        let b = &index.blobs[i as usize];
        match result {
            Ok(()) => {
                good.insert(b.digest, b.size);
            }
            // A bad chunk is reported under `pack` already.
            Err(e) if e.region == crate::pack::Region::Chunk => {}
            Err(e) => blob_errors.push(format!("blob {}: {e}", hex::encode(b.digest))),
        }
    });
    let unused = used.iter().filter(|u| !**u).count();
    if unused > 0 {
        problems.push((
            Weight::FailIfComplete,
            format!("{unused} chunk(s) in {PACK_FILE} that no blob uses (a blob being written when the run was interrupted)"),
        ));
    }
    PackRead::Read(PackFacts {
        problems,
        blob_errors,
        good,
        indexed: index.blobs.iter().map(|b| b.digest).collect(),
        known: index.blob_by_digest.keys().copied().collect(),
        good_len: index.good_len,
        chunks: index.chunks.len(),
    })
}
