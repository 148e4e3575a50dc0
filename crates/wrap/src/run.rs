//! The wrapped run, start to end: check everything before writing anything, open the
//! bundle, start the proxy and the confined program, pass its output and the signals
//! on, then record its exit, import its session log, take its workspace's files as the
//! outputs and finish the bundle.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use provrun_capture::Capture;
use provrun_evidence::{OutputPolicy, ProgramExited, RunEnd, RunStatus, StreamRecord};
use provrun_sandbox::roots::{HostRoot, check_disjoint};
use provrun_sandbox::{
    PortForwards, ProgramChild, ProgramExit, ProgramSignal, ProgramSpec, Sandbox, system_dirs,
};
use serde_json::{Value, json};

use crate::env::{ANTHROPIC_PORT, CONNECT_PORT, OPENAI_PORT, Secrets, program_env};
use crate::error::WrapError;
use crate::options::WrapOptions;
use crate::program::{Resolved, Visible, resolve};
use crate::proxy::{ANTHROPIC_SOCKET, CONNECT_SOCKET, OPENAI_SOCKET, Proxy, ProxyConfig};
use crate::record::{Recording, Totals};
use crate::session::Imported;
use crate::tee::{Sink, Teed, tee};

/// The `builder` a wrapped run's bundle names.
pub const WRAP_BUILDER: &str = concat!("provrun-wrap/", env!("CARGO_PKG_VERSION"));

/// How long a program has to end after a signal was passed on, before its tree is killed.
pub const SIGNAL_GRACE: Duration = Duration::from_secs(10);

/// The stop signals the caller receives while the run goes on, handed to [`wrap`] one by
/// one as they arrive (the CLI sends each one its `StopSignals` listener gets). One that
/// arrives before anything is written stops the run there ([`WrapError::Stopped`]).
pub type Signals = tokio::sync::mpsc::UnboundedReceiver<ProgramSignal>;

/// How long exchanges still in flight when the program ended have to be recorded.
const RECORD_GRACE: Duration = Duration::from_secs(10);

/// How a wrapped run ended.
#[derive(Debug, Clone)]
pub struct WrapOutcome {
    /// The program's exit code (128 + N when signal N ended it). `provrun wrap` exits
    /// with it, or with 128 + the passed-on signal's number when one was passed on.
    pub exit_code: i32,
    /// The bundle's status.
    pub status: RunStatus,
    /// What the proxy recorded.
    pub totals: Totals,
    /// What was imported from the program's session log.
    pub imported: Imported,
    /// The signal passed on to the program, if any (the first the caller handed in).
    pub forwarded_signal: Option<ProgramSignal>,
    /// Things the caller should hear about (no exchange recorded, a log not imported…).
    pub warnings: Vec<String>,
}

/// What the checks found, before anything is written.
struct Prepared {
    program: Resolved,
    argv: Vec<String>,
    workspace: Option<PathBuf>,
    read_only: Vec<PathBuf>,
    secrets: Secrets,
    env: Vec<(String, String)>,
    /// The run's private folder in `TMPDIR`: the program's home and the proxy's sockets.
    private: crate::private::Private,
    /// Warnings of the set-up (a CA variable not passed on), for the bundle.
    warnings: Vec<String>,
    /// The owner (uid, gid) of the workspace folder before the run, to hand it back to.
    workspace_owner: Option<(u32, u32)>,
}

