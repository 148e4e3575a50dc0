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
//! Every run is a real [`Backend::execute`] with its own bundle: inputs staged, every
//! model request and tool call recorded, the trace imported, outputs digested and the
//! statement written. The tool is the built-in `read_file` (in-process) reading one of 8
//! small files from `/input`; the model is a shared, stateless [`ScriptModel`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use provrun_agent::{AgentSpec, Backend, BlobLayout, Durability, RunControl, RunSpec, RunStatus};
use provrun_evidence::{read_events, verify};
use provrun_model::{Model, ModelError, ModelRequest, ModelResponse, ScriptModel, StreamDelta};
use provrun_tools::ToolRegistry;
use serde_json::{Value, json};

/// Number of small input files, as in the peer.
const N_FILES: usize = 8;

/// One figure, printed as one JSON line.
struct Figure {
    name: String,
    runs: u64,
    seconds: f64,
    events: Option<u64>,
    latencies_ms: Vec<f64>,
    skipped: Option<String>,
    /// Scenario-specific figures, appended to the line.
    extra: Vec<(&'static str, Value)>,
}

impl Figure {
    fn new(name: &str, runs: u64, seconds: f64) -> Self {
        Self {
            name: name.to_string(),
            runs,
            seconds,
            events: None,
            latencies_ms: Vec::new(),
            skipped: None,
            extra: Vec::new(),
        }
    }

