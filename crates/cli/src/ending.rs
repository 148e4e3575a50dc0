//! How `run` and `resume` end: the exit code, the answer on stdout (or one JSON object
//! with `--json`), the paused run's waiting calls and resume command on stderr, and the
//! signature and verdict asked for.

use std::path::Path;

use provrun_agent::{AgentError, DeferReason, RunResult, RunStatus};
use provrun_evidence::{EvidenceError, VerifyReport};
use serde_json::json;

use crate::inert::inert;
use crate::style::Painter;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_PAUSED, EXIT_USAGE, fail, shell_word};

/// What is asked of a run's end.
pub(crate) struct Ending<'a> {
    /// The bundle the run wrote.
    pub(crate) bundle: &'a Path,
    /// The evidence log's length before the run (for a resume): whether it wrote.
    pub(crate) log_before: Option<u64>,
    /// `--verify`.
    pub(crate) verify: bool,
    /// The folder the run was granted, for the resume command printed when it pauses.
    pub(crate) host_dir: Option<&'a Path>,
    /// `--sign-key`'s seed.
    pub(crate) sign_key: Option<&'a provrun_evidence::dsse::PrivateKey>,
    /// `--json`.
    pub(crate) json: bool,
    /// The exit code of a cancelled run: 128 + the signal that stopped it (see
    /// [`crate::drive::Driven`]).
    pub(crate) cancelled_code: u8,
    /// `--ledger`: the ledger the bundle is added to when the run ends (not when it
    /// pauses).
    pub(crate) ledger: Option<&'a crate::ledger::RunLedger>,
}

impl Ending<'_> {
    /// Report a run's end and choose the exit code.
    pub(crate) fn report(&self, result: Result<RunResult, AgentError>) -> u8 {
        let result = match result {
            Ok(r) => r,
            Err(e) => return self.not_run(e),
        };
        let bundle = self.bundle;
        let mut code = match result.status() {
            RunStatus::Finished => {
                if !self.json {
                    print_answer(result.output());
                }
                EXIT_OK
            }
            RunStatus::Failed => fail(
                EXIT_FAILED,
                format!(
                    "the run failed: {}; the bundle `{}` records it",
                    result.error().unwrap_or("no reason given"),
                    bundle.display()
                ),
            ),
            RunStatus::Cancelled => fail(
                self.cancelled_code,
                format!(
                    "the run was cancelled{}; the bundle `{}` is finished as cancelled",
                    crate::signals::StopSignal::ALL
                        .into_iter()
                        .find(|s| s.exit_code() == self.cancelled_code)
                        .map(|s| format!(" ({})", s.name()))
                        .unwrap_or_default(),
                    bundle.display()
                ),
            ),
            RunStatus::Paused => {
                paused(&result, bundle, self.host_dir);
                EXIT_PAUSED
            }
        };
        if let Some(key) = self.sign_key
            && let Err(e) = crate::sign::sign_bundle(bundle, key)
        {
            code = fail(EXIT_FAILED, e);
        }
        if let Some(ledger) = self.ledger
            && result.status() != RunStatus::Paused
        {
            match ledger.add_run(bundle) {
                Ok(line) if !crate::logging::quiet() => eprintln!("provrun: {}", inert(&line)),
                Ok(_) => {}
                Err(e) => code = fail(EXIT_FAILED, e),
            }
        }
        let report = self.verify.then(|| self.verify_now());
        if report.as_ref().is_some_and(|r| !r.ok) {
            code = EXIT_FAILED;
        }
        if self.json {
            print_json(&result, bundle, report.as_ref());
        }
        code
    }

    /// A run that could not start leaves nothing behind (exit 2); evidence that failed
    /// mid-run does (exit 1). A bundle another writer holds (or has just created) was not
    /// touched: exit 2, whatever that writer has written since.
    fn not_run(&self, e: AgentError) -> u8 {
        if let AgentError::Evidence(
            EvidenceError::BundleLocked { .. } | EvidenceError::BundleNotEmpty(_),
        ) = &e
        {
            return fail(EXIT_USAGE, e);
        }
        let written = log_len(self.bundle) != self.log_before;
        fail(if written { EXIT_FAILED } else { EXIT_USAGE }, e)
    }

    /// `--verify`: the bundle checked (with the signing key's public half, when it was
    /// signed), the verdict on stderr.
    fn verify_now(&self) -> VerifyReport {
        let report = match self.sign_key {
            Some(key) => provrun_evidence::verify_with(
                self.bundle,
                &provrun_evidence::VerifyOptions::with_key(key.public()),
            ),
            None => provrun_evidence::verify(self.bundle),
        };
        let paint = Painter::stderr();
        if !report.ok {
            for line in crate::verify::report_lines(&report, paint) {
                eprintln!("{line}");
            }
        }
        eprintln!("{}", crate::verify::summary(&report, paint));
        report
    }
}

