//! `provrun ledger init|add|proof|consistency|verify`: the transparency log of runs
//! (provrun-ledger), and the `--ledger DIR|URL [--ledger-key FILE]` that `run`, `resume`,
//! `batch` and `serve` take to add each run as it ends ([`RunLedger`]).

use std::path::{Path, PathBuf};

use provrun_ledger::witness::{WitnessKey, cosignature_time};

pub(crate) use crate::witness::{read_verifier_key, read_witness_key};
use provrun_ledger::{
    Config, Ledger, LedgerError, LedgerReport, Since, Status, check_since, divergence, leaf_data,
    statement_digest,
};
use serde_json::json;

use crate::style::Painter;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// `provrun ledger …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LedgerCommand {
    /// Make a new, empty ledger in DIR (a new or empty folder) or at an s3:// URL (where
    /// nothing is yet), its checkpoints signed with an Ed25519 key from `provrun keygen`;
    /// prints the checkpoint verifier key (NAME+KEYHASH+BASE64) as the last line.
    #[command(
        after_help = "Exit codes: 0 made · 2 DIR not empty or a ledger already at the URL, a bucket that cannot be reached, a bad key or origin, a URL of another scheme"
    )]
    Init {
        /// The folder (or file:// URL) to make the ledger in, or an s3://BUCKET/PREFIX.
        #[arg(value_name = "DIR|URL")]
        dir: String,
        /// The Ed25519 private key that signs the checkpoints (in a folder its path is
        /// kept in DIR/ledger.json: later adds sign with it; a bucket's ledger.json names
        /// only the verifier key, and each writer is given the key).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// The log's name: the checkpoints' origin line and the key's name, e.g.
        /// example.com/runs (no spaces or `+`).
        #[arg(long, value_name = "NAME")]
        origin: String,
    },
    /// Append finished bundles (each must verify); a bundle already in the ledger keeps its
    /// index. Writes a new signed checkpoint.
    #[command(
        after_help = "Exit codes: 0 added · 1 a bundle does not verify or never finished (nothing added), or the ledger cannot be written · 2 no ledger at DIR, no bundle, a bad key"
    )]
    Add {
        /// The ledger: a folder, a file:// URL, or an s3://BUCKET/PREFIX (with --key).
        #[arg(value_name = "DIR|URL")]
        dir: String,
        /// The bundles: folders, .tar files or their s3:// / file:// URLs.
        #[arg(required = true, value_name = "BUNDLE")]
        bundles: Vec<PathBuf>,
        /// The ledger's signing key (an Ed25519 key from `provrun keygen`): required for a
        /// ledger in a bucket; a folder's own key file signs without it.
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// Print one JSON object {"size", "root", "added": [{"bundle", "statement",
        /// "index", "new"}]}.
        #[arg(long)]
        json: bool,
    },
    /// Print the proof that a run's statement is in the tree of the current checkpoint.
    #[command(
        after_help = "Exit codes: 0 printed · 1 the run is not in the ledger · 2 no ledger, no bundle, a bad RUN"
    )]
    Proof {
        /// The ledger: a folder, or the URL it is published at (s3://, file://, http(s)://).
        #[arg(value_name = "DIR|URL")]
        dir: String,
        /// The run: its bundle (its statement.json is what the ledger holds), the
        /// statement's digest as sha256:HEX (for a run whose bundle is gone), or a leaf
        /// index (digits that name no file or folder).
        #[arg(value_name = "BUNDLE|sha256:HEX|INDEX")]
        bundle: String,
        /// Print one JSON object {"index", "tree_size", "hashes": [base64…]}.
        #[arg(long)]
        json: bool,
    },
    /// Print the proof that the tree of N leaves is a prefix of the current one.
    #[command(after_help = "Exit codes: 0 printed · 2 no ledger, or N is 0 or past the tree size")]
    Consistency {
        /// The ledger: a folder, or the URL it is published at.
        #[arg(value_name = "DIR|URL")]
        dir: String,
        /// The size of the earlier tree (from an older checkpoint).
        #[arg(long, value_name = "N")]
        from: u64,
        /// Print one JSON object {"hashes": [base64…]}.
        #[arg(long)]
        json: bool,
    },
    /// Check the whole ledger: its checkpoint's signature, every entry and tile, the root;
    /// with --since, that it still holds every checkpoint someone kept; with
    /// --witness-key, that witnesses cosigned its checkpoint.
    #[command(
        after_help = "Exit codes: 0 the ledger verifies (a torn tail is a warning) · 1 a check fails: a held checkpoint it no longer extends (the size where the histories part is named), a missing or bad cosignature · 2 no ledger at DIR, a bad key or checkpoint file"
    )]
    Verify {
        /// The ledger: a folder, or the URL it is published at (s3://, file://, http(s)://).
        #[arg(value_name = "DIR|URL")]
        dir: String,
        /// Check the checkpoint against this verifier key (the text init printed, or a file
        /// holding it) instead of the one DIR/ledger.json names.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// A checkpoint (signed note) kept from earlier: the log must still extend it
        /// (a consistency proof from it, computed from the log's tiles, checked against
        /// both signed roots). Repeat for several.
        #[arg(long, value_name = "CHECKPOINT_FILE")]
        since: Vec<PathBuf>,
        /// A witness's verifier key (NAME+KEYHASH+BASE64, type 0x04, or a file holding it):
        /// the checkpoint must carry a valid cosignature by it. Repeat for several.
        #[arg(long = "witness-key", value_name = "VKEY")]
        witness_key: Vec<String>,
        /// Print one JSON object {"ok", "size", "checks": [{"code", "status", "detail"}]}.
        #[arg(long)]
        json: bool,
    },
    /// List the logged runs whose bundles are gone from a store, and the store's bundles
    /// that were never logged.
    #[command(
        after_help = "Exit codes: 0 the log and the store agree · 1 a run is missing or a bundle unlogged · 2 no ledger, a store that cannot be read"
    )]
    Audit {
        /// The ledger: a folder, or the URL it is published at.
        #[arg(value_name = "DIR|URL")]
        dir: String,
        /// The store of bundles: a folder of bundles, or an s3:// / file:// prefix of
        /// bundle tars.
        #[arg(long, value_name = "STORE")]
        store: String,
        /// Print one JSON object {"missing": [HEX…], "unlogged": [BUNDLE…], "unfinished":
        /// [BUNDLE…]}.
        #[arg(long)]
        json: bool,
    },
    /// Ask witnesses to cosign the ledger's checkpoint (C2SP tlog-witness), and add their
    /// cosignature lines to it.
    #[command(
        after_help = "Exit codes: 0 every witness cosigned · 1 a witness refused or could not be reached (named), the checkpoint changed meanwhile · 2 no ledger at DIR"
    )]
    Cosign {
        /// The ledger.
        dir: PathBuf,
        /// A witness's URL (its submission prefix; the request goes to URL/add-checkpoint).
        /// Repeat for several.
        #[arg(long, value_name = "URL", required = true)]
        witness: Vec<String>,
    },
    /// A witness of other ledgers: make one, or serve one.
    #[command(subcommand)]
    Witness(WitnessCommand),
}

