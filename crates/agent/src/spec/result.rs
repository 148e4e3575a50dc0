//! A run's result: [`RunResult`] with its [`RunOutcome`] and [`RunUsage`], the calls a
//! paused run waits on ([`DeferredCall`], [`DeferReason`]) and what the caller decides for
//! them ([`Decision`]).

use std::path::PathBuf;

use provrun_evidence::RunStatus;
use serde::{Deserialize, Serialize};

/// Token and call counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunUsage {
    /// Input (prompt) tokens over all model requests.
    pub input_tokens: u64,
    /// Output (completion) tokens over all model requests.
    pub output_tokens: u64,
    /// Model requests made.
    pub requests: u64,
    /// Tool calls completed (deferred calls count when they complete).
    pub tool_calls: u64,
}

/// A tool call that waits: for approval, or for the caller to run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferredCall {
    /// The call id as the model sent it. `--approve` / `--deny` accept it while it
    /// names one waiting call only.
    pub call_id: String,
    /// The call's id in the run, unique whatever the model sent (`STEP.N`): what
    /// `--approve` / `--deny` name. Empty only when read from an old serialisation.
    #[serde(default)]
    pub run_call_id: String,
    /// The tool.
    pub name: String,
    /// The arguments as the model sent them.
    pub arguments: String,
    /// Why it waits.
    pub reason: DeferReason,
    /// The tool's confirmation prompt with the call's arguments filled in (its
    /// `x-confirm`, e.g. `Delete /output/a.txt?`), when it has one: what to ask a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<String>,
}

/// Why a call waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferReason {
    /// The approval policy wants a human to approve it.
    Approval,
    /// A client round-trip tool: the caller runs it.
    ClientRoundTrip,
}

/// What the caller decides for a deferred call, given to `resume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Approve(String),
    /// Do not run it; the model is told why.
    Deny {
        /// The call id.
        call_id: String,
        /// What the model is told.
        message: String,
    },
    /// The caller ran it (client round trip): here is its result.
    Result {
        /// The call id.
        call_id: String,
        /// The result the model sees.
        content: String,
        /// Whether it succeeded.
        ok: bool,
    },
}

/// How a denied call's result begins: the model is told `denied: MESSAGE`, and the log
/// records that text as the call's result (the file format), which is how replay
/// recovers the message ([`denial_message`]).
const DENIED_PREFIX: &str = "denied: ";

/// The result the model is told for a call denied with `message`.
pub(crate) fn denial_text(message: &str) -> String {
    format!("{DENIED_PREFIX}{message}")
}

/// The message of a recorded denial ([`denial_text`]'s inverse), `None` when `result`
/// is not one.
pub(crate) fn denial_message(result: &str) -> Option<&str> {
    result.strip_prefix(DENIED_PREFIX)
}

impl Decision {
    /// The call this decision is for: its run-unique id (`DeferredCall::run_call_id`),
    /// or the model's id when only one waiting call has it.
    pub fn call_id(&self) -> &str {
        match self {
            Decision::Approve(id) => id,
            Decision::Deny { call_id, .. } | Decision::Result { call_id, .. } => call_id,
        }
    }
}

/// How a run ended, with what only that ending has: the answer of a finished run, the
/// reason of a failed or cancelled one, the waiting calls of a paused one.
///
/// ```
/// # fn show(result: &provrun_agent::RunResult) {
/// use provrun_agent::RunOutcome;
/// match &result.outcome {
///     RunOutcome::Finished { output } => println!("{output}"),
///     RunOutcome::Failed { error } => eprintln!("failed: {error}"),
///     RunOutcome::Cancelled { reason } => eprintln!("cancelled: {reason}"),
///     RunOutcome::Paused { deferred } => eprintln!("{} calls wait", deferred.len()),
///     _ => eprintln!("ended: {}", result.status().as_str()),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// The agent answered ([`RunStatus::Finished`]).
    Finished {
        /// The agent's final answer (the output tool's arguments as canonical JSON when
        /// the spec has an `output_schema`); empty when the model's last message had no
        /// text.
        output: String,
    },
    /// The run failed ([`RunStatus::Failed`]); the bundle still verifies.
    Failed {
        /// What went wrong, as `run_end` records it.
        error: String,
    },
    /// The run was cancelled ([`RunStatus::Cancelled`]).
    Cancelled {
        /// Where it stopped, as `run_end` records it (e.g. `the run was cancelled while
        /// waiting for the model`).
        reason: String,
    },
    /// The run waits ([`RunStatus::Paused`]): resume it with decisions for these calls
    /// ([`crate::Backend::resume`]).
    Paused {
        /// The calls it waits on, in the order the model made them.
        deferred: Vec<DeferredCall>,
    },
}