/// Runs `options.argv` wrapped: see the crate docs. `Err` with
/// [`WrapError::nothing_written`] before the bundle exists; after, the bundle is finished
/// whatever the program did, and `Err` only when it could not be written.
///
/// `signals` carries the stop signals the caller receives (listen before calling, so
/// that none is lost): one that came before the bundle is made stops the run with
/// nothing written ([`WrapError::Stopped`]); after, the first is passed on to the program
/// and the bundle ends `cancelled`.
///
/// # Errors
///
/// Before anything is written: [`WrapError::SetUp`] when the command line or the machine
/// does not allow the run, [`WrapError::Stopped`] for a stop signal. After:
/// [`WrapError::Program`] when the program cannot be started or watched,
/// [`WrapError::Capture`] or [`WrapError::Evidence`] when the bundle cannot be written.
pub async fn wrap(options: WrapOptions, mut signals: Signals) -> Result<WrapOutcome, WrapError> {
    // As root, the program runs as a uid of this run's own (held until the run ends), so
    // that it cannot reach what another run's program left.
    let lease = provrun_sandbox::UidLease::acquire(&options.limits)
        .map_err(|e| WrapError::SetUp(e.to_string()))?;
    let options = WrapOptions {
        limits: lease.limits(&options.limits),
        ..options
    };
    let prepared = prepare(&options)?;
    if let Ok(signal) = signals.try_recv() {
        return Err(WrapError::Stopped(signal));
    }
    let capture = open(&options, &prepared)?;
    let outcome = run_opened(&options, prepared, capture, signals).await;
    drop(lease);
    outcome
}

fn canonical(path: &Path, what: &str) -> Result<PathBuf, WrapError> {
    std::fs::canonicalize(path)
        .map_err(|e| WrapError::SetUp(format!("{what} `{}`: {e}", path.display())))
}

/// Where each `--read-only` path is shown: at its canonical path, and also at the path
/// as given (made absolute) when a link made them differ — a program named by the given
/// path (`~/tools/bin/x` through a link) is found, and so is one named by the real one.
fn read_only_paths(given: &[PathBuf]) -> Result<Vec<PathBuf>, WrapError> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in given {
        let real = canonical(p, "a --read-only path")?;
        let as_given = std::path::absolute(p)
            .map_err(|e| WrapError::SetUp(format!("a --read-only path `{}`: {e}", p.display())))?;
        for path in [real, as_given] {
            let plain = path.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::RootDir | std::path::Component::Normal(_)
                )
            });
            if plain && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    Ok(out)
}