/// `provrun ledger witness …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum WitnessCommand {
    /// Make a witness in DIR (a new or empty folder) that cosigns with an Ed25519 key from
    /// `provrun keygen`; prints its verifier key (type 0x04) as the last line.
    #[command(after_help = "Exit codes: 0 made · 2 DIR not empty, a bad key or name")]
    Init {
        /// The witness's private key (its path is kept in DIR/witness.json).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// The witness's name, e.g. witness.example.com/w1 (no spaces or `+`).
        #[arg(long, value_name = "NAME")]
        name: String,
        /// The folder to make the witness in.
        dir: PathBuf,
    },
    /// Serve the witness's add-checkpoint endpoint (C2SP tlog-witness) until Ctrl-C or
    /// SIGTERM; the first line on stdout is its URL.
    #[command(
        after_help = "Exit codes: 0 stopped · 1 cannot listen · 2 no witness at DIR, a bad log key"
    )]
    Serve {
        /// The witness folder.
        dir: PathBuf,
        /// Where to listen (ADDR:PORT; port 0 picks a free one).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        listen: String,
        /// A log's checkpoint verifier key (as `ledger init` printed it, or a file holding
        /// it): the logs this witness cosigns. Repeat for several.
        #[arg(long = "log", value_name = "VKEY", required = true)]
        log: Vec<String>,
    },
}

