//! `provrun ledger init|add|proof|consistency|verify`: the transparency log of runs
//! (provrun-ledger), and the `--ledger DIR` that `run`, `resume` and `batch` take to add
//! each run as it ends.

use std::path::{Path, PathBuf};

use provrun_ledger::{
    Config, Ledger, LedgerError, LedgerReport, Status, VerifierKey, leaf_data, statement_digest,
};
use serde_json::json;

use crate::style::Painter;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// `provrun ledger …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LedgerCommand {
    /// Make a new, empty ledger in DIR (a new or empty folder), its checkpoints signed with
    /// an Ed25519 key from `provrun keygen`; prints the checkpoint verifier key
    /// (NAME+KEYHASH+BASE64) as the last line.
    #[command(after_help = "Exit codes: 0 made · 2 DIR not empty, a bad key or origin")]
    Init {
        /// The folder to make the ledger in.
        dir: PathBuf,
        /// The Ed25519 private key that signs the checkpoints (its path is kept in
        /// DIR/ledger.json: later adds sign with it).
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
        /// The ledger.
        dir: PathBuf,
        /// The bundles: folders, .tar files or their s3:// / file:// URLs.
        #[arg(required = true, value_name = "BUNDLE")]
        bundles: Vec<PathBuf>,
        /// Print one JSON object {"size", "root", "added": [{"bundle", "statement",
        /// "index", "new"}]}.
        #[arg(long)]
        json: bool,
    },
    /// Print the proof that a bundle's statement is in the tree of the current checkpoint.
    #[command(
        after_help = "Exit codes: 0 printed · 1 the bundle is not in the ledger · 2 no ledger or no bundle"
    )]
    Proof {
        /// The ledger.
        dir: PathBuf,
        /// The bundle (its statement.json is what the ledger holds).
        bundle: PathBuf,
        /// Print one JSON object {"index", "tree_size", "hashes": [base64…]}.
        #[arg(long)]
        json: bool,
    },
    /// Print the proof that the tree of N leaves is a prefix of the current one.
    #[command(after_help = "Exit codes: 0 printed · 2 no ledger, or N is 0 or past the tree size")]
    Consistency {
        /// The ledger.
        dir: PathBuf,
        /// The size of the earlier tree (from an older checkpoint).
        #[arg(long, value_name = "N")]
        from: u64,
        /// Print one JSON object {"hashes": [base64…]}.
        #[arg(long)]
        json: bool,
    },
    /// Check the whole ledger: its checkpoint's signature, every entry and tile, the root.
    #[command(
        after_help = "Exit codes: 0 the ledger verifies (a torn tail is a warning) · 1 a check fails · 2 no ledger at DIR"
    )]
    Verify {
        /// The ledger.
        dir: PathBuf,
        /// Check the checkpoint against this verifier key (the text init printed, or a file
        /// holding it) instead of the one DIR/ledger.json names.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// Print one JSON object {"ok", "size", "checks": [{"code", "status", "detail"}]}.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn ledger(command: LedgerCommand) -> u8 {
    match command {
        LedgerCommand::Init { dir, key, origin } => init(&dir, &key, &origin),
        LedgerCommand::Add { dir, bundles, json } => add(&dir, &bundles, json),
        LedgerCommand::Proof { dir, bundle, json } => proof(&dir, &bundle, json),
        LedgerCommand::Consistency { dir, from, json } => consistency(&dir, from, json),
        LedgerCommand::Verify { dir, key, json } => verify(&dir, key.as_deref(), json),
    }
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
        | LedgerError::BadConfig { .. } => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}

fn init(dir: &Path, key: &Path, origin: &str) -> u8 {
    match provrun_ledger::init(dir, key, origin) {
        Ok(vkey) => {
            out!("ledger:   {}", dir.display());
            out!("origin:   {origin}");
            out!("{}", vkey.to_text());
            EXIT_OK
        }
        Err(e) => fail(code_of(&e), format!("ledger init: {e}")),
    }
}

