//! Offline verification of a bundle: every check has a stable code, a status and a
//! detail; the report sums them up as `ok` (nothing failed) and `complete` (the run
//! reached its end and the statement was written).
//!
//! The bundle is hostile input: nothing here follows a symlink, opens a special file,
//! trusts a path taken from the log, or reads an unbounded line into memory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dsse::DSSE_FILE;
use crate::event::{
    BlobRef, Confidence, Event, EventType, FileRecord, OutputSkipped, RunFinished, RunStarted,
    RunStatus, ToolCalled, collect_refs, escape_path_bytes,
};
use crate::fsutil::{hash_file, open_regular, walk_files};
use crate::log::{LogScan, is_sha256_hex, parse_line, scan_log};
use crate::pack::{BlobReader, FileSource, read_chunk};
use crate::recorder::{BlobLayout, EVENTS_FILE, PACK_FILE, STATEMENT_FILE};
use crate::statement::StatementFacts;

/// Largest `statement.json` read (64 MiB).
const MAX_STATEMENT_BYTES: u64 = 64 * 1024 * 1024;
/// How many problems a check's detail lists before summarising the rest.
const DETAIL_ITEMS: usize = 5;

/// The stable code of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckCode {
    /// The bundle's directory structure: expected entries of the right kinds, nothing
    /// else, no symlinks or special files anywhere.
    Layout,
    /// Every line of `events.jsonl` is UTF-8 canonical JSON with the envelope fields and a
    /// payload that fits its type and confidence; a torn last line is a warning.
    Parse,
    /// Each line's `prev` is the SHA-256 of the line before (`null` for the first).
    Chain,
    /// `seq` counts from 0, one `run_id`, `run_started` first and only first,
    /// `run_finished` last (earlier ones only `paused`), with the right `event_count`.
    Sequence,
    /// Every file in `blobs/sha256` is named by its digest, every blob ref resolves with
    /// the right size, and no blob is unreferenced.
    Blobs,
    /// The pack (blob store v2, `blobs/pack`): its header, the framing of every record,
    /// every chunk's data (decompressed and re-hashed), no torn tail in a complete
    /// bundle, no chunk that no blob uses. Passes with nothing to check in a bundle of
    /// loose blobs.
    Pack,
    /// The files under `input/` are exactly the `input_staged` events, digests equal.
    Inputs,
    /// The files under `output/` are exactly the final `output_produced` events.
    Outputs,
    /// `statement.json` equals, byte for byte, the statement derived from the log.
    Statement,
    /// Every deferred tool call is later completed (unless the run is paused), none is
    /// deferred after completing, none completed twice.
    ToolCalls,
    /// `statement.dsse.json`, if present or required, is a DSSE envelope of exactly
    /// `statement.json` with a valid Ed25519 signature by the given key.
    Signature,
}

impl CheckCode {
    /// The code as written in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckCode::Layout => "layout",
            CheckCode::Parse => "parse",
            CheckCode::Chain => "chain",
            CheckCode::Sequence => "sequence",
            CheckCode::Blobs => "blobs",
            CheckCode::Pack => "pack",
            CheckCode::Inputs => "inputs",
            CheckCode::Outputs => "outputs",
            CheckCode::Statement => "statement",
            CheckCode::ToolCalls => "tool-calls",
            CheckCode::Signature => "signature",
        }
    }
}

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Holds.
    Pass,
    /// Violated: the bundle is tampered with or corrupt.
    Fail,
    /// Not violated, but not fully checkable or worth a look (e.g. an unfinished run).
    Warn,
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Stable code.
    pub code: CheckCode,
    /// Outcome.
    pub status: CheckStatus,
    /// Human-readable detail: what was found.
    pub detail: String,
}

/// The result of [`verify`]; serialises as `{"ok":…,"complete":…,"checks":[…]}`, plus
/// `"status"` when the log ends with `run_finished`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// No check failed.
    pub ok: bool,
    /// The log ends with `run_finished`, has no torn line, and `statement.json` exists.
    pub complete: bool,
    /// How the run ended, as its last `run_finished` says (`finished`, `failed`,
    /// `cancelled`, or `paused`: a paused run is `complete` too, and waits to be resumed);
    /// `None` when the log does not end with `run_finished`. Added later: absent from
    /// the JSON then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// Every check, in a fixed order.
    pub checks: Vec<Check>,
}

impl VerifyReport {
    /// The check with `code`, if it ran.
    pub fn check(&self, code: CheckCode) -> Option<&Check> {
        self.checks.iter().find(|c| c.code == code)
    }

    /// Process exit code for `provrun verify`: 0 all good, 1 a check failed, 3 valid
    /// but incomplete (the run never finished).
    pub fn exit_code(&self) -> i32 {
        if !self.ok {
            1
        } else if !self.complete {
            3
        } else {
            0
        }
    }

    /// Checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.status == CheckStatus::Fail)
    }
}

/// Problems gathered for one check.
struct Acc {
    code: CheckCode,
    fails: Vec<String>,
    warns: Vec<String>,
    pass: String,
}