pub(crate) fn ledger(command: LedgerCommand) -> u8 {
    match command {
        LedgerCommand::Init { dir, key, origin } => init(&dir, &key, &origin),
        LedgerCommand::Add {
            dir,
            bundles,
            key,
            json,
        } => add(&dir, &bundles, key.as_deref(), json),
        LedgerCommand::Proof { dir, bundle, json } => proof(&dir, &bundle, json),
        LedgerCommand::Consistency { dir, from, json } => consistency(&dir, from, json),
        LedgerCommand::Verify {
            dir,
            key,
            since,
            witness_key,
            json,
        } => verify(
            &dir,
            &VerifyOptions {
                key: key.as_deref(),
                since: &since,
                witness_keys: &witness_key,
            },
            json,
        ),
        LedgerCommand::Audit { dir, store, json } => audit(&dir, &store, json),
        LedgerCommand::Cosign { dir, witness } => match local(&dir) {
            Ok(()) => crate::witness::cosign(&dir, &witness),
            Err(code) => code,
        },
        LedgerCommand::Witness(WitnessCommand::Init { key, name, dir }) => {
            crate::witness::init(&dir, &key, &name)
        }
        LedgerCommand::Witness(WitnessCommand::Serve { dir, listen, log }) => {
            crate::witness::serve(&dir, &listen, &log)
        }
    }
}

/// `cosign` rewrites a folder's checkpoint: a URL is refused with exit 2, never taken for
/// a folder named `s3:`.
fn local(dir: &Path) -> Result<(), u8> {
    let text = dir.to_string_lossy();
    if text.contains("://") {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "ledger cosign: `{text}` is a URL; cosign adds to a ledger folder's checkpoint"
            ),
        ));
    }
    Ok(())
}

