//! `provrun batch`: many runs from one JSONL file, a bounded number at a time, one bundle
//! per run, resumable after a kill, and split into shards for many machines.
//!
//! Two passes over the file keep memory bounded by the concurrency, not by the number of
//! lines: the first checks every line (and loads each distinct agent spec once) before
//! anything runs, keeping only the ids; the second reads the lines again and hands this
//! shard's to at most `--concurrency` runs in flight.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use provrun_agent::{AgentSpec, Backend, ModelRef, RunControl, RunSpec, RunStatus};
use provrun_evidence::{BundleLock, EvidenceError};
use serde::Deserialize;
use serde_json::json;

use crate::inert::inert;
use crate::run::DurabilityArg;
use crate::store::{Bucket, is_url};
use crate::{DEFAULT_PROMPT, EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail, registry};

/// The folder under DEST where incomplete bundles found by a restart are moved.
pub(crate) const ASIDE_DIR: &str = ".provrun-aside";

/// How many failed runs the summary names (the rest are counted).
const FAILURES_NAMED: usize = 20;

/// How often the plain progress line is printed when stderr is not a terminal.
const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Arguments of `provrun batch`.
#[derive(Debug, clap::Args)]
pub(crate) struct BatchArgs {
    /// The runs, one JSON object per line: {"id", "agent", "input": [PATH...], "prompt",
    /// "model", "host_dir"}; relative paths resolve against this file's folder.
    runs: PathBuf,
    /// Where the bundles go: a folder (one bundle per run at DEST/<id>, made if missing),
    /// or s3://BUCKET/PREFIX or file:///FOLDER (one object per run, PREFIX/<id>.tar).
    #[arg(long, value_name = "DEST")]
    out: PathBuf,
    /// With a bucket --out: the local folder where bundles are built before they are
    /// uploaded [default: a new provrun-batch-* folder in TMPDIR, removed at the end].
    #[arg(long = "work-dir", value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Runs in flight at once.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    concurrency: u32,
    /// Model requests in flight at once, over all runs (for rate-limited endpoints)
    /// [default: no limit beyond --concurrency].
    #[arg(long = "max-model-requests", value_name = "M", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_model_requests: Option<u32>,
    /// Run only shard I of N (0 <= I < N): the lines whose number, counted from 0, leaves
    /// I when divided by N.
    #[arg(long, value_name = "I/N", value_parser = parse_shard, conflicts_with = "shards")]
    shard: Option<Shard>,
    /// Split the lines into N shards and run the one named by JOB_COMPLETION_INDEX (as a
    /// Kubernetes Indexed Job sets it).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    shards: Option<u32>,
    /// Print one JSON object per run as it ends, then a summary object, on stdout.
    #[arg(long)]
    json: bool,
    /// Load the tool manifests (*.toml) of this folder as well; repeatable.
    #[arg(long = "tools-dir", value_name = "DIR")]
    tools_dirs: Vec<PathBuf>,
    /// When each run's evidence log is synced to disk (as for `run`).
    #[arg(long, value_enum, value_name = "POLICY", default_value = "at-end")]
    durability: DurabilityArg,
}

/// One shard of N: the lines `n` (from 0) with `n % count == index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    fn whole() -> Self {
        Shard { index: 0, count: 1 }
    }

    /// Whether the line with this number (from 1, as error messages count) is ours.
    fn owns(self, line_number: usize) -> bool {
        (line_number - 1) % self.count as usize == self.index as usize
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

fn parse_shard(text: &str) -> Result<Shard, String> {
    let (i, n) = text
        .split_once('/')
        .ok_or_else(|| "expected I/N, for example 0/4".to_string())?;
    let index: u32 = i
        .trim()
        .parse()
        .map_err(|_| format!("`{i}` is not a shard number"))?;
    let count: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("`{n}` is not a number of shards"))?;
    if count == 0 || index >= count {
        return Err(format!(
            "shard {index} of {count} does not exist: I must be at least 0 and below N"
        ));
    }
    Ok(Shard { index, count })
}

