//! `provrun import pydantic-ai MESSAGES.json --out BUNDLE`: a run made elsewhere, kept as a
//! bundle of `parsed` events (the provrun-capture crate's importer); `provrun import
//! inspect LOG.eval --out DIR`: each sample of an Inspect log as such a bundle (the
//! provrun-inspect crate's reader).

use std::io::Read as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use provrun_capture::pydantic_ai::MAX_TRACE_BYTES;
use provrun_capture::{CaptureError, ImportOptions, import_pydantic_ai};
use provrun_evidence::{Durability, EvidenceError};
use provrun_inspect::{EvalLog, InspectError};

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// Where the trace comes from.
#[derive(Debug, Subcommand)]
pub(crate) enum ImportSource {
    /// A PydanticAI message history (`result.all_messages_json()`): one `model_called`
    /// per response and one `tool_called` per tool call, all `parsed`, plus the history
    /// itself as `trace_imported`. Exit 0 written, 1 writing failed, 2 the file cannot
    /// be read or is not such a history, or the bundle exists (nothing written).
    PydanticAi(ImportArgs),
    /// An Inspect `.eval` log: one bundle per sample at `DIR/ID` (the sample's id, or
    /// `sample-N`), each with one `model_called` per model event and one `tool_called` per
    /// tool event, all `parsed`, plus the sample itself as `trace_imported`. Exit 0 written,
    /// 1 writing failed, 2 the file cannot be read or is not an Inspect log, or a bundle
    /// exists (every sample is checked before anything is written).
    Inspect(InspectImportArgs),
}

/// `provrun import inspect`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct InspectImportArgs {
    /// The `.eval` log.
    #[arg(value_name = "LOG.eval")]
    log: PathBuf,
    /// The folder to write one bundle per sample into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// `provrun import pydantic-ai`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The JSON file `all_messages_json()` wrote.
    #[arg(value_name = "MESSAGES")]
    messages: PathBuf,
    /// The bundle to create (must not exist, or be an empty folder).
    #[arg(long, value_name = "BUNDLE")]
    out: PathBuf,
    /// The run id (default: the history's own, or one derived from its digest).
    #[arg(long = "run-id", value_name = "ID")]
    run_id: Option<String>,
    /// Print one JSON object `{run_id, messages, model_calls, tool_calls}` on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn import(source: ImportSource) -> u8 {
    let args = match source {
        ImportSource::PydanticAi(args) => args,
        ImportSource::Inspect(args) => return import_inspect(&args),
    };
    let bytes = match std::fs::File::open(&args.messages).and_then(|f| {
        let mut buf = Vec::new();
        f.take(MAX_TRACE_BYTES as u64 + 1).read_to_end(&mut buf)?;
        Ok(buf)
    }) {
        Ok(b) => b,
        Err(e) => {
            return fail(
                EXIT_USAGE,
                format!("import: cannot read `{}`: {e}", args.messages.display()),
            );
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => return fail(EXIT_FAILED, format!("cannot start the runtime: {e}")),
    };
    let options = ImportOptions {
        run_id: args.run_id.clone(),
        durability: Durability::default(),
    };
    match runtime.block_on(import_pydantic_ai(&bytes, &args.out, &options)) {
        Ok(summary) => {
            if args.json {
                out!(
                    "{}",
                    serde_json::json!({
                        "run_id": summary.run_id,
                        "messages": summary.messages,
                        "model_calls": summary.model_calls,
                        "tool_calls": summary.tool_calls,
                    })
                );
            } else {
                out!(
                    "imported {} message(s): {} model call(s), {} tool call(s) into {}",
                    summary.messages,
                    summary.model_calls,
                    summary.tool_calls,
                    args.out.display()
                );
            }
            EXIT_OK
        }
        Err(e @ CaptureError::Trace { .. })
        | Err(
            e @ CaptureError::Evidence(
                EvidenceError::BundleNotEmpty(_) | EvidenceError::BundleLocked { .. },
            ),
        ) => fail(
            EXIT_USAGE,
            format!(
                "import: {}: {}",
                args.messages.display(),
                crate::inert::inert(&e.to_string())
            ),
        ),
        Err(e) => fail(EXIT_FAILED, format!("import: {e}")),
    }
}

/// `provrun import inspect`: every sample read and checked, then each written as a bundle.
fn import_inspect(args: &InspectImportArgs) -> u8 {
    let usage = |e: InspectError| {
        fail(
            EXIT_USAGE,
            format!(
                "import: {}: {}",
                args.log.display(),
                crate::inert::inert(&e.to_string())
            ),
        )
    };
    let mut log = match EvalLog::open(&args.log) {
        Ok(log) => log,
        Err(e) => return usage(e),
    };
    let names = log.names();
    for (i, name) in names.iter().enumerate() {
        if let Err(e) = log.read(i) {
            return usage(e);
        }
        let bundle = args.out.join(name);
        if bundle.exists() {
            return fail(
                EXIT_USAGE,
                format!("import: `{}` exists; nothing written", bundle.display()),
            );
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => return fail(EXIT_FAILED, format!("cannot start the runtime: {e}")),
    };
    let options = ImportOptions::default();
    for (i, name) in names.iter().enumerate() {
        let bundle = args.out.join(name);
        let written = log.read(i).and_then(|bytes| {
            runtime.block_on(provrun_inspect::import_sample(&bytes, &bundle, &options))
        });
        match written {
            Ok(s) => out!(
                "{}: {} model call(s), {} tool call(s)",
                bundle.display(),
                s.model_calls,
                s.tool_calls
            ),
            Err(e) => return fail(EXIT_FAILED, format!("import: {}: {e}", bundle.display())),
        }
    }
    out!(
        "imported {} sample(s) into {}",
        names.len(),
        args.out.display()
    );
    EXIT_OK
}
