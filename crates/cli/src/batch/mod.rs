//! `provrun batch`: many runs from one JSONL file, a bounded number at a time, one bundle
//! per run, resumable after a kill, and split into shards for many machines.
//!
//! Two passes over the file keep memory bounded by the concurrency, not by the number of
//! lines: the first checks every line (and loads each distinct agent spec once) before
//! anything runs, keeping only the ids; the second reads the lines again and hands this
//! shard's to at most `--concurrency` runs in flight.
//!
//! The code: `shard` (which lines are ours), `check` (a line resolved, the first pass),
//! `dest` (where bundles go, what a restart finds there), `run` (one line), `progress`,
//! `drive` (the second pass and the summary).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use provrun_agent::{Backend, RunControl};

use crate::ledger::RunLedger;
use crate::signals::StopSignals;
use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail, registry};
use provrun_store::{Store, is_url};

mod args;
mod check;
mod dest;
mod drive;
mod progress;
mod run;
mod shard;

pub(crate) use args::BatchArgs;
use check::check_file;
use dest::Dest;
use drive::{Source, drive, print_summary_line, print_table};
use shard::choose_shard;

pub(crate) fn batch(args: BatchArgs) -> u8 {
    crate::raise_open_files_limit();
    let job_index = std::env::var("JOB_COMPLETION_INDEX").ok();
    let shard = match choose_shard(args.shard, args.shards, job_index.as_deref()) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let registry = match registry(&args.tools_dirs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let ledger = match args
        .ledger
        .as_deref()
        .map(|l| crate::ledger::open_run_ledger(l, args.ledger_key.as_deref()))
        .transpose()
    {
        Ok(l) => l.map(Arc::new),
        Err(code) => return code,
    };
    // A bad PROVRUN_BUILDER_ID is a usage error before anything is written.
    let backend = match crate::run::with_builder_id(Backend::new().with_registry(registry.clone()))
    {
        Ok(b) => b,
        Err(code) => return code,
    };
    let runs = std::path::absolute(&args.runs).unwrap_or_else(|_| args.runs.clone());
    let base = runs
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let checked = match check_file(&runs, &base, (shard, &args.set), &registry) {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors {
                fail(EXIT_USAGE, e);
            }
            return EXIT_USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(EXIT_FAILED, format!("cannot start the runtime: {e}")),
    };
    // Kept until the batch ends: the work folder of a bucket destination.
    let (dest, _work) = match open_dest(&args, &runtime, ledger) {
        Ok(d) => d,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let dest = Arc::new(dest);
    let mut backend = backend;
    if let Some(m) = args.max_model_requests {
        backend = backend.with_model_limit(Arc::new(tokio::sync::Semaphore::new(m as usize)));
    }
    let backend = Arc::new(crate::otel::with_live_export(backend));
    // Every run's control is a child of this one: a stop signal cancels them all.
    let stop = RunControl::new();
    let (summary, stopped_by) = runtime.block_on(async {
        let signals = stop_on_signals(&stop);
        let summary = drive(
            &args,
            Source {
                runs: &runs,
                base: &base,
                shard,
            },
            checked,
            &dest,
            (&backend, &stop),
            &registry,
        )
        .await;
        (summary, signals.and_then(|s| s.received()))
    });
    runtime.shutdown_background();
    let mut summary = match summary {
        Ok(s) => s,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    summary.stopped_by = stopped_by;
    if args.json {
        print_summary_line(&summary);
    } else {
        print_table(&summary, &runs, &dest, shard);
    }
    match stopped_by {
        Some(signal) => signal.exit_code(),
        None if summary.not_finished == 0 => EXIT_OK,
        None => EXIT_FAILED,
    }
}

/// Listens for SIGINT, SIGTERM and SIGHUP while the batch runs: the first stops taking
/// lines and cancels the running runs through `stop` (each then finishes its bundle as
/// `cancelled`); a second one ends the process at once. `None` when the handlers cannot
/// be installed (the batch then runs without them).
fn stop_on_signals(stop: &RunControl) -> Option<StopSignals> {
    let stop = stop.clone();
    StopSignals::watch(
        move |signal| {
            if !crate::logging::quiet() {
                eprintln!(
                    "\nprovrun: batch: {}: taking no more lines; the running runs are being \
                     cancelled (again to stop at once)",
                    signal.name()
                );
            }
            stop.cancel();
        },
        "the running runs' bundles may be unfinished; start the batch again to redo them",
    )
    .ok()
}

/// The destination `--out` names, made ready: a bucket (probed) with its local work folder
/// (`--work-dir`, or a new temporary folder, returned to be kept until the batch ends), or
/// a local folder (made if missing); each run is added to `ledger`, with one. The error is
/// a usage error's message.
fn open_dest(
    args: &BatchArgs,
    runtime: &tokio::runtime::Runtime,
    ledger: Option<Arc<RunLedger>>,
) -> Result<(Dest, Option<tempfile::TempDir>), String> {
    let out_text = args.out.to_string_lossy().into_owned();
    if is_url(&out_text) {
        let bucket = Store::open(&out_text).map_err(|e| format!("--out: {e}"))?;
        if let Err(e) = runtime.block_on(bucket.probe()) {
            return Err(format!("--out: {e}"));
        }
        let mut work = None;
        let local = match &args.work_dir {
            Some(dir) => std::fs::create_dir_all(dir)
                .map(|()| std::path::absolute(dir).unwrap_or_else(|_| dir.clone()))
                .map_err(|e| format!("cannot make --work-dir `{}`: {e}", dir.display())),
            None => tempfile::Builder::new()
                .prefix("provrun-batch-")
                .tempdir()
                .map_err(|e| format!("cannot make a work folder in TMPDIR: {e}"))
                .map(|t| {
                    let path = std::path::absolute(t.path()).unwrap_or_else(|_| t.path().into());
                    work = Some(t);
                    path
                }),
        }?;
        let dest = Dest {
            bucket: Some(bucket.with_scratch(&local)),
            // A bucket's runs are not indexed: the work folder is not kept.
            index: None,
            local,
            ledger,
        };
        return Ok((dest, work));
    }
    match std::fs::symlink_metadata(&args.out) {
        Ok(m) if !m.is_dir() => {
            return Err(format!(
                "--out `{}` exists and is not a folder",
                args.out.display()
            ));
        }
        _ => {}
    }
    if let Err(e) = std::fs::create_dir_all(&args.out) {
        return Err(format!("cannot make --out `{}`: {e}", args.out.display()));
    }
    let local = std::path::absolute(&args.out).unwrap_or_else(|_| args.out.clone());
    let dest = Dest {
        index: Some(provrun_view::RunIndex::at(
            local.join(provrun_view::BATCH_INDEX_FILE),
        )),
        local,
        bucket: None,
        ledger,
    };
    Ok((dest, None))
}