    fn print(&self) {
        let mut lat = self.latencies_ms.clone();
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| -> Value {
            if lat.is_empty() {
                return Value::Null;
            }
            let i = ((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1;
            json!(round(lat[i], 3))
        };
        let per_s = |n: f64| -> Value {
            if self.seconds > 0.0 && self.skipped.is_none() {
                json!(round(n / self.seconds, 2))
            } else {
                Value::Null
            }
        };
        // Keys in the order issue 9 lists them.
        let mut line = format!(
            "{{\"name\":{},\"runs\":{},\"seconds\":{},\"runs_per_second\":{},\"events_per_second\":{},\"p50_ms\":{},\"p99_ms\":{},\"peak_rss_mb\":{}",
            json!(self.name),
            self.runs,
            json!(round(self.seconds, 4)),
            per_s(self.runs as f64),
            self.events.map_or(Value::Null, |e| per_s(e as f64)),
            pct(0.50),
            pct(0.99),
            json!(round(peak_rss_mb(), 1)),
        );
        for (k, v) in &self.extra {
            line.push_str(&format!(",{}:{v}", json!(k)));
        }
        if let Some(why) = &self.skipped {
            line.push_str(&format!(",\"skipped\":{}", json!(why)));
        }
        line.push('}');
        println!("{line}");
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// This process's peak resident set (`VmHWM`), in MiB.
fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Where the scenario writes: `$PROVRUN_BENCH_DIR` or the system temp dir.
fn work_dir() -> tempfile::TempDir {
    let base = std::env::var_os("PROVRUN_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&base).expect("create the bench folder");
    tempfile::Builder::new()
        .prefix("provrun-bench-")
        .tempdir_in(base)
        .expect("create a temp folder")
}

/// Done with a scenario's folder. With `$PROVRUN_BENCH_TRASH` set (as `cargo xtask bench`
/// does) it is moved there, to be deleted once every scenario has run: deleting tens of
/// thousands of files makes ext4 skip their inode numbers for about a minute
/// ("recently deleted"), which made each file the *next* scenario created cost a scan of
/// the inode table, several times the cost of the run itself. Otherwise it is deleted.
fn discard_tree(path: &Path) {
    if let Some(trash) = std::env::var_os("PROVRUN_BENCH_TRASH").map(PathBuf::from)
        && std::fs::create_dir_all(&trash).is_ok()
        && let Some(name) = path.file_name()
        && std::fs::rename(path, trash.join(name)).is_ok()
    {
        return;
    }
    remove_tree(path);
}

/// Staged inputs are read-only: make a tree writable so it can be removed.
fn remove_tree(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fn writable(p: &Path) {
        if let Ok(m) = std::fs::symlink_metadata(p)
            && m.is_dir()
        {
            let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    writable(&e.path());
                }
            }
        }
    }
    writable(path);
    let _ = std::fs::remove_dir_all(path);
}

/// The input folder: `f0.txt` … `f7.txt`, 64·(i+1) bytes each (as the peer's).
fn make_inputs(dir: &Path) -> PathBuf {
    let input = dir.join("input");
    std::fs::create_dir_all(&input).expect("create input");
    for i in 0..N_FILES {
        std::fs::write(input.join(format!("f{i}.txt")), vec![b'x'; 64 * (i + 1)])
            .expect("write input");
    }
    input
}

/// K sequential `read_file` calls, one per response, then a text answer.
fn script(k: usize) -> Value {
    let mut steps: Vec<Value> = (0..k)
        .map(|i| {
            json!({"tool_calls": [{
                "id": format!("call_{i}"),
                "name": "read_file",
                "arguments": {"path": format!("/input/f{}.txt", i % N_FILES)}
            }]})
        })
        .collect();
    steps.push(json!({"text": format!("read {k} files")}));
    Value::Array(steps)
}

/// The blob layout of the scripted scenarios' bundles: the pack, or with `--loose` the
/// first layout (one file per blob), for A/B comparisons by hand.
fn layout() -> BlobLayout {
    if std::env::args().any(|a| a == "--loose") {
        BlobLayout::Loose
    } else {
        BlobLayout::Pack
    }
}

fn agent() -> AgentSpec {
    let mut a = AgentSpec::new("bench", "script:bench");
    a.instructions = "Read the files and report.".into();
    a.tools = vec!["read_file".into()];
    a.max_steps = 1000;
    a
}

/// Everything a scripted scenario shares between its runs.
struct Bench {
    backend: Backend,
    agent: AgentSpec,
    input: PathBuf,
    runs_dir: PathBuf,
    durability: Durability,
    k: usize,
}

impl Bench {
    fn new(dir: &Path, model: Arc<dyn Model>, durability: Durability, k: usize) -> Self {
        let runs_dir = dir.join("runs");
        std::fs::create_dir_all(&runs_dir).expect("create runs");
        Self {
            backend: Backend::new()
                .with_model(model)
                .with_registry(ToolRegistry::linked())
                .with_blob_layout(layout()),
            agent: agent(),
            input: make_inputs(dir),
            runs_dir,
            durability,
            k,
        }
    }

    fn bundle(&self, n: usize) -> PathBuf {
        self.runs_dir.join(format!("run-{n:06}"))
    }

    /// One whole run; returns its wall time in ms.
    async fn run(&self, n: usize) -> f64 {
        let started = Instant::now();
        let mut spec =
            RunSpec::new("Read the files and report.", self.bundle(n)).input(&self.input);
        spec.durability = self.durability;
        spec.run_id = Some(format!("bench-{n:06}"));
        let result = self
            .backend
            .execute(&RunControl::new(), &self.agent, &spec)
            .await
            .expect("run");
        let ms = started.elapsed().as_secs_f64() * 1e3;
        assert_eq!(result.status, RunStatus::Finished, "{:?}", result.error);
        assert_eq!(result.output, format!("read {} files", self.k));
        assert_eq!(result.usage.tool_calls, self.k as u64);
        ms
    }

    /// Check one bundle (outside the timing) and return its event count.
    fn check(&self, n: usize) -> u64 {
        let bundle = self.bundle(n);
        let report = verify(&bundle);
        assert_eq!(
            report.exit_code(),
            0,
            "bundle {} does not verify",
            bundle.display()
        );
        read_events(&bundle).expect("read events").len() as u64
    }
}

/// `runs` runs, `concurrency` at a time, on a multi-threaded runtime.
fn scripted(name: &str, runs: usize, concurrency: usize, durability: Durability) -> Figure {
    let dir = work_dir();
    let k = 10;
    let model: Arc<dyn Model> = Arc::new(ScriptModel::from_value(&script(k)).expect("script"));
    let bench = Arc::new(Bench::new(dir.path(), model, durability, k));
    let rt = runtime();
    // One warm-up run (page cache, lazy statics), not counted.
    rt.block_on(bench.run(usize::MAX / 2));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let latencies = rt.block_on(async {
        let workers = (0..concurrency.min(runs)).map(|_| {
            let bench = Arc::clone(&bench);
            let next = Arc::clone(&next);
            tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= runs {
                        break lat;
                    }
                    lat.push(bench.run(n).await);
                }
            })
        });
        let mut all = Vec::with_capacity(runs);
        for w in workers.collect::<Vec<_>>() {
            all.extend(w.await.expect("worker"));
        }
        all
    });
    let seconds = started.elapsed().as_secs_f64();
    let per_run = bench.check(0);
    assert_eq!(per_run, bench.check(runs - 1));
    let mut fig = Figure::new(name, runs as u64, seconds);
    fig.events = Some(per_run * runs as u64);
    fig.latencies_ms = latencies;
    let (files, bytes) = bundle_size(&bench.bundle(0));
    fig.extra.push(("files_per_run", json!(files)));
    fig.extra.push(("bundle_bytes_per_run", json!(bytes)));
    discard_tree(dir.path());
    fig
}

/// Files in a bundle and their bytes, `input/` excluded (the staged inputs are the
/// user's files, the same under any layout).
fn bundle_size(bundle: &Path) -> (u64, u64) {
    fn walk(dir: &Path, files: &mut u64, bytes: &mut u64) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                walk(&e.path(), files, bytes);
            } else {
                *files += 1;
                *bytes += m.len();
            }
        }
    }
    let (mut files, mut bytes) = (0, 0);
    for e in std::fs::read_dir(bundle).into_iter().flatten().flatten() {
        if e.file_name() == "input" {
            continue;
        }
        let Ok(m) = e.metadata() else { continue };
        if m.is_dir() {
            walk(&e.path(), &mut files, &mut bytes);
        } else {
            files += 1;
            bytes += m.len();
        }
    }
    (files, bytes)
}