impl Acc {
    fn new(code: CheckCode) -> Self {
        Acc {
            code,
            fails: Vec::new(),
            warns: Vec::new(),
            pass: String::new(),
        }
    }
    fn fail(&mut self, msg: impl Into<String>) {
        self.fails.push(msg.into());
    }
    fn warn(&mut self, msg: impl Into<String>) {
        self.warns.push(msg.into());
    }
    fn fail_or_warn(&mut self, fail: bool, msg: impl Into<String>) {
        if fail { self.fail(msg) } else { self.warn(msg) }
    }
    fn done(self) -> Check {
        fn list(items: &[String]) -> String {
            let mut s = items
                .iter()
                .take(DETAIL_ITEMS)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ");
            if items.len() > DETAIL_ITEMS {
                s.push_str(&format!("; and {} more", items.len() - DETAIL_ITEMS));
            }
            s
        }
        let (status, detail) = if !self.fails.is_empty() {
            let mut d = list(&self.fails);
            if !self.warns.is_empty() {
                d.push_str(&format!(" (warnings: {})", list(&self.warns)));
            }
            (CheckStatus::Fail, d)
        } else if !self.warns.is_empty() {
            (CheckStatus::Warn, list(&self.warns))
        } else {
            (CheckStatus::Pass, self.pass)
        };
        Check {
            code: self.code,
            status,
            detail,
        }
    }
}

fn valid_rel_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\0')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

fn is_statement_temp(name: &str) -> bool {
    name.starts_with(&format!(".{STATEMENT_FILE}.tmp-"))
}

fn file_map(acc: &mut Acc, root: &Path, sub: &str) -> BTreeMap<String, std::path::PathBuf> {
    let dir = root.join(sub);
    if !matches!(fs::symlink_metadata(&dir), Ok(m) if m.is_dir()) {
        return BTreeMap::new(); // reported by the layout check
    }
    let walk = walk_files(&dir);
    for p in walk.problems {
        acc.fail(format!("{sub}/{p}"));
    }
    walk.files.into_iter().map(|f| (f.rel, f.path)).collect()
}

/// Compare recorded files with the files present.
fn compare_files(
    acc: &mut Acc,
    sub: &str,
    records: &[FileRecord],
    files: &BTreeMap<String, std::path::PathBuf>,
    strict: bool,
) {
    let mut seen = BTreeSet::new();
    for r in records {
        if !valid_rel_path(&r.path) {
            acc.fail(format!(
                "recorded path {:?} is not a plain relative path",
                r.path
            ));
            continue;
        }
        if !seen.insert(r.path.as_str()) {
            acc.fail(format!("{sub}/{} is recorded twice", r.path));
            continue;
        }
        match files.get(&r.path) {
            None => acc.fail(format!("{sub}/{} is recorded but missing", r.path)),
            Some(path) => match hash_file(path, false) {
                Err(e) => acc.fail(format!("{sub}/{}: cannot read: {e}", r.path)),
                Ok((sha, size)) => {
                    if sha != r.sha256 || size != r.size {
                        acc.fail(format!(
                            "{sub}/{} does not match its recorded digest",
                            r.path
                        ));
                    }
                }
            },
        }
    }
    for rel in files.keys() {
        if !seen.contains(rel.as_str()) {
            acc.fail_or_warn(strict, format!("{sub}/{rel} is not recorded"));
        }
    }
    if acc.fails.is_empty() && acc.warns.is_empty() {
        acc.pass = format!("{} file(s) match their events", records.len());
    }
}

fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "file too large",
        ));
    }
    Ok(bytes)
}

/// Options of [`verify_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Ed25519 public key that must have signed the statement (`statement.dsse.json`).
    /// Checking a signature needs the crate feature `dsse`.
    pub public_key: Option<[u8; 32]>,
}

/// Check a bundle offline. Never panics and never follows a symlink; problems in the
/// bundle become failed or warned checks. A signature, if present, is not checked
/// (the `signature` check warns); use [`verify_with`] and a key for that.
pub fn verify(bundle: impl AsRef<Path>) -> VerifyReport {
    verify_with(bundle, &VerifyOptions::default())
}

