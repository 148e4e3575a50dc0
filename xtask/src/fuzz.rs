//! `cargo xtask fuzz` and `cargo xtask soak`: the reliability suite's long-running parts.
//!
//! `fuzz TARGET|--all --seconds N` runs cargo-fuzz targets from `fuzz/` (its own Cargo
//! workspace, built into `fuzz/target`) for N seconds each, starting from the committed
//! seeds in `fuzz/corpus/<target>`; what libFuzzer finds on the way goes to
//! `fuzz/target/corpus/<target>` and crashes to `fuzz/artifacts/<target>`, both ignored by
//! git. It ends with executions and crashes per target, names every crash file, and fails
//! if any target crashed.
//!
//! cargo-fuzz needs nightly-only compiler flags. With a rustup `nightly` toolchain it uses
//! that; without one it uses the default toolchain with `RUSTC_BOOTSTRAP=1`, which unlocks
//! the same flags on a stable compiler. `PROVRUN_FUZZ_TOOLCHAIN=nightly|bootstrap` forces
//! one of the two.
//!
//! `soak [--kills N] [--seconds N]` is the nightly mode: the SIGKILL crash test with many
//! more kills, then every fuzz target for longer.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{cargo, root, run};

/// The targets in `fuzz/Cargo.toml`.
pub(crate) const TARGETS: &[&str] = &[
    "tool_args",
    "response_parser",
    "evidence_verify",
    "sandbox_path",
    "agent_spec",
    "anthropic_stream",
    "responses_stream",
    "pack_reader",
];

const FUZZ_USAGE: &str = "usage: cargo xtask fuzz (TARGET | --all) [--seconds N]
targets: tool_args, response_parser, evidence_verify, sandbox_path, agent_spec,
  anthropic_stream, responses_stream, pack_reader
needs: cargo install cargo-fuzz --locked; a rustup nightly toolchain is used when there is
one, else the default toolchain with RUSTC_BOOTSTRAP=1 (PROVRUN_FUZZ_TOOLCHAIN=nightly|bootstrap
forces one)";

const SOAK_USAGE: &str = "usage: cargo xtask soak [--kills N] [--seconds N]
  --kills N    SIGKILLs in the crash-consistency test (default 500)
  --seconds N  fuzzing time per target (default 300)";

/// How cargo-fuzz gets the nightly-only compiler flags it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Toolchain {
    /// `cargo +nightly fuzz …` through rustup.
    Nightly,
    /// `cargo fuzz …` on the default toolchain with `RUSTC_BOOTSTRAP=1`.
    Bootstrap,
}

impl Toolchain {
    fn describe(self) -> &'static str {
        match self {
            Toolchain::Nightly => "rustup nightly",
            Toolchain::Bootstrap => "default toolchain with RUSTC_BOOTSTRAP=1",
        }
    }
}

/// What one fuzz run did.
struct FuzzRun {
    target: String,
    executions: Option<u64>,
    crashed: bool,
    seconds: f64,
    /// Crash files libFuzzer wrote during this run.
    artifacts: Vec<std::path::PathBuf>,
}

fn flag_value(args: &[String], flag: &str, default: u64) -> Result<u64, String> {
    match args.iter().position(|a| a == flag) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} needs a whole number")),
    }
}

/// `cargo xtask fuzz …`
pub(crate) fn fuzz(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "-h" || a == "--help") || args.is_empty() {
        println!("{FUZZ_USAGE}");
        return if args.is_empty() {
            Err("fuzz: name a target or --all".into())
        } else {
            Ok(())
        };
    }
    let seconds = flag_value(args, "--seconds", 60)?;
    let mut targets: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--all" => targets.extend(TARGETS),
            "--seconds" => i += 1,
            t if TARGETS.contains(&t) => targets.push(t),
            other => {
                return Err(format!(
                    "fuzz: unknown target or flag `{other}`\n{FUZZ_USAGE}"
                ));
            }
        }
        i += 1;
    }
    if targets.is_empty() {
        return Err(format!("fuzz: name a target or --all\n{FUZZ_USAGE}"));
    }
    fuzz_targets(&targets, seconds)
}

fn fuzz_targets(targets: &[&str], seconds: u64) -> Result<(), String> {
    let toolchain = check_tools()?;
    build(toolchain)?;
    let mut runs = Vec::new();
    for t in targets {
        runs.push(fuzz_one(toolchain, t, seconds)?);
    }
    println!("\nfuzz summary ({seconds} s per target):");
    println!(
        "  {:<18} {:>14} {:>8}  result",
        "target", "executions", "seconds"
    );
    for r in &runs {
        println!(
            "  {:<18} {:>14} {:>8.1}  {}",
            r.target,
            r.executions.map_or("?".to_string(), |n| n.to_string()),
            r.seconds,
            match (r.crashed, r.artifacts.is_empty()) {
                (false, _) => "ok",
                (true, false) => "CRASHED",
                (true, true) => "FAILED (no crash file: see its output above)",
            }
        );
        for a in &r.artifacts {
            println!("      crash file: {}", a.display());
            println!(
                "      reproduce: cd fuzz && cargo fuzz run {} {} --sanitizer none --debug-assertions",
                r.target,
                a.display()
            );
        }
    }
    let crashed: Vec<&str> = runs
        .iter()
        .filter(|r| r.crashed)
        .map(|r| r.target.as_str())
        .collect();
    if crashed.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzz: crashed or failed: {}", crashed.join(", ")))
    }
}

