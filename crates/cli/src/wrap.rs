//! `provrun wrap --out BUNDLE [--input PATH]… [--workspace DIR] [--read-only PATH]…
//! [--allow-host HOST[:PORT]]… [--upstream-openai URL] [--upstream-anthropic URL]
//! [--sign-key FILE] -- PROGRAM [ARGS…]`: a program provrun did not write, run confined
//! behind the recording proxy (crates/wrap, docs/wrap.md).

use std::path::PathBuf;

use provrun_sandbox::ProgramSignal;
use provrun_wrap::{AllowedHost, Upstreams, WrapError, WrapOptions, WrapOutcome};

use crate::inert::inert;
use crate::signals::{StopSignal, StopSignals};
use crate::{EXIT_FAILED, EXIT_USAGE, check_new_bundle, fail};

/// `provrun wrap`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct WrapArgs {
    /// The bundle to write (must not exist, or be an empty folder).
    #[arg(long, value_name = "BUNDLE")]
    out: PathBuf,
    /// A file or folder staged as /input, read-only to the program (repeatable).
    #[arg(long = "input", value_name = "PATH")]
    inputs: Vec<PathBuf>,
    /// The program's working folder (writable, /workspace inside); its final files become
    /// the bundle's outputs. Default: the bundle's own output folder, empty at the start.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// A host path the program may read (and run) at the same path, such as its own
    /// installation (repeatable).
    #[arg(long = "read-only", value_name = "PATH")]
    read_only: Vec<PathBuf>,
    /// A host the program may reach through the proxy's CONNECT tunnels: HOST (port 443)
    /// or HOST:PORT (repeatable); every other host is refused and recorded.
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    allow_hosts: Vec<String>,
    /// Where the proxy sends OpenAI requests (default: $OPENAI_BASE_URL, else
    /// https://api.openai.com/v1).
    #[arg(long = "upstream-openai", value_name = "URL")]
    upstream_openai: Option<String>,
    /// Where the proxy sends Anthropic requests (default: $ANTHROPIC_BASE_URL, else
    /// https://api.anthropic.com).
    #[arg(long = "upstream-anthropic", value_name = "URL")]
    upstream_anthropic: Option<String>,
    /// Sign the statement with this Ed25519 private key (as `provrun keygen` writes)
    /// when the run ends.
    #[arg(long = "sign-key", value_name = "FILE")]
    sign_key: Option<PathBuf>,
    /// The program to run and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<String>,
}

/// The caller's environment as text (a variable that is not UTF-8 cannot be passed on,
/// and is left out with a warning).
fn caller_env() -> Vec<(String, String)> {
    let mut env = Vec::new();
    for (k, v) in std::env::vars_os() {
        match (k.into_string(), v.into_string()) {
            (Ok(k), Ok(v)) => env.push((k, v)),
            (Ok(k), Err(_)) => {
                eprintln!(
                    "provrun: warning: ${} is not UTF-8 and is not passed to the program",
                    inert(&k)
                );
            }
            _ => {}
        }
    }
    env
}