/// [`verify`] with options, e.g. the public key the statement must be signed with.
pub fn verify_with(bundle: impl AsRef<Path>, options: &VerifyOptions) -> VerifyReport {
    let root = bundle.as_ref();
    let mut layout = Acc::new(CheckCode::Layout);
    let mut parse = Acc::new(CheckCode::Parse);
    let mut chain = Acc::new(CheckCode::Chain);
    let mut sequence = Acc::new(CheckCode::Sequence);
    let mut blobs = Acc::new(CheckCode::Blobs);
    let mut pack = Acc::new(CheckCode::Pack);
    let mut inputs = Acc::new(CheckCode::Inputs);
    let mut outputs = Acc::new(CheckCode::Outputs);
    let mut statement = Acc::new(CheckCode::Statement);
    let mut tools = Acc::new(CheckCode::ToolCalls);
    let mut signature = Acc::new(CheckCode::Signature);

    // --- layout -------------------------------------------------------------------------
    match fs::symlink_metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(m) if m.file_type().is_symlink() => {
            layout.fail("the bundle path is a symlink (not followed)")
        }
        Ok(_) => layout.fail("the bundle path is not a directory"),
        Err(e) => layout.fail(format!("cannot open the bundle: {e}")),
    }
    if !layout.fails.is_empty() {
        let detail = "not checked: the bundle cannot be read".to_owned();
        let mut checks = vec![layout.done()];
        for code in [
            CheckCode::Parse,
            CheckCode::Chain,
            CheckCode::Sequence,
            CheckCode::Blobs,
            CheckCode::Pack,
            CheckCode::Inputs,
            CheckCode::Outputs,
            CheckCode::Statement,
            CheckCode::ToolCalls,
            CheckCode::Signature,
        ] {
            checks.push(Check {
                code,
                status: CheckStatus::Fail,
                detail: detail.clone(),
            });
        }
        return VerifyReport {
            ok: false,
            complete: false,
            status: None,
            checks,
        };
    }
    let mut has_events = false;
    let mut has_statement = false;
    let mut leftovers: Vec<String> = Vec::new();
    let mut present: BTreeSet<&str> = BTreeSet::new();
    match fs::read_dir(root) {
        Err(e) => layout.fail(format!("cannot list the bundle: {e}")),
        Ok(entries) => {
            for entry in entries {
                let Ok(entry) = entry else {
                    layout.fail("cannot list the bundle");
                    continue;
                };
                let name_os = entry.file_name();
                let Some(name) = name_os.to_str() else {
                    layout.fail(format!("unexpected entry {:?} (name not UTF-8)", name_os));
                    continue;
                };
                let Ok(ft) = entry.file_type() else {
                    layout.fail(format!("{name}: cannot stat"));
                    continue;
                };
                let kind_ok = |want_dir: bool| if want_dir { ft.is_dir() } else { ft.is_file() };
                match name {
                    EVENTS_FILE | STATEMENT_FILE | DSSE_FILE | "input" | "output" | "blobs" => {
                        let want_dir = !name.ends_with(".json") && !name.ends_with(".jsonl");
                        if ft.is_symlink() {
                            layout.fail(format!("{name} is a symlink (not followed)"));
                        } else if !kind_ok(want_dir) {
                            layout.fail(format!(
                                "{name} is not a {}",
                                if want_dir {
                                    "directory"
                                } else {
                                    "regular file"
                                }
                            ));
                        } else {
                            present.insert(match name {
                                EVENTS_FILE => EVENTS_FILE,
                                STATEMENT_FILE => STATEMENT_FILE,
                                DSSE_FILE => DSSE_FILE,
                                "input" => "input",
                                "output" => "output",
                                _ => "blobs",
                            });
                        }
                    }
                    n if (is_statement_temp(n) || n.starts_with(&format!(".{DSSE_FILE}.tmp-")))
                        && ft.is_file() =>
                    {
                        leftovers.push(n.to_owned())
                    }
                    n => layout.fail(format!("unexpected entry {n}")),
                }
            }
        }
    }
    for required in [EVENTS_FILE, "input", "output", "blobs"] {
        if !present.contains(required) {
            layout.fail(format!("{required} is missing"));
        }
    }
    has_events |= present.contains(EVENTS_FILE);
    has_statement |= present.contains(STATEMENT_FILE);
    let blob_dir = root.join("blobs/sha256");
    // What `blobs/` holds; judged against the layout `run_started` declares, below.
    let mut has_sha_dir = false;
    let mut has_pack = false;
    if present.contains("blobs")
        && let Ok(entries) = fs::read_dir(root.join("blobs"))
    {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let ft = entry.file_type().ok();
            let is_dir = ft.is_some_and(|t| t.is_dir());
            let is_file = ft.is_some_and(|t| t.is_file());
            if name == "sha256" && is_dir {
                has_sha_dir = true;
            } else if name == "pack" && is_file {
                has_pack = true;
            } else if is_file && name.to_string_lossy().starts_with(".pack.tmp-") {
                leftovers.push(format!("blobs/{}", name.to_string_lossy()));
            } else {
                layout.fail(format!("unexpected entry blobs/{}", name.to_string_lossy()));
            }
        }
    }

    // --- parse --------------------------------------------------------------------------
    let scan: Option<LogScan> = if has_events {
        match scan_log(&root.join(EVENTS_FILE)) {
            Ok(s) => Some(s),
            Err(e) => {
                parse.fail(format!("cannot read {EVENTS_FILE}: {e}"));
                None
            }
        }
    } else {
        parse.fail(format!("{EVENTS_FILE} is missing"));
        None
    };
    let lines = scan.as_ref().map(|s| s.lines.as_slice()).unwrap_or(&[]);
    let events: Vec<Option<Event>> = lines
        .iter()
        .enumerate()
        .map(|(i, raw)| match parse_line(raw) {
            Ok(ev) => Some(ev),
            Err(e) => {
                parse.fail(format!("line {}: {e}", i + 1));
                None
            }
        })
        .collect();
    let torn = scan.as_ref().and_then(|s| s.torn_len);
    if let Some(n) = torn {
        if scan.as_ref().is_some_and(|s| s.torn_zeros) {
            parse.warn(format!(
                "the log ends in {n} zero bytes after its last complete line: space the file \
                 system had allocated but not written when the machine stopped (the run was \
                 interrupted)"
            ));
        } else {
            parse.warn(format!(
                "the last line is torn ({n} bytes without a newline): the run was interrupted"
            ));
        }
    }
    parse.pass = format!(
        "{} event line(s) parse{}",
        lines.len(),
        confidence_summary(events.iter().flatten().map(|e| e.confidence))
    );
    let all_parsed = scan.is_some() && events.iter().all(Option::is_some);

    // --- chain --------------------------------------------------------------------------
    for (i, ev) in events.iter().enumerate() {
        let want = if i == 0 {
            None
        } else {
            Some(lines[i - 1].hash.as_str())
        };
        if let Some(ev) = ev
            && ev.prev.as_deref() != want
        {
            chain.fail(format!(
                "line {}: prev is not the SHA-256 of the line before",
                i + 1
            ));
        }
    }
    if !all_parsed && chain.fails.is_empty() {
        chain.fail("not every line could be checked (see parse)");
    }
    chain.pass = match lines.last() {
        Some(l) => format!("{} line(s) chained; head {}", lines.len(), l.hash),
        None => "no lines".to_owned(),
    };

    // --- sequence -----------------------------------------------------------------------
    let parsed: Vec<&Event> = events.iter().flatten().collect();
    let first_run_id = parsed.first().map(|e| e.run_id.clone());
    let mut last_finish: Option<(usize, RunFinished)> = None;
    let mut seg_start = 0usize;
    if lines.is_empty() {
        sequence.warn("the log has no events");
    }
    for (i, ev) in events.iter().enumerate() {
        let Some(ev) = ev else { continue };
        if ev.seq != i as u64 {
            sequence.fail(format!("line {} has seq {} (expected {i})", i + 1, ev.seq));
        }
        if Some(&ev.run_id) != first_run_id.as_ref() {
            sequence.fail(format!("line {} belongs to run {:?}", i + 1, ev.run_id));
        }
        if (i == 0) != (ev.kind == EventType::RunStarted) {
            sequence.fail(if i == 0 {
                "the first event is not run_started".to_owned()
            } else {
                format!("line {}: run_started again", i + 1)
            });
        }
        if ev.kind == EventType::OutputSkipped {
            // Written by the recorder right before the output_produced block.
            let next = events.get(i + 1).and_then(Option::as_ref).map(|e| e.kind);
            if !matches!(
                next,
                Some(EventType::OutputSkipped | EventType::OutputProduced | EventType::RunFinished)
            ) {
                sequence.fail(format!(
                    "line {}: output_skipped is not followed by output_skipped, output_produced or run_finished",
                    i + 1
                ));
            }
        }
        if ev.kind == EventType::RunFinished {
            if let Ok(p) = serde_json::from_value::<RunFinished>(ev.payload.clone()) {
                if p.event_count != i as u64 + 1 {
                    sequence.fail(format!(
                        "line {}: run_finished says {} events, it is event {}",
                        i + 1,
                        p.event_count,
                        i + 1
                    ));
                }
                if let Some((j, prev)) = &last_finish
                    && prev.status != RunStatus::Paused
                {
                    sequence.fail(format!(
                        "line {}: events after run_finished ({}) on line {}",
                        i + 1,
                        prev.status.as_str(),
                        j + 1
                    ));
                }
                if let Some((j, _)) = &last_finish {
                    seg_start = j + 1;
                }
                let block_ok = usize::try_from(p.outputs)
                    .ok()
                    .and_then(|n| i.checked_sub(n))
                    .is_some_and(|from| {
                        events[from..i]
                            .iter()
                            .all(|e| matches!(e, Some(e) if e.kind == EventType::OutputProduced))
                    });
                if !block_ok {
                    sequence.fail(format!(
                        "line {}: run_finished says {} outputs, but the lines before it are not that many output_produced events",
                        i + 1,
                        p.outputs
                    ));
                }
                last_finish = Some((i, p));
            }
        } else if let Some((j, prev)) = &last_finish
            && prev.status != RunStatus::Paused
            && j + 1 == i
        {
            sequence.fail(format!(
                "line {}: event after run_finished ({})",
                i + 1,
                prev.status.as_str()
            ));
        }
    }
    let ends_finished = matches!(
        (&last_finish, lines.len()),
        (Some((i, _)), n) if *i + 1 == n
    ) && torn.is_none()
        && all_parsed;
    if !ends_finished && all_parsed && !lines.is_empty() {
        sequence.warn("the log does not end with run_finished: the run did not finish");
    }
    let status = last_finish.as_ref().map(|(_, p)| p.status);
    sequence.pass = format!(
        "{} event(s), run_started first, run_finished last ({})",
        lines.len(),
        status.map(RunStatus::as_str).unwrap_or("-")
    );
    let complete = ends_finished && has_statement;

    // --- blob layout --------------------------------------------------------------------
    // `run_started` says which layout the bundle uses; without it (an empty log), what
    // is on disk.
    let declared = events
        .first()
        .and_then(Option::as_ref)
        .filter(|e| e.kind == EventType::RunStarted)
        .map(|e| BlobLayout::of_run_started(&e.payload));
    let blob_layout = match declared {
        Some(Some(l)) => l,
        Some(None) => {
            parse.fail("line 1: run_started names an unknown blob_store");
            if has_pack {
                BlobLayout::Pack
            } else {
                BlobLayout::Loose
            }
        }
        None if has_pack => BlobLayout::Pack,
        None => BlobLayout::Loose,
    };
    if present.contains("blobs") {
        match blob_layout {
            BlobLayout::Loose => {
                if has_pack {
                    layout.fail("blobs/pack in a bundle whose run_started declares loose blobs");
                }
                // Without run_started (an empty or unreadable log) the layout is not
                // known: a bundle interrupted at its creation may hold neither.
                if !has_sha_dir && declared.is_some() {
                    layout.fail("blobs/sha256 is missing");
                }
            }
            BlobLayout::Pack => {
                if has_sha_dir {
                    layout.fail("blobs/sha256 in a bundle whose run_started declares a pack");
                }
            }
        }
    }

    // --- blobs --------------------------------------------------------------------------
    let mut refs: Vec<(usize, BlobRef)> = Vec::new();
    for (i, ev) in events.iter().enumerate() {
        if let Some(ev) = ev {
            let mut found = Vec::new();
            collect_refs(&ev.payload, &mut found);
            refs.extend(found.into_iter().map(|b| (i, b)));
        }
    }
    let mut stored: BTreeMap<String, u64> = BTreeMap::new();
    let mut mismatched: BTreeSet<String> = BTreeSet::new();
    if blob_layout == BlobLayout::Pack {
        check_pack(
            &mut blobs,
            &mut pack,
            root,
            has_pack && present.contains("blobs"),
            &refs,
            complete,
        );
    } else if matches!(fs::symlink_metadata(&blob_dir), Ok(m) if m.is_dir()) {
        let walk = walk_files(&blob_dir);
        for p in walk.problems {
            blobs.fail(format!("blobs/sha256/{p}"));
        }
        for f in walk.files {
            if f.rel.starts_with('.') && f.rel.contains(".tmp-") {
                leftovers.push(format!("blobs/sha256/{}", f.rel));
                continue;
            }
            if !is_sha256_hex(&f.rel) {
                blobs.fail(format!("unexpected file blobs/sha256/{}", f.rel));
                continue;
            }
            match hash_file(&f.path, false) {
                Err(e) => blobs.fail(format!("blobs/sha256/{}: cannot read: {e}", f.rel)),
                Ok((sha, size)) => {
                    if sha != f.rel {
                        // Judged below: tampering when an event names it, a blob cut short
                        // by a crash (power loss) when none does and the run is unfinished.
                        mismatched.insert(f.rel);
                    } else {
                        stored.insert(f.rel, size);
                    }
                }
            }
        }
    }
    let mut referenced = BTreeSet::new();
    let loose_refs: &[(usize, BlobRef)] = if blob_layout == BlobLayout::Loose {
        &refs
    } else {
        &[]
    };
    for (i, b) in loose_refs {
        let hex = &b.digest.sha256;
        if !is_sha256_hex(hex) {
            blobs.fail(format!(
                "line {}: blob ref digest is not 64 lower-case hex digits",
                i + 1
            ));
            continue;
        }
        referenced.insert(hex.clone());
        match stored.get(hex) {
            None if mismatched.contains(hex) => blobs.fail(format!(
                "line {}: blob {hex}: content does not match its name",
                i + 1
            )),
            None => blobs.fail(format!("line {}: blob {hex} is missing", i + 1)),
            Some(size) if *size != b.size => blobs.fail(format!(
                "line {}: blob {hex} has {size} bytes, the ref says {}",
                i + 1,
                b.size
            )),
            Some(_) => {}
        }
    }
    if blob_layout == BlobLayout::Pack {
        // Judged by check_pack.
    } else {
        pack.pass = "no pack: the bundle stores loose blobs (blobs/sha256)".to_owned();
        for hex in stored.keys() {
            if !referenced.contains(hex) {
                blobs.fail_or_warn(complete, format!("blob {hex} is not named by any event"));
            }
        }
        // A file no event names whose content is not its digest: in an unfinished bundle,
        // what a power loss leaves of a blob written just before it (empty, cut short or
        // zero-filled); no recorded content depends on it.
        for hex in mismatched.iter().filter(|h| !referenced.contains(*h)) {
            blobs.fail_or_warn(
                complete,
                format!(
                    "blobs/sha256/{hex}: content does not match its name, and no event names it \
                 (a blob being written when the run was interrupted)"
                ),
            );
        }
        blobs.pass = format!("{} blob(s), {} ref(s), all match", stored.len(), refs.len());
    }

    // --- inputs and outputs -------------------------------------------------------------
    let payloads = |kind: EventType, from: usize| -> Vec<FileRecord> {
        events
            .iter()
            .skip(from)
            .flatten()
            .filter(|e| e.kind == kind)
            .filter_map(|e| serde_json::from_value::<FileRecord>(e.payload.clone()).ok())
            .collect()
    };
    let input_records = payloads(EventType::InputStaged, 0);
    let input_files = file_map(&mut inputs, root, "input");
    compare_files(
        &mut inputs,
        "input",
        &input_records,
        &input_files,
        ends_finished,
    );
    // A finished log's outputs are the `outputs` output_produced events directly before
    // the final run_finished (the recorder writes them as one block); an unfinished
    // log's are whatever the final segment recorded so far.
    let output_records = match (&last_finish, ends_finished) {
        (Some((last, p)), true) => {
            let from = usize::try_from(p.outputs)
                .ok()
                .and_then(|n| last.checked_sub(n));
            match from {
                Some(from) => payloads(EventType::OutputProduced, from)
                    .into_iter()
                    .take(*last - from)
                    .collect(),
                None => Vec::new(),
            }
        }
        _ => payloads(EventType::OutputProduced, seg_start),
    };
    let output_files = file_map(&mut outputs, root, "output");
    compare_files(
        &mut outputs,
        "output",
        &output_records,
        &output_files,
        ends_finished,
    );
    // Entries the recorder left out (`output_skipped`, bundles of this version on): each
    // names its path losslessly, and none of them may still be in the bundle.
    let mut skipped_count = 0usize;
    for (i, ev) in events.iter().enumerate().skip(seg_start) {
        let Some(ev) = ev else { continue };
        if ev.kind != EventType::OutputSkipped {
            continue;
        }
        skipped_count += 1;
        let Ok(p) = serde_json::from_value::<OutputSkipped>(ev.payload.clone()) else {
            continue; // reported by parse
        };
        let raw = match hex::decode(&p.path_hex) {
            Ok(raw) => raw,
            Err(_) => {
                outputs.fail(format!(
                    "line {}: output_skipped path_hex is not hex",
                    i + 1
                ));
                continue;
            }
        };
        if escape_path_bytes(&raw) != p.path {
            outputs.fail(format!(
                "line {}: output_skipped path does not escape its path_hex",
                i + 1
            ));
        }
        if let Ok(rel) = std::str::from_utf8(&raw)
            && output_files.contains_key(rel)
        {
            outputs.fail(format!(
                "output/{} is recorded as left out but is in the bundle",
                p.path
            ));
        }
    }
    if skipped_count > 0 && outputs.fails.is_empty() && outputs.warns.is_empty() {
        outputs.pass = format!(
            "{} file(s) match their events; {skipped_count} entr{} left out",
            output_records.len(),
            if skipped_count == 1 { "y" } else { "ies" }
        );
    }

    // --- statement ----------------------------------------------------------------------
    if has_statement {
        if !ends_finished {
            statement.fail(
                "statement.json is present but the log does not end with a complete run_finished",
            );
        } else {
            let facts = derive_facts(
                &parsed,
                scan.as_ref(),
                input_records.clone(),
                output_records.clone(),
            );
            match (
                facts,
                read_bounded(&root.join(STATEMENT_FILE), MAX_STATEMENT_BYTES),
            ) {
                (_, Err(e)) => statement.fail(format!("cannot read statement.json: {e}")),
                (None, _) => statement.fail("cannot derive the statement from the log"),
                (Some(facts), Ok(actual))
                    if facts.format >= 2 && crate::statement::has_no_subject(&actual) =>
                {
                    statement.fail(
                        "statement.json has no subject: an in-toto Statement v1 needs at least \
                         one (this bundle's statements name the event log at least)",
                    );
                }
                (Some(facts), Ok(actual)) => match facts.to_bytes() {
                    Err(e) => statement.fail(format!("cannot build the expected statement: {e}")),
                    Ok(expected) if expected == actual => {
                        statement.pass = format!(
                            "matches the log: {} events, head {}, {} subject(s), {} input(s)",
                            facts.event_count,
                            facts.head,
                            facts.subject_count(),
                            facts.inputs.len()
                        );
                    }
                    Ok(expected) => statement.fail(describe_statement_diff(&expected, &actual)),
                },
            }
        }
    } else if ends_finished {
        statement.warn("the log ends with run_finished but statement.json is missing: finishing was interrupted");
    } else {
        statement.warn("no statement.json: the run did not finish");
    }

    // --- tool calls ---------------------------------------------------------------------
    let mut pending: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut calls = 0usize;
    // Logs written since command confinement is recorded per command say so in
    // run_started; older logs are not held to it.
    let sandbox_details = events
        .first()
        .and_then(Option::as_ref)
        .filter(|e| e.kind == EventType::RunStarted)
        .map(|e| &e.payload["details"]["sandbox"]);
    let command_records = sandbox_details.is_some_and(|s| s["command_records"] == 1);
    // The tools whose calls run a program (`run_command` when the list is absent).
    let command_tools: BTreeSet<&str> =
        match sandbox_details.and_then(|s| s["command_tools"].as_array()) {
            Some(names) => names.iter().filter_map(Value::as_str).collect(),
            None => BTreeSet::from(["run_command"]),
        };
    for (i, ev) in events.iter().enumerate() {
        let Some(ev) = ev else { continue };
        if ev.kind != EventType::ToolCalled {
            continue;
        }
        let Ok(call) = serde_json::from_value::<ToolCalled>(ev.payload.clone()) else {
            continue;
        };
        calls += 1;
        if command_records
            && let Some(problem) =
                confinement_problem(&call, command_tools.contains(call.name.as_str()))
        {
            tools.fail(format!(
                "line {}: call {:?} ({}): {problem}",
                i + 1,
                call.call_id,
                call.name
            ));
        }
        // A call is known by its run-unique id (older logs: the model's id).
        let key = call.key().to_string();
        if call.deferred {
            if done.contains(&key) {
                tools.fail(format!(
                    "line {}: call {key:?} deferred after it completed",
                    i + 1,
                ));
            } else {
                pending.insert(key, (i, call.run_call_id.is_none()));
            }
        } else {
            if !done.insert(key.clone()) {
                tools.warn(format!("line {}: call {key:?} completed twice", i + 1,));
            }
            if pending.remove(&key).is_none() && call.run_call_id.is_some() {
                // A run paused by a version before run ids and resumed by a later one:
                // the deferral names the call by the model's id only.
                if pending
                    .get(&call.call_id)
                    .is_some_and(|&(_, legacy)| legacy)
                {
                    pending.remove(&call.call_id);
                    done.insert(call.call_id.clone());
                }
            }
        }
    }
    let waiting: Vec<String> = pending.keys().map(|k| format!("{k:?}")).collect();
    tools.pass = format!("{calls} tool call event(s), every deferred call linked");
    if !waiting.is_empty() {
        let msg = format!("deferred call(s) never completed: {}", waiting.join(", "));
        match (ends_finished, status) {
            (true, Some(RunStatus::Paused)) => {
                tools.pass = format!(
                    "{calls} tool call event(s); waiting while paused: {}",
                    waiting.join(", ")
                )
            }
            (true, Some(RunStatus::Finished)) => tools.fail(msg),
            _ => tools.warn(msg),
        }
    }

    // --- signature ----------------------------------------------------------------------
    let signed = present.contains(DSSE_FILE);
    match (signed, &options.public_key) {
        (false, None) => signature.pass = "not signed, no key required".to_owned(),
        (false, Some(_)) => signature.fail("a key was given but statement.dsse.json is missing"),
        (true, _) if !has_statement => signature.fail("statement.dsse.json without statement.json"),
        (true, None) => check_signature_form(&mut signature, root),
        (true, Some(key)) => check_signature(&mut signature, root, key),
    }

    // --- summary ------------------------------------------------------------------------
    for l in leftovers {
        layout.fail_or_warn(complete, format!("leftover temporary file {l}"));
    }
    layout.pass = "bundle layout as expected".to_owned();
    let checks: Vec<Check> = [
        layout, parse, chain, sequence, blobs, pack, inputs, outputs, statement, tools, signature,
    ]
    .into_iter()
    .map(Acc::done)
    .collect();
    let ok = checks.iter().all(|c| c.status != CheckStatus::Fail);
    tracing::debug!(bundle = %root.display(), ok, complete, "bundle verified");
    VerifyReport {
        ok,
        complete,
        status: status.filter(|_| ends_finished),
        checks,
    }
}

