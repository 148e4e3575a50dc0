//! The PydanticAI peer of `cargo xtask bench --peer`: its pinned version, its virtualenv,
//! the arguments it takes for each scenario, and its figure in our line format.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::dirs::target_dir;
use super::line::{Line, num};
use crate::root;

/// The peer's version, pinned.
const PEER_PACKAGE: &str = "pydantic-ai-slim==2.68.0";

/// The peer's virtualenv python, created (and the peer installed) on first use.
pub(super) fn peer_python() -> Result<PathBuf, String> {
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
pub(super) fn run_peer(python: &Path, scenario: &str, quick: bool) -> Result<Option<Line>, String> {
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