fn add(dir: &Path, bundles: &[PathBuf], json: bool) -> u8 {
    if let Err(e) = Config::read(dir) {
        return fail(code_of(&e), format!("ledger add: {e}"));
    }
    let mut opened = Vec::new();
    for b in bundles {
        match crate::open::for_reading(b, "ledger add: ", EXIT_FAILED) {
            Ok(o) => opened.push(o),
            Err(code) => return code,
        }
    }
    let dirs: Vec<&Path> = opened.iter().map(|o| o.dir()).collect();
    let outcome = match provrun_ledger::add_bundles(dir, &dirs, None) {
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

fn proof(dir: &Path, bundle: &Path, json: bool) -> u8 {
    let ledger = match Ledger::open(dir, None) {
        Ok(l) => l,
        Err(e) => return fail(code_of(&e), format!("ledger proof: {e}")),
    };
    let opened = match crate::open::for_reading(bundle, "ledger proof: ", EXIT_FAILED) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let found = statement_digest(opened.dir()).and_then(|digest| {
        let index = ledger
            .find(&leaf_data(&digest))?
            .ok_or(LedgerError::NotIncluded(digest))?;
        ledger.inclusion_proof(index)
    });
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

fn consistency(dir: &Path, from: u64, json: bool) -> u8 {
    let made = Ledger::open(dir, None).and_then(|l| {
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

/// A verifier key given as its text, or as a file holding it.
pub(crate) fn read_verifier_key(given: &str) -> Result<VerifierKey, String> {
    let path = Path::new(given);
    let text = if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() < 4096) {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read `{given}`: {e}"))?
    } else {
        given.to_owned()
    };
    VerifierKey::parse(text.trim()).map_err(|e| e.to_string())
}

fn verify(dir: &Path, key: Option<&str>, json: bool) -> u8 {
    if let Err(e) = Config::read(dir)
        && matches!(e, LedgerError::NotALedger(_))
    {
        return fail(EXIT_USAGE, format!("ledger verify: {e}"));
    }
    let key = match key.map(read_verifier_key).transpose() {
        Ok(k) => k,
        Err(e) => return fail(EXIT_USAGE, format!("ledger verify: --key: {e}")),
    };
    let report = provrun_ledger::verify_ledger(dir, key.as_ref());
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

/// `--ledger DIR` of `run`, `resume`, `batch` and `serve`, checked before anything runs: a ledger
/// whose key file can be read (an add signs with it). Exit 2 otherwise.
pub(crate) fn check_target(dir: &Path) -> Result<(), u8> {
    Config::read(dir)
        .and_then(|c| provrun_ledger::load_signing_key(&c.key_file).map(|_| ()))
        .map_err(|e| fail(EXIT_USAGE, format!("--ledger: {e}")))
}

/// Add a run's bundle to the ledger as the run ends; the line that says where.
pub(crate) fn add_run(dir: &Path, bundle: &Path) -> Result<String, String> {
    let outcome = provrun_ledger::append_bundle(dir, bundle)
        .map_err(|e| format!("cannot add the bundle to the ledger {}: {e}", dir.display()))?;
    let index = outcome.added.first().map(|a| a.index).unwrap_or_default();
    tracing::info!(ledger = %dir.display(), bundle = %bundle.display(), index, "run added to the ledger");
    Ok(format!(
        "added to the ledger {} at index {index} (checkpoint of {} leaves)",
        dir.display(),
        outcome.checkpoint.size
    ))
}

/// The `verify --ledger…` options, as given.
pub(crate) struct LedgerCheckArgs<'a> {
    pub(crate) ledger: Option<&'a Path>,
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
            if let Err(e @ LedgerError::NotALedger(_)) = Config::read(dir) {
                return Err(fail(EXIT_USAGE, format!("--ledger: {e}")));
            }
            statement_digest(bundle)
                .and_then(|d| provrun_ledger::check_in_ledger(dir, &d, key.as_ref()))
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