/// Which shard runs: `--shard`, else `--shards` with `JOB_COMPLETION_INDEX`, else all.
fn choose_shard(args: &BatchArgs, job_index: Option<&str>) -> Result<Shard, String> {
    match (args.shard, args.shards) {
        (Some(shard), _) => Ok(shard),
        (None, Some(count)) => {
            let text = job_index.ok_or_else(|| {
                "--shards needs JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job), or give \
                 --shard I/N"
                    .to_string()
            })?;
            let index: u32 = text
                .trim()
                .parse()
                .map_err(|_| format!("JOB_COMPLETION_INDEX `{text}` is not a whole number"))?;
            if index >= count {
                return Err(format!(
                    "JOB_COMPLETION_INDEX {index} is not below --shards {count}"
                ));
            }
            Ok(Shard { index, count })
        }
        (None, None) => Ok(Shard::whole()),
    }
}

/// One line of RUNS.jsonl.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    /// The run's name: its bundle is DEST/<id>.
    id: String,
    /// The agent spec (TOML).
    agent: PathBuf,
    /// Files and folders to stage into /input.
    #[serde(default)]
    input: Vec<PathBuf>,
    /// The user's prompt.
    prompt: Option<String>,
    /// Replaces the spec's model.
    model: Option<String>,
    /// The host folder the host tools may use.
    host_dir: Option<PathBuf>,
}

/// A line ready to run: its paths resolved.
struct Job {
    line: usize,
    id: String,
    agent: Arc<AgentSpec>,
    model: Option<String>,
    inputs: Vec<PathBuf>,
    prompt: String,
    host_dir: Option<PathBuf>,
}

/// An id must be usable as a file name everywhere: 1 to 128 of `A-Z a-z 0-9 . _ -`, not
/// starting with `.` or `-`.
fn check_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !id.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "id `{id}` is not a safe name: use 1 to 128 of A-Z a-z 0-9 . _ - (not starting with \
             . or -)"
        ))
    }
}

/// The agent specs met so far, by resolved path: loaded once each.
type Agents = HashMap<PathBuf, Arc<AgentSpec>>;

/// Everything that is true of the whole file after the first pass.
struct Checked {
    agents: Agents,
    /// Lines of this shard.
    ours: u64,
}

/// Resolve a line's paths and check what can be checked before running.
fn resolve(
    line: Line,
    number: usize,
    base: &Path,
    agents: &mut Agents,
    registry: &provrun_tools::ToolRegistry,
) -> Result<Job, String> {
    check_id(&line.id)?;
    let agent_path = base.join(&line.agent);
    let agent = match agents.get(&agent_path) {
        Some(a) => Arc::clone(a),
        None => {
            let spec = AgentSpec::load(&agent_path).map_err(|e| e.to_string())?;
            spec.validate(&format!("agent spec `{}`", agent_path.display()))
                .map_err(|e| e.to_string())?;
            registry
                .get(&spec.tools)
                .map_err(|e| format!("agent spec `{}`: {e}", agent_path.display()))?;
            let spec = Arc::new(spec);
            agents.insert(agent_path.clone(), Arc::clone(&spec));
            spec
        }
    };
    let model = match &line.model {
        None => None,
        Some(text) => Some(
            match ModelRef::parse(text).map_err(|e| format!("model: {e}"))? {
                ModelRef::Script(p) => format!("script:{}", base.join(p).display()),
                ModelRef::Replay(p) => format!("replay:{}", base.join(p).display()),
                _ => text.trim().to_string(),
            },
        ),
    };
    // A script the run would read must be there (a spec's own script resolves against
    // the spec's folder; a line's against the JSONL file's).
    let script = match ModelRef::parse(model.as_deref().unwrap_or(&agent.model)) {
        Ok(ModelRef::Script(p)) => Some(agent.resolve(&p)),
        _ => None,
    };
    if let Some(script) = script
        && !script.is_file()
    {
        return Err(format!("model script `{}` is not a file", script.display()));
    }
    let inputs: Vec<PathBuf> = line.input.iter().map(|p| base.join(p)).collect();
    for input in &inputs {
        std::fs::symlink_metadata(input)
            .map_err(|e| format!("input `{}`: {e}", input.display()))?;
    }
    let host_dir = line.host_dir.as_ref().map(|p| base.join(p));
    if let Some(host) = &host_dir
        && !host.is_dir()
    {
        return Err(format!(
            "host_dir `{}` does not exist or is not a folder",
            host.display()
        ));
    }
    Ok(Job {
        line: number,
        id: line.id,
        agent,
        model,
        inputs,
        prompt: line.prompt.unwrap_or_else(|| DEFAULT_PROMPT.to_string()),
        host_dir,
    })
}

