//! `provrun run`, `provrun resume` and `provrun replay`: everything that executes a run.

use std::path::{Path, PathBuf};

use provrun_agent::{
    AgentError, AgentSpec, Backend, Decision, DeferReason, Durability, ModelRef, ResumeSpec,
    RunControl, RunResult, RunSpec, RunStatus,
};

use provrun_evidence::{BundleLock, EvidenceError};

use crate::drive::{Driven, drive};
use crate::inert::inert;
use crate::style::Painter;
use crate::{
    DEFAULT_PROMPT, EXIT_FAILED, EXIT_OK, EXIT_PAUSED, EXIT_USAGE, check_new_bundle, fail,
    registry, shell_word,
};

/// When evidence reaches stable storage (`--durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DurabilityArg {
    /// Never fsync: survives a killed process, not a power loss.
    Flush,
    /// fsync after every event.
    PerEvent,
    /// fsync after every step (model response and its tool calls).
    PerStep,
    /// One fsync when the run ends (the default).
    AtEnd,
    /// Like per-event, with one fsync shared by events written together.
    GroupCommit,
}

impl From<DurabilityArg> for Durability {
    fn from(d: DurabilityArg) -> Self {
        match d {
            DurabilityArg::Flush => Durability::Flush,
            DurabilityArg::PerEvent => Durability::PerEvent,
            DurabilityArg::PerStep => Durability::PerStep,
            DurabilityArg::AtEnd => Durability::AtEnd,
            DurabilityArg::GroupCommit => Durability::GroupCommit,
        }
    }
}

/// Arguments of `provrun run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The agent spec (TOML). Relative paths in it (a `script:` model, skills) resolve
    /// against its folder.
    agent: PathBuf,
    /// The bundle folder to write; it must not exist or be empty.
    #[arg(long, value_name = "BUNDLE")]
    out: PathBuf,
    /// A file (staged as /input/<name>) or folder (its contents at /input's root) to
    /// stage; repeatable.
    #[arg(long = "input", value_name = "PATH")]
    inputs: Vec<PathBuf>,
    /// Most bytes of all inputs together (apparent size), instead of the spec's
    /// `[limits] max_input_bytes` (default 1 GiB); over it, exit 2 with nothing written.
    #[arg(long = "max-input-bytes", value_name = "BYTES")]
    max_input_bytes: Option<u64>,
    /// The user's prompt [default: "Do the task your instructions describe."]
    #[arg(long, value_name = "TEXT")]
    prompt: Option<String>,
    /// Use this model instead of the spec's: test, script:PATH, replay:BUNDLE,
    /// openai:MODEL_NAME (OPENAI_BASE_URL, OPENAI_API_KEY), anthropic:MODEL_NAME
    /// (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY) or openai-responses:MODEL_NAME
    /// (OPENAI_BASE_URL, OPENAI_API_KEY; the spec's base_url and api_key_env win); a
    /// relative PATH here resolves against the current folder.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Grant the host tools (list_host_files, copy_from_host, copy_to_host) this host
    /// folder; without it they are refused.
    #[arg(long = "host-dir", value_name = "DIR")]
    host_dir: Option<PathBuf>,
    /// Load the tool manifests (*.toml) of this folder as well; repeatable.
    #[arg(long = "tools-dir", value_name = "DIR")]
    tools_dirs: Vec<PathBuf>,
    /// When the evidence log is synced to disk: flush (never), per-event, per-step,
    /// at-end, or group-commit.
    #[arg(long, value_enum, value_name = "POLICY", default_value = "at-end")]
    durability: DurabilityArg,
    /// Change one of the spec's `[settings]` for this run (repeatable): KEY=VALUE with
    /// VALUE read as TOML (`--set temperature=0.2 --set stop='["END"]'`; text that is no
    /// TOML value is a string), `extra.NAME=VALUE` for a field of `extra`.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = crate::settings::parse_setting)]
    set: Vec<(String, String)>,
    /// Verify the bundle when the run ends and print the verdict on stderr; exit 1 if it
    /// does not verify.
    #[arg(long)]
    verify: bool,
    /// Sign the statement with this private key (PKCS#8 PEM, from `provrun keygen`) when
    /// the run ends: writes statement.dsse.json.
    #[arg(long = "sign-key", value_name = "FILE")]
    sign_key: Option<PathBuf>,
    /// Steer the running agent from this file: each line appended to it (those already
    /// there when the run starts included) is sent to the agent as a new user message
    /// before its next model request, and recorded (`steered`). Empty lines are ignored;
    /// the file may be created after the run starts.
    #[arg(long = "steer-file", value_name = "FILE")]
    steer_file: Option<PathBuf>,
}