/// The exit code for a ledger error: usage errors (no ledger, bad keys, bad arguments)
/// are 2, the rest 1.
fn code_of(e: &LedgerError) -> u8 {
    match e {
        LedgerError::NotALedger(_)
        | LedgerError::NotEmpty(_)
        | LedgerError::BadName(_)
        | LedgerError::KeyType(_)
        | LedgerError::Key(_)
        | LedgerError::BadVerifierKey(_)
        | LedgerError::BadConfig { .. }
        | LedgerError::Remote(_) => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}

fn init(dir: &str, key: &Path, origin: &str) -> u8 {
    match provrun_ledger::init_at(dir, key, origin) {
        Ok(vkey) => {
            out!("ledger:   {dir}");
            out!("origin:   {origin}");
            out!("{}", vkey.to_text());
            EXIT_OK
        }
        Err(e) => fail(code_of(&e), format!("ledger init: {e}")),
    }
}

fn add(dir: &str, bundles: &[PathBuf], key: Option<&Path>, json: bool) -> u8 {
    let key = match key.map(provrun_ledger::load_signing_key).transpose() {
        Ok(k) => k,
        Err(e) => return fail(EXIT_USAGE, format!("ledger add: --key: {e}")),
    };
    let writer = match provrun_ledger::LedgerWriter::open(dir, key.as_ref()) {
        Ok(w) => w,
        Err(e) => return fail(code_of(&e), format!("ledger add: {e}")),
    };
    let mut opened = Vec::new();
    for b in bundles {
        match crate::open::for_reading(b, "ledger add: ", EXIT_FAILED) {
            Ok(o) => opened.push(o),
            Err(code) => return code,
        }
    }
    let dirs: Vec<&Path> = opened.iter().map(|o| o.dir()).collect();
    let outcome = match writer.add_bundles(&dirs) {
        Ok(o) => o,
        Err(e) => return fail(code_of(&e), format!("ledger add: {e}")),
    };
    let cp = &outcome.checkpoint;
    let root = provrun_ledger::encode_hashes(&[cp.root]).remove(0);
    if json {
        let added: Vec<_> = bundles
            .iter()
            .zip(&dirs)
            .zip(&outcome.added)
            .map(|((b, d), a)| {
                json!({
                    "bundle": b.display().to_string(),
                    "statement": statement_digest(d).ok(),
                    "index": a.index,
                    "new": a.new,
                })
            })
            .collect();
        out!(
            "{}",
            crate::inert::inert_json(
                &json!({"size": cp.size, "root": root, "added": added}).to_string()
            )
        );
    } else {
        for (b, a) in bundles.iter().zip(&outcome.added) {
            let shown = b.display().to_string();
            let b = crate::inert::inert(&shown);
            if a.new {
                out!("added {b} at index {}", a.index);
            } else {
                out!("{b} is already at index {}", a.index);
            }
        }
        out!("checkpoint: {} leaves, root {root}", cp.size);
    }
    if !outcome.repaired.is_empty() {
        eprintln!(
            "provrun: removed {} file(s) an interrupted add had left beyond the checkpoint",
            outcome.repaired.len()
        );
    }
    EXIT_OK
}

/// The statement digest (hex) a `ledger proof` RUN names, or the leaf index.
enum Run {
    Digest(String),
    Index(u64),
}

fn run_of(arg: &str) -> Result<Run, u8> {
    if let Some(hex) = arg.strip_prefix("sha256:") {
        if hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Ok(Run::Digest(hex.to_owned()));
        }
        return Err(fail(
            EXIT_USAGE,
            format!("ledger proof: `{arg}` is not sha256: and 64 lower-case hex digits"),
        ));
    }
    if !arg.is_empty()
        && arg.bytes().all(|b| b.is_ascii_digit())
        && std::fs::symlink_metadata(arg).is_err()
        && let Ok(index) = arg.parse()
    {
        return Ok(Run::Index(index));
    }
    let opened = crate::open::for_reading(Path::new(arg), "ledger proof: ", EXIT_USAGE)?;
    statement_digest(opened.dir())
        .map(Run::Digest)
        .map_err(|e| fail(EXIT_USAGE, format!("ledger proof: {e}")))
}

fn proof(dir: &str, bundle: &str, json: bool) -> u8 {
    let ledger = match Ledger::open_at(dir, None) {
        Ok(l) => l,
        Err(e) => return fail(code_of(&e), format!("ledger proof: {e}")),
    };
    let run = match run_of(bundle) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let found = match run {
        Run::Digest(digest) => ledger
            .find(&leaf_data(&digest))
            .and_then(|i| i.ok_or(LedgerError::NotIncluded(digest)))
            .and_then(|index| ledger.inclusion_proof(index)),
        Run::Index(index) => ledger.inclusion_proof(index),
    };
    let proof = match found {
        Ok(p) => p,
        Err(e) => return fail(EXIT_FAILED, format!("ledger proof: {e}")),
    };
    if json {
        out!("{}", serde_json::to_string(&proof).unwrap_or_default());
    } else {
        out!(
            "leaf {} of a tree of {} leaves; {} hash(es), nearest the leaf first:",
            proof.index,
            proof.tree_size,
            proof.hashes.len()
        );
        for h in &proof.hashes {
            out!("  {h}");
        }
    }
    EXIT_OK
}