/// The first pass: every line parses, names a safe, unique id, a loadable agent with known
/// tools, inputs that exist. Errors name the line; at most 20 are listed.
fn check_file(
    path: &Path,
    base: &Path,
    shard: Shard,
    registry: &provrun_tools::ToolRegistry,
) -> Result<Checked, Vec<String>> {
    let file = std::fs::File::open(path)
        .map_err(|e| vec![format!("cannot read `{}`: {e}", path.display())])?;
    let mut agents = Agents::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut errors = Vec::new();
    let mut ours = 0u64;
    let mut any = false;
    for (i, text) in BufReader::new(file).lines().enumerate() {
        let number = i + 1;
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("{}: line {number}: {e}", path.display()));
                break;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        any = true;
        let checked = serde_json::from_str::<Line>(&text)
            .map_err(|e| e.to_string())
            .and_then(|line| {
                if let Some(first) = ids.get(&line.id) {
                    return Err(format!("id `{}` is already used on line {first}", line.id));
                }
                let id = line.id.clone();
                resolve(line, number, base, &mut agents, registry)?;
                ids.insert(id, number);
                Ok(())
            });
        match checked {
            Ok(()) => ours += u64::from(shard.owns(number)),
            Err(e) => errors.push(format!("{}: line {number}: {e}", path.display())),
        }
        if errors.len() >= 20 {
            errors.push("(stopped after 20 errors)".to_string());
            break;
        }
    }
    if !any && errors.is_empty() {
        errors.push(format!("`{}` holds no runs", path.display()));
    }
    if errors.is_empty() {
        Ok(Checked { agents, ours })
    } else {
        Err(errors)
    }
}

/// How one line ended.
#[derive(Debug)]
struct Outcome {
    line: usize,
    id: String,
    /// `finished`, `failed`, `cancelled`, `paused`, or `error` (it could not start, or
    /// its bundle does not verify).
    status: &'static str,
    /// It had finished in an earlier batch and was not run again.
    skipped: bool,
    run_id: Option<String>,
    error: Option<String>,
    seconds: f64,
}

impl Outcome {
    fn finished(&self) -> bool {
        self.status == "finished"
    }
}

fn status_word(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Finished => "finished",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
        RunStatus::Paused => "paused",
    }
}

/// What an existing bundle at DEST/<id> says: finished (and verifying), or to be redone.
enum Existing {
    None,
    Done {
        status: &'static str,
        run_id: String,
    },
    Redo,
    Held(String),
}

/// The status and run id of a bundle that verifies and whose run ended, else `None`.
fn ended(bundle: &Path) -> Option<(&'static str, String)> {
    let report = provrun_evidence::verify(bundle);
    if !report.ok || !report.complete {
        return None;
    }
    let events = provrun_evidence::read_events(bundle).ok()?;
    let last = events.last()?;
    let provrun_evidence::EventPayload::RunFinished(finished) = last.typed().ok()? else {
        return None;
    };
    Some((finished.status.as_str(), last.run_id.clone()))
}

fn existing(bundle: &Path) -> Existing {
    match std::fs::symlink_metadata(bundle) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Existing::None,
        Err(e) => return Existing::Held(format!("cannot look at `{}`: {e}", bundle.display())),
        Ok(_) => {}
    }
    // A bundle another process is writing is left alone.
    match BundleLock::acquire(bundle) {
        Err(e @ EvidenceError::BundleLocked { .. }) => return Existing::Held(e.to_string()),
        Ok(lock) => drop(lock),
        Err(_) => {}
    }
    match ended(bundle) {
        Some((status, run_id)) => Existing::Done { status, run_id },
        None => Existing::Redo,
    }
}