/// Runs `provrun wrap`: the program's exit code, or 128 + the signal passed on to it
/// (130, 143, 129), or 2 for a usage or set-up error (nothing written), or 1 when the
/// bundle could not be written.
pub(crate) fn wrap(args: WrapArgs) -> u8 {
    if let Err(code) = check_new_bundle(&args.out) {
        return code;
    }
    let sign_key = match args
        .sign_key
        .as_deref()
        .map(crate::sign::load_private_key)
        .transpose()
    {
        Ok(k) => k,
        Err(e) => return fail(EXIT_USAGE, format!("--sign-key: {e}")),
    };
    let options = match options(&args) {
        Ok(o) => o,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(EXIT_USAGE, format!("cannot start the runtime: {e}")),
    };
    let result = runtime.block_on(async {
        // Listening before anything is checked or written, so that no stop signal can end
        // wrap with the program running: each one goes to the run, which passes the first
        // on to the program.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let _signals = match StopSignals::forward(move |signal, first| {
            if first && !crate::logging::quiet() {
                eprintln!(
                    "\nprovrun: wrap: {} passed on to the program (again to kill it)",
                    signal.name()
                );
            }
            let _ = tx.send(program_signal(signal));
        }) {
            Ok(s) => s,
            Err(e) => return Err(fail(EXIT_USAGE, format!("cannot listen for signals: {e}"))),
        };
        Ok(provrun_wrap::wrap(options, rx).await)
    });
    let outcome = match result {
        Err(code) => return code,
        Ok(Ok(o)) => o,
        Ok(Err(WrapError::Stopped(signal))) => {
            let signal = stop_signal(signal);
            return fail(
                signal.exit_code(),
                format!(
                    "stopped by {} before the program started; nothing was written",
                    signal.name()
                ),
            );
        }
        Ok(Err(e)) if e.nothing_written() => return fail(EXIT_USAGE, e),
        Ok(Err(e)) => {
            return fail(
                EXIT_FAILED,
                format!(
                    "{e}; the bundle `{}` records what happened",
                    args.out.display()
                ),
            );
        }
    };
    report(&args, &outcome);
    let code = match outcome.forwarded_signal {
        Some(signal) => stop_signal(signal).exit_code(),
        None => u8::try_from(outcome.exit_code.clamp(0, 255)).unwrap_or(EXIT_FAILED),
    };
    if let Some(seed) = sign_key
        && let Err(e) = crate::sign::sign_bundle(&args.out, &seed)
    {
        return fail(EXIT_FAILED, e);
    }
    code
}

/// The warnings (as log lines: `-q` silences them) and the one line that ends stderr.
fn report(args: &WrapArgs, outcome: &WrapOutcome) {
    for w in &outcome.warnings {
        tracing::warn!("{w}");
    }
    eprintln!(
        "provrun: wrapped `{}`: {}, {} model request(s) and {} other exchange(s) recorded, \
         {} tool call(s) imported from {} session log(s), {} connection(s) refused; bundle: {}",
        inert(&args.program[0]),
        match outcome.forwarded_signal {
            Some(s) => format!(
                "{} passed on, the program's exit {}",
                s.name(),
                outcome.exit_code
            ),
            None => format!("exit {}", outcome.exit_code),
        },
        outcome.totals.requests,
        outcome.totals.other_exchanges,
        outcome.imported.calls,
        outcome.imported.logs,
        outcome.totals.refused,
        inert(&args.out.display().to_string()),
    );
}

/// The sandbox's name for a stop signal the CLI received.
fn program_signal(signal: StopSignal) -> ProgramSignal {
    match signal {
        StopSignal::Interrupt => ProgramSignal::Interrupt,
        StopSignal::Terminate => ProgramSignal::Terminate,
        StopSignal::Hangup => ProgramSignal::Hangup,
    }
}

/// The stop signal a signal passed on to the program was (for its exit code, 128 + it).
fn stop_signal(signal: ProgramSignal) -> StopSignal {
    match signal {
        ProgramSignal::Interrupt => StopSignal::Interrupt,
        ProgramSignal::Terminate => StopSignal::Terminate,
        ProgramSignal::Hangup => StopSignal::Hangup,
    }
}

/// The options of a run, from the flags and the caller's environment.
fn options(args: &WrapArgs) -> Result<WrapOptions, String> {
    // An organisation's own builder (docs/evidence.md §5); not a URI is a usage error.
    let builder = provrun_evidence::builder_id_from_env().map_err(|e| e.to_string())?;
    let allow_hosts = args
        .allow_hosts
        .iter()
        .map(|h| AllowedHost::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let env = caller_env();
    let upstreams = Upstreams::resolve(
        args.upstream_openai.as_deref(),
        args.upstream_anthropic.as_deref(),
        &env,
    )
    .map_err(|e| e.to_string())?;
    Ok(WrapOptions {
        out: args.out.clone(),
        inputs: args.inputs.clone(),
        workspace: args.workspace.clone(),
        read_only: args.read_only.clone(),
        allow_hosts,
        upstreams,
        argv: args.program.clone(),
        env,
        limits: WrapOptions::default_limits(),
        builder,
    })
}