/// The answer is the product's output: raw into a pipe or a file. On a terminal it is
/// shown inert (controls and invisible characters escaped, its own line ends kept);
/// redirect stdout for the exact bytes.
fn print_answer(output: &str) {
    use std::io::{IsTerminal as _, Write as _};
    if output.is_empty() {
        return;
    }
    let stdout = std::io::stdout();
    let mut text = if stdout.is_terminal() {
        crate::inert::inert_block(output).into_owned()
    } else {
        output.to_string()
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let _ = stdout.lock().write_all(text.as_bytes());
}

/// `--json`: the run's end as one object on stdout (docs/cli.md has its shape).
fn print_json(result: &RunResult, bundle: &Path, report: Option<&VerifyReport>) {
    let waiting: Vec<serde_json::Value> = result
        .deferred()
        .iter()
        .map(|c| {
            json!({
                "run_call_id": c.run_call_id,
                "call_id": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
                "reason": c.reason,
                "confirm": c.confirm,
            })
        })
        .collect();
    let value = json!({
        "status": result.status().as_str(),
        "run_id": result.run_id,
        "bundle": bundle.display().to_string(),
        "output": result.output(),
        "error": result.error(),
        "usage": result.usage,
        "waiting": waiting,
        "verify": report,
    });
    out!("{}", crate::inert::inert_json(&value.to_string()));
}

/// Tell the user what a paused run waits on, and the command that continues it.
fn paused(result: &RunResult, bundle: &Path, host_dir: Option<&Path>) {
    let n = result.deferred().len();
    eprintln!(
        "provrun: the run paused: {n} call{} wait{} for a decision",
        if n == 1 { "" } else { "s" },
        if n == 1 { "s" } else { "" }
    );
    let mut flags = Vec::new();
    for call in result.deferred() {
        // The tool's own question, its arguments filled in, where it has one.
        let why = match (&call.confirm, call.reason) {
            (Some(confirm), _) => confirm.as_str(),
            (None, DeferReason::Approval) => "needs approval",
            (None, DeferReason::ClientRoundTrip) => "the caller runs it",
        };
        let mut args = call.arguments.clone();
        if args.chars().count() > 120 {
            args = args.chars().take(117).collect::<String>() + "...";
        }
        // The run-unique id names the call; the model's own id is shown when it differs.
        let model_id = if call.call_id == call.run_call_id {
            String::new()
        } else {
            format!(" (model id {:?})", inert(&call.call_id))
        };
        eprintln!(
            "  {}{model_id}  {} {}  ({})",
            inert(&call.run_call_id),
            inert(&call.name),
            inert(&args),
            inert(why)
        );
        flags.push(match call.reason {
            DeferReason::Approval => format!("--approve {}", shell_word(&call.run_call_id)),
            DeferReason::ClientRoundTrip => {
                format!(
                    "--result {}",
                    shell_word(&format!("{}=RESULT", call.run_call_id))
                )
            }
        });
    }
    if let Some(host) = host_dir {
        flags.push(format!(
            "--host-dir {}",
            shell_word(&host.display().to_string())
        ));
    }
    eprintln!("continue it with (--deny ID refuses a call):");
    eprintln!(
        "  provrun resume {} {}",
        inert(&shell_word(&bundle.display().to_string())),
        inert(&flags.join(" "))
    );
}

/// The length of a bundle's evidence log, if it has one: a run that changed it wrote
/// evidence, even when it then failed.
pub(crate) fn log_len(bundle: &Path) -> Option<u64> {
    std::fs::metadata(bundle.join("events.jsonl"))
        .ok()
        .map(|m| m.len())
}
