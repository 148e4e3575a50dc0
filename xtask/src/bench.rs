//! `cargo xtask bench`: builds the scenario driver (`crates/bench`) in release mode, runs
//! each scenario of issue 9 in a fresh process (so each reports its own peak RSS), and
//! with `--peer` runs the PydanticAI peer on the same work in the same command and prints
//! the ratios and the goals.
//!
//! Flags: `--json` (one JSON object per line), `--quick` (small sizes, a smoke test),
//! `--peer`, `--repeat N` (run each scenario N times, report the median), `--crates`
//! (also the crate micro-benches), and scenario names to run only those.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{cargo, root};

/// The scenarios, in the order they run.
const SCENARIOS: &[&str] = &[
    "scripted_k10_c1",
    "scripted_k10_c100",
    "scripted_k10_c100_fsync",
    "concurrent_10k_idle",
    "verify_1g",
    "cli_single_run",
    "long_k300",
    "batch_10k",
    "wrap_proxy",
    "serve_200",
    "ledger_100k",
];

/// The crate micro-benches (`--crates`), as (package, bench target).
const CRATE_BENCHES: &[(&str, &str)] = &[
    ("provrun-evidence", "recorder"),
    ("provrun-sandbox", "fileops"),
];

/// The peer's version, pinned.
const PEER_PACKAGE: &str = "pydantic-ai-slim==2.68.0";

struct Options {
    json: bool,
    quick: bool,
    peer: bool,
    crates: bool,
    repeat: usize,
    only: Vec<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        json: false,
        quick: false,
        peer: false,
        crates: false,
        repeat: 1,
        only: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => o.json = true,
            "--quick" => o.quick = true,
            "--peer" => o.peer = true,
            "--crates" => o.crates = true,
            "--repeat" => {
                o.repeat = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n >= 1)
                    .ok_or("bench: --repeat needs a number ≥ 1")?;
            }
            s if SCENARIOS.contains(&s) => o.only.push(s.to_string()),
            other => {
                return Err(format!(
                    "bench: unknown argument `{other}` (flags: --json --quick --peer --repeat N --crates; scenarios: {})",
                    SCENARIOS.join(" ")
                ));
            }
        }
    }
    Ok(o)
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root().join(p) })
        .unwrap_or_else(|| root().join("target"))
}

/// Build packages in release mode, quietly; `Err` holds cargo's last lines.
fn build_release(packages: &[&str]) -> Result<(), String> {
    let mut cmd = cargo();
    cmd.args(["build", "--release", "--quiet"]);
    for p in packages {
        cmd.args(["-p", p]);
    }
    eprintln!("==> bench: building {} (release)", packages.join(", "));
    let out = cmd
        .output()
        .map_err(|e| format!("could not start cargo: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        Err(tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
    }
}

/// A flat JSON object's field, as its raw text (numbers, `null`, `true`) or a string's
/// contents. Enough for the one-line objects the driver and the peer print.
fn field(line: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":");
    let start = line.find(&pat)? + pat.len();
    let rest = line[start..].trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next()?),
                '"' => return Some(out),
                c => out.push(c),
            }
        }
        None
    } else {
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim().to_string())
    }
}

fn num(line: &str, key: &str) -> Option<f64> {
    field(line, key).and_then(|v| v.parse().ok())
}

/// One figure line: ours (the driver's line verbatim) or the peer's (converted).
#[derive(Clone)]
struct Line {
    name: String,
    json: String,
}

impl Line {
    fn get(&self, key: &str) -> Option<f64> {
        num(&self.json, key)
    }
}

fn median_by(mut lines: Vec<Line>, key: &str) -> Option<Line> {
    if lines.is_empty() {
        return None;
    }
    lines.sort_by(|a, b| {
        let x = a.get(key).unwrap_or(f64::NAN);
        let y = b.get(key).unwrap_or(f64::NAN);
        x.total_cmp(&y)
    });
    let mid = lines.len() / 2;
    Some(lines.swap_remove(mid))
}

