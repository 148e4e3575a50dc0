//! `provrun import pydantic-ai MESSAGES.json --out BUNDLE`: a run made elsewhere, kept as a
//! bundle of `parsed` events (the provrun-capture crate's importer).

use std::io::Read as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use provrun_capture::pydantic_ai::MAX_TRACE_BYTES;
use provrun_capture::{CaptureError, ImportOptions, import_pydantic_ai};
use provrun_evidence::{Durability, EvidenceError};

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// Where the trace comes from.
#[derive(Debug, Subcommand)]
pub(crate) enum ImportSource {
    /// A PydanticAI message history (`result.all_messages_json()`): one `model_called`
    /// per response and one `tool_called` per tool call, all `parsed`, plus the history
    /// itself as `trace_imported`. Exit 0 written, 1 writing failed, 2 the file cannot
    /// be read or is not such a history, or the bundle exists (nothing written).
    PydanticAi(ImportArgs),
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
    let ImportSource::PydanticAi(args) = source;
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
