//! Crash consistency of whole runs: long scripted runs (many steps, large writes, parallel
//! calls) in their own processes, each killed with SIGKILL at a random instant. Every bundle
//! left behind must verify as complete or incomplete, never as corrupt; a killed run must be
//! told apart from a finished one; and no temporary file or half-written file may be taken
//! for an output.
//!
//! The runs are `provrun run AGENT.toml --out BUNDLE --input DIR` processes when the CLI
//! binary next to this test executable has a `run` command; otherwise this test executable
//! re-runs itself as the child (`crash_child_run`), which runs the same spec through the
//! library. The number of kills is `PROVRUN_CRASH_KILLS` (default 60; `cargo xtask soak`
//! asks for more).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use provrun::agent::{AgentSpec, Backend, Durability, RunControl, RunSpec};
use provrun::evidence::{EventType, read_events, verify};
use serde_json::{Value, json};

const CHILD_ENV: &str = "PROVRUN_CRASH_CHILD";

/// `crash_child_run` as the test harness names it, for `--exact`: its path below the
/// crate root (`crash::crash_child_run` while this file is a module of `tests/it`).
fn child_test() -> &'static str {
    let path = concat!(module_path!(), "::crash_child_run");
    path.split_once("::").map_or(path, |(_krate, below)| below)
}
const STEPS: usize = 8;
const BIG: usize = 16 * 1024;
/// The last step also writes one file this large.
const LARGE: usize = 512 * 1024;

/// Not a test on its own: the child process when no `provrun run` binary is there.
/// `PROVRUN_CRASH_CHILD=SPEC\nBUNDLE\nINPUT\nPOLICY` runs that agent to completion.
#[test]
fn crash_child_run() {
    let Ok(job) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = job.lines();
    let (spec, bundle, input, policy) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let agent = AgentSpec::load(spec).unwrap();
    let run = RunSpec::new("Fill /output.", bundle)
        .input(input)
        .durability(match policy {
            "flush" => Durability::Flush,
            "per-event" => Durability::PerEvent,
            "per-step" => Durability::PerStep,
            "group-commit" => Durability::GroupCommit,
            _ => Durability::AtEnd,
        });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let r = rt
        .block_on(Backend::new().execute(&RunControl::new(), &agent, &run))
        .unwrap();
    println!("{}", r.output());
}

/// The agent: `STEPS` model turns of four parallel calls (a 16 KiB write, a small write in
/// a subfolder, a read, a listing), one 512 KiB write, then an answer.
fn write_agent(dir: &Path) -> PathBuf {
    let mut steps = Vec::new();
    for s in 0..STEPS {
        let fill = char::from(b'a' + (s % 26) as u8);
        steps.push(json!({"tool_calls": [
            {"id": format!("big{s}"), "name": "write_file",
             "arguments": {"path": format!("/output/big-{s}.txt"), "content": fill.to_string().repeat(BIG)}},
            {"id": format!("small{s}"), "name": "write_file",
             "arguments": {"path": format!("/output/notes/n-{s}.md"), "content": format!("note {s}\n")}},
            {"id": format!("read{s}"), "name": "read_file", "arguments": {"path": "/input/data.txt"}},
            {"id": format!("list{s}"), "name": "list_dir", "arguments": {"path": "/output"}}
        ]}));
    }
    steps.push(json!({"tool_calls": [
        {"id": "large", "name": "write_file",
         "arguments": {"path": "/output/large.txt", "content": "z".repeat(LARGE)}}
    ]}));
    steps.push(json!({"text": "all written"}));
    std::fs::write(
        dir.join("steps.json"),
        serde_json::to_vec(&Value::Array(steps)).unwrap(),
    )
    .unwrap();
    let spec = dir.join("agent.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"crash\"\nmodel = \"script:steps.json\"\ntools = [\"write_file\", \"read_file\", \"list_dir\"]\nmax_steps = {}\n",
            STEPS + 6
        ),
    )
    .unwrap();
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("data.txt"), "input data\n".repeat(200)).unwrap();
    spec
}