/// Every check that can refuse the run, in the order a user would fix them.
fn prepare(options: &WrapOptions) -> Result<Prepared, WrapError> {
    if options.argv.is_empty() {
        return Err(WrapError::SetUp("no program given after `--`".into()));
    }
    let workspace = match &options.workspace {
        Some(w) if w.is_dir() => Some(canonical(w, "the workspace (--workspace)")?),
        Some(w) => {
            return Err(WrapError::SetUp(format!(
                "the workspace (--workspace) `{}` is not a folder",
                w.display()
            )));
        }
        None => None,
    };
    let mut read_only = read_only_paths(&options.read_only)?;
    for input in &options.inputs {
        canonical(input, "an input (--input)")?;
    }
    let cwd = std::env::current_dir()
        .map_err(|e| WrapError::SetUp(format!("the current folder: {e}")))?;
    // What of the host the program is shown besides: the CA store, what a CA variable
    // names, a virtualenv's base installation.
    let extra = crate::grants::extra(
        &options.argv[0],
        &cwd,
        &options.env,
        &visible_to(workspace.as_ref(), &read_only),
        &options.out,
        &std::env::temp_dir(),
    )?;
    read_only.extend(extra.read_only.iter().cloned());
    check_roots(options, workspace.as_deref(), &read_only)?;

    let visible = visible_to(workspace.as_ref(), &read_only);
    let var = |name: &str| {
        options
            .env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let program = resolve(&options.argv[0], &cwd, var("PATH"), &visible)?;
    let mut argv = options.argv.clone();
    argv[0] = program.inside.display().to_string();
    let support = Sandbox::command_support();
    if !support.is_complete() {
        return Err(WrapError::SetUp(format!(
            "wrap runs the program fully confined, and this machine lacks: {}",
            support.missing_summary()
        )));
    }
    let secrets = Secrets::from_env(&options.env);
    let mut env = program_env(&options.env, &secrets);
    env.retain(|(k, _)| !extra.dropped.contains(k));
    for w in &extra.warnings {
        tracing::warn!("{w}");
    }
    let tmp = std::env::temp_dir();
    crate::private::clean_stale(&tmp);
    let private = crate::private::Private::new(&tmp)
        .map_err(|e| WrapError::SetUp(format!("cannot make a private folder in TMPDIR: {e}")))?;
    let workspace_owner = workspace.as_deref().and_then(|w| {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(w).ok().map(|m| (m.uid(), m.gid()))
    });
    Ok(Prepared {
        program,
        argv,
        workspace,
        read_only,
        secrets,
        env,
        private,
        warnings: extra.warnings,
        workspace_owner,
    })
}

/// Where host folders appear inside the sandbox: the system folders and `read_only` at
/// their own paths, the workspace at `/workspace`.
fn visible_to(workspace: Option<&PathBuf>, read_only: &[PathBuf]) -> Visible {
    let mut same_path: Vec<PathBuf> = system_dirs()
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    same_path.extend(read_only.iter().cloned());
    Visible {
        same_path,
        workspace: workspace.cloned(),
    }
}

/// The bundle, the folder the private home is made in (`TMPDIR`), and the workspace,
/// inputs and read-only grants together must not overlap: one equal to or inside another
/// (the workspace, inputs and grants may overlap one another: the inputs are copied first).
fn check_roots(
    options: &WrapOptions,
    workspace: Option<&Path>,
    read_only: &[PathBuf],
) -> Result<(), WrapError> {
    let tmp = std::env::temp_dir();
    let mut roots = vec![
        HostRoot::new("the bundle (--out)", &options.out, 0),
        HostRoot::fresh_in("the private HOME (TMPDIR)", &tmp, 2),
    ];
    if let Some(w) = workspace {
        roots.push(HostRoot::new("the workspace (--workspace)", w, 1));
    }
    roots.extend(
        options
            .inputs
            .iter()
            .map(|p| HostRoot::new("an input (--input)", p, 1)),
    );
    roots.extend(
        read_only
            .iter()
            .map(|p| HostRoot::new("a --read-only path", p, 1)),
    );
    check_disjoint(&roots).map_err(|e| WrapError::SetUp(e.to_string()))?;
    Ok(())
}

/// `run_started.details.wrap`: what was run, how, and where its traffic went.
fn details(options: &WrapOptions, p: &Prepared) -> Value {
    let mut names: Vec<&str> = p.env.iter().map(|(k, _)| k.as_str()).collect();
    names.sort_unstable();
    let set: serde_json::Map<String, Value> = p
        .env
        .iter()
        .filter(|(k, _)| {
            k.ends_with("_BASE_URL")
                || k.ends_with("_PROXY")
                || k.ends_with("_proxy")
                || k.ends_with("_API_KEY")
                || k.as_str() == "CODEX_HOME"
                || k.as_str() == "ANTHROPIC_AUTH_TOKEN"
        })
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    json!({
        "wrap": {
            "program": options.argv,
            "program_path": p.program.host,
            "argv_inside": p.argv,
            "workspace": {
                "inside": provrun_sandbox::WORKSPACE_INSIDE,
                "host": p.workspace,
            },
            "home_inside": provrun_sandbox::HOME_INSIDE,
            "read_only": p.read_only,
            "allow_hosts": options.allow_hosts.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "upstreams": {"openai": options.upstreams.openai, "anthropic": options.upstreams.anthropic},
            "ports": {"openai": OPENAI_PORT, "anthropic": ANTHROPIC_PORT, "connect": CONNECT_PORT},
            "credentials": {
                "openai": p.secrets.openai_key.is_some(),
                "anthropic": p.secrets.anthropic_key.is_some() || p.secrets.anthropic_token.is_some(),
            },
            "environment": {"names": names, "set": set},
        },
        "sandbox": {
            "command_confinement": Sandbox::command_support(),
            "command_user": provrun_sandbox::CommandUser::for_limits(&options.limits),
        },
    })
}

/// Creates the bundle: `run_started` and the staged inputs. A failure leaves nothing.
fn open(options: &WrapOptions, p: &Prepared) -> Result<Capture, WrapError> {
    let details = details(options, p);
    let spec = provrun_evidence::to_canonical_string(&details["wrap"])
        .map_err(|e| WrapError::SetUp(format!("cannot describe the run: {e}")))?;
    // The program as the caller named it (`sh`, `codex`), not the file a link leads to.
    let name = Path::new(&options.argv[0]).file_name().map_or_else(
        || "program".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut builder = Capture::builder(&options.out)
        .builder(options.builder.as_deref().unwrap_or(WRAP_BUILDER))
        .agent(name)
        .model("wrapped")
        .limits(options.limits.clone())
        .spec_bytes(spec.into_bytes())
        .details(details);
    for input in &options.inputs {
        builder = builder.input(input);
    }
    builder.open().map_err(|e| WrapError::SetUp(e.to_string()))
}

/// The run once the bundle exists: it is finished whatever happens to the program, and
/// finished `failed` when something of wrap's own goes wrong on the way.
async fn run_opened(
    options: &WrapOptions,
    p: Prepared,
    capture: Capture,
    mut signals: Signals,
) -> Result<WrapOutcome, WrapError> {
    let result = supervise(options, &p, &capture, &mut signals).await;
    result.map_err(|e| {
        // The bundle exists now: nothing here is a set-up error any more.
        let e = match e {
            WrapError::SetUp(m) => WrapError::Program(m),
            other => other,
        };
        let end = RunEnd {
            status: RunStatus::Failed,
            usage: json!({"requests": 0}),
            error: Some(e.to_string()),
        };
        // The bundle may already be finished (the error came after), or refuse: the
        // first error is the one to report.
        let _ = capture.recorder().finish_with(end, &policy(options));
        e
    })
}

/// Proxy, program, exit, session log, outputs, finish.
async fn supervise(
    options: &WrapOptions,
    p: &Prepared,
    capture: &Capture,
    signals: &mut Signals,
) -> Result<WrapOutcome, WrapError> {
    let recording = Recording::new(capture.clone());
    let config = ProxyConfig {
        upstreams: options.upstreams.clone(),
        secrets: p.secrets.clone(),
        allow_hosts: options.allow_hosts.clone(),
    };
    // The workspace as the program finds it, to compare with what it leaves.
    let workspace = p
        .workspace
        .clone()
        .unwrap_or_else(|| capture.recorder().output_dir());
    let before = tokio::task::spawn_blocking(move || crate::changes::Before::take(&workspace))
        .await
        .map_err(|e| WrapError::Program(format!("reading the workspace: {e}")))?;
    let started = Instant::now();
    let proxy = Proxy::start(&p.private.sockets(), config, recording.clone())?;
    let mut child = launch(options, p, capture)
        .map_err(|e| WrapError::Program(format!("it could not be started: {e}")))?;
    let streamer = crate::trail::Streamer::start(capture, &child);
    let out = child.take_stdout().map(|s| tee(s, Sink::Stdout));
    let err = child.take_stderr().map(|s| tee(s, Sink::Stderr));
    let (exit, forwarded) = watch(&mut child, signals).await?;
    let duration = started.elapsed();
    crate::trail::finish(capture, &mut child, streamer).await?;
    let (out, err) = (joined(out).await, joined(err).await);
    proxy.stop(RECORD_GRACE).await;
    let exited = Exited {
        exit,
        forwarded,
        out,
        err,
        duration,
    };
    record_exit(capture, options, &child, &exited).await?;
    drop(child);
    before.record(capture).await?;
    let seen = recording.wire_calls().await;
    for call in &seen {
        capture.recorder().record_async(call).await?;
    }

    let (imported, import_warnings) = crate::session::import(&recording, &p.private.home()).await?;
    let mut warnings = p.warnings.clone();
    warnings.extend(import_warnings);
    let mut left_out = Vec::new();
    if let Some(ws) = &p.workspace {
        // As root the workspace was handed to the program's user: hand it back.
        let user = provrun_sandbox::CommandUser::for_limits(&options.limits);
        let hand_back = p
            .workspace_owner
            .filter(|_| user.drops_root())
            .map(|to| (user.uid, to));
        left_out = settle_workspace(ws, capture, options, hand_back, &mut warnings)?;
    }
    let totals = recording.totals().await;
    let cut = recording.cut_exchanges().await;
    if cut > 0 {
        warnings.push(format!(
            "{cut} exchange(s) were still in flight {} s after the program ended: recorded as \
             cut, with what had arrived and an error saying the program left",
            RECORD_GRACE.as_secs()
        ));
    }
    let unrecorded = recording.unrecorded_refusals().await;
    if unrecorded > 0 {
        warnings.push(format!(
            "{unrecorded} more connection(s) over the proxy's bound were refused: counted in \
             refused_connections, not recorded one by one"
        ));
    }
    if totals.requests == 0 && totals.other_exchanges == 0 {
        warnings.push(no_exchange_warning(&exited, &totals));
    }
    let ended = Ended {
        totals,
        cut,
        wire_calls: seen.len() as u64,
        imported,
        warnings,
    };
    finish(options, capture, &exited, ended, left_out)
}

/// The host workspace at the end: set-id bits cleared and device nodes removed on the
/// host, what the program's user owns handed back (`hand_back`: from that uid to the
/// folder's owner), then its files copied into the bundle's `output/`. Returns the
/// entries the copy left out (to be recorded as `output_skipped`), and says what it did in
/// `warnings`.
fn settle_workspace(
    ws: &Path,
    capture: &Capture,
    options: &WrapOptions,
    hand_back: Option<(u32, (u32, u32))>,
    warnings: &mut Vec<String>,
) -> Result<Vec<provrun_evidence::OutputSkipped>, WrapError> {
    let disarmed = crate::workspace::disarm_and_hand_back(ws, hand_back);
    for path in &disarmed.set_id_cleared {
        warnings.push(format!(
            "the workspace's `{path}` was left set-uid or set-gid: the bits were cleared on the host"
        ));
    }
    for device in &disarmed.devices_removed {
        warnings.push(format!(
            "the workspace's `{}` is a device node: removed from the host workspace",
            device.path
        ));
    }
    for failed in &disarmed.failed {
        warnings.push(format!(
            "the workspace's set-id bits and device nodes could not all be checked: {failed}"
        ));
    }
    let report = crate::workspace::copy_workspace(
        ws,
        &capture.recorder().output_dir(),
        options.limits.max_total_bytes,
    )
    .map_err(|e| WrapError::Program(format!("copying the workspace's files: {e}")))?;
    for entry in &report.left_out {
        let why = match entry.reason.as_str() {
            "unreadable" => "could not be read",
            _ => "is not a file, folder, link, FIFO or socket",
        };
        warnings.push(format!(
            "the workspace's `{}` {why}: not in the bundle (output_skipped)",
            entry.path
        ));
    }
    let mut left_out = report.left_out;
    left_out.extend(disarmed.devices_removed);
    Ok(left_out)
}

/// What to say of a run with no exchange through the proxy: what happened, as far as
/// wrap can tell — the program failed (perhaps before calling anything), its only
/// connections were ones wrap refused (and recorded), or it ended well without asking
/// the proxy for anything (its traffic, if any, went around provrun).
fn no_exchange_warning(exited: &Exited, totals: &Totals) -> String {
    let ended = match (exited.exit.code, exited.exit.signal) {
        (_, Some(sig)) => Some(format!("was killed by signal {sig}")),
        (Some(0), None) => None,
        (Some(code), None) => Some(format!("exited with code {code}")),
        (None, None) => Some("ended".to_owned()),
    };
    let connections = match (totals.connections, totals.refused) {
        (0, _) => None,
        (n, r) if r == n => Some(format!(
            "its {n} connection(s) through the proxy variables were refused by wrap and \
             recorded (connection_handled): allow a host with --allow-host, or point the \
             program at $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL"
        )),
        (n, r) => Some(format!(
            "it asked the proxy for {n} connection(s) ({r} refused), recorded as \
             connection_handled"
        )),
    };
    match (ended, connections) {
        (Some(ended), conn) => format!(
            "the program made no request through the proxy and {ended}: it may have failed \
             before calling a model (its stderr says why){}",
            conn.map(|c| format!("; {c}")).unwrap_or_default()
        ),
        (None, Some(conn)) => format!("the program made no API request through the proxy: {conn}"),
        (None, None) => "the program made no request through the proxy: if it called a model, \
                         its traffic bypassed provrun (see docs/wrap.md for each program's recipe)"
            .to_owned(),
    }
}

/// How the program ended, and what its output streams carried.
struct Exited {
    exit: ProgramExit,
    forwarded: Option<ProgramSignal>,
    out: Teed,
    err: Teed,
    duration: Duration,
}

/// Starts the confined program (after the proxy listens).
fn launch(
    options: &WrapOptions,
    p: &Prepared,
    capture: &Capture,
) -> Result<ProgramChild, WrapError> {
    let workspace = p
        .workspace
        .clone()
        .unwrap_or_else(|| capture.recorder().output_dir());
    let sandbox = Sandbox::new(
        capture.recorder().input_dir(),
        &workspace,
        p.private.home(),
        options.limits.clone(),
    )
    .map_err(|e| WrapError::Program(e.to_string()))?;
    let spec = ProgramSpec {
        argv: p.argv.clone(),
        env: p.env.clone(),
        read_only: p.read_only.clone(),
        forwards: Some(PortForwards {
            dir: p.private.sockets(),
            ports: vec![
                (OPENAI_PORT, OPENAI_SOCKET.into()),
                (ANTHROPIC_PORT, ANTHROPIC_SOCKET.into()),
                (CONNECT_PORT, CONNECT_SOCKET.into()),
            ],
        }),
    };
    // No key provrun holds reaches the process trail's records.
    let keys = [
        &p.secrets.openai_key,
        &p.secrets.anthropic_key,
        &p.secrets.anthropic_token,
    ];
    sandbox
        .with_trail_secrets(keys.into_iter().flatten().cloned().collect())
        .start_program(&spec)
        .map_err(|e| WrapError::Program(e.to_string()))
}

/// Waits for the program, passing the first signal the caller hands in on. A second
/// signal, or a program still running [`SIGNAL_GRACE`] after the first, has its tree
/// killed. A closed channel (the caller stopped listening) passes nothing on.
async fn watch(
    child: &mut ProgramChild,
    signals: &mut Signals,
) -> Result<(ProgramExit, Option<ProgramSignal>), WrapError> {
    let mut forwarded: Option<ProgramSignal> = None;
    let mut deadline: Option<Instant> = None;
    let mut listening = true;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        let kill = tokio::select! {
            signal = signals.recv(), if listening => match (signal, forwarded) {
                (None, _) => {
                    listening = false;
                    false
                }
                (Some(signal), Some(_)) => {
                    tracing::warn!(signal = signal.name(), "a second signal: the program's processes are killed");
                    true
                }
                (Some(signal), None) => {
                    tracing::info!(signal = signal.name(), "passing the signal on to the program");
                    child.signal(signal);
                    forwarded = Some(signal);
                    deadline = Some(Instant::now() + SIGNAL_GRACE);
                    false
                }
            },
            _ = tick.tick() => {
                if let Some(exit) = child
                    .try_wait()
                    .map_err(|e| WrapError::Program(format!("waiting for the program: {e}")))?
                {
                    return Ok((exit, forwarded));
                }
                let late = deadline.is_some_and(|d| Instant::now() >= d);
                if late {
                    tracing::warn!(
                        grace_s = SIGNAL_GRACE.as_secs(),
                        "the program did not end after the signal: its processes are killed"
                    );
                }
                late
            }
        };
        if kill {
            let exit = child.kill().unwrap_or(ProgramExit {
                code: None,
                signal: Some(9),
            });
            return Ok((exit, forwarded));
        }
    }
}

async fn joined(handle: Option<std::thread::JoinHandle<Teed>>) -> Teed {
    let empty = || Teed {
        sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"")),
        size: 0,
        kept: Some(Vec::new()),
    };
    match handle {
        Some(h) => tokio::task::spawn_blocking(move || h.join().unwrap_or_else(|_| empty()))
            .await
            .unwrap_or_else(|_| empty()),
        None => empty(),
    }
}