fn consistency(dir: &str, from: u64, json: bool) -> u8 {
    let made = Ledger::open_at(dir, None).and_then(|l| {
        let size = l.checkpoint().size;
        l.consistency_proof(from).map(|p| (p, size))
    });
    let (proof, size) = match made {
        Ok(p) => p,
        Err(e @ LedgerError::BadProof(_)) => {
            return fail(EXIT_USAGE, format!("ledger consistency: {e}"));
        }
        Err(e) => return fail(code_of(&e), format!("ledger consistency: {e}")),
    };
    if json {
        out!("{}", serde_json::to_string(&proof).unwrap_or_default());
    } else {
        out!(
            "the tree of {from} leaves is a prefix of the tree of {size}; {} hash(es):",
            proof.hashes.len()
        );
        for h in &proof.hashes {
            out!("  {h}");
        }
    }
    EXIT_OK
}

fn audit(dir: &str, store: &str, json: bool) -> u8 {
    let ledger = match Ledger::open_at(dir, None) {
        Ok(l) => l,
        Err(e) => return fail(code_of(&e), format!("ledger audit: {e}")),
    };
    let store = match provrun_store::Store::open(store) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, format!("ledger audit: --store: {e}")),
    };
    let found = match provrun_ledger::audit(&ledger, &store) {
        Ok(a) => a,
        Err(e) => return fail(EXIT_USAGE, format!("ledger audit: {e}")),
    };
    if json {
        out!(
            "{}",
            crate::inert::inert_json(
                &json!({"missing": found.missing, "unlogged": found.unlogged,
                        "unfinished": found.unfinished})
                .to_string()
            )
        );
    } else {
        let paint = Painter::stdout();
        for d in &found.missing {
            out!(
                "{}  sha256:{d}: logged, no bundle in the store",
                paint.bad("missing ")
            );
        }
        for b in &found.unlogged {
            out!(
                "{}  {}: in the store, not in the log",
                paint.bad("unlogged"),
                crate::inert::inert(b)
            );
        }
        for b in &found.unfinished {
            out!(
                "{}  {}: the run never finished (nothing to log)",
                paint.warn("unfinished"),
                crate::inert::inert(b)
            );
        }
        out!(
            "{}: {} logged run(s), {} bundle(s) in the store, {} missing, {} unlogged",
            if found.clean() {
                paint.good("the log and the store agree")
            } else {
                paint.bad("the log and the store disagree")
            },
            found.logged,
            found.stored,
            found.missing.len(),
            found.unlogged.len()
        );
    }
    if found.clean() { EXIT_OK } else { EXIT_FAILED }
}

/// What `ledger verify` checks besides the log itself.
struct VerifyOptions<'a> {
    key: Option<&'a str>,
    since: &'a [PathBuf],
    witness_keys: &'a [String],
}

