//! Offline verification of a bundle: every check has a stable code, a status and a
//! detail; the report sums them up as `ok` (nothing failed) and `complete` (the run
//! reached its end and the statement was written).
//!
//! The bundle is hostile input: nothing here follows a symlink, opens a special file,
//! trusts a path taken from the log, or reads an unbounded line into memory.

//!
//! Verification reads the bundle once ([`bundle`]: the folders, the log walked line by
//! line, the run's shape, the blob store) and then runs one function per check code over
//! what was read, in the report's order: [`layout`], [`events`] (`parse`, `chain`,
//! `sequence`), [`blobs`] (`blobs`, `pack`), [`files`] (`inputs`, `outputs`),
//! [`statement`] (`statement`, `signature`), [`tools`] (`tool-calls`) and [`claims`]
//! (`claims`, a wrapped program's claimed commands against its process trail).

mod blobs;
mod bundle;
mod claims;
mod events;
mod files;
mod layout;
mod redacted;
mod redactions;
mod statement;
mod tools;

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::event::{Event, RunStatus};
use bundle::Bundle;
pub use redacted::{RedactionReport, SignatureStatus};

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
    /// `statement.json` with a valid signature (Ed25519 or ECDSA P-256) by the given key.
    Signature,
    /// Added later, and present only when asked for (`provrun verify --ledger`, made by
    /// the CLI with provrun-ledger): the statement is a leaf of a ledger's signed
    /// checkpoint.
    Ledger,
    /// Added later, and present only in a bundle with `redactions.jsonl`: every
    /// redaction record is well formed, about this run, statement and log, in order;
    /// each piece it lists as removed is gone and sat where it says; its signature, if
    /// any, verifies.
    Redactions,
    /// Added later, and present only in a wrapped program's bundle with an imported
    /// session log (or claimed commands): every call its session log claims ran a command is matched by
    /// an observed process, and every observed process by a claim ([`crate::claims`]). A
    /// discrepancy is a warning, never a failure.
    Claims,
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
            CheckCode::Ledger => "ledger",
            CheckCode::Redactions => "redactions",
            CheckCode::Claims => "claims",
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
    /// What was removed from this bundle, why and by whom: each record of its
    /// `redactions.jsonl` (added later; absent from the JSON when there are none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<RedactionReport>,
}

impl VerifyReport {
    /// The check with `code`, if it ran.
    pub fn check(&self, code: CheckCode) -> Option<&Check> {
        self.checks.iter().find(|c| c.code == code)
    }

    /// Add a check made elsewhere (the CLI's `ledger` check) at the end, and count it in
    /// `ok`.
    pub fn push(&mut self, check: Check) {
        self.ok &= check.status != CheckStatus::Fail;
        self.checks.push(check);
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
    /// The detail when nothing failed or warned.
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

/// Options of [`verify_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Ed25519 public key that must have signed the statement (`statement.dsse.json`).
    /// Checking a signature needs the crate feature `dsse`. `key` takes either algorithm
    /// and wins over this.
    pub public_key: Option<[u8; 32]>,
    /// The public key (Ed25519 or ECDSA P-256) that must have signed the statement
    /// (added with P-256 keys; feature `dsse`).
    #[cfg(feature = "dsse")]
    pub key: Option<crate::dsse::PublicKey>,
}

impl VerifyOptions {
    /// Options that require a valid signature of the statement by `key`.
    #[cfg(feature = "dsse")]
    pub fn with_key(key: crate::dsse::PublicKey) -> VerifyOptions {
        VerifyOptions {
            key: Some(key),
            ..VerifyOptions::default()
        }
    }
}

/// Check a bundle offline. Never panics and never follows a symlink; problems in the
/// bundle become failed or warned checks. A signature, if present, is not checked
/// (the `signature` check warns); use [`verify_with`] and a key for that.
pub fn verify(bundle: impl AsRef<Path>) -> VerifyReport {
    verify_with(bundle, &VerifyOptions::default())
}

/// [`verify`] with options, e.g. the public key the statement must be signed with.
pub fn verify_with(bundle: impl AsRef<Path>, options: &VerifyOptions) -> VerifyReport {
    check_bundle(bundle.as_ref(), options, |_| ())
}

/// [`verify_with`], also giving back the log's events as [`crate::read_events`] reads
/// them, from the one read of the log the checks made: for a caller that needs both
/// (a listing, a run index), which then reads and parses the log once instead of twice.
/// The events are `None` wherever [`crate::read_events`] would fail: the log is missing
/// or unreadable, `redactions.jsonl` does not read, or a complete line does not parse,
/// breaks the chain or the sequence.
pub fn verify_with_events(
    bundle: impl AsRef<Path>,
    options: &VerifyOptions,
) -> (VerifyReport, Option<Vec<Event>>) {
    let mut events = None;
    let report = check_bundle(bundle.as_ref(), options, |b| {
        let log = &mut b.log;
        let readable = log.scan.is_some()
            && b.redactions.error.is_none()
            && log.in_sequence
            && log.chained.iter().all(|c| *c);
        if readable {
            events = std::mem::take(&mut log.events)
                .into_iter()
                .collect::<Option<Vec<Event>>>();
        }
    });
    (report, events)
}

/// The checks of [`verify_with`]; `after` is given the bundle as read once every check
/// is made (it may take what it wants of it).
fn check_bundle(
    root: &Path,
    options: &VerifyOptions,
    after: impl FnOnce(&mut Bundle<'_>),
) -> VerifyReport {
    let mut layout = Acc::new(CheckCode::Layout);
    match fs::symlink_metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(m) if m.file_type().is_symlink() => {
            layout.fail("the bundle path is a symlink (not followed)")
        }
        Ok(_) => layout.fail("the bundle path is not a directory"),
        Err(e) => layout.fail(format!("cannot open the bundle: {e}")),
    }
    if !layout.fails.is_empty() {
        return unreadable(layout);
    }
    let mut b = Bundle::read(root);
    let checks = vec![
        layout::layout(&b),
        events::parse(&b),
        events::chain(&b),
        events::sequence(&b),
        blobs::blobs(&b),
        blobs::pack(&b),
        files::inputs(&b),
        files::outputs(&b),
        statement::statement(&b),
        tools::tool_calls(&b),
        statement::signature(&b, options),
    ];
    let mut checks = checks;
    checks.extend(claims::claims(&b));
    let mut reports = Vec::new();
    if let Some((check, statuses)) = redactions::redactions(&b) {
        checks.push(check);
        reports = b.redactions.reports(&statuses);
    }
    let ok = checks.iter().all(|c| c.status != CheckStatus::Fail);
    let complete = b.shape.complete;
    tracing::debug!(bundle = %root.display(), ok, complete, "bundle verified");
    let status = b.shape.status.filter(|_| b.shape.ends_finished);
    after(&mut b);
    VerifyReport {
        ok,
        complete,
        status,
        checks,
        redactions: reports,
    }
}

/// The report on a bundle path that is not a readable folder: `layout` says why, and
/// every other check fails unchecked.
fn unreadable(layout: Acc) -> VerifyReport {
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
    VerifyReport {
        ok: false,
        complete: false,
        status: None,
        checks,
        redactions: Vec::new(),
    }
}