/// How long one scenario may take before it is stopped (`$PROVRUN_BENCH_TIMEOUT`
/// seconds, 900 unless set): a scenario that hangs fails; the others still run.
fn scenario_timeout() -> std::time::Duration {
    let secs = std::env::var("PROVRUN_BENCH_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(900);
    std::time::Duration::from_secs(secs)
}

/// Run one scenario once in a fresh driver process; its lines. A driver that fails or
/// takes too long keeps the lines it printed and adds one saying it failed.
fn run_ours(bin: &Path, scenario: &str, o: &Options, provrun: Option<&Path>) -> Vec<Line> {
    use std::io::Read as _;
    use std::process::Stdio;
    let mut cmd = Command::new(bin);
    cmd.arg(scenario)
        .env("PROVRUN_BENCH_DIR", target_dir().join("bench-tmp"))
        .env("PROVRUN_BENCH_TRASH", bench_trash())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if o.quick {
        cmd.arg("--quick");
    }
    if let Some(p) = provrun {
        cmd.arg("--provrun").arg(p);
    }
    let failed = |why: String| Line {
        name: scenario.to_string(),
        json: format!(
            "{{\"name\":\"{scenario}\",\"runs\":null,\"seconds\":null,\"failed\":\"{}\"}}",
            why.replace('\\', "\\\\").replace('"', "\\\"")
        ),
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return vec![failed(format!("could not start {}: {e}", bin.display()))],
    };
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    // Echoed as it comes, so a long scenario shows its progress.
    let echo = std::thread::spawn(move || {
        let mut buf = String::new();
        let _ = err.read_to_string(&mut buf);
        for l in buf.lines() {
            eprintln!("    {l}");
        }
    });
    let deadline = Instant::now() + scenario_timeout();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "stopped after {} s (PROVRUN_BENCH_TIMEOUT)",
                    scenario_timeout().as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(100)),
            Err(e) => break Err(e.to_string()),
        }
    };
    let stdout = reader.join().unwrap_or_default();
    let _ = echo.join();
    let mut lines: Vec<Line> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| Line {
            name: field(l, "name").unwrap_or_default(),
            json: l.to_string(),
        })
        .collect();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => lines.push(failed(format!("the driver failed ({s})"))),
        Err(why) => lines.push(failed(why)),
    }
    lines
}

/// Where the driver leaves each scenario's finished folder; emptied after the last one
/// (see `discard_tree` in the driver: deleting between scenarios slows the next one).
fn bench_trash() -> PathBuf {
    target_dir().join("bench-trash")
}

/// Delete the finished scenarios' folders (staged inputs are read-only).
fn empty_trash() {
    let trash = bench_trash();
    if !trash.exists() {
        return;
    }
    eprintln!("==> bench: removing {}", trash.display());
    let _ = Command::new("chmod")
        .arg("-R")
        .arg("u+w")
        .arg(&trash)
        .status();
    if let Err(e) = std::fs::remove_dir_all(&trash) {
        eprintln!("    could not remove {}: {e}", trash.display());
    }
}

/// The peer's virtualenv python, created (and the peer installed) on first use.
fn peer_python() -> Result<PathBuf, String> {
    let venv = target_dir().join("peer-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(".provrun-installed");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(PEER_PACKAGE) {
        return Ok(python);
    }
    eprintln!("==> bench: creating {} with {PEER_PACKAGE}", venv.display());
    let ok = |mut c: Command, what: &str| -> Result<(), String> {
        let s = c.status().map_err(|e| format!("{what}: {e}"))?;
        if s.success() {
            Ok(())
        } else {
            Err(format!("{what} failed ({s})"))
        }
    };
    if !python.exists() {
        let mut c = Command::new("python3");
        c.args(["-m", "venv"]).arg(&venv);
        ok(c, "python3 -m venv")?;
    }
    let mut c = Command::new(&python);
    c.args(["-m", "pip", "install", "-q", PEER_PACKAGE]);
    ok(c, "pip install")?;
    std::fs::write(&marker, PEER_PACKAGE).map_err(|e| e.to_string())?;
    Ok(python)
}