fn verify(dir: &str, options: &VerifyOptions<'_>, json: bool) -> u8 {
    let key = match options.key.map(read_verifier_key).transpose() {
        Ok(k) => k,
        Err(e) => return fail(EXIT_USAGE, format!("ledger verify: --key: {e}")),
    };
    let files = match provrun_ledger::files::open_files(dir) {
        Ok(f) => f,
        Err(e) => return fail(EXIT_USAGE, format!("ledger verify: {e}")),
    };
    if let Err(e) = Config::read_from(&*files)
        && matches!(e, LedgerError::NotALedger(_))
        && (files.folder().is_some() || key.is_none())
    {
        return fail(EXIT_USAGE, format!("ledger verify: {e}"));
    }
    let mut held = Vec::new();
    for path in options.since {
        match std::fs::read(path) {
            Ok(b) => held.push((path, b)),
            Err(e) => {
                return fail(
                    EXIT_USAGE,
                    format!("ledger verify: --since `{}`: {e}", path.display()),
                );
            }
        }
    }
    let mut witnesses = Vec::new();
    for w in options.witness_keys {
        match read_witness_key(w) {
            Ok(k) => witnesses.push(k),
            Err(e) => return fail(EXIT_USAGE, format!("ledger verify: --witness-key: {e}")),
        }
    }
    let mut report = provrun_ledger::verify_ledger_at(&*files, key.as_ref());
    if !held.is_empty() || !witnesses.is_empty() {
        match Ledger::open_at(dir, key.as_ref()) {
            Ok(ledger) => {
                if !held.is_empty() {
                    report.checks.push(since_check(&ledger, &held));
                }
                if !witnesses.is_empty() {
                    report.checks.push(witness_check(&ledger, &witnesses));
                }
            }
            Err(e) => report.checks.push(provrun_ledger::LedgerCheck {
                code: "since",
                status: Status::Fail,
                detail: format!("the ledger cannot be opened: {e}"),
            }),
        }
        report.ok = report.checks.iter().all(|c| c.status != Status::Fail);
    }
    if json {
        out!(
            "{}",
            crate::inert::inert_json(&serde_json::to_string(&report).unwrap_or_default())
        );
    } else {
        print_report(&report);
    }
    if report.ok { EXIT_OK } else { EXIT_FAILED }
}