#[cfg(feature = "dsse")]
fn check_signature(acc: &mut Acc, root: &Path, key: &[u8; 32]) {
    let envelope = match read_bounded(&root.join(DSSE_FILE), MAX_STATEMENT_BYTES) {
        Ok(b) => b,
        Err(e) => return acc.fail(format!("cannot read {DSSE_FILE}: {e}")),
    };
    let statement = match read_bounded(&root.join(STATEMENT_FILE), MAX_STATEMENT_BYTES) {
        Ok(b) => b,
        Err(e) => return acc.fail(format!("cannot read {STATEMENT_FILE}: {e}")),
    };
    match crate::dsse::check_envelope(&envelope, &statement, key) {
        Ok(msg) => acc.pass = msg,
        Err(msg) => acc.fail(msg),
    }
}

/// Without a key: the envelope must still be a well-formed DSSE envelope of exactly
/// `statement.json` (garbage or a stale envelope fails); its signature cannot be checked,
/// so the check warns and names the key ids the envelope claims.
#[cfg(feature = "dsse")]
fn check_signature_form(acc: &mut Acc, root: &Path) {
    let envelope = match read_bounded(&root.join(DSSE_FILE), MAX_STATEMENT_BYTES) {
        Ok(b) => b,
        Err(e) => return acc.fail(format!("cannot read {DSSE_FILE}: {e}")),
    };
    let statement = match read_bounded(&root.join(STATEMENT_FILE), MAX_STATEMENT_BYTES) {
        Ok(b) => b,
        Err(e) => return acc.fail(format!("cannot read {STATEMENT_FILE}: {e}")),
    };
    match crate::dsse::check_envelope_form(&envelope, &statement) {
        Ok(env) => acc.warn(format!(
            "signed (key id {}), but the signature is not checked: no key given",
            env.key_ids().join(", ")
        )),
        Err(msg) => acc.fail(msg),
    }
}

