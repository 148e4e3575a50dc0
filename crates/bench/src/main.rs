//! `provrun-bench`: the scenario driver behind `cargo xtask bench` (issue 9).
//!
//! `provrun-bench SCENARIO [--quick] [--provrun PATH] [--runs N] [--loose] [--no-loose]` runs
//! one named scenario in this process and prints one JSON line per figure (`--loose`: the
//! scripted scenarios write bundles of the first blob layout; `--no-loose`: `long_k300`
//! skips its first-layout baselines):
//! `{"name","runs","seconds","runs_per_second","events_per_second","p50_ms","p99_ms","peak_rss_mb"}`
//! (`peak_rss_mb` is this process's `VmHWM`, so run one scenario per process). Baselines
//! measured beside a scenario (raw `write`+`fdatasync`, `sha256sum`) are extra lines with
//! their own names; a scenario that cannot run prints its line with a `skipped` reason.
//!
//! Every run is a real [`Backend::execute`](provrun_agent::Backend::execute) with its own
//! bundle: inputs staged, every model request and tool call recorded, the trace imported,
//! outputs digested and the statement written. The tool is the built-in `read_file`
//! (in-process) reading one of 8 small files from `/input`; the model is a shared,
//! stateless [`ScriptModel`](provrun_model::ScriptModel).
//!
//! The code: `figure` (one JSON line), `harness` (folders, inputs, the script, the shared
//! backend), and the scenarios by what they measure: `scripted` (scripted runs, one long
//! run), `idle` (runs waiting on a model at once), `disk` (fsync and `verify` baselines),
//! `cli` (whole `provrun run` and `provrun batch` processes), `wrap` (what
//! `provrun wrap`'s recording proxy adds to an exchange and to a stream), `serve` (runs
//! at once through an AG-UI server over HTTP), `ledger` (adds to the transparency log
//! up to 100,000 leaves, and its proofs' sizes) and `exec_trail` (what the process trail
//! costs a command that execs 1,000 times).

use std::path::PathBuf;

use provrun_agent::{BlobLayout, Durability};

mod cli;
mod disk;
mod exec_trail;
mod figure;
mod harness;
mod idle;
mod ledger;
mod scripted;
mod serve;
mod wrap;

use cli::{batch_10k, cli_single_run};
use disk::{fsync_baseline, verify_big};
use idle::concurrent_idle;
use scripted::{long_run, scripted};
use serve::serve_concurrent;

const USAGE: &str = "usage: provrun-bench SCENARIO [--quick] [--provrun PATH] [--runs N] [--loose] [--no-loose]
scenarios: scripted_k10_c1 scripted_k10_c100 scripted_k10_c100_fsync concurrent_10k_idle verify_1g cli_single_run long_k300 batch_10k wrap_proxy serve_200 ledger_100k exec_trail";

fn main() {
    // `exec_trail` confines commands: this executable is their helper and their tracer.
    provrun_sandbox::arg0_dispatch();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let provrun = args
        .iter()
        .position(|a| a == "--provrun")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let Some(scenario) = args.first() else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    // `--runs N` overrides a scenario's run count (e.g. to count syscalls per run).
    let runs_arg: Option<usize> = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok());
    let figures = match scenario.as_str() {
        "scripted_k10_c1" => vec![scripted(
            scenario,
            runs_arg.unwrap_or(if quick { 20 } else { 200 }),
            1,
            Durability::Flush,
        )],
        "scripted_k10_c100" => vec![scripted(
            scenario,
            runs_arg.unwrap_or(if quick { 200 } else { 1000 }),
            100,
            Durability::Flush,
        )],
        "scripted_k10_c100_fsync" => {
            // Both measured while another writer keeps the disk's page cache dirty.
            let dirt = disk::Dirtier::start();
            let mut base = fsync_baseline(quick);
            base.extra
                .push(("foreign_dirty_mb_per_s", dirt.mb_per_s.into()));
            base.print();
            let mut ours = scripted(
                scenario,
                runs_arg.unwrap_or(if quick { 200 } else { 1000 }),
                100,
                Durability::GroupCommit,
            );
            ours.extra
                .push(("foreign_dirty_mb_per_s", dirt.mb_per_s.into()));
            drop(dirt);
            vec![ours]
        }
        "concurrent_10k_idle" => {
            // `--runs N` overrides the count, e.g. where the descriptor limit is too low.
            let runs = runs_arg.unwrap_or(if quick { 1000 } else { 10_000 });
            vec![concurrent_idle(scenario, runs)]
        }
        "verify_1g" => verify_big(scenario, 16, if quick { 4 } else { 64 }),
        "long_k300" => {
            // K=300, K=30 for the growth ratio, and both again in the first (loose)
            // blob layout for comparison (`--quick`: K=30 and K=3).
            // Each printed as it is made.
            let (long, short) = if quick { (30, 3) } else { (300, 30) };
            // A short run first, not printed, so that both figures are made warm (the
            // first run of a process pays for its page cache, lazy statics and thread
            // pools, which would count against whichever figure came first).
            long_run("long_warmup", 3, BlobLayout::Pack);
            long_run("long_k300", long, BlobLayout::Pack).print();
            long_run("long_k30", short, BlobLayout::Pack).print();
            if !args.iter().any(|a| a == "--no-loose") {
                long_run("long_k300_loose", long, BlobLayout::Loose).print();
                long_run("long_k30_loose", short, BlobLayout::Loose).print();
            }
            Vec::new()
        }
        "cli_single_run" => vec![cli_single_run(
            scenario,
            provrun.as_deref(),
            if quick { 1 } else { 5 },
        )],
        "batch_10k" => batch_10k(
            scenario,
            provrun.as_deref(),
            runs_arg.unwrap_or(if quick { 500 } else { 10_000 }),
        ),
        // N small exchanges, then streams of M MB, through the proxy and directly.
        "wrap_proxy" => {
            if quick {
                wrap::wrap_proxy(50, 3, 4)
            } else {
                wrap::wrap_proxy(runs_arg.unwrap_or(1000), 20, 16)
            }
        }
        "serve_200" => vec![serve_concurrent(
            scenario,
            runs_arg.unwrap_or(if quick { 20 } else { 200 }),
        )],
        "ledger_100k" => ledger::ledger_100k(quick),
        // Pairs with the process trail and without, alternating (at least 5).
        "exec_trail" => vec![exec_trail::exec_trail(
            runs_arg.unwrap_or(if quick { 5 } else { 11 }).max(5),
        )],
        other => {
            eprintln!("unknown scenario `{other}`\n{USAGE}");
            std::process::exit(2);
        }
    };
    for f in figures {
        f.print();
    }
}