/// Records `program_exited`.
async fn record_exit(
    capture: &Capture,
    options: &WrapOptions,
    child: &ProgramChild,
    e: &Exited,
) -> Result<(), WrapError> {
    let recorder = capture.recorder();
    let stdout = stream_record(recorder, &e.out).await?;
    let stderr = stream_record(recorder, &e.err).await?;
    recorder
        .record_async(&ProgramExited {
            argv: options.argv.clone(),
            exit_code: e.exit.code,
            signal: e.exit.signal,
            forwarded_signal: e.forwarded.map(|s| s.name().to_owned()),
            stdout,
            stderr,
            duration_ms: u64::try_from(e.duration.as_millis()).unwrap_or(u64::MAX),
            confinement: serde_json::to_value(child.confinement()).ok(),
        })
        .await?;
    Ok(())
}

/// A stream's record: its digest and size, and its bytes as a blob when they were kept.
async fn stream_record(
    recorder: &provrun_evidence::Recorder,
    t: &Teed,
) -> Result<StreamRecord, WrapError> {
    let blob = match t.kept.as_deref() {
        Some(bytes) if !bytes.is_empty() => Some(
            recorder
                .put_blob_for_next_event(bytes, "application/octet-stream")
                .await?,
        ),
        _ => None,
    };
    Ok(StreamRecord {
        sha256: t.sha256.clone(),
        size: t.size,
        blob,
    })
}