#[cfg(not(feature = "dsse"))]
fn check_signature_form(acc: &mut Acc, _root: &Path) {
    acc.warn("signed, but the envelope is not checked: built without the `dsse` feature");
}

#[cfg(not(feature = "dsse"))]
fn check_signature(acc: &mut Acc, _root: &Path, _key: &[u8; 32]) {
    acc.fail("cannot check the signature: built without the `dsse` feature");
}

fn derive_facts(
    events: &[&Event],
    scan: Option<&LogScan>,
    inputs: Vec<FileRecord>,
    outputs: Vec<FileRecord>,
) -> Option<StatementFacts> {
    let scan = scan?;
    let first = events.first()?;
    let last = events.last()?;
    let started: RunStarted = serde_json::from_value(first.payload.clone()).ok()?;
    let finished: RunFinished = serde_json::from_value(last.payload.clone()).ok()?;
    Some(StatementFacts {
        format: crate::statement::format_of(&first.payload),
        run_id: first.run_id.clone(),
        builder: started.builder,
        agent_spec_digest: started.agent_spec_digest,
        started_on: first.ts.clone(),
        finished_on: last.ts.clone(),
        status: finished.status,
        inputs,
        outputs,
        events_sha256: scan.file_sha256.clone(),
        event_count: scan.lines.len() as u64,
        head: scan.lines.last()?.hash.clone(),
    })
}