fn peer_script() -> PathBuf {
    std::env::var_os("PROVRUN_PEER_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("crates/bench/peer/pydantic_ai_bench.py"))
}

/// The peer's arguments for a scenario it runs (K=10, one evidence file per run, with
/// the post-run trace import, as our bundles hold).
fn peer_args(scenario: &str, quick: bool) -> Option<Vec<String>> {
    let (runs, conc, fsync) = match scenario {
        "scripted_k10_c1" => (if quick { 20 } else { 200 }, 1, false),
        "scripted_k10_c100" => (if quick { 200 } else { 1000 }, 100, false),
        "scripted_k10_c100_fsync" => (if quick { 200 } else { 1000 }, 100, true),
        "cli_single_run" => (1, 1, false),
        _ => return None,
    };
    let mut a: Vec<String> = [
        "--runs".to_string(),
        runs.to_string(),
        "--tool-calls".into(),
        "10".into(),
        "--concurrency".into(),
        conc.to_string(),
        "--layout".into(),
        "per-run".into(),
        "--trace-import".into(),
    ]
    .to_vec();
    if fsync {
        a.push("--fsync".into());
    }
    Some(a)
}

/// Run the peer once for `scenario`; its figure in our line format.
fn run_peer(python: &Path, scenario: &str, quick: bool) -> Result<Option<Line>, String> {
    let Some(args) = peer_args(scenario, quick) else {
        return Ok(None);
    };
    let started = Instant::now();
    let out = Command::new(python)
        .arg(peer_script())
        .args(&args)
        .env("TMPDIR", target_dir().join("bench-tmp"))
        .output()
        .map_err(|e| format!("could not start the peer: {e}"))?;
    let wall = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "the peer failed on {scenario}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let l = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .ok_or("the peer printed no JSON")?;
    let runs = num(l, "runs").unwrap_or(0.0);
    let seconds = num(l, "total_seconds").unwrap_or(0.0);
    let events = num(l, "events_written").unwrap_or(0.0);
    let rss = num(l, "peak_rss_mb").unwrap_or(0.0);
    let name = format!("peer:{scenario}");
    let json = if scenario == "cli_single_run" {
        // The whole process, import included, timed from outside.
        format!(
            "{{\"name\":\"{name}\",\"runs\":1,\"seconds\":{wall:.4},\"runs_per_second\":{:.3},\"events_per_second\":null,\"p50_ms\":{:.1},\"p99_ms\":{:.1},\"peak_rss_mb\":{rss}}}",
            1.0 / wall,
            wall * 1e3,
            wall * 1e3
        )
    } else {
        format!(
            "{{\"name\":\"{name}\",\"runs\":{runs},\"seconds\":{seconds},\"runs_per_second\":{:.2},\"events_per_second\":{:.1},\"p50_ms\":null,\"p99_ms\":null,\"peak_rss_mb\":{rss}}}",
            runs / seconds,
            events / seconds
        )
    };
    Ok(Some(Line { name, json }))
}

/// What a figure line is ranked by when taking the median of repeats.
fn rank_key(name: &str) -> &'static str {
    if name.starts_with("verify_1g")
        || name.contains("cli_single_run")
        || name.starts_with("long_k")
    {
        "seconds"
    } else {
        "runs_per_second"
    }
}

