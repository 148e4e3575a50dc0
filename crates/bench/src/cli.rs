//! The scenarios of whole processes of the release CLI: single `provrun run`s, and
//! `provrun batch` of thousands of runs, killed once and started again.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::figure::Figure;
use crate::harness::{discard_tree, make_inputs, script, work_dir};

/// Wall time of whole `provrun run` processes with K=10 and a script model (median of
/// `times` in `p50_ms`).
pub(crate) fn cli_single_run(name: &str, provrun: Option<&Path>, times: usize) -> Figure {
    let skip = |why: String| {
        let mut f = Figure::new(name, 0, 0.0);
        f.skipped = Some(why);
        f
    };
    let Some(bin) = provrun else {
        return skip("no provrun binary given (--provrun PATH)".into());
    };
    match Command::new(bin).args(["run", "--help"]).output() {
        Ok(o) if o.status.success() => {}
        Ok(_) => {
            return skip(format!(
                "`{} run` does not exist yet (the CLI issue is in progress)",
                bin.display()
            ));
        }
        Err(e) => return skip(format!("cannot start {}: {e}", bin.display())),
    }
    let dir = work_dir();
    let input = make_inputs(dir.path());
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script(10).to_string()).expect("write script");
    let spec = dir.path().join("agent.toml");
    std::fs::write(
        &spec,
        "name = \"bench\"\nmodel = \"script:script.json\"\ninstructions = \"Read the files and report.\"\ntools = [\"read_file\"]\n",
    )
    .expect("write agent.toml");
    let mut lat = Vec::new();
    let started = Instant::now();
    for n in 0..times {
        let out = dir.path().join(format!("bundle-{n}"));
        let t = Instant::now();
        let o = Command::new(bin)
            .arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(&out)
            .arg("--input")
            .arg(&input)
            .output()
            .expect("start provrun");
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        if !o.status.success() {
            return skip(format!(
                "`provrun run` failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut fig = Figure::new(name, times as u64, seconds);
    fig.latencies_ms = lat;
    discard_tree(dir.path());
    fig
}

/// The child's peak resident set (`VmHWM`), in MiB, while it lives; 0 once it is gone.
fn child_peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// One `provrun batch` of the runs file into `out` at concurrency 100, watched every
/// 20 ms for its peak RSS; killed (SIGKILL) after `kill_after` if given. Returns the exit
/// code (`None` when killed), the seconds it took, its peak RSS in MiB and its stdout.
fn batch_process(
    bin: &Path,
    runs: &Path,
    out: &Path,
    kill_after: Option<Duration>,
    durability: &str,
) -> (Option<i32>, f64, f64, String) {
    let started = Instant::now();
    let stdout_path = out.with_extension("stdout");
    let stdout = std::fs::File::create(&stdout_path).expect("stdout file");
    let mut child = Command::new(bin)
        .arg("batch")
        .arg(runs)
        .arg("--out")
        .arg(out)
        .args(["--concurrency", "100", "--json", "--durability", durability])
        .stdout(stdout)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start provrun batch");
    let mut peak: f64 = 0.0;
    let code = loop {
        peak = peak.max(child_peak_rss_mb(child.id()));
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if kill_after.is_some_and(|k| started.elapsed() >= k) {
            child.kill().expect("kill");
            child.wait().expect("wait");
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    (code, seconds, peak, text)
}

/// The run id in a bundle's first event, if it has one.
fn first_run_id(bundle: &Path) -> Option<String> {
    let log = std::fs::read_to_string(bundle.join("events.jsonl")).ok()?;
    let first: Value = serde_json::from_str(log.lines().next()?).ok()?;
    first["run_id"].as_str().map(str::to_string)
}

/// `batch_10k`: `runs` scripted K=3 runs through `provrun batch --concurrency 100` (the
/// release CLI): throughput and the batch process's peak RSS; then the same batch into a
/// fresh folder killed with SIGKILL at a random moment and started again, counting what
/// the restart skipped and ran and checking nothing was lost or run twice. The batch runs
/// under its default durability (`at-end`: each run synced when it ends); a second
/// figure, `<name>_flush`, is the same batch with `--durability flush` (no sync), as the
/// library's scripted scenarios run.
pub(crate) fn batch_10k(name: &str, provrun: Option<&Path>, runs: usize) -> Vec<Figure> {
    let skip = |why: String| {
        let mut f = Figure::new(name, 0, 0.0);
        f.skipped = Some(why);
        vec![f]
    };
    let Some(bin) = provrun else {
        return skip("no provrun binary given (--provrun PATH)".into());
    };
    let dir = work_dir();
    make_inputs(dir.path());
    std::fs::write(dir.path().join("script.json"), script(3).to_string()).expect("script");
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"bench\"\nmodel = \"script:script.json\"\ninstructions = \"Read the files and report.\"\ntools = [\"read_file\"]\n",
    )
    .expect("agent.toml");
    let runs_file = dir.path().join("runs.jsonl");
    let lines: String = (0..runs)
        .map(|i| format!("{{\"id\":\"r{i}\",\"agent\":\"agent.toml\",\"input\":[\"input\"]}}\n"))
        .collect();
    std::fs::write(&runs_file, lines).expect("runs.jsonl");

    // Throughput and memory, at the default durability, then without syncs.
    let timed = |fig_name: &str, folder: &str, durability: &str| {
        let out = dir.path().join(folder);
        let (code, seconds, peak, _) = batch_process(bin, &runs_file, &out, None, durability);
        let mut f = Figure::new(fig_name, runs as u64, seconds);
        f.extra
            .push(("batch_peak_rss_mb", json!((peak * 10.0).round() / 10.0)));
        f.extra.push(("durability", json!(durability)));
        discard_tree(&out);
        (f, code)
    };
    let (mut fig, code) = timed(name, "a", "at-end");
    if code != Some(0) {
        return skip(format!("`provrun batch` exited {code:?}"));
    }
    // The kill below is timed against this run, the durability it runs under.
    let seconds = fig.seconds;
    let (mut flush, code) = timed(&format!("{name}_flush"), "f", "flush");
    if code != Some(0) {
        flush.failed = Some(format!(
            "`provrun batch --durability flush` exited {code:?}"
        ));
    }

    // Killed at a random moment between 10% and 90% of the time it takes, then again.
    let b = dir.path().join("b");
    let kill_at = Duration::from_secs_f64(seconds * (0.1 + 0.8 * fastrand_f64()));
    let (code, _, _, _) = batch_process(bin, &runs_file, &b, Some(kill_at), "at-end");
    let before: std::collections::HashMap<String, String> = std::fs::read_dir(&b)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("statement.json").is_file())
        .filter_map(|e| {
            let id = e.file_name().to_string_lossy().into_owned();
            first_run_id(&e.path()).map(|r| (id, r))
        })
        .collect();
    let (code2, _, _, out) = batch_process(bin, &runs_file, &b, None, "at-end");
    let summary: Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    let bundles = std::fs::read_dir(&b)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.') && e.path().is_dir())
        .count();
    let rerun = before
        .iter()
        .filter(|(id, r)| first_run_id(&b.join(id)).as_deref() != Some(r.as_str()))
        .count();
    let lost = runs.saturating_sub(summary["finished"].as_u64().unwrap_or(0) as usize);
    fig.extra.push((
        "kill_after_s",
        json!((kill_at.as_secs_f64() * 100.0).round() / 100.0),
    ));
    fig.extra.push(("killed", json!(code.is_none())));
    fig.extra.push(("restart_exit", json!(code2)));
    fig.extra.push(("done_at_kill", json!(before.len())));
    fig.extra
        .push(("restart_skipped", summary["skipped"].clone()));
    fig.extra.push(("restart_ran", summary["ran"].clone()));
    fig.extra.push(("bundles_after_restart", json!(bundles)));
    fig.extra.push(("lost", json!(lost)));
    fig.extra.push(("run_twice", json!(rerun)));
    discard_tree(dir.path());
    vec![fig, flush]
}

/// A number in [0, 1) from the clock's nanoseconds: enough to pick a kill moment.
fn fastrand_f64() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    f64::from(nanos % 1_000_000) / 1_000_000.0
}