/// Say where a statement differs from the expected one, naming the field if possible.
fn describe_statement_diff(expected: &[u8], actual: &[u8]) -> String {
    let at = expected
        .iter()
        .zip(actual)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(actual.len()));
    let field = serde_json::from_slice::<Value>(actual)
        .ok()
        .and_then(|act| {
            let exp: Value = serde_json::from_slice(expected).ok()?;
            first_difference(&exp, &act, String::new())
        });
    match field {
        Some(f) => format!("statement.json differs from the statement derived from the log at {f}"),
        None => {
            format!("statement.json differs from the statement derived from the log at byte {at}")
        }
    }
}

fn first_difference(exp: &Value, act: &Value, path: String) -> Option<String> {
    match (exp, act) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}/{k}");
                match a.get(k) {
                    None => return Some(p),
                    Some(av) => {
                        if let Some(d) = first_difference(ev, av, p) {
                            return Some(d);
                        }
                    }
                }
            }
            a.keys()
                .find(|k| !e.contains_key(*k))
                .map(|k| format!("{path}/{k}"))
        }
        (Value::Array(e), Value::Array(a)) => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                if let Some(d) = first_difference(ev, av, format!("{path}/{i}")) {
                    return Some(d);
                }
            }
            (e.len() != a.len()).then(|| format!("{path} (length)"))
        }
        _ if exp == act => None,
        _ => Some(if path.is_empty() { "/".into() } else { path }),
    }
}