/// Whether `cmd` runs and exits 0 (its output discarded).
fn succeeds(mut cmd: Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Picks the toolchain and checks that cargo-fuzz runs on it.
fn check_tools() -> Result<Toolchain, String> {
    let forced = std::env::var("PROVRUN_FUZZ_TOOLCHAIN").ok();
    let toolchain = match forced.as_deref() {
        Some("nightly") => Toolchain::Nightly,
        Some("bootstrap") => Toolchain::Bootstrap,
        Some(other) => {
            return Err(format!(
                "fuzz: PROVRUN_FUZZ_TOOLCHAIN={other:?}: expected `nightly` or `bootstrap`"
            ));
        }
        None => {
            let mut probe = Command::new("cargo");
            probe.args(["+nightly", "--version"]);
            if succeeds(probe) {
                Toolchain::Nightly
            } else {
                Toolchain::Bootstrap
            }
        }
    };
    let mut version = cargo_fuzz_command(toolchain);
    version.arg("--version");
    if !succeeds(version) {
        return Err(format!(
            "fuzz: cargo-fuzz does not run on the {} (install it with \
             `cargo install cargo-fuzz --locked`)\n{FUZZ_USAGE}",
            toolchain.describe()
        ));
    }
    println!("fuzz: cargo-fuzz on the {}", toolchain.describe());
    Ok(toolchain)
}

/// `cargo [+nightly] fuzz`, in `fuzz/`, built into `fuzz/target` whatever the caller's
/// CARGO_TARGET_DIR.
fn cargo_fuzz_command(toolchain: Toolchain) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root().join("fuzz"))
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTC_WRAPPER");
    match toolchain {
        Toolchain::Nightly => {
            cmd.arg("+nightly");
        }
        Toolchain::Bootstrap => {
            cmd.env("RUSTC_BOOTSTRAP", "1");
        }
    }
    cmd.arg("fuzz");
    cmd
}

/// `cargo fuzz SUB` with the build options every fuzz command shares: no sanitizer (the
/// code under test has no unsafe; coverage-guided search is what matters) and debug
/// assertions on, so overflows are found too.
fn cargo_fuzz(toolchain: Toolchain, sub: &str) -> Command {
    let mut cmd = cargo_fuzz_command(toolchain);
    cmd.args([sub, "--sanitizer", "none", "--debug-assertions"]);
    cmd
}

fn build(toolchain: Toolchain) -> Result<(), String> {
    run("fuzz build", cargo_fuzz(toolchain, "build"))
}

/// Files in `dir` (not recursive).
fn files_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

fn fuzz_one(toolchain: Toolchain, target: &str, seconds: u64) -> Result<FuzzRun, String> {
    let root = root();
    let work = root.join("fuzz/target/corpus").join(target);
    let seeds = root.join("fuzz/corpus").join(target);
    let artifacts = root.join("fuzz/artifacts").join(target);
    for d in [&work, &artifacts] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let before = files_in(&artifacts);
    let mut cmd = cargo_fuzz(toolchain, "run");
    cmd.arg(target)
        .arg(&work)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-max_len=65536")
        .arg("-rss_limit_mb=2048")
        .arg("-print_final_stats=1")
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped());
    println!("\n==> fuzz {target} for {seconds} s: {cmd:?}");
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("fuzz {target}: could not start cargo fuzz: {e}"))?;
    let mut executions: Option<u64> = None;
    if let Some(err) = child.stderr.take() {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            // libFuzzer's last word: "Done 123456 runs in 60 second(s)".
            if let Some(rest) = line.strip_prefix("Done ")
                && let Some(n) = rest.split_whitespace().next()
            {
                executions = n.parse().ok();
            }
            if let Some(n) = line.strip_prefix("stat::number_of_executed_units:") {
                executions = n.trim().parse().ok().or(executions);
            }
            // Keep the progress quiet; show what matters.
            if !line.starts_with('#') || line.contains("DONE") {
                eprintln!("{line}");
            }
        }
    }
    let status = child.wait().map_err(|e| format!("fuzz {target}: {e}"))?;
    let seconds = started.elapsed().as_secs_f64();
    let artifacts: Vec<_> = files_in(&artifacts)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    for a in &artifacts {
        eprintln!("fuzz {target}: crash file {}", a.display());
    }
    println!(
        "<== fuzz {target}: {} executions in {seconds:.1}s{}",
        executions.map_or("?".to_string(), |n| n.to_string()),
        if status.success() { "" } else { ", CRASHED" }
    );
    Ok(FuzzRun {
        target: target.to_string(),
        executions,
        crashed: !status.success() || !artifacts.is_empty(),
        seconds,
        artifacts,
    })
}

/// `cargo xtask soak …`
pub(crate) fn soak(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{SOAK_USAGE}");
        return Ok(());
    }
    let kills = flag_value(args, "--kills", 500)?;
    let seconds = flag_value(args, "--seconds", 300)?;
    let mut crash = cargo();
    crash
        .args([
            "test",
            "-p",
            "provrun-tests",
            "--test",
            "it",
            "--",
            "crash::",
            "--nocapture",
        ])
        .env("PROVRUN_CRASH_KILLS", kills.to_string());
    run(&format!("crash consistency, {kills} kills"), crash)?;
    let mut concurrency = cargo();
    // One test binary, tests/it; the filters pick its modules (`faults::` also matches
    // `tool_faults::`).
    concurrency.args([
        "test",
        "-p",
        "provrun-tests",
        "--test",
        "it",
        "--",
        "concurrency::",
        "faults::",
        "--nocapture",
    ]);
    run("faults and concurrency", concurrency)?;
    fuzz_targets(TARGETS, seconds)?;
    println!("\nxtask soak: all steps passed");
    Ok(())
}