fn policy(options: &WrapOptions) -> OutputPolicy {
    OutputPolicy {
        max_total_bytes: options.limits.max_total_bytes,
    }
}

/// What the run's end records besides the program's exit.
struct Ended {
    totals: Totals,
    /// Exchanges recorded as cut.
    cut: u64,
    /// The tool calls seen on the wire.
    wire_calls: u64,
    imported: Imported,
    warnings: Vec<String>,
}

/// Writes the outputs, `run_finished` and the statement.
fn finish(
    options: &WrapOptions,
    capture: &Capture,
    exited: &Exited,
    ended: Ended,
    left_out: Vec<provrun_evidence::OutputSkipped>,
) -> Result<WrapOutcome, WrapError> {
    let Ended {
        totals,
        cut,
        wire_calls,
        imported,
        warnings,
    } = ended;
    let (exit, forwarded) = (exited.exit, exited.forwarded);
    let exit_code = exit.code.unwrap_or_else(|| 128 + exit.signal.unwrap_or(0));
    let (status, error) = match (forwarded, exit_code) {
        (Some(s), _) => (
            RunStatus::Cancelled,
            Some(format!(
                "{} passed on to the program; it exited with code {exit_code}",
                s.name()
            )),
        ),
        (None, 0) => (RunStatus::Finished, None),
        (None, code) => (
            RunStatus::Failed,
            Some(match exit.signal {
                Some(sig) => format!("the program was killed by signal {sig}"),
                None => format!("the program exited with code {code}"),
            }),
        ),
    };
    let mut usage = json!({
        "requests": totals.requests,
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
        "tool_calls": wire_calls,
        "claimed_tool_calls": imported.calls,
        "other_exchanges": totals.other_exchanges,
        "connections": totals.connections,
        "refused_connections": totals.refused,
    });
    if cut > 0 {
        usage["cut_exchanges"] = json!(cut);
    }
    if !warnings.is_empty() {
        usage["warnings"] = json!(warnings);
    }
    capture.recorder().finish_with_left_out(
        RunEnd {
            status,
            usage,
            error,
        },
        &policy(options),
        left_out,
    )?;
    Ok(WrapOutcome {
        exit_code,
        status,
        totals,
        imported,
        forwarded_signal: forwarded,
        warnings,
    })
}