impl RunOutcome {
    /// The status the bundle's `run_end` records for this outcome.
    pub fn status(&self) -> RunStatus {
        match self {
            RunOutcome::Finished { .. } => RunStatus::Finished,
            RunOutcome::Failed { .. } => RunStatus::Failed,
            RunOutcome::Cancelled { .. } => RunStatus::Cancelled,
            RunOutcome::Paused { .. } => RunStatus::Paused,
        }
    }

    /// The agent's final answer; empty unless the run finished.
    pub fn output(&self) -> &str {
        match self {
            RunOutcome::Finished { output } => output,
            _ => "",
        }
    }

    /// Why the run did not finish, as `run_end` records it: the error of a failed run,
    /// the reason of a cancelled one; `None` for a finished or paused run.
    pub fn error(&self) -> Option<&str> {
        match self {
            RunOutcome::Failed { error } => Some(error),
            RunOutcome::Cancelled { reason } => Some(reason),
            _ => None,
        }
    }

    /// The calls a paused run waits on; empty unless the run paused.
    pub fn deferred(&self) -> &[DeferredCall] {
        match self {
            RunOutcome::Paused { deferred } => deferred,
            _ => &[],
        }
    }
}

/// What a run gives back: its id, its [`RunOutcome`], its usage and where its bundle is.
///
/// Only this crate builds one (hence `#[non_exhaustive]`). Read how the run ended from
/// [`RunResult::outcome`], or through [`RunResult::status`], [`RunResult::output`],
/// [`RunResult::error`] and [`RunResult::deferred`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunResult {
    /// The run's id.
    pub run_id: String,
    /// How it ended, with the answer, the reason or the waiting calls.
    pub outcome: RunOutcome,
    /// Tokens and calls.
    pub usage: RunUsage,
    /// The bundle folder.
    pub bundle: PathBuf,
    /// With [`crate::Backend::with_otlp`]: what the export of the run's spans at its end
    /// gave (`Err` holds the reason it failed, which never changes the run's outcome);
    /// `None` when export was not asked for. Needs the `otel` feature (on by default).
    #[cfg(feature = "otel")]
    pub otel_export: Option<Result<provrun_otel::ExportSummary, String>>,
    /// How it ended: a copy of `outcome.status()`.
    #[deprecated(
        note = "a copy of `outcome`'s status: read `outcome` or the method of the \
                         same name, `status()`"
    )]
    pub status: RunStatus,
    /// The agent's final answer (empty unless finished): a copy of `outcome.output()`.
    #[deprecated(
        note = "a copy of `outcome`'s answer: read `outcome` or the method of the \
                         same name, `output()`"
    )]
    pub output: String,
    /// The calls a paused run waits on: a copy of `outcome.deferred()`.
    #[deprecated(
        note = "a copy of `outcome`'s waiting calls: read `outcome` or the method \
                         of the same name, `deferred()`"
    )]
    pub deferred: Vec<DeferredCall>,
    /// What went wrong, for a failed or cancelled run: a copy of `outcome.error()`.
    #[deprecated(
        note = "a copy of `outcome`'s error: read `outcome` or the method of the \
                         same name, `error()`"
    )]
    pub error: Option<String>,
}

