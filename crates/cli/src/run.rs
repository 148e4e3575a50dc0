//! `provrun run`, `provrun resume` and `provrun replay`: everything that executes a run.

use std::path::{Path, PathBuf};

use provrun_agent::{
    AgentSpec, Backend, Decision, Durability, ModelRef, ResumeSpec, RunControl, RunSpec,
};

use provrun_evidence::BundleLock;

use crate::drive::{Driven, drive};
use crate::ending::{Ending, log_len};
use crate::{DEFAULT_PROMPT, EXIT_USAGE, check_new_bundle, fail, registry};

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
    /// Print one JSON object on stdout instead of the answer: {"status", "run_id",
    /// "bundle", "output", "error", "usage", "waiting", "verify"} (see docs/cli.md).
    #[arg(long)]
    json: bool,
    /// Steer the running agent from this file: each line appended to it (those already
    /// there when the run starts included) is sent to the agent as a new user message
    /// before its next model request, and recorded (`steered`). Empty lines are ignored;
    /// the file may be created after the run starts.
    #[arg(long = "steer-file", value_name = "FILE")]
    steer_file: Option<PathBuf>,
    /// Add the bundle to this ledger (`provrun ledger init`) when the run ends (a paused
    /// run is added when it ends after a resume); exit 1 if it cannot be added. A folder,
    /// a file:// URL, or an s3://BUCKET/PREFIX (with --ledger-key).
    #[arg(long, value_name = "DIR|URL")]
    ledger: Option<PathBuf>,
    /// The ledger's signing key (Ed25519, PKCS#8 PEM): required for a ledger in a bucket,
    /// whose ledger.json names only the verifier key; for a folder, used instead of the
    /// key file its ledger.json names (it must be the same key).
    #[arg(long = "ledger-key", value_name = "FILE", requires = "ledger")]
    ledger_key: Option<PathBuf>,
}

/// Arguments of `provrun resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResumeArgs {
    /// The paused bundle folder (a .tar or a bucket object is refused: a run is resumed
    /// in place).
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
    /// Print one JSON object on stdout instead of the answer, as `run --json` does.
    #[arg(long)]
    json: bool,
    /// Add the bundle to this ledger when the run ends (see `run --ledger`).
    #[arg(long, value_name = "DIR|URL")]
    ledger: Option<PathBuf>,
    /// The ledger's signing key (see `run --ledger-key`).
    #[arg(long = "ledger-key", value_name = "FILE", requires = "ledger")]
    ledger_key: Option<PathBuf>,
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
    let ledger = match run_ledger(args.ledger.as_deref(), args.ledger_key.as_deref()) {
        Ok(l) => l,
        Err(code) => return code,
    };
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

    let backend = match with_builder_id(Backend::new().with_registry(registry)) {
        Ok(b) => crate::otel::with_live_export(b),
        Err(code) => return code,
    };
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
    Ending {
        bundle: &args.out,
        log_before: None,
        verify: args.verify,
        host_dir: args.host_dir.as_deref(),
        sign_key: sign_key.as_ref(),
        json: args.json,
        cancelled_code,
        ledger: ledger.as_ref(),
    }
    .report(result)
}

/// `backend` naming the organisation's builder in new bundles when `PROVRUN_BUILDER_ID`
/// sets one (docs/evidence.md §5); a value that is not an absolute URI is exit 2, before
/// anything is written.
pub(crate) fn with_builder_id(backend: Backend) -> Result<Backend, u8> {
    match provrun_evidence::builder_id_from_env() {
        Ok(Some(id)) => Ok(backend.with_builder(id)),
        Ok(None) => Ok(backend),
        Err(e) => Err(fail(EXIT_USAGE, e)),
    }
}

/// `--ledger` (with `--ledger-key`), opened before the run starts so a bad ledger writes
/// nothing.
fn run_ledger(
    ledger: Option<&Path>,
    key: Option<&Path>,
) -> Result<Option<crate::ledger::RunLedger>, u8> {
    ledger
        .map(|l| crate::ledger::open_run_ledger(l, key))
        .transpose()
}

/// The `--sign-key` key, read before the run starts so a bad key writes nothing.
fn signing_key(path: Option<&Path>) -> Result<Option<provrun_evidence::dsse::PrivateKey>, u8> {
    path.map(|p| {
        crate::sign::load_private_key(p).map_err(|e| fail(EXIT_USAGE, format!("--sign-key: {e}")))
    })
    .transpose()
}

pub(crate) fn resume(args: ResumeArgs) -> u8 {
    // A run is resumed in its own bundle: a .tar or a bucket object is refused (exit 2).
    if let Err(code) = crate::open::in_place(&args.bundle, "resume") {
        return code;
    }
    let sign_key = match signing_key(args.sign_key.as_deref()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let ledger = match run_ledger(args.ledger.as_deref(), args.ledger_key.as_deref()) {
        Ok(l) => l,
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
    Ending {
        bundle: &args.bundle,
        log_before: before,
        verify: args.verify,
        host_dir: args.host_dir.as_deref(),
        sign_key: sign_key.as_ref(),
        json: args.json,
        cancelled_code,
        ledger: ledger.as_ref(),
    }
    .report(result)
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