/// Move an incomplete or broken bundle out of the way, under DEST/.provrun-aside/, with a
/// name no earlier move used.
fn move_aside(dest: &Path, id: &str, bundle: &Path) -> Result<PathBuf, String> {
    let aside = dest.join(ASIDE_DIR);
    std::fs::create_dir_all(&aside)
        .map_err(|e| format!("cannot make `{}`: {e}", aside.display()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let to = aside.join(format!("{id}.{stamp}"));
    std::fs::rename(bundle, &to).map_err(|e| {
        format!(
            "cannot move the incomplete bundle `{}` aside: {e}",
            bundle.display()
        )
    })?;
    Ok(to)
}

/// Where a batch's bundles go: a local folder, or a bucket (the bundles are then built in
/// a local work folder, uploaded once they verify, and removed).
pub(crate) struct Dest {
    /// DEST itself, or the work folder for a bucket.
    local: PathBuf,
    bucket: Option<Bucket>,
}

impl Dest {
    /// Where the bundle of `id` ends up, as the user would name it.
    fn bundle_name(&self, id: &str) -> String {
        match &self.bucket {
            Some(b) => b.object_url(id),
            None => self.local.join(id).display().to_string(),
        }
    }

    fn name(&self) -> String {
        match &self.bucket {
            Some(b) => b.url.clone(),
            None => self.local.display().to_string(),
        }
    }
}

/// What the bucket holds for `id`: `Existing::None`, or the ended run of a tar that
/// verifies, else `Existing::Redo` (it is replaced by the new upload).
async fn existing_in_bucket(bucket: &Bucket, work: &Path, id: &str) -> Result<Existing, String> {
    let Some(bytes) = bucket.fetch(id).await? else {
        return Ok(Existing::None);
    };
    let check = work.join(format!(".check-{id}"));
    let found = tokio::task::spawn_blocking(move || {
        let _ = std::fs::remove_dir_all(&check);
        let found = match crate::store::untar(&bytes, &check) {
            Ok(()) => ended(&check),
            Err(_) => None,
        };
        let _ = std::fs::remove_dir_all(&check);
        found
    })
    .await
    .map_err(|e| format!("cannot check the bundle in the bucket: {e}"))?;
    Ok(match found {
        Some((status, run_id)) => Existing::Done { status, run_id },
        None => Existing::Redo,
    })
}

/// Run one line (or find it done), and say how it ended.
async fn run_one(
    job: Job,
    dest: Arc<Dest>,
    backend: Arc<Backend>,
    durability: DurabilityArg,
) -> Outcome {
    let started = Instant::now();
    let bundle = dest.local.join(&job.id);
    let mut outcome = Outcome {
        line: job.line,
        id: job.id.clone(),
        status: "error",
        skipped: false,
        run_id: None,
        error: None,
        seconds: 0.0,
    };
    let look = match &dest.bucket {
        Some(bucket) => match existing_in_bucket(bucket, &dest.local, &job.id).await {
            Ok(Existing::Redo | Existing::None) => {
                // A folder a killed batch left in a reused work folder is not evidence of
                // anything: only the bucket counts.
                let _ = std::fs::remove_dir_all(&bundle);
                Ok(Existing::None)
            }
            Ok(found) => Ok(found),
            Err(e) => Ok(Existing::Held(e)),
        },
        None => {
            let bundle = bundle.clone();
            tokio::task::spawn_blocking(move || existing(&bundle)).await
        }
    };
    match look {
        Ok(Existing::None) => {}
        Ok(Existing::Done { status, run_id }) => {
            outcome.status = status;
            outcome.skipped = true;
            outcome.run_id = Some(run_id);
            return outcome;
        }
        Ok(Existing::Redo) => match move_aside(&dest.local, &job.id, &bundle) {
            Ok(to) => tracing::info!(
                id = %job.id,
                aside = %to.display(),
                "moved an incomplete bundle aside; running again"
            ),
            Err(e) => {
                outcome.error = Some(e);
                return outcome;
            }
        },
        Ok(Existing::Held(e)) => {
            outcome.error = Some(e);
            return outcome;
        }
        Err(e) => {
            outcome.error = Some(format!("cannot look at the bundle: {e}"));
            return outcome;
        }
    }
    let agent_owned;
    let agent: &AgentSpec = match &job.model {
        None => &job.agent,
        Some(model) => {
            let mut a = (*job.agent).clone();
            a.model = model.clone();
            // Evidence keeps the spec that ran: with the override, not the file's text.
            a.source = None;
            agent_owned = a;
            &agent_owned
        }
    };
    let mut spec = RunSpec::new(job.prompt, &bundle);
    spec.inputs = job.inputs;
    spec.host_dir = job.host_dir;
    spec.durability = durability.into();
    let control = RunControl::new();
    match backend.execute(&control, agent, &spec).await {
        Ok(result) => {
            outcome.status = status_word(result.status);
            outcome.run_id = Some(result.run_id.clone());
            outcome.error = result.error.clone();
            // A bundle that does not verify is no result.
            let check = bundle.clone();
            let report =
                tokio::task::spawn_blocking(move || provrun_evidence::verify(&check)).await;
            if !matches!(&report, Ok(r) if r.ok) {
                outcome.status = "error";
                outcome.error = Some("the bundle does not verify".to_string());
            } else if let Some(bucket) = &dest.bucket
                && let Err(e) = bucket.upload(&job.id, &bundle).await
            {
                outcome.status = "error";
                outcome.error = Some(e);
            }
        }
        Err(e) => outcome.error = Some(e.to_string()),
    }
    if dest.bucket.is_some() {
        // Uploaded, or not worth keeping: the bucket is the only place that counts.
        let _ = std::fs::remove_dir_all(&bundle);
    }
    outcome.seconds = started.elapsed().as_secs_f64();
    outcome
}

/// Counts shared by the runs, the progress display and the summary.
#[derive(Default)]
struct Tally {
    done: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
    running: AtomicU64,
}

/// The progress display: a bar on a terminal, a plain line now and then otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    ticker: Option<tokio::task::AbortHandle>,
}

fn plain_line(tally: &Tally, total: u64, started: Instant) -> String {
    let done = tally.done.load(Ordering::Relaxed);
    let failed = tally.failed.load(Ordering::Relaxed);
    let running = tally.running.load(Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();
    let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
    let eta = if rate > 0.0 {
        format!("{:.0} s", total.saturating_sub(done) as f64 / rate)
    } else {
        "unknown".to_string()
    };
    format!(
        "provrun: batch: {done}/{total} done ({failed} failed), {running} running, {rate:.1} runs/s, ETA {eta}"
    )
}

impl Progress {
    fn start(tally: &Arc<Tally>, total: u64, started: Instant) -> Self {
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total),
                indicatif::ProgressDrawTarget::stderr(),
            );
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} done · {msg} · {per_sec} · ETA {eta}",
            ) {
                bar.set_style(style);
            }
            bar.set_message("0 failed · 0 running");
            bar.enable_steady_tick(Duration::from_millis(200));
            Progress {
                bar: Some(bar),
                ticker: None,
            }
        } else {
            let tally = Arc::clone(tally);
            let ticker = tokio::spawn(async move {
                let mut every = tokio::time::interval(PLAIN_PROGRESS_EVERY);
                every.tick().await;
                loop {
                    every.tick().await;
                    eprintln!("{}", plain_line(&tally, total, started));
                }
            });
            Progress {
                bar: None,
                ticker: Some(ticker.abort_handle()),
            }
        }
    }

    fn update(&self, tally: &Tally) {
        if let Some(bar) = &self.bar {
            bar.set_position(tally.done.load(Ordering::Relaxed));
            bar.set_message(format!(
                "{} failed · {} running",
                tally.failed.load(Ordering::Relaxed),
                tally.running.load(Ordering::Relaxed)
            ));
        }
    }

    fn stop(&self, tally: &Tally, total: u64, started: Instant) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if let Some(t) = &self.ticker {
            t.abort();
        }
        eprintln!("{}", plain_line(tally, total, started));
    }
}