/// Arguments of `provrun resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResumeArgs {
    /// The paused bundle.
    bundle: PathBuf,
    /// Run this waiting call (repeatable). ID is the call's run id (`STEP.N`, as the
    /// paused run and `show` print it), or the model's id while one waiting call has it.
    #[arg(long, value_name = "ID", required_unless_present_any = ["deny", "result"])]
    approve: Vec<String>,
    /// Do not run this waiting call; the model is told it was denied (repeatable).
    #[arg(long, value_name = "ID")]
    deny: Vec<String>,
    /// What the model is told for each call denied with --deny.
    #[arg(
        long = "deny-message",
        value_name = "TEXT",
        default_value = "a human denied this call"
    )]
    deny_message: String,
    /// Give the result of a client round-trip call that you ran yourself (ID=TEXT);
    /// repeatable.
    #[arg(long, value_name = "ID=TEXT", value_parser = parse_result)]
    result: Vec<(String, String)>,
    /// Grant the host folder again to a run that was granted one with `run --host-dir`;
    /// required for such a run, refused for others.
    #[arg(long = "host-dir", value_name = "DIR")]
    host_dir: Option<PathBuf>,
    /// Load the tool manifests (*.toml) of this folder as well; repeatable.
    #[arg(long = "tools-dir", value_name = "DIR")]
    tools_dirs: Vec<PathBuf>,
    /// Verify the bundle when the run ends (like `run --verify`).
    #[arg(long)]
    verify: bool,
    /// Sign the statement with this private key when the run ends (see `run --sign-key`).
    #[arg(long = "sign-key", value_name = "FILE")]
    sign_key: Option<PathBuf>,
}

/// Arguments of `provrun replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The recorded bundle; it must verify and be finished.
    bundle: PathBuf,
    /// The new bundle folder; it must not exist or be empty.
    #[arg(long, value_name = "NEW")]
    out: PathBuf,
    /// Load the tool manifests (*.toml) of this folder as well; repeatable.
    #[arg(long = "tools-dir", value_name = "DIR")]
    tools_dirs: Vec<PathBuf>,
}

fn parse_result(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((id, content)) if !id.is_empty() => Ok((id.to_string(), content.to_string())),
        _ => Err("expected ID=TEXT".to_string()),
    }
}