/// The blob checks of a bundle with a pack: the `pack` check (header, framing, every
/// chunk's data, the tail) and, in `blobs`, every blob record rebuilt from its chunks
/// and re-hashed, every ref resolved with its size, no blob that no event names (in a
/// complete bundle).
fn check_pack(
    blobs: &mut Acc,
    pack: &mut Acc,
    root: &Path,
    present: bool,
    refs: &[(usize, BlobRef)],
    complete: bool,
) {
    let missing_all = |blobs: &mut Acc, why: &str| {
        for (i, b) in refs {
            blobs.fail(format!(
                "line {}: blob {} is missing ({why})",
                i + 1,
                b.digest.sha256
            ));
        }
    };
    if !present {
        pack.fail_or_warn(complete, format!("{PACK_FILE} is missing"));
        missing_all(blobs, "no pack");
        return;
    }
    let path = root.join(PACK_FILE);
    let reader = match FileSource::open(&path)
        .map_err(|e| format!("cannot open {PACK_FILE}: {e}"))
        .and_then(|src| BlobReader::new(src).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            pack.fail(e);
            missing_all(blobs, "the pack is unreadable");
            return;
        }
    };
    let index = reader.index();
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
        pack.fail_or_warn(complete, format!("{PACK_FILE}: {what}"));
    }
    // Every chunk's data, once.
    for c in &index.chunks {
        if let Err(e) = read_chunk(reader.source(), c) {
            pack.fail(e.to_string());
        }
    }
    // Every blob rebuilt and re-hashed (a bad chunk is already reported under `pack`).
    let mut good: BTreeMap<[u8; 32], u64> = BTreeMap::new();
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
            Err(e) => blobs.fail(format!("blob {}: {e}", hex::encode(b.digest))),
        }
    });
    let unused = used.iter().filter(|u| !**u).count();
    if unused > 0 {
        pack.fail_or_warn(
            complete,
            format!("{unused} chunk(s) in {PACK_FILE} that no blob uses (a blob being written when the run was interrupted)"),
        );
    }
    let mut referenced = BTreeSet::new();
    for (i, b) in refs {
        let hex = &b.digest.sha256;
        let mut d = [0u8; 32];
        if !is_sha256_hex(hex) || hex::decode_to_slice(hex, &mut d).is_err() {
            blobs.fail(format!(
                "line {}: blob ref digest is not 64 lower-case hex digits",
                i + 1
            ));
            continue;
        }
        referenced.insert(d);
        match (good.get(&d), index.blob_by_digest.contains_key(&d)) {
            (Some(size), _) if *size != b.size => blobs.fail(format!(
                "line {}: blob {hex} has {size} bytes, the ref says {}",
                i + 1,
                b.size
            )),
            (Some(_), _) => {}
            (None, true) => blobs.fail(format!(
                "line {}: blob {hex} cannot be rebuilt from the pack",
                i + 1
            )),
            (None, false) => blobs.fail(format!("line {}: blob {hex} is missing", i + 1)),
        }
    }
    for b in &index.blobs {
        if !referenced.contains(&b.digest) {
            blobs.fail_or_warn(
                complete,
                format!("blob {} is not named by any event", hex::encode(b.digest)),
            );
        }
    }
    pack.pass = format!(
        "{PACK_FILE}: {} bytes, {} chunk(s) intact, {} blob record(s)",
        index.good_len,
        index.chunks.len(),
        index.blobs.len()
    );
    blobs.pass = format!(
        "{} blob(s) rebuilt from the pack, {} ref(s), all match",
        good.len(),
        refs.len()
    );
}

