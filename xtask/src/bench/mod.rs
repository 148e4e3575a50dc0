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

use crate::cargo;

mod dirs;
mod line;
mod peer;
mod python;
mod report;

use dirs::target_dir;
use line::{Line, field};

use peer::{peer_python, run_peer};
use report::{goals, loadavg, machine, machine_json, print_header, print_row, print_table};

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
    "exec_trail",
    "python_overhead",
];

/// The crate micro-benches (`--crates`), as (package, bench target).
const CRATE_BENCHES: &[(&str, &str)] = &[
    ("provrun-evidence", "recorder"),
    ("provrun-sandbox", "fileops"),
];

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

/// What a figure line is ranked by when taking the median of repeats.
fn rank_key(name: &str) -> &'static str {
    if name == "exec_trail" {
        "overhead_ratio"
    } else if name.starts_with("verify_1g")
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
    // python_overhead runs in Python against the package's release build.
    let package = if scenarios.contains(&"python_overhead") {
        match python::prepare() {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!(
                    "bench: provrun's Python package did not build, python_overhead is skipped:\n{e}"
                );
                None
            }
        }
    } else {
        None
    };
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
            let lines = if *s == "python_overhead" {
                let run = match &package {
                    Some(py) => python::run(py, o.quick),
                    None => Err("skipped: the package did not build".to_string()),
                };
                vec![run.unwrap_or_else(|e| Line {
                    name: s.to_string(),
                    json: format!(
                        "{{\"name\":\"{s}\",\"runs\":null,\"seconds\":null,\"failed\":\"{}\"}}",
                        e.replace('\\', "\\\\").replace('"', "\\\"")
                    ),
                })]
            } else {
                run_ours(&bin, s, &o, provrun.as_deref())
            };
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
