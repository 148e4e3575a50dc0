//! `provrun verify BUNDLE [--json]`.

use std::path::PathBuf;

use provrun_evidence::redaction::Removed;
use provrun_evidence::{CheckStatus, SignatureStatus, VerifyReport};

use crate::style::Painter;
use crate::{EXIT_FAILED, EXIT_USAGE, fail};

/// Arguments of `provrun verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The bundle: a folder, a .tar of one (as `batch` uploads), or its URL
    /// (s3://BUCKET/PREFIX/ID.tar, file:///…/ID.tar).
    bundle: PathBuf,
    /// Print one JSON object `{"ok", "complete", "status", "checks": [{"code", "status", "detail"}]}`
    /// (`status`: how the run ended — finished, failed, cancelled or paused — absent when
    /// the log does not end with run_finished), and for a redacted bundle
    /// `"redactions": [{"record", "signature"}]` (docs/evidence.md §8).
    #[arg(long)]
    json: bool,
    /// Require a valid signature (statement.dsse.json) by this public key (SPKI PEM, as
    /// `provrun keygen` writes FILE.pub; Ed25519 or ECDSA P-256); the signature check names
    /// the key id that signed.
    #[arg(long, value_name = "PUBFILE")]
    key: Option<PathBuf>,
    /// Also check that the bundle's statement is in this ledger (`provrun ledger`): a
    /// `ledger` check is added to the report. A folder, or the URL the ledger is published
    /// at (s3://, file://, http(s)://).
    #[arg(long, value_name = "DIR|URL", conflicts_with_all = ["checkpoint", "proof"])]
    ledger: Option<String>,
    /// With --ledger: a checkpoint kept from earlier, which the ledger must still extend
    /// (else the `ledger` check fails, naming the size where the histories part). Repeat
    /// for several.
    #[arg(long, value_name = "CHECKPOINT_FILE", requires = "ledger")]
    since: Vec<PathBuf>,
    /// The ledger's checkpoint verifier key (NAME+KEYHASH+BASE64, as `ledger init` printed
    /// it, or a file holding it): with --ledger, the key its checkpoint must verify with;
    /// with --checkpoint and --proof, the key of an offline check.
    #[arg(long = "ledger-key", value_name = "KEY")]
    ledger_key: Option<String>,
    /// A ledger checkpoint (signed note) to check the bundle's inclusion against offline,
    /// with --ledger-key and --proof.
    #[arg(long, value_name = "FILE", requires_all = ["ledger_key", "proof"])]
    checkpoint: Option<PathBuf>,
    /// The inclusion proof (`provrun ledger proof --json`) for --checkpoint.
    #[arg(long, value_name = "FILE", requires_all = ["ledger_key", "checkpoint"])]
    proof: Option<PathBuf>,
}

pub(crate) fn verify(args: &VerifyArgs) -> u8 {
    let mut options = provrun_evidence::VerifyOptions::default();
    if let Some(path) = &args.key {
        match crate::sign::load_public_key(path) {
            Ok(key) => options.key = Some(key),
            Err(e) => return fail(EXIT_USAGE, format!("--key: {e}")),
        }
    }
    // A .tar or a bucket URL is unpacked to a temporary folder first; one that cannot be
    // read or unpacked does not verify (exit 1). Nothing there at all is exit 2.
    let loaded = match crate::open::for_reading(&args.bundle, "", EXIT_FAILED) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let mut report = provrun_evidence::verify_with(loaded.dir(), &options);
    if args.ledger.is_some() || args.checkpoint.is_some() || args.ledger_key.is_some() {
        let ledger = crate::ledger::LedgerCheckArgs {
            ledger: args.ledger.as_deref(),
            since: &args.since,
            key: args.ledger_key.as_deref(),
            checkpoint: args.checkpoint.as_deref(),
            proof: args.proof.as_deref(),
        };
        match crate::ledger::check_bundle(loaded.dir(), &ledger) {
            Ok(check) => report.push(check),
            Err(code) => return code,
        }
    }
    if args.json {
        match serde_json::to_string(&report) {
            Ok(text) => out!("{}", crate::inert::inert_json(&text)),
            Err(e) => return fail(EXIT_FAILED, format!("cannot print the report: {e}")),
        }
    } else {
        let paint = Painter::stdout();
        for line in report_lines(&report, paint) {
            out!("{line}");
        }
        for line in redaction_lines(&report) {
            out!("{line}");
        }
        out!("{}", summary(&report, paint));
    }
    exit_code(&report)
}