/// The `since` check: the log extends every held checkpoint.
fn since_check(ledger: &Ledger, held: &[(&PathBuf, Vec<u8>)]) -> provrun_ledger::LedgerCheck {
    let mut results = Vec::new();
    let mut problems = Vec::new();
    for (path, note) in held {
        match check_since(ledger, note) {
            Ok(r) => results.push(r),
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    for r in &results {
        if let Since::Diverged { held, reason, .. } = r {
            problems.push(format!(
                "the held checkpoint of {} leaves: {reason}",
                held.size
            ));
        }
    }
    let (status, detail) = match (problems.is_empty(), divergence(&results)) {
        (true, _) => (
            Status::Pass,
            format!(
                "the log of {} leaves extends {} held checkpoint(s) (largest {} leaves)",
                ledger.checkpoint().size,
                results.len(),
                results
                    .iter()
                    .filter_map(|r| match r {
                        Since::Consistent { held, .. } => Some(held.size),
                        Since::Diverged { .. } => None,
                    })
                    .max()
                    .unwrap_or(0)
            ),
        ),
        (false, Some((agree, at))) => (
            Status::Fail,
            format!(
                "the log diverges from what was held at size {at} (it still agrees at {agree}): {}",
                problems.join("; ")
            ),
        ),
        (false, None) => (Status::Fail, problems.join("; ")),
    };
    provrun_ledger::LedgerCheck {
        code: "since",
        status,
        detail,
    }
}

/// The `witnesses` check: a valid cosignature by each key on the current checkpoint.
fn witness_check(ledger: &Ledger, keys: &[WitnessKey]) -> provrun_ledger::LedgerCheck {
    let mut problems = Vec::new();
    let mut good = Vec::new();
    for k in keys {
        match cosignature_time(ledger.checkpoint_note(), k) {
            Ok(t) => good.push(format!("{} (time {t})", k.name)),
            Err(e) => problems.push(format!("{}: {e}", k.name)),
        }
    }
    provrun_ledger::LedgerCheck {
        code: "witnesses",
        status: if problems.is_empty() {
            Status::Pass
        } else {
            Status::Fail
        },
        detail: if problems.is_empty() {
            format!("cosigned by {}", good.join(", "))
        } else {
            format!("not cosigned as required: {}", problems.join("; "))
        },
    }
}

fn print_report(report: &LedgerReport) {
    let paint = Painter::stdout();
    for c in &report.checks {
        let status = match c.status {
            Status::Pass => paint.good("pass"),
            Status::Fail => paint.bad("FAIL"),
            Status::Warn => paint.warn("warn"),
        };
        out!(
            "{status}  {:<10} {}",
            c.code,
            crate::inert::inert(&c.detail)
        );
    }
    if report.ok {
        out!(
            "{}: {} leaves, every entry and tile matches the signed checkpoint",
            paint.good("ledger verifies"),
            report.size
        );
    } else {
        let failed: Vec<&str> = report
            .checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.code)
            .collect();
        out!(
            "{}: {} failed",
            paint.bad("ledger does not verify"),
            failed.join(", ")
        );
    }
}

/// `--ledger DIR` of `run`, `resume`, `batch` and `serve` (without `--ledger-key`),
/// checked before anything runs: a ledger whose key file can be read (an add signs with
/// it). Exit 2 otherwise.
fn check_target(dir: &Path) -> Result<(), u8> {
    Config::read(dir)
        .and_then(|c| provrun_ledger::load_signing_key(&c.key_file).map(|_| ()))
        .map_err(|e| fail(EXIT_USAGE, format!("--ledger: {e}")))
}

/// The ledger `--ledger` names, opened before anything runs, that each run is added to as
/// it ends.
#[derive(Debug)]
pub(crate) enum RunLedger {
    /// A folder given without `--ledger-key`: added to as it always was (its
    /// `ledger.json` names the key file that signs).
    Folder(PathBuf),
    /// A bucket (`s3://`), a `file://` folder, or a folder with `--ledger-key`: added to
    /// through a [`provrun_ledger::LedgerWriter`] holding the key. `at` is the location as
    /// given.
    Writer {
        /// The location as given.
        at: String,
        /// The ledger, opened for adding (boxed: it is large beside a path).
        writer: Box<provrun_ledger::LedgerWriter>,
    },
}

/// Open `--ledger` (with `--ledger-key`) for `run`, `resume`, `batch` and `serve`, before
/// anything runs: a folder alone must be a ledger whose key file can be read; a URL must
/// be one a ledger is written at (`file://`, `s3://`; a bucket needs `--ledger-key`, the
/// key its `ledger.json` names); a key given must be the ledger's. A URL is never taken for
/// a folder. Exit 2, said on stderr, otherwise.
pub(crate) fn open_run_ledger(ledger: &Path, key: Option<&Path>) -> Result<RunLedger, u8> {
    let shown = ledger.to_string_lossy();
    if key.is_none() && !shown.contains("://") {
        check_target(ledger)?;
        return Ok(RunLedger::Folder(ledger.to_path_buf()));
    }
    let Some(at) = ledger.to_str() else {
        return Err(fail(
            EXIT_USAGE,
            format!("--ledger `{shown}`: with --ledger-key the location must be UTF-8"),
        ));
    };
    let key = key
        .map(provrun_ledger::load_signing_key)
        .transpose()
        .map_err(|e| fail(EXIT_USAGE, format!("--ledger-key: {e}")))?;
    match provrun_ledger::LedgerWriter::open(at, key.as_ref()) {
        Ok(writer) => Ok(RunLedger::Writer {
            at: at.to_string(),
            writer: Box::new(writer),
        }),
        Err(e) => Err(fail(EXIT_USAGE, format!("--ledger: {e}"))),
    }
}

impl RunLedger {
    /// Where the ledger is, as given.
    pub(crate) fn shown(&self) -> String {
        match self {
            RunLedger::Folder(dir) => dir.display().to_string(),
            RunLedger::Writer { at, .. } => at.clone(),
        }
    }

    /// Add a run's bundle to the ledger as the run ends; the line that says where.
    pub(crate) fn add_run(&self, bundle: &Path) -> Result<String, String> {
        let added = match self {
            RunLedger::Folder(dir) => provrun_ledger::append_bundle(dir, bundle),
            RunLedger::Writer { writer, .. } => writer.add_bundles(&[bundle]),
        };
        let shown = self.shown();
        let outcome =
            added.map_err(|e| format!("cannot add the bundle to the ledger {shown}: {e}"))?;
        let index = outcome.added.first().map(|a| a.index).unwrap_or_default();
        tracing::info!(ledger = %shown, bundle = %bundle.display(), index, "run added to the ledger");
        Ok(format!(
            "added to the ledger {shown} at index {index} (checkpoint of {} leaves)",
            outcome.checkpoint.size
        ))
    }
}

/// The `verify --ledger…` options, as given.
pub(crate) struct LedgerCheckArgs<'a> {
    pub(crate) ledger: Option<&'a str>,
    pub(crate) since: &'a [PathBuf],
    pub(crate) key: Option<&'a str>,
    pub(crate) checkpoint: Option<&'a Path>,
    pub(crate) proof: Option<&'a Path>,
}

