//! `provrun serve --agents DIR --out STORE`: the AG-UI server of `provrun-serve`, a thin
//! layer over it: flags to a `ServeConfig`, the token from `PROVRUN_SERVE_TOKEN` or
//! `--token-file`, the URL as the first line on stdout, and SIGINT, SIGTERM or SIGHUP as
//! the stop ([`crate::signals::StopSignals`]; a second one ends the process at once). Its
//! log lines (one per request, one per run's end) are shown at info unless `-q`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use provrun_agent::Backend;
use provrun_serve::{ServeConfig, Server};
use provrun_store::Store;

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail, registry};

/// The variable a token is read from when no `--token-file` is given.
const TOKEN_VAR: &str = "PROVRUN_SERVE_TOKEN";

/// Arguments of `provrun serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The folder of agents: each NAME.toml in it is served at POST /agents/NAME.
    #[arg(long, value_name = "DIR")]
    agents: PathBuf,
    /// Where every run's bundle goes: a folder, or an s3:// or file:// URL (a bucket of
    /// ID.tar objects).
    #[arg(long, value_name = "STORE")]
    out: PathBuf,
    /// The address to listen on; port 0 picks a free one (the first line on stdout is the
    /// URL). Without a token only a loopback address is allowed.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Runs in flight at most; a request past it is answered 429 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
    /// Read the bearer token every request must carry from this file (its first line);
    /// without it, PROVRUN_SERVE_TOKEN is read.
    #[arg(long = "token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Let browsers on this one origin call the server (CORS); off without it.
    #[arg(long, value_name = "ORIGIN")]
    cors: Option<String>,
    /// Without a token, also take requests addressed (Host) to this name, e.g. a reverse
    /// proxy's; repeatable. The address served, and localhost for a loopback one, are
    /// always taken.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_hosts: Vec<String>,
    /// Connections open at once at most (fewer when the open-files limit is low); at the
    /// cap the oldest connection still waiting for a request's header is closed.
    #[arg(long = "max-connections", value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Seconds runs in flight may go on after SIGTERM or SIGINT before they are cancelled.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    grace: u64,
    /// With a bucket --out: seconds a replica's lease on a run it streams lasts unless
    /// renewed (every third of it); a run whose lease expired (its replica lost) is ended
    /// `failed` by the next replica that touches its thread.
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    lease: u64,
    /// The largest request body taken, in bytes (413 past it).
    #[arg(long = "body-limit", value_name = "BYTES", default_value_t = provrun_serve::DEFAULT_BODY_LIMIT)]
    body_limit: usize,
    /// Where runs are built and paused runs kept when --out is a bucket (a temporary
    /// folder without it).
    #[arg(long = "work-dir", value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Load the tool manifests (*.toml) of this folder as well; repeatable.
    #[arg(long = "tools-dir", value_name = "DIR")]
    tools_dirs: Vec<PathBuf>,
    /// Add each run's bundle to this ledger (`provrun ledger init`) when the run ends (a
    /// paused run when a resume ends it), before a bucket gets it; a bundle the ledger
    /// cannot take is logged as an error. A folder, a file:// URL, or an
    /// s3://BUCKET/PREFIX (with --ledger-key).
    #[arg(long, value_name = "DIR|URL")]
    ledger: Option<PathBuf>,
    /// The ledger's signing key (as `run --ledger-key`): required for a ledger in a bucket.
    #[arg(long = "ledger-key", value_name = "FILE", requires = "ledger")]
    ledger_key: Option<PathBuf>,
}

/// The token: `--token-file`'s first line, else `PROVRUN_SERVE_TOKEN`; `None` when
/// neither gives one.
fn token(args: &ServeArgs) -> Result<Option<String>, String> {
    if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--token-file `{}`: {e}", path.display()))?;
        let line = text.lines().next().unwrap_or("").trim().to_string();
        if line.is_empty() {
            return Err(format!("--token-file `{}` is empty", path.display()));
        }
        return Ok(Some(line));
    }
    Ok(std::env::var(TOKEN_VAR)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty()))
}

/// Everything a server needs, checked before anything listens; the error is exit 2's.
fn config(args: &ServeArgs) -> Result<ServeConfig, u8> {
    let ledger = args
        .ledger
        .as_deref()
        .map(|l| crate::ledger::open_run_ledger(l, args.ledger_key.as_deref()))
        .transpose()?;
    let registry = registry(&args.tools_dirs)?;
    let backend = crate::run::with_builder_id(Backend::new().with_registry(registry))?;
    let backend = crate::otel::with_live_export(backend);
    let store = Store::open(&args.out.to_string_lossy())
        .map_err(|e| fail(EXIT_USAGE, format!("--out: {e}")))?;
    let mut config = ServeConfig::new(&args.agents, store, args.listen)
        .concurrency(usize::from(args.concurrency))
        .grace(Duration::from_secs(args.grace))
        .lease(Duration::from_secs(args.lease))
        .body_limit(args.body_limit)
        .backend(backend);
    if let Some(t) = token(args).map_err(|e| fail(EXIT_USAGE, e))? {
        config = config.token(t);
    }
    if let Some(origin) = &args.cors {
        config = config.cors_origin(origin);
    }
    for name in &args.allow_hosts {
        config = config.allow_host(name);
    }
    config = config.max_connections(usize::try_from(args.max_connections).unwrap_or(usize::MAX));
    if let Some(dir) = &args.work_dir {
        config = config.work_dir(dir);
    }
    match ledger {
        Some(crate::ledger::RunLedger::Folder(dir)) => config = config.ledger(dir),
        Some(crate::ledger::RunLedger::Writer { at, writer }) => {
            config = config.ledger_writer(at, *writer);
        }
        None => {}
    }
    config.check().map_err(|e| fail(EXIT_USAGE, e))?;
    Ok(config)
}

pub(crate) fn serve(args: &ServeArgs) -> u8 {
    crate::raise_open_files_limit();
    let config = match config(args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(EXIT_FAILED, format!("serve: cannot start the runtime: {e}")),
    };
    let code = runtime.block_on(async move {
        let server = match Server::bind(config).await {
            Ok(s) => s,
            Err(e) => return fail(EXIT_FAILED, format!("serve: {e}")),
        };
        let stop = tokio_util::sync::CancellationToken::new();
        let on_stop = stop.clone();
        // Held while the server runs: the first signal stops it gracefully.
        let _signals = match crate::signals::StopSignals::watch(
            move |signal| {
                eprintln!(
                    "provrun: serve: stopping on {} (a second signal stops at once)",
                    signal.name()
                );
                on_stop.cancel();
            },
            "runs in flight may be left unfinished",
        ) {
            Ok(s) => s,
            Err(e) => return fail(EXIT_FAILED, format!("serve: cannot watch for signals: {e}")),
        };
        out!("{}", server.url());
        match server.run(stop).await {
            Ok(stopped) => {
                eprintln!(
                    "provrun: serve: stopped ({} runs ended in the grace period, {} cancelled)",
                    stopped.finished_in_grace, stopped.cancelled
                );
                EXIT_OK
            }
            Err(e) => fail(EXIT_FAILED, format!("serve: {e}")),
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}