/// How to start a run.
enum Runner {
    Cli(PathBuf),
    SelfExec,
}

impl Runner {
    fn find() -> Runner {
        let exe = std::env::current_exe().unwrap();
        // target/<profile>/deps/crash-<hash> → target/<profile>/provrun
        let cli = exe
            .parent()
            .and_then(Path::parent)
            .map(|d| d.join(format!("provrun{}", std::env::consts::EXE_SUFFIX)));
        if let Some(cli) = cli.filter(|p| p.is_file()) {
            let has_run = Command::new(&cli)
                .args(["run", "--help"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if has_run {
                return Runner::Cli(cli);
            }
            eprintln!(
                "crash test: {} has no `run` command yet; running the agent through this test executable instead",
                cli.display()
            );
        } else {
            eprintln!(
                "crash test: NO provrun binary next to {}; running the agent through this test executable instead",
                exe.display()
            );
        }
        Runner::SelfExec
    }

    fn command(&self, spec: &Path, bundle: &Path, input: &Path, policy: &str) -> Command {
        let mut cmd = match self {
            Runner::Cli(cli) => {
                let mut c = Command::new(cli);
                c.arg("run")
                    .arg(spec)
                    .arg("--out")
                    .arg(bundle)
                    .arg("--input")
                    .arg(input)
                    .args(["--durability", policy]);
                c
            }
            Runner::SelfExec => {
                let mut c = Command::new(std::env::current_exe().unwrap());
                c.args(["--exact", child_test(), "--nocapture", "--test-threads=1"])
                    .env(
                        CHILD_ENV,
                        format!(
                            "{}\n{}\n{}\n{policy}",
                            spec.display(),
                            bundle.display(),
                            input.display()
                        ),
                    );
                c
            }
        };
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        cmd
    }

    fn name(&self) -> String {
        match self {
            Runner::Cli(p) => format!("`{} run`", p.display()),
            Runner::SelfExec => "the in-test child".to_string(),
        }
    }
}

/// A small deterministic generator (xorshift), seeded from the clock and printed, so a
/// failing schedule can be repeated with `PROVRUN_CRASH_SEED`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What a bundle left by a killed process was.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Left {
    /// Killed before the bundle appeared: nothing at its path.
    Nothing,
    /// A valid prefix: verifies, incomplete.
    Incomplete,
    /// The run finished before the kill landed.
    Complete,
}

/// Checks one bundle; `Err` says how it is corrupt or misleading.
fn check_bundle(bundle: &Path, runner: &Runner, check_cli_exit: bool) -> Result<Left, String> {
    if std::fs::symlink_metadata(bundle).is_err() {
        // Killed before the bundle appeared: no folder at all (a bundle is built aside
        // and appears whole). Anything at the path must verify, below.
        return Ok(Left::Nothing);
    }
    let report = verify(bundle);
    if !report.ok {
        return Err(format!(
            "CORRUPT: {:?}",
            report.failures().collect::<Vec<_>>()
        ));
    }
    let events = read_events(bundle).map_err(|e| format!("read_events: {e}"))?;
    // Complete needs run_finished; a kill between run_finished and the statement leaves
    // an incomplete bundle, which is right: the run never returned.
    let finished = events.iter().any(|e| e.kind == EventType::RunFinished);
    if report.complete && !finished {
        return Err("complete without run_finished".into());
    }
    if report.complete != bundle.join("statement.json").exists() {
        return Err("statement.json presence disagrees with completeness".into());
    }
    let expected_exit = if report.complete { 0 } else { 3 };
    if report.exit_code() != expected_exit {
        return Err(format!("verify exit code {}", report.exit_code()));
    }
    if check_cli_exit && let Runner::Cli(cli) = runner {
        let code = Command::new(cli)
            .arg("verify")
            .arg(bundle)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())?
            .code();
        if code != Some(expected_exit) {
            return Err(format!(
                "`provrun verify` exited {code:?}, expected {expected_exit}"
            ));
        }
    }
    // Outputs: only files named by output_produced are outputs, and each one named is
    // whole (verify checked its digest); a complete bundle has no temp file left over and
    // names every file in output/.
    let named: BTreeMap<String, u64> = events
        .iter()
        .filter(|e| e.kind == EventType::OutputProduced)
        .map(|e| {
            (
                e.payload["path"].as_str().unwrap_or_default().to_string(),
                e.payload["size"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    for name in named.keys() {
        if name.contains(".provrun-tmp-") || name.contains(".tmp-") {
            return Err(format!(
                "a temporary file was recorded as an output: {name}"
            ));
        }
    }
    if report.complete {
        let on_disk = files_under(&bundle.join("output"));
        let names: Vec<&String> = named.keys().collect();
        let disk: Vec<&String> = on_disk.iter().collect();
        if names != disk {
            return Err(format!("outputs recorded {names:?} but on disk {disk:?}"));
        }
        if named.len() != 2 * STEPS + 2 {
            return Err(format!("{} outputs in a finished run", named.len()));
        }
        for (name, size) in &named {
            let want = if name == "large.txt" { LARGE } else { BIG };
            if (name.starts_with("big-") || name == "large.txt") && *size != want as u64 {
                return Err(format!("{name} recorded with {size} bytes"));
            }
        }
        Ok(Left::Complete)
    } else {
        // Killed while outputs were being recorded: those named are whole files.
        for (name, size) in &named {
            let len = std::fs::metadata(bundle.join("output").join(name))
                .map_err(|e| format!("recorded output {name}: {e}"))?
                .len();
            if len != *size {
                return Err(format!(
                    "recorded output {name}: {size} bytes, {len} on disk"
                ));
            }
        }
        Ok(Left::Incomplete)
    }
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push(
                    p.strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    out.sort();
    out
}

/// The evidence policies, as `provrun run --durability` names them; kill `k` uses
/// policy `k % 5`.
const POLICIES: [&str; 5] = ["flush", "per-event", "per-step", "at-end", "group-commit"];

// One loop over kills: each kill's bundle is checked before the next kill is chosen.
#[test]
fn sigkill_at_random_instants_never_leaves_a_corrupt_bundle() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let kills: usize = std::env::var("PROVRUN_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("PROVRUN_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let runner = Runner::find();
    let dir = tempfile::tempdir().unwrap();
    let spec = write_agent(dir.path());
    let input = dir.path().join("input");

    // Two undisturbed runs (the default policy and the one that never syncs): each
    // finishes and verifies as complete; the size of the log is the range the kills are
    // spread over (the policies write the same events).
    let mut log_size = 0;
    let mut slowest = Duration::ZERO;
    for policy in ["at-end", "flush"] {
        let reference = dir.path().join(format!("reference-{policy}"));
        let started = Instant::now();
        let status = runner
            .command(&spec, &reference, &input, policy)
            .status()
            .unwrap();
        slowest = slowest.max(started.elapsed());
        assert!(
            status.success(),
            "the {policy} reference run failed: {status}"
        );
        assert_eq!(
            check_bundle(&reference, &runner, true),
            Ok(Left::Complete),
            "the {policy} reference run"
        );
        log_size = log_size.max(
            std::fs::metadata(reference.join("events.jsonl"))
                .unwrap()
                .len(),
        );
    }

    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    let began = Instant::now();
    // Two killers at a time: twice the kills in the same time, and concurrent runs.
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if k >= kills {
                        return;
                    }
                    let policy = POLICIES[k % POLICIES.len()];
                    let mut rng = Rng((seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
                    rng.next();
                    let bundle = dir.path().join(format!("killed-{k}"));
                    let mut child = runner
                        .command(&spec, &bundle, &input, policy)
                        .spawn()
                        .unwrap();
                    // The instant: one kill in ten at a random time in the first 30 ms
                    // (while the bundle is being created); the others once the log has
                    // grown past a random size up to its final one (the last share lands
                    // after run_finished, while the statement is written), plus a random
                    // jitter of up to 2 ms so kills fall inside writes too. Progress, not
                    // wall time, so a loaded machine does not move the kills to the end.
                    let moment = if rng.next().is_multiple_of(10) {
                        let delay = Duration::from_micros(rng.next() % 30_000);
                        std::thread::sleep(delay);
                        format!("at {delay:?}")
                    } else {
                        let size = log_size;
                        let target = rng.next() % (size + size / 20 + 1);
                        let log = bundle.join("events.jsonl");
                        loop {
                            let grown = std::fs::metadata(&log).map_or(0, |m| m.len());
                            if grown >= target.min(size) || child.try_wait().unwrap().is_some() {
                                break;
                            }
                            std::thread::sleep(Duration::from_micros(300));
                        }
                        std::thread::sleep(Duration::from_micros(rng.next() % 2000));
                        format!("at log byte {target} of {size}")
                    };
                    let _ = child.kill(); // SIGKILL (a no-op if it already ended)
                    let exit = child.wait().unwrap();
                    let outcome = match check_bundle(&bundle, &runner, k.is_multiple_of(10)) {
                        Ok(Left::Complete) if !exit.success() && exit.code().is_some() => {
                            Err(format!("the run failed ({exit}) yet verifies complete"))
                        }
                        other => other,
                    }
                    .map_err(|why| format!("kill {k} ({policy}) {moment}: {why}"));
                    let _ = std::fs::remove_dir_all(&bundle);
                    results.lock().unwrap().push(outcome);
                }
            });
        }
    });
    // A run killed before its bundle appeared left a hidden folder beside it, and no
    // bundle; the next run of that bundle removes the folder and creates the bundle.
    let litter: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".provrun-creating"))
        .collect();
    for hidden in &litter {
        let name = hidden
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".provrun-creating"))
            .unwrap_or_else(|| panic!("an unexpected hidden folder: {hidden}"));
        let bundle = dir.path().join(name);
        let status = runner
            .command(&spec, &bundle, &input, "at-end")
            .status()
            .unwrap();
        assert!(
            status.success(),
            "the run after the kill of {name} failed: {status}"
        );
        assert_eq!(check_bundle(&bundle, &runner, false), Ok(Left::Complete));
        assert!(!dir.path().join(hidden).exists(), "{hidden} is still there");
    }
    println!(
        "{} hidden folders left by kills before their bundle appeared, each removed by the next run",
        litter.len()
    );
    let results = results.into_inner().unwrap();
    let mut counts: BTreeMap<Left, usize> = BTreeMap::new();
    let mut corrupt = Vec::new();
    for r in results {
        match r {
            Ok(left) => *counts.entry(left).or_default() += 1,
            Err(why) => corrupt.push(why),
        }
    }
    println!(
        "crash consistency with {}: seed {seed}, slowest reference run {:.2}s, {kills} SIGKILLs in {:.1}s: {} before the log existed, {} incomplete, {} complete, {} corrupt",
        runner.name(),
        slowest.as_secs_f64(),
        began.elapsed().as_secs_f64(),
        counts.get(&Left::Nothing).unwrap_or(&0),
        counts.get(&Left::Incomplete).unwrap_or(&0),
        counts.get(&Left::Complete).unwrap_or(&0),
        corrupt.len()
    );
    assert!(
        corrupt.is_empty(),
        "seed {seed} (PROVRUN_CRASH_SEED): bundles corrupt or misleading:\n{}",
        corrupt.join("\n")
    );
    assert!(
        counts.get(&Left::Incomplete).copied().unwrap_or(0) >= kills / 4,
        "too few kills landed mid-run to mean anything: {counts:?}"
    );
}