/// The `ledger` check of `verify`: the bundle's statement is a leaf of the ledger's
/// signed checkpoint (from the folder, or offline from a checkpoint and a proof). `Err`
/// is a usage error (exit 2) already reported.
pub(crate) fn check_bundle(
    bundle: &Path,
    args: &LedgerCheckArgs<'_>,
) -> Result<provrun_evidence::Check, u8> {
    use provrun_evidence::{Check, CheckCode, CheckStatus};
    let key = args
        .key
        .map(read_verifier_key)
        .transpose()
        .map_err(|e| fail(EXIT_USAGE, format!("--ledger-key: {e}")))?;
    let read = |p: &Path, what: &str| {
        std::fs::read(p).map_err(|e| fail(EXIT_USAGE, format!("{what} `{}`: {e}", p.display())))
    };
    let result = match (args.ledger, &key, args.checkpoint, args.proof) {
        (Some(dir), key, _, _) => {
            let ledger = match Ledger::open_at(dir, key.as_ref()) {
                Ok(l) => l,
                Err(e @ (LedgerError::NotALedger(_) | LedgerError::Remote(_))) => {
                    return Err(fail(EXIT_USAGE, format!("--ledger: {e}")));
                }
                Err(e) => {
                    return Ok(Check {
                        code: CheckCode::Ledger,
                        status: CheckStatus::Fail,
                        detail: e.to_string(),
                    });
                }
            };
            let mut held = Vec::new();
            for path in args.since {
                held.push((path, read(path, "--since")?));
            }
            let included =
                statement_digest(bundle).and_then(|d| provrun_ledger::check_included(&ledger, &d));
            if let (Ok(_), false) = (&included, held.is_empty()) {
                let since = since_check(&ledger, &held);
                if since.status == Status::Fail {
                    return Ok(Check {
                        code: CheckCode::Ledger,
                        status: CheckStatus::Fail,
                        detail: format!(
                            "the ledger no longer holds what was held: {}",
                            since.detail
                        ),
                    });
                }
            }
            included
        }
        (None, Some(key), Some(cp), Some(proof)) => {
            let (cp, proof) = (read(cp, "--checkpoint")?, read(proof, "--proof")?);
            statement_digest(bundle)
                .and_then(|d| provrun_ledger::check_offline(key, &cp, &proof, &d))
        }
        _ => {
            return Err(fail(
                EXIT_USAGE,
                "give --ledger DIR, or --ledger-key KEY with --checkpoint FILE and --proof FILE",
            ));
        }
    };
    Ok(match result {
        Ok(inc) => Check {
            code: CheckCode::Ledger,
            status: CheckStatus::Pass,
            detail: format!(
                "the statement is leaf {} of the tree of {} leaves signed by {}",
                inc.index, inc.checkpoint.size, inc.key
            ),
        },
        Err(e) => Check {
            code: CheckCode::Ledger,
            status: CheckStatus::Fail,
            detail: e.to_string(),
        },
    })
}