/// `report.exit_code()` as a process exit code.
pub(crate) fn exit_code(report: &VerifyReport) -> u8 {
    u8::try_from(report.exit_code()).unwrap_or(EXIT_FAILED)
}

/// One line per check: status, code, detail.
pub(crate) fn report_lines(report: &VerifyReport, paint: Painter) -> Vec<String> {
    report
        .checks
        .iter()
        .map(|c| {
            let status = match c.status {
                CheckStatus::Pass => paint.good("pass"),
                CheckStatus::Fail => paint.bad("FAIL"),
                CheckStatus::Warn => paint.warn("warn"),
            };
            format!(
                "{status}  {:<10} {}",
                c.code.as_str(),
                crate::inert::inert(&c.detail)
            )
        })
        .collect()
}

/// What a redacted bundle lacks, record by record: why, when, by whom, and each removed
/// piece with its digest and where it sat.
pub(crate) fn redaction_lines(report: &VerifyReport) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, r) in report.redactions.iter().enumerate() {
        let rec = &r.record;
        let by = match (&rec.signer, r.signature) {
            (Some(s), SignatureStatus::Verified) => format!("signed by key {}", s.key_id),
            (Some(s), SignatureStatus::NotChecked) => {
                format!("signed by key {} (not checked)", s.key_id)
            }
            (Some(s), _) => format!("signature by key {} does NOT verify", s.key_id),
            (None, _) => "unsigned".to_owned(),
        };
        lines.push(format!(
            "redaction {}: {:?} on {}, {by}",
            i + 1,
            rec.reason,
            rec.redacted_on
        ));
        for item in &rec.removed {
            lines.push(match item {
                Removed::Text {
                    seq,
                    pointer,
                    sha256,
                } => format!(
                    "  removed text  line {} {pointer}  sha256:{sha256}",
                    seq + 1
                ),
                Removed::Blob {
                    sha256,
                    size,
                    media_type,
                    events,
                } => {
                    let at: Vec<String> = events
                        .iter()
                        .map(|p| format!("line {} {}", p.seq + 1, p.pointer))
                        .collect();
                    format!(
                        "  removed blob  sha256:{sha256} ({size} bytes, {media_type}) named at {}",
                        at.join(", ")
                    )
                }
                Removed::File {
                    path,
                    sha256,
                    size,
                    seq,
                } => format!(
                    "  removed file  {path}  sha256:{sha256} ({size} bytes, recorded on line {})",
                    seq + 1
                ),
            });
        }
    }
    lines
        .iter()
        .map(|l| crate::inert::inert(l).into_owned())
        .collect()
}

/// The verdict in one line.
pub(crate) fn summary(report: &VerifyReport, paint: Painter) -> String {
    let failed: Vec<&str> = report.failures().map(|c| c.code.as_str()).collect();
    let warned = report
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Warn)
        .count();
    let warnings = match warned {
        0 => String::new(),
        1 => ", 1 warning".to_string(),
        n => format!(", {n} warnings"),
    };
    if !failed.is_empty() {
        format!(
            "{}: {} of {} checks failed ({})",
            paint.bad("bundle does not verify"),
            failed.len(),
            report.checks.len(),
            failed.join(", ")
        )
    } else if !report.complete {
        format!(
            "{}: the chain is valid but the run never finished{warnings}",
            paint.warn("bundle incomplete")
        )
    } else {
        format!(
            "{}: all {} checks pass{warnings}",
            paint.good("bundle verifies"),
            report.checks.len()
        )
    }
}