/// The facts every command's `confinement` record holds (`null` where a fact does not
/// apply, e.g. no bubblewrap), as paths of keys.
const CONFINEMENT_FACTS: &[&[&str]] = &[
    &["mode"],
    &["missing"],
    &["landlock", "status"],
    &["landlock", "abi"],
    &["landlock", "abi_wanted"],
    &["landlock", "unenforced"],
    &["seccomp", "applied"],
    &["seccomp", "filter_sha256"],
    &["bubblewrap"],
    &["namespaces"],
    &["host_uid"],
    &["limits", "timeout_ms"],
    &["limits", "cpu_s"],
    &["limits", "memory_bytes"],
    &["limits", "processes"],
    &["limits", "process_limit"],
    &["limits", "file_size_bytes"],
    &["limits", "output_bytes"],
    &["limits", "quota_bytes"],
    &["limits", "quota_files"],
];

/// What is wrong with a completed call's confinement record, in a log that records one
/// per command: a call of a command tool (`runs_program`) its tool decided must have one,
/// and every record (of any tool) must hold every fact unless it says the program never
/// ran.
fn confinement_problem(call: &ToolCalled, runs_program: bool) -> Option<String> {
    if call.deferred {
        return None;
    }
    let record = match &call.confinement {
        None if runs_program && call.decided_by.as_deref() == Some("tool") => {
            return Some("a command's event without its confinement record".to_owned());
        }
        None => return None,
        Some(r) => r,
    };
    let Some(object) = record.as_object() else {
        return Some("the confinement record is not an object".to_owned());
    };
    if object.get("ran") == Some(&Value::Bool(false)) {
        return None;
    }
    let missing: Vec<String> = CONFINEMENT_FACTS
        .iter()
        .filter(|path| {
            let mut at = record;
            for key in path.iter() {
                match at.get(key) {
                    Some(v) => at = v,
                    None => return true,
                }
            }
            false
        })
        .map(|path| path.join("."))
        .collect();
    (!missing.is_empty()).then(|| format!("the confinement record lacks {}", missing.join(", ")))
}

/// How many events carry each confidence, for the `parse` check's detail: `""` when every
/// event is `observed`, else e.g. `" (3 observed, 5 parsed, 1 declared)"`, so a bundle of
/// an integrated loop or an imported trace says so in `verify`'s output.
fn confidence_summary(confidences: impl Iterator<Item = Confidence>) -> String {
    let (mut observed, mut parsed, mut declared) = (0u64, 0u64, 0u64);
    for c in confidences {
        match c {
            Confidence::Observed => observed += 1,
            Confidence::Parsed => parsed += 1,
            Confidence::Declared => declared += 1,
        }
    }
    if parsed == 0 && declared == 0 {
        return String::new();
    }
    format!(" ({observed} observed, {parsed} parsed, {declared} declared)")
}