/// What the summary needs, kept small whatever the number of runs.
#[derive(Default)]
struct Summary {
    finished: u64,
    not_finished: u64,
    skipped: u64,
    /// The first failures, for the table.
    named: Vec<(String, String)>,
}

fn json_line(o: &Outcome, dest: &Dest) -> serde_json::Value {
    json!({
        "type": "run",
        "line": o.line,
        "id": o.id,
        "status": o.status,
        "skipped": o.skipped,
        "bundle": dest.bundle_name(&o.id),
        "run_id": o.run_id,
        "error": o.error,
        "seconds": (o.seconds * 1000.0).round() / 1000.0,
    })
}

pub(crate) fn batch(args: BatchArgs) -> u8 {
    let job_index = std::env::var("JOB_COMPLETION_INDEX").ok();
    let shard = match choose_shard(&args, job_index.as_deref()) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let registry = match registry(&args.tools_dirs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let runs = std::path::absolute(&args.runs).unwrap_or_else(|_| args.runs.clone());
    let base = runs
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let checked = match check_file(&runs, &base, shard, &registry) {
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
    let out_text = args.out.to_string_lossy().into_owned();
    // Kept until the batch ends: the work folder of a bucket destination.
    let mut _work = None;
    let dest = if is_url(&out_text) {
        let bucket = match Bucket::open(&out_text) {
            Ok(b) => b,
            Err(e) => return fail(EXIT_USAGE, format!("--out: {e}")),
        };
        if let Err(e) = runtime.block_on(bucket.probe()) {
            return fail(EXIT_USAGE, format!("--out: {e}"));
        }
        let work = match &args.work_dir {
            Some(dir) => std::fs::create_dir_all(dir)
                .map(|()| std::path::absolute(dir).unwrap_or_else(|_| dir.clone()))
                .map_err(|e| format!("cannot make --work-dir `{}`: {e}", dir.display())),
            None => tempfile::Builder::new()
                .prefix("provrun-batch-")
                .tempdir()
                .map_err(|e| format!("cannot make a work folder in TMPDIR: {e}"))
                .map(|t| {
                    let path = std::path::absolute(t.path()).unwrap_or_else(|_| t.path().into());
                    _work = Some(t);
                    path
                }),
        };
        match work {
            Ok(local) => Dest {
                local,
                bucket: Some(bucket),
            },
            Err(e) => return fail(EXIT_USAGE, e),
        }
    } else {
        match std::fs::symlink_metadata(&args.out) {
            Ok(m) if !m.is_dir() => {
                return fail(
                    EXIT_USAGE,
                    format!("--out `{}` exists and is not a folder", args.out.display()),
                );
            }
            _ => {}
        }
        if let Err(e) = std::fs::create_dir_all(&args.out) {
            return fail(
                EXIT_USAGE,
                format!("cannot make --out `{}`: {e}", args.out.display()),
            );
        }
        Dest {
            local: std::path::absolute(&args.out).unwrap_or_else(|_| args.out.clone()),
            bucket: None,
        }
    };
    let dest = Arc::new(dest);
    let mut backend = Backend::new().with_registry(registry.clone());
    if let Some(m) = args.max_model_requests {
        backend = backend.with_model_limit(Arc::new(tokio::sync::Semaphore::new(m as usize)));
    }
    let backend = Arc::new(crate::otel::with_live_export(backend));
    let summary = runtime.block_on(drive(
        &args,
        Source {
            runs: &runs,
            base: &base,
            shard,
        },
        checked,
        &dest,
        &backend,
        &registry,
    ));
    runtime.shutdown_background();
    let summary = match summary {
        Ok(s) => s,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    if !args.json {
        print_table(&summary, &runs, &dest, shard);
    }
    if summary.not_finished == 0 {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

/// The second pass: hand this shard's lines to at most `--concurrency` runs at once.
/// Where the lines come from and which of them are ours.
struct Source<'a> {
    runs: &'a Path,
    base: &'a Path,
    shard: Shard,
}

async fn drive(
    args: &BatchArgs,
    source: Source<'_>,
    checked: Checked,
    dest: &Arc<Dest>,
    backend: &Arc<Backend>,
    registry: &provrun_tools::ToolRegistry,
) -> Result<Summary, String> {
    let Checked { mut agents, ours } = checked;
    let Source { runs, base, shard } = source;
    let started = Instant::now();
    let tally = Arc::new(Tally::default());
    let progress = Arc::new(Progress::start(&tally, ours, started));
    let summary = Arc::new(Mutex::new(Summary::default()));
    let concurrency = args.concurrency as usize;
    let slots = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let json = args.json;
    let durability = args.durability;

    let file =
        std::fs::File::open(runs).map_err(|e| format!("cannot read `{}`: {e}", runs.display()))?;
    for (i, text) in BufReader::new(file).lines().enumerate() {
        let number = i + 1;
        let text = text.map_err(|e| format!("{}: line {number}: {e}", runs.display()))?;
        if text.trim().is_empty() || !shard.owns(number) {
            continue;
        }
        // Checked in the first pass; a file changed since is refused here, line named.
        let job = serde_json::from_str::<Line>(&text)
            .map_err(|e| e.to_string())
            .and_then(|line| resolve(line, number, base, &mut agents, registry))
            .map_err(|e| {
                format!(
                    "{}: line {number} changed while the batch ran: {e}",
                    runs.display()
                )
            })?;
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        tally.running.fetch_add(1, Ordering::Relaxed);
        progress.update(&tally);
        let (dest, backend, tally, progress, summary) = (
            Arc::clone(dest),
            Arc::clone(backend),
            Arc::clone(&tally),
            Arc::clone(&progress),
            Arc::clone(&summary),
        );
        tokio::spawn(async move {
            let outcome = run_one(job, Arc::clone(&dest), backend, durability).await;
            tally.running.fetch_sub(1, Ordering::Relaxed);
            tally.done.fetch_add(1, Ordering::Relaxed);
            if !outcome.finished() {
                tally.failed.fetch_add(1, Ordering::Relaxed);
            }
            if outcome.skipped {
                tally.skipped.fetch_add(1, Ordering::Relaxed);
            }
            progress.update(&tally);
            {
                let mut s = summary.lock().unwrap_or_else(|p| p.into_inner());
                if outcome.finished() {
                    s.finished += 1;
                } else {
                    s.not_finished += 1;
                    if s.named.len() < FAILURES_NAMED {
                        let why = outcome.error.clone().unwrap_or_default();
                        s.named.push((
                            outcome.id.clone(),
                            format!(
                                "{}{}{why}",
                                outcome.status,
                                if why.is_empty() { "" } else { ": " }
                            ),
                        ));
                    }
                }
                s.skipped += u64::from(outcome.skipped);
                if json {
                    let line = json_line(&outcome, &dest);
                    // One line per write, under the summary's lock: lines never interleave.
                    let _ = writeln!(std::io::stdout().lock(), "{line}");
                }
            }
            drop(slot);
        });
    }
    // Every slot back: every run has ended.
    let _all = slots
        .acquire_many(u32::try_from(concurrency).unwrap_or(u32::MAX))
        .await
        .map_err(|e| e.to_string())?;
    progress.stop(&tally, ours, started);
    // The tasks may still hold their clones a moment after giving their slot back: take
    // the summary out rather than unwrap the Arc.
    let summary = std::mem::take(&mut *summary.lock().unwrap_or_else(|p| p.into_inner()));
    if json {
        let secs = started.elapsed().as_secs_f64();
        let ran = summary.finished + summary.not_finished - summary.skipped;
        let line = json!({
            "type": "summary",
            "shard": shard.to_string(),
            "runs": summary.finished + summary.not_finished,
            "finished": summary.finished,
            "not_finished": summary.not_finished,
            "skipped": summary.skipped,
            "ran": ran,
            "seconds": (secs * 1000.0).round() / 1000.0,
            "runs_per_second": if secs > 0.0 { ((ran as f64 / secs) * 10.0).round() / 10.0 } else { 0.0 },
            "out": dest.name(),
        });
        let _ = writeln!(std::io::stdout().lock(), "{line}");
    }
    Ok(summary)
}

fn print_table(s: &Summary, runs: &Path, dest: &Dest, shard: Shard) {
    let total = s.finished + s.not_finished;
    out!(
        "batch {} -> {} (shard {shard})",
        inert(&runs.display().to_string()),
        inert(&dest.name())
    );
    out!("  {:<34} {:>8}", "finished", s.finished);
    out!("  {:<34} {:>8}", "not finished", s.not_finished);
    out!("  {:<34} {:>8}", "total", total);
    out!(
        "  {:<34} {:>8}",
        "of these, done before (not rerun)",
        s.skipped
    );
    if !s.named.is_empty() {
        out!("not finished:");
        for (id, why) in &s.named {
            out!("  {}  {}", inert(id), inert(why));
        }
        if s.not_finished > s.named.len() as u64 {
            out!("  … and {} more", s.not_finished - s.named.len() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_every_line_exactly_once() {
        for count in 1..6u32 {
            for line in 1..50usize {
                let owners = (0..count)
                    .filter(|&index| Shard { index, count }.owns(line))
                    .count();
                assert_eq!(owners, 1, "line {line} of {count} shards");
            }
        }
    }

    #[test]
    fn shard_flags_parse_and_refuse_what_does_not_exist() {
        assert_eq!(parse_shard("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("0/0").is_err());
        assert!(parse_shard("1").is_err());
        assert!(parse_shard("a/2").is_err());
    }

    #[test]
    fn ids_must_be_plain_names() {
        for good in ["a", "run-001", "A.b_c", "x".repeat(128).as_str()] {
            assert!(check_id(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "-a",
            ".hidden",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
    }
}
