//! OpenTelemetry: `provrun export otlp BUNDLE`, and the live export `run`/`resume` set up
//! when the standard `OTEL_EXPORTER_OTLP_*` variables name a collector.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use provrun_agent::{Backend, RunResult};
use provrun_otel::OtlpConfig;

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// `provrun export`'s targets.
#[derive(Debug, Subcommand)]
pub(crate) enum ExportTarget {
    /// Send a bundle's spans (GenAI conventions, the times recorded in its evidence) to an
    /// OTLP collector: exit 0 sent, 1 not sent (collector refused, unreachable or too
    /// slow; evidence unreadable), 2 no collector named or bad arguments.
    Otlp(OtlpArgs),
    /// Write bundles as an Inspect (inspect-ai) `.eval` log, one sample per run, with
    /// the run id, bundle digest and verify verdict in each sample's metadata: exit 0
    /// written, 1 it cannot be written, 2 no bundle.
    Inspect(crate::inspect::InspectArgs),
}

/// `provrun export otlp`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct OtlpArgs {
    /// The bundle whose spans to send: a folder, a .tar of one, or its URL
    /// (s3://BUCKET/PREFIX/ID.tar, file:///…/ID.tar).
    #[arg(value_name = "BUNDLE")]
    bundle: PathBuf,
    /// The collector's base URL (as OTEL_EXPORTER_OTLP_ENDPOINT; `/v1/traces` is added for
    /// HTTP); without it the OTEL_EXPORTER_OTLP_* variables say where.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Give up after this many milliseconds (default: OTEL_EXPORTER_OTLP_TIMEOUT, else 3000).
    #[arg(long = "timeout-ms", value_name = "MS")]
    timeout_ms: Option<u64>,
}

/// `provrun export otlp BUNDLE`.
pub(crate) fn export(target: ExportTarget) -> u8 {
    let args = match target {
        ExportTarget::Otlp(args) => args,
        ExportTarget::Inspect(args) => return crate::inspect::export(&args),
    };
    let loaded = match crate::open::for_reading(&args.bundle, "", EXIT_FAILED) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let config = match (&args.endpoint, OtlpConfig::from_env()) {
        (_, Err(e)) => return fail(EXIT_USAGE, e),
        (Some(url), Ok(found)) => found
            .map_or_else(OtlpConfig::env_defaults, Ok)
            .map(|c| c.with_endpoint(url.clone())),
        (None, Ok(Some(c))) => Ok(c),
        (None, Ok(None)) => {
            return fail(
                EXIT_USAGE,
                "no collector: give --endpoint URL or set OTEL_EXPORTER_OTLP_ENDPOINT",
            );
        }
    };
    let mut config = match config {
        Ok(c) => c,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if let Some(ms) = args.timeout_ms {
        config = config.with_timeout(Duration::from_millis(ms));
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(EXIT_FAILED, format!("cannot start the runtime: {e}")),
    };
    let sent = runtime.block_on(provrun_otel::export_bundle(loaded.dir(), &config));
    runtime.shutdown_background();
    match sent {
        Ok(s) => {
            out!("sent {} spans in trace {}", s.spans, s.trace_id);
            EXIT_OK
        }
        Err(e) => fail(EXIT_FAILED, e),
    }
}

/// The backend with live export when the OTLP variables name a collector. A bad setting
/// is reported once and the run goes on without export.
pub(crate) fn with_live_export(backend: Backend) -> Backend {
    match OtlpConfig::from_env() {
        Ok(Some(config)) => backend.with_otlp(config),
        Ok(None) => backend,
        Err(e) => {
            eprintln!("provrun: {e}; the run is not exported");
            backend
        }
    }
}

/// Say once on stderr when the live export failed; the run's outcome stands.
pub(crate) fn report_live_export(result: &RunResult) {
    if let Some(Err(e)) = &result.otel_export {
        eprintln!("provrun: {e}; the run and its bundle are unaffected");
    }
}