/// Run the benchmarks (see the module docs).
pub(crate) fn bench(args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    let scenarios: Vec<&str> = SCENARIOS
        .iter()
        .copied()
        .filter(|s| o.only.is_empty() || o.only.iter().any(|x| x == s))
        .collect();
    build_release(&["provrun-bench"])?;
    let bin = target_dir().join("release/provrun-bench");
    let mut provrun = None;
    if scenarios.contains(&"cli_single_run") || scenarios.contains(&"batch_10k") {
        match build_release(&["provrun-cli"]) {
            Ok(()) => provrun = Some(target_dir().join("release/provrun")),
            Err(e) => {
                eprintln!("bench: the provrun CLI did not build, cli_single_run is skipped:\n{e}")
            }
        }
    }
    let python = if o.peer { Some(peer_python()?) } else { None };
    std::fs::create_dir_all(target_dir().join("bench-tmp")).map_err(|e| e.to_string())?;

    let machine = machine();
    if !o.json {
        println!("{machine}");
        print_header();
    }
    let mut results: Vec<Line> = Vec::new();
    for s in &scenarios {
        let mut ours: Vec<Line> = Vec::new();
        let mut peer: Vec<Line> = Vec::new();
        for i in 0..o.repeat {
            eprintln!(
                "==> bench: {s} ({}/{}), load {}",
                i + 1,
                o.repeat,
                loadavg()
            );
            let lines = run_ours(&bin, s, &o, provrun.as_deref());
            // Each figure shown as it is made: a later failure loses none of them.
            for l in &lines {
                if o.json {
                    println!("{}", l.json);
                } else {
                    print_row(l);
                }
            }
            ours.extend(lines);
            if let Some(py) = &python {
                let l = match run_peer(py, s, o.quick) {
                    Ok(l) => l,
                    Err(e) => Some(Line {
                        name: format!("peer:{s}"),
                        json: format!(
                            "{{\"name\":\"peer:{s}\",\"failed\":\"{}\"}}",
                            e.replace('\\', "\\\\").replace('"', "\\\"")
                        ),
                    }),
                };
                if let Some(l) = l {
                    if o.json {
                        println!("{}", l.json);
                    } else {
                        print_row(&l);
                    }
                    peer.push(l);
                }
            }
        }
        let mut names: Vec<String> = ours.iter().map(|l| l.name.clone()).collect();
        names.dedup();
        names.sort();
        names.dedup();
        // Our scenario line first, then its baselines, then the peer.
        names.sort_by_key(|n| n != s);
        for n in names {
            let lines: Vec<Line> = ours.iter().filter(|l| l.name == n).cloned().collect();
            results.extend(median_by(lines, rank_key(&n)));
        }
        results.extend(median_by(peer, rank_key(s)));
    }
    empty_trash();
    let goals = goals(&results);
    if o.json {
        println!("{}", machine_json(&machine));
        for g in &goals {
            println!("{}", g.json());
        }
    } else {
        println!(
            "\n==> the whole table\n{machine}\nload at the end: {}",
            loadavg()
        );
        print_table(&results, &goals, o.repeat);
    }
    if o.crates {
        for (package, target) in CRATE_BENCHES {
            let mut cmd = cargo();
            cmd.args(["bench", "--quiet", "-p", package, "--bench", target]);
            if o.quick {
                cmd.args(["--", "--quick"]);
            }
            crate::run(&format!("bench {package}/{target}"), cmd)?;
        }
    }
    Ok(())
}

/// One goal of issue 9, checked against the figures.
struct Goal {
    scenario: &'static str,
    what: &'static str,
    value: Option<f64>,
    target: f64,
    at_most: bool,
}

impl Goal {
    fn met(&self) -> Option<bool> {
        self.value.map(|v| {
            if self.at_most {
                v <= self.target
            } else {
                v >= self.target
            }
        })
    }

    fn json(&self) -> String {
        let v = self.value.map_or("null".to_string(), |v| format!("{v:.3}"));
        let met = self.met().map_or("null".to_string(), |m| m.to_string());
        format!(
            "{{\"name\":\"goal:{}\",\"measure\":\"{}\",\"value\":{v},\"target\":{},\"met\":{met}}}",
            self.scenario, self.what, self.target
        )
    }
}