impl RunResult {
    /// The result of a run that ended with `outcome`: the one place a result is built,
    /// so the deprecated copies of the outcome's parts always agree with it.
    #[allow(deprecated)] // it fills the copies kept for existing readers
    pub(crate) fn new(
        run_id: String,
        outcome: RunOutcome,
        usage: RunUsage,
        bundle: PathBuf,
    ) -> Self {
        Self {
            run_id,
            status: outcome.status(),
            output: outcome.output().to_string(),
            deferred: outcome.deferred().to_vec(),
            error: outcome.error().map(str::to_string),
            outcome,
            usage,
            bundle,
            #[cfg(feature = "otel")]
            otel_export: None,
        }
    }

    /// How the run ended ([`RunOutcome::status`]).
    pub fn status(&self) -> RunStatus {
        self.outcome.status()
    }

    /// The agent's final answer; empty unless the run finished ([`RunOutcome::output`]).
    pub fn output(&self) -> &str {
        self.outcome.output()
    }

    /// The error of a failed run or the reason of a cancelled one
    /// ([`RunOutcome::error`]).
    pub fn error(&self) -> Option<&str> {
        self.outcome.error()
    }

    /// The calls a paused run waits on; empty unless it paused ([`RunOutcome::deferred`]).
    pub fn deferred(&self) -> &[DeferredCall] {
        self.outcome.deferred()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> DeferredCall {
        DeferredCall {
            call_id: "c1".into(),
            run_call_id: "1.1".into(),
            name: "delete_file".into(),
            arguments: "{}".into(),
            reason: DeferReason::Approval,
            confirm: None,
        }
    }

    /// One outcome of each kind, each with its own part set.
    fn outcomes() -> [RunOutcome; 4] {
        [
            RunOutcome::Finished {
                output: "the answer".into(),
            },
            RunOutcome::Failed {
                error: "what failed".into(),
            },
            RunOutcome::Cancelled {
                reason: "where it stopped".into(),
            },
            RunOutcome::Paused {
                deferred: vec![waiting()],
            },
        ]
    }

    #[test]
    fn a_finished_run_reads_as_its_answer_only() {
        let o = RunOutcome::Finished {
            output: "the answer".into(),
        };
        assert_eq!(o.status(), RunStatus::Finished);
        assert_eq!(o.output(), "the answer");
        assert_eq!(o.error(), None);
        assert!(o.deferred().is_empty());
    }

    #[test]
    fn a_failed_run_reads_as_its_error_only() {
        let o = RunOutcome::Failed {
            error: "what failed".into(),
        };
        assert_eq!(o.status(), RunStatus::Failed);
        assert_eq!(o.output(), "");
        assert_eq!(o.error(), Some("what failed"));
        assert!(o.deferred().is_empty());
    }

    #[test]
    fn a_cancelled_run_reads_as_its_reason_only() {
        let o = RunOutcome::Cancelled {
            reason: "where it stopped".into(),
        };
        assert_eq!(o.status(), RunStatus::Cancelled);
        assert_eq!(o.output(), "");
        assert_eq!(o.error(), Some("where it stopped"));
        assert!(o.deferred().is_empty());
    }

    #[test]
    fn a_paused_run_reads_as_its_waiting_calls_only() {
        let o = RunOutcome::Paused {
            deferred: vec![waiting()],
        };
        assert_eq!(o.status(), RunStatus::Paused);
        assert_eq!(o.output(), "");
        assert_eq!(o.error(), None);
        assert_eq!(o.deferred(), [waiting()]);
    }

    #[test]
    #[allow(deprecated)] // the copies are what is checked
    fn the_copies_kept_for_old_readers_follow_the_outcome() {
        for outcome in outcomes() {
            let status = outcome.status();
            let r = RunResult::new("run".into(), outcome, RunUsage::default(), "/b".into());
            assert_eq!(r.status, status);
            assert_eq!(r.status(), status);
            assert_eq!(r.output, r.outcome.output());
            assert_eq!(r.error.as_deref(), r.outcome.error());
            assert_eq!(r.deferred, r.outcome.deferred());
        }
    }
}