/// Bytes of each distinct input of a long run.
const LONG_FILE_BYTES: usize = 10 * 1024;

/// One long run: `k` sequential steps, step `i` reading `/input/f{i}.txt`, a distinct
/// 10 KB file of text-like bytes (so each request resends a history that grows by one
/// tool result), in blob `layout`. Reports the run's time, the bundle's size and files
/// (inputs excluded), the distinct tool-result content, and how long `verify` takes.
fn long_run(name: &str, k: usize, layout: BlobLayout) -> Figure {
    let dir = work_dir();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).expect("create input");
    // Words of random letters, so that the content compresses like text, not like a
    // repeated pattern.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in 0..k {
        let mut text = Vec::with_capacity(LONG_FILE_BYTES);
        while text.len() < LONG_FILE_BYTES {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = match x % 32 {
                0..=25 => b'a' + (x % 32) as u8,
                26..=29 => b' ',
                30 => b'\n',
                _ => b'.',
            };
            text.push(c);
        }
        std::fs::write(input.join(format!("f{i}.txt")), text).expect("write input");
    }
    let steps: Vec<Value> = (0..k)
        .map(|i| {
            json!({"tool_calls": [{
                "id": format!("call_{i}"),
                "name": "read_file",
                "arguments": {"path": format!("/input/f{i}.txt")}
            }]})
        })
        .chain(std::iter::once(json!({"text": format!("read {k} files")})))
        .collect();
    let model: Arc<dyn Model> =
        Arc::new(ScriptModel::from_value(&Value::Array(steps)).expect("script"));
    let backend = Backend::new()
        .with_model(model)
        .with_registry(ToolRegistry::linked())
        .with_blob_layout(layout);
    let bundle = dir.path().join("bundle");
    let mut spec = RunSpec::new("Read the files and report.", &bundle).input(&input);
    spec.durability = Durability::Flush;
    spec.run_id = Some(format!("{name}-run"));
    let rt = runtime();
    let started = Instant::now();
    let result = rt
        .block_on(backend.execute(&RunControl::new(), &agent(), &spec))
        .expect("run");
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(result.status, RunStatus::Finished, "{:?}", result.error);
    assert_eq!(result.usage.tool_calls, k as u64);
    let (files, bytes) = bundle_size(&bundle);
    let t = Instant::now();
    let report = verify(&bundle);
    let verify_s = t.elapsed().as_secs_f64();
    assert_eq!(report.exit_code(), 0, "{name}: the bundle does not verify");
    let events = read_events(&bundle).expect("read events").len() as u64;
    let distinct = (k * LONG_FILE_BYTES) as u64;
    eprintln!(
        "{name}: {k} steps in {seconds:.2} s, bundle {:.2} MiB in {files} files ({:.2}x the {:.2} MiB of distinct tool results), verify {verify_s:.3} s",
        bytes as f64 / 1048576.0,
        bytes as f64 / distinct as f64,
        distinct as f64 / 1048576.0
    );
    let mut fig = Figure::new(name, 1, seconds);
    fig.events = Some(events);
    fig.latencies_ms = vec![seconds * 1e3];
    fig.extra = vec![
        ("steps", json!(k)),
        ("layout", json!(layout.as_str())),
        ("bundle_bytes", json!(bytes)),
        ("files", json!(files)),
        ("distinct_bytes", json!(distinct)),
        (
            "size_vs_distinct",
            json!(round(bytes as f64 / distinct as f64, 3)),
        ),
        ("verify_seconds", json!(round(verify_s, 4))),
    ];
    drop(rt);
    discard_tree(dir.path());
    fig
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Raw `write` + `fdatasync` of event-sized lines in one file: what one fsync per event
/// allows on this disk.
fn fsync_baseline(quick: bool) -> Figure {
    use std::io::Write;
    let dir = work_dir();
    let path = dir.path().join("raw.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("open");
    let line = vec![b'x'; 400];
    let n = if quick { 200 } else { 2000 };
    let mut lat = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        f.write_all(&line).expect("write");
        f.sync_data().expect("fdatasync");
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut fig = Figure::new(
        "fsync_per_event_baseline",
        n as u64,
        started.elapsed().as_secs_f64(),
    );
    fig.events = Some(n as u64);
    fig.latencies_ms = lat;
    fig
}

/// A model that makes its first request wait until every run is waiting on it (so all
/// runs are in flight at once), then holds them `hold` longer; later requests answer
/// after `hold`. Answers come from a [`ScriptModel`].
struct SlowModel {
    inner: ScriptModel,
    expected: usize,
    hold: Duration,
    waiting: AtomicUsize,
    max_waiting: AtomicUsize,
    all_in: tokio::sync::watch::Sender<bool>,
}

impl SlowModel {
    async fn wait(&self, request: &ModelRequest) {
        let first = !request
            .messages
            .iter()
            .any(|m| matches!(m, provrun_model::Message::Assistant { .. }));
        if first {
            let now = self.waiting.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_waiting.fetch_max(now, Ordering::SeqCst);
            if now >= self.expected {
                self.all_in.send_replace(true);
            }
            let mut rx = self.all_in.subscribe();
            let _ = tokio::time::timeout(Duration::from_secs(600), rx.wait_for(|v| *v)).await;
            tokio::time::sleep(self.hold).await;
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        } else {
            tokio::time::sleep(self.hold).await;
        }
    }
}

#[async_trait]
impl Model for SlowModel {
    fn name(&self) -> &str {
        "slow"
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.wait(request).await;
        self.inner.request(request).await
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.wait(request).await;
        self.inner.request_stream(request, on_delta).await
    }
}

/// `runs` runs started at once, each with one tool call, all waiting on a slow model
/// together; reports the process's peak RSS.
fn concurrent_idle(name: &str, runs: usize) -> Figure {
    let limit = raise_fd_limit();
    // A run waiting on its model holds one descriptor, its log (the sandbox gives its
    // folder handles back while it waits); the rest is headroom for the runs that are
    // between two requests and the runtime's own.
    let need = runs as u64 + 1024;
    if limit < need {
        let mut f = Figure::new(name, runs as u64, 0.0);
        f.skipped = Some(format!(
            "the open-files limit is {limit} and cannot be raised here; {runs} runs in flight need about {need}"
        ));
        return f;
    }
    let dir = work_dir();
    let k = 1;
    let model = Arc::new(SlowModel {
        inner: ScriptModel::from_value(&script(k)).expect("script"),
        expected: runs,
        hold: Duration::from_millis(500),
        waiting: AtomicUsize::new(0),
        max_waiting: AtomicUsize::new(0),
        all_in: tokio::sync::watch::channel(false).0,
    });
    let bench = Arc::new(Bench::new(
        dir.path(),
        Arc::clone(&model) as Arc<dyn Model>,
        Durability::Flush,
        k,
    ));
    let rt = runtime();
    let started = Instant::now();
    let latencies = rt.block_on(async {
        let tasks: Vec<_> = (0..runs)
            .map(|n| {
                let bench = Arc::clone(&bench);
                tokio::spawn(async move { bench.run(n).await })
            })
            .collect();
        let mut all = Vec::with_capacity(runs);
        for t in tasks {
            all.push(t.await.expect("run"));
        }
        all
    });
    let seconds = started.elapsed().as_secs_f64();
    let in_flight = model.max_waiting.load(Ordering::SeqCst);
    eprintln!("{name}: {in_flight} runs were waiting on the model at once");
    assert_eq!(in_flight, runs, "not every run was in flight at once");
    let per_run = bench.check(0);
    let mut fig = Figure::new(name, runs as u64, seconds);
    fig.events = Some(per_run * runs as u64);
    fig.latencies_ms = latencies;
    drop(rt);
    discard_tree(dir.path());
    fig
}

/// Each waiting run holds a descriptor (its log): allow many thousands.
/// Returns the soft limit in force afterwards.
#[allow(unsafe_code)]
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid, owned struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            let want = 1_048_576.min(lim.rlim_max.max(262_144));
            let raised = libc::rlimit {
                rlim_cur: want,
                rlim_max: lim.rlim_max.max(want),
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                lim.rlim_cur = lim.rlim_max;
                let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
        let _ = libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

/// A finished bundle holding `files` outputs of `file_mib` MiB each; `verify` is timed
/// next to `sha256sum` of the same files (both from the page cache, after one untimed
/// read).
fn verify_big(name: &str, files: usize, file_mib: usize) -> Vec<Figure> {
    use provrun_evidence::{Recorder, RunEnd, RunStarted};
    let dir = work_dir();
    let bundle = dir.path().join("bundle");
    let started = RunStarted {
        builder: "provrun-bench".into(),
        agent_spec_digest: "0".repeat(64),
        agent: "bench".into(),
        model: "script".into(),
        tools: vec![],
        limits: json!({}),
        details: Value::Null,
    };
    let rec =
        Recorder::create(&bundle, "bench-verify", Durability::Flush, &started).expect("create");
    let mut block = vec![0u8; file_mib << 20];
    let mut paths = Vec::new();
    for i in 0..files {
        // Different bytes in every file (a cheap xorshift), so no two digests match.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1);
        for chunk in block.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        let p = rec.output_dir().join(format!("out-{i:03}.bin"));
        std::fs::write(&p, &block).expect("write output");
        paths.push(p);
    }
    drop(block);
    rec.finish(RunEnd {
        status: RunStatus::Finished,
        usage: json!({}),
        error: None,
    })
    .expect("finish");
    drop(rec);
    let total = (files * file_mib) as u64;
    eprintln!("{name}: bundle of {total} MiB outputs written");
    let sha = || {
        let t = Instant::now();
        let out = Command::new("sha256sum").args(&paths).output();
        let secs = t.elapsed().as_secs_f64();
        match out {
            Ok(o) if o.status.success() => Some(secs),
            _ => None,
        }
    };
    sha(); // warm the page cache
    let t = Instant::now();
    let report = verify(&bundle);
    let verify_s = t.elapsed().as_secs_f64();
    assert_eq!(report.exit_code(), 0, "the big bundle does not verify");
    let sha_s = sha();
    let mut ours = Figure::new(name, 1, verify_s);
    ours.latencies_ms = vec![verify_s * 1e3];
    eprintln!(
        "{name}: verify {:.0} MiB/s, sha256sum {}",
        total as f64 / verify_s,
        sha_s.map_or("unavailable".into(), |s| format!(
            "{:.0} MiB/s",
            total as f64 / s
        ))
    );
    let mut base = Figure::new(&format!("{name}_sha256sum"), 1, sha_s.unwrap_or(0.0));
    match sha_s {
        Some(s) => base.latencies_ms = vec![s * 1e3],
        None => base.skipped = Some("sha256sum did not run".into()),
    }
    discard_tree(dir.path());
    vec![ours, base]
}

/// Wall time of whole `provrun run` processes with K=10 and a script model (median of
/// `times` in `p50_ms`).
fn cli_single_run(name: &str, provrun: Option<&Path>, times: usize) -> Figure {
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
) -> (Option<i32>, f64, f64, String) {
    let started = Instant::now();
    let stdout_path = out.with_extension("stdout");
    let stdout = std::fs::File::create(&stdout_path).expect("stdout file");
    let mut child = Command::new(bin)
        .arg("batch")
        .arg(runs)
        .arg("--out")
        .arg(out)
        .args(["--concurrency", "100", "--json"])
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
/// the restart skipped and ran and checking nothing was lost or run twice.
fn batch_10k(name: &str, provrun: Option<&Path>, runs: usize) -> Figure {
    let skip = |why: String| {
        let mut f = Figure::new(name, 0, 0.0);
        f.skipped = Some(why);
        f
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

    // Throughput and memory.
    let (code, seconds, peak, _) = batch_process(bin, &runs_file, &dir.path().join("a"), None);
    if code != Some(0) {
        return skip(format!("`provrun batch` exited {code:?}"));
    }
    let mut fig = Figure::new(name, runs as u64, seconds);
    fig.extra
        .push(("batch_peak_rss_mb", json!((peak * 10.0).round() / 10.0)));
    discard_tree(&dir.path().join("a"));

    // Killed at a random moment between 10% and 90% of the time it takes, then again.
    let b = dir.path().join("b");
    let kill_at = Duration::from_secs_f64(seconds * (0.1 + 0.8 * fastrand_f64()));
    let (code, _, _, _) = batch_process(bin, &runs_file, &b, Some(kill_at));
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
    let (code2, _, _, out) = batch_process(bin, &runs_file, &b, None);
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
    fig
}

/// A number in [0, 1) from the clock's nanoseconds: enough to pick a kill moment.
fn fastrand_f64() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    f64::from(nanos % 1_000_000) / 1_000_000.0
}

const USAGE: &str = "usage: provrun-bench SCENARIO [--quick] [--provrun PATH] [--runs N] [--loose] [--no-loose]
scenarios: scripted_k10_c1 scripted_k10_c100 scripted_k10_c100_fsync concurrent_10k_idle verify_1g cli_single_run long_k300 batch_10k";

fn main() {
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
            let base = fsync_baseline(quick);
            let ours = scripted(
                scenario,
                runs_arg.unwrap_or(if quick { 200 } else { 1000 }),
                100,
                Durability::GroupCommit,
            );
            vec![ours, base]
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
            let (long, short) = if quick { (30, 3) } else { (300, 30) };
            let mut figs = vec![
                long_run("long_k300", long, BlobLayout::Pack),
                long_run("long_k30", short, BlobLayout::Pack),
            ];
            if !args.iter().any(|a| a == "--no-loose") {
                figs.push(long_run("long_k300_loose", long, BlobLayout::Loose));
                figs.push(long_run("long_k30_loose", short, BlobLayout::Loose));
            }
            figs
        }
        "cli_single_run" => vec![cli_single_run(
            scenario,
            provrun.as_deref(),
            if quick { 1 } else { 5 },
        )],
        "batch_10k" => vec![batch_10k(
            scenario,
            provrun.as_deref(),
            runs_arg.unwrap_or(if quick { 500 } else { 10_000 }),
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