// One table of goals, each beside the figures it reads; split, the table would scatter.
fn goals(results: &[Line]) -> Vec<Goal> {
    // A skipped scenario measured nothing: its goal is "not measured", never met.
    let get = |name: &str, key: &str| {
        results
            .iter()
            .find(|l| {
                l.name == name
                    && field(&l.json, "skipped").is_none()
                    && field(&l.json, "failed").is_none()
            })
            .and_then(|l| l.get(key))
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    vec![
        Goal {
            scenario: "scripted_k10_c1",
            what: "runs/s vs peer",
            value: ratio(
                get("scripted_k10_c1", "runs_per_second"),
                get("peer:scripted_k10_c1", "runs_per_second"),
            ),
            target: 100.0,
            at_most: false,
        },
        Goal {
            scenario: "scripted_k10_c100",
            what: "runs/s vs peer",
            value: ratio(
                get("scripted_k10_c100", "runs_per_second"),
                get("peer:scripted_k10_c100", "runs_per_second"),
            ),
            target: 100.0,
            at_most: false,
        },
        Goal {
            scenario: "scripted_k10_c100_fsync",
            what: "events/s vs one fdatasync per event",
            value: ratio(
                get("scripted_k10_c100_fsync", "events_per_second"),
                get("fsync_per_event_baseline", "events_per_second"),
            ),
            target: 5.0,
            at_most: false,
        },
        Goal {
            scenario: "scripted_k10_c1",
            what: "files per 10-step bundle, input/ excluded",
            value: get("scripted_k10_c1", "files_per_run"),
            target: 12.0,
            at_most: true,
        },
        Goal {
            scenario: "long_k300",
            what: "bundle bytes ÷ distinct tool results",
            value: get("long_k300", "size_vs_distinct"),
            target: 4.0,
            at_most: true,
        },
        Goal {
            scenario: "long_k300",
            what: "bundle bytes, K=300 ÷ K=30",
            value: ratio(
                get("long_k300", "bundle_bytes"),
                get("long_k30", "bundle_bytes"),
            ),
            target: 12.0,
            at_most: true,
        },
        Goal {
            scenario: "long_k300",
            what: "run time, K=300 ÷ K=30",
            value: ratio(get("long_k300", "seconds"), get("long_k30", "seconds")),
            target: 12.0,
            at_most: true,
        },
        Goal {
            scenario: "long_k300",
            what: "verify time, pack ÷ loose blobs",
            value: ratio(
                get("long_k300", "verify_seconds"),
                get("long_k300_loose", "verify_seconds"),
            ),
            target: 1.0,
            at_most: true,
        },
        Goal {
            scenario: "concurrent_10k_idle",
            what: "peak RSS MiB",
            value: get("concurrent_10k_idle", "peak_rss_mb"),
            target: 256.0,
            at_most: true,
        },
        Goal {
            scenario: "batch_10k",
            what: "runs/s (K=3)",
            value: get("batch_10k", "runs_per_second"),
            target: 1700.0,
            at_most: false,
        },
        Goal {
            scenario: "verify_1g",
            what: "throughput vs sha256sum",
            value: ratio(
                get("verify_1g_sha256sum", "seconds"),
                get("verify_1g", "seconds"),
            ),
            target: 0.8,
            at_most: false,
        },
        Goal {
            scenario: "cli_single_run",
            what: "process wall time, peer ÷ ours",
            value: ratio(
                get("peer:cli_single_run", "p50_ms"),
                get("cli_single_run", "p50_ms"),
            ),
            target: 50.0,
            at_most: false,
        },
    ]
}

/// The machine the figures come from, in a few lines: CPU, cores, memory, kernel, the
/// file system of the bench folder, the commit and the load when the bench began.
fn machine() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let kernel = read("/proc/sys/kernel/osrelease").trim().to_string();
    let dir = target_dir().join("bench-tmp");
    let fs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&dir)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!(
        "machine: {cpu}, {cores} cores, {mem_gib:.1} GiB, Linux {kernel}\n\
         bench folder: {} ({fs}); commit {commit}; load at the start: {}",
        dir.display(),
        loadavg()
    )
}