/// A `--model` as given on the command line: relative file paths resolve against the
/// current folder.
fn model_override(text: &str) -> Result<String, String> {
    let absolute = |p: &Path| -> String {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    Ok(match ModelRef::parse(text)? {
        ModelRef::Script(p) => format!("script:{}", absolute(&p)),
        ModelRef::Replay(p) => format!("replay:{}", absolute(&p)),
        _ => text.trim().to_string(),
    })
}

pub(crate) fn run(args: RunArgs) -> u8 {
    if let Err(code) = check_new_bundle(&args.out) {
        return code;
    }
    let sign_key = match signing_key(args.sign_key.as_deref()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let mut agent = match AgentSpec::load(&args.agent) {
        Ok(a) => a,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if let Some(model) = &args.model {
        match model_override(model) {
            Ok(m) => agent.model = m,
            Err(e) => return fail(EXIT_USAGE, format!("--model: {e}")),
        }
        // Evidence keeps the spec that ran: with the override, not the file's text.
        agent.source = None;
    }
    if let Err(e) = crate::settings::apply_settings(&mut agent, &args.set) {
        return fail(EXIT_USAGE, e);
    }
    if let Some(max) = args.max_input_bytes {
        agent.limits.max_input_bytes = max;
        // Evidence keeps the spec that ran: with the override, not the file's text.
        agent.source = None;
    }
    if let Err(code) = check_host_dir(args.host_dir.as_deref()) {
        return code;
    }
    let registry = match registry(&args.tools_dirs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut spec = RunSpec::new(
        args.prompt.unwrap_or_else(|| DEFAULT_PROMPT.to_string()),
        &args.out,
    )
    .inputs(args.inputs)
    .durability(args.durability.into());
    if let Some(dir) = &args.host_dir {
        spec = spec.host_dir(dir);
    }

    let backend = crate::otel::with_live_export(Backend::new().with_registry(registry));
    let control = RunControl::new();
    if let Some(path) = &args.steer_file {
        if path.exists() && !path.is_file() {
            return fail(
                EXIT_USAGE,
                format!("--steer-file: `{}` is not a regular file", path.display()),
            );
        }
        let mut file = crate::steer_file::SteerFile::new(path.clone());
        control.steer_from(move || file.new_lines());
    }
    let Driven {
        out: result,
        cancelled_code,
    } = match drive(&control, backend.execute(&control, &agent, &spec)) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Ok(r) = &result {
        crate::otel::report_live_export(r);
    }
    finish(
        result,
        &args.out,
        None,
        (args.verify, cancelled_code),
        args.host_dir.as_deref(),
        sign_key.as_ref(),
    )
}

/// The `--sign-key` seed, read before the run starts so a bad key writes nothing.
fn signing_key(path: Option<&Path>) -> Result<Option<[u8; 32]>, u8> {
    path.map(|p| {
        crate::sign::load_private_key(p).map_err(|e| fail(EXIT_USAGE, format!("--sign-key: {e}")))
    })
    .transpose()
}

pub(crate) fn resume(args: ResumeArgs) -> u8 {
    if !args.bundle.is_dir() {
        return fail(
            EXIT_USAGE,
            format!("no bundle at `{}`", args.bundle.display()),
        );
    }
    let sign_key = match signing_key(args.sign_key.as_deref()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let mut decisions: Vec<Decision> = args.approve.into_iter().map(Decision::Approve).collect();
    decisions.extend(args.deny.into_iter().map(|call_id| Decision::Deny {
        call_id,
        message: args.deny_message.clone(),
    }));
    decisions.extend(
        args.result
            .into_iter()
            .map(|(call_id, content)| Decision::Result {
                call_id,
                content,
                ok: true,
            }),
    );
    let registry = match registry(&args.tools_dirs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Err(code) = check_host_dir(args.host_dir.as_deref()) {
        return code;
    }
    let mut options = ResumeSpec::new();
    options.host_dir = args.host_dir.clone();
    let backend = crate::otel::with_live_export(Backend::new().with_registry(registry));
    let control = RunControl::new();
    // One writer per bundle: a bundle another run or resume holds is refused (exit 2),
    // and the log's length is taken under the lock, so what that writer wrote is never
    // counted as this resume's.
    let bundle_lock = match BundleLock::acquire(&args.bundle) {
        Ok(l) => l,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let before = log_len(&args.bundle);
    let resumed = backend.resume_locked(&control, bundle_lock, &decisions, &options);
    let Driven {
        out: result,
        cancelled_code,
    } = match drive(&control, resumed) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Ok(r) = &result {
        crate::otel::report_live_export(r);
    }
    finish(
        result,
        &args.bundle,
        before,
        (args.verify, cancelled_code),
        args.host_dir.as_deref(),
        sign_key.as_ref(),
    )
}

pub(crate) fn replay(args: ReplayArgs) -> u8 {
    if !args.bundle.is_dir() {
        return fail(
            EXIT_USAGE,
            format!("no bundle at `{}`", args.bundle.display()),
        );
    }
    if let Err(code) = check_new_bundle(&args.out) {
        return code;
    }
    let registry = match registry(&args.tools_dirs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let backend = Backend::new().with_registry(registry);
    let control = RunControl::new();
    let report = match drive(
        &control,
        provrun_agent::replay(&backend, &control, &args.bundle, &args.out),
    )
    .map(|d| d.out)
    {
        Ok(Ok(r)) => r,
        Ok(Err(e @ (AgentError::Bundle { .. } | AgentError::Evidence(_)))) => {
            return fail(EXIT_FAILED, e);
        }
        Ok(Err(e)) => return fail(EXIT_USAGE, format!("cannot replay: {e}")),
        Err(code) => return code,
    };
    let paint = Painter::stdout();
    if report.answered_from_recording > 0 {
        // Said on stderr so that stdout's one line stays the verdict scripts read.
        eprintln!(
            "provrun: {} tool call{} stopped in the recording (timed out, or the run was \
             cancelled) {} answered from the recording, not run again",
            report.answered_from_recording,
            if report.answered_from_recording == 1 {
                ""
            } else {
                "s"
            },
            if report.answered_from_recording == 1 {
                "was"
            } else {
                "were"
            },
        );
    }
    match &report.difference {
        None => {
            out!(
                "{}: {} tool calls and {} output files are the same as recorded (new bundle: {})",
                paint.good("replay matches"),
                report.tool_calls,
                report.outputs,
                inert(&args.out.display().to_string())
            );
            EXIT_OK
        }
        Some(difference) => {
            out!(
                "{}: {} (new bundle: {})",
                paint.bad("replay differs"),
                inert(&difference.to_string()),
                inert(&args.out.display().to_string())
            );
            EXIT_FAILED
        }
    }
}

/// The length of a bundle's evidence log, if it has one.
fn log_len(bundle: &Path) -> Option<u64> {
    std::fs::metadata(bundle.join("events.jsonl"))
        .ok()
        .map(|m| m.len())
}

/// Report a run's end and choose the exit code. `log_before` is the evidence log's length
/// before the run (for a resume); `verify` is `--verify`, and `cancelled_code` the exit
/// code of a cancelled run (see [`Driven`]).
/// `host_dir` is the folder the run was granted, for the resume command printed when it
/// pauses.
fn finish(
    result: Result<RunResult, AgentError>,
    bundle: &Path,
    log_before: Option<u64>,
    (verify, cancelled_code): (bool, u8),
    host_dir: Option<&Path>,
    sign_key: Option<&[u8; 32]>,
) -> u8 {
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            // "Could not start" leaves nothing behind (exit 2); evidence that failed
            // mid-run does (exit 1). A bundle another writer holds (or has just created)
            // was not touched: exit 2, whatever that writer has written since.
            if let AgentError::Evidence(
                EvidenceError::BundleLocked { .. } | EvidenceError::BundleNotEmpty(_),
            ) = &e
            {
                return fail(EXIT_USAGE, e);
            }
            let written = log_len(bundle) != log_before;
            return fail(if written { EXIT_FAILED } else { EXIT_USAGE }, e);
        }
    };
    let mut code = match result.status() {
        RunStatus::Finished => {
            if !result.output().is_empty() {
                use std::io::{IsTerminal as _, Write as _};
                let stdout = std::io::stdout();
                // The answer is the product's output: raw into a pipe or a file. On a
                // terminal it is shown inert (controls and invisible characters escaped,
                // its own line ends kept); redirect stdout for the exact bytes.
                let mut text = if stdout.is_terminal() {
                    crate::inert::inert_block(result.output()).into_owned()
                } else {
                    result.output().to_string()
                };
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                let _ = stdout.lock().write_all(text.as_bytes());
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
            cancelled_code,
            format!(
                "the run was cancelled{}; the bundle `{}` is finished as cancelled",
                crate::signals::StopSignal::ALL
                    .into_iter()
                    .find(|s| s.exit_code() == cancelled_code)
                    .map(|s| format!(" ({})", s.name()))
                    .unwrap_or_default(),
                bundle.display()
            ),
        ),
        RunStatus::Paused => {
            paused(&result, bundle, host_dir);
            EXIT_PAUSED
        }
    };
    if let Some(seed) = sign_key
        && let Err(e) = crate::sign::sign_bundle(bundle, seed)
    {
        code = fail(EXIT_FAILED, e);
    }
    if verify {
        let report = match sign_key {
            Some(seed) => provrun_evidence::verify_with(
                bundle,
                &provrun_evidence::VerifyOptions {
                    public_key: Some(provrun_evidence::dsse::public_key(seed)),
                },
            ),
            None => provrun_evidence::verify(bundle),
        };
        let paint = Painter::stderr();
        if !report.ok {
            for line in crate::verify::report_lines(&report, paint) {
                eprintln!("{line}");
            }
        }
        eprintln!("{}", crate::verify::summary(&report, paint));
        if !report.ok {
            code = EXIT_FAILED;
        }
    }
    code
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

/// `--host-dir` must name an existing folder (a usage error otherwise).
fn check_host_dir(host: Option<&Path>) -> Result<(), u8> {
    match host {
        Some(host) if !host.is_dir() => Err(fail(
            EXIT_USAGE,
            format!(
                "--host-dir `{}` does not exist or is not a folder",
                host.display()
            ),
        )),
        _ => Ok(()),
    }
}