fn machine_json(machine: &str) -> String {
    format!(
        "{{\"name\":\"machine\",\"description\":\"{}\",\"load_at_end\":\"{}\"}}",
        machine
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "; "),
        loadavg()
    )
}

/// `/proc/loadavg`'s three load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_header() {
    println!(
        "\n{:<28} {:>6} {:>9} {:>10} {:>11} {:>9} {:>9} {:>8}",
        "scenario", "runs", "seconds", "runs/s", "events/s", "p50 ms", "p99 ms", "rss MiB"
    );
}

/// One figure as a table row; a skipped or failed one says why.
fn print_row(l: &Line) {
    let cell = |k: &str| {
        field(&l.json, k)
            .filter(|v| v != "null")
            .unwrap_or_else(|| "-".into())
    };
    let note = match (field(&l.json, "skipped"), field(&l.json, "failed")) {
        (_, Some(w)) => format!("  FAILED: {w}"),
        (Some(w), None) => format!("  SKIPPED: {w}"),
        _ => String::new(),
    };
    println!(
        "{:<28} {:>6} {:>9} {:>10} {:>11} {:>9} {:>9} {:>8}{note}",
        l.name,
        cell("runs"),
        cell("seconds"),
        cell("runs_per_second"),
        cell("events_per_second"),
        cell("p50_ms"),
        cell("p99_ms"),
        cell("peak_rss_mb"),
    );
}

fn print_table(results: &[Line], goals: &[Goal], repeat: usize) {
    print_header();
    for l in results {
        print_row(l);
    }
    if repeat > 1 {
        println!("(median of {repeat} runs of each scenario)");
    }
    println!("\ngoals:");
    for g in goals {
        let v = g.value.map_or("n/a".to_string(), |v| format!("{v:.2}"));
        let met = match g.met() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        let cmp = if g.at_most { "≤" } else { "≥" };
        println!(
            "  {:<26} {:<38} {v:>10} (goal {cmp} {}): {met}",
            g.scenario, g.what, g.target
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(json: &str) -> Line {
        Line {
            name: field(json, "name").unwrap(),
            json: json.to_string(),
        }
    }

    #[test]
    fn a_skipped_scenario_is_not_measured_rather_than_met() {
        let skipped = line(
            r#"{"name":"concurrent_10k_idle","runs":10000,"seconds":0.0,"peak_rss_mb":4.6,"skipped":"limit"}"#,
        );
        let g = goals(&[skipped]);
        let idle = g
            .iter()
            .find(|g| g.scenario == "concurrent_10k_idle")
            .unwrap();
        assert_eq!(idle.value, None);
        assert_eq!(idle.met(), None);
        let ran = line(
            r#"{"name":"concurrent_10k_idle","runs":10000,"seconds":7.9,"peak_rss_mb":201.7}"#,
        );
        let g = goals(&[ran]);
        let idle = g
            .iter()
            .find(|g| g.scenario == "concurrent_10k_idle")
            .unwrap();
        assert_eq!(idle.value, Some(201.7));
        assert_eq!(idle.met(), Some(true));
        // A failed scenario measured nothing either.
        let failed = line(
            r#"{"name":"concurrent_10k_idle","runs":10000,"seconds":3.1,"peak_rss_mb":90.0,"failed":"3 of 10000 runs failed"}"#,
        );
        let g = goals(&[failed]);
        let idle = g
            .iter()
            .find(|g| g.scenario == "concurrent_10k_idle")
            .unwrap();
        assert_eq!(idle.met(), None);
    }
}
