//! What the scenarios share: their folders (made, discarded), the input files, the
//! model's script, the agent, the [`Bench`] of a scripted scenario, a bundle's size and
//! the runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use provrun_agent::{AgentSpec, Backend, BlobLayout, Durability, RunControl, RunSpec, RunStatus};
use provrun_evidence::{read_events, verify};
use provrun_model::Model;
use provrun_tools::ToolRegistry;
use serde_json::{Value, json};

/// Number of small input files, as in the peer.
const N_FILES: usize = 8;
/// Where the scenario writes: `$PROVRUN_BENCH_DIR` or the system temp dir.
pub(crate) fn work_dir() -> tempfile::TempDir {
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
pub(crate) fn discard_tree(path: &Path) {
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
pub(crate) fn make_inputs(dir: &Path) -> PathBuf {
    let input = dir.join("input");
    std::fs::create_dir_all(&input).expect("create input");
    for i in 0..N_FILES {
        std::fs::write(input.join(format!("f{i}.txt")), vec![b'x'; 64 * (i + 1)])
            .expect("write input");
    }
    input
}

/// K sequential `read_file` calls, one per response, then a text answer.
pub(crate) fn script(k: usize) -> Value {
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

pub(crate) fn agent() -> AgentSpec {
    let mut a = AgentSpec::new("bench", "script:bench");
    a.instructions = "Read the files and report.".into();
    a.tools = vec!["read_file".into()];
    a.max_steps = 1000;
    a
}

/// Everything a scripted scenario shares between its runs.
pub(crate) struct Bench {
    pub(crate) backend: Backend,
    pub(crate) agent: AgentSpec,
    pub(crate) input: PathBuf,
    pub(crate) runs_dir: PathBuf,
    pub(crate) durability: Durability,
    pub(crate) k: usize,
}

impl Bench {
    pub(crate) fn new(dir: &Path, model: Arc<dyn Model>, durability: Durability, k: usize) -> Self {
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

    pub(crate) fn bundle(&self, n: usize) -> PathBuf {
        self.runs_dir.join(format!("run-{n:06}"))
    }

    /// One whole run; returns its wall time in ms.
    pub(crate) async fn run(&self, n: usize) -> f64 {
        self.try_run(n).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// One whole run; its wall time in ms, or why it did not finish as scripted.
    pub(crate) async fn try_run(&self, n: usize) -> Result<f64, String> {
        let started = Instant::now();
        let spec = RunSpec::new("Read the files and report.", self.bundle(n))
            .input(&self.input)
            .durability(self.durability)
            .run_id(format!("bench-{n:06}"));
        let result = self
            .backend
            .execute(&RunControl::new(), &self.agent, &spec)
            .await
            .map_err(|e| format!("run {n} did not start or lost its evidence: {e}"))?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        if result.status() != RunStatus::Finished {
            return Err(format!("run {n} failed: {:?}", result.error()));
        }
        assert_eq!(result.output(), format!("read {} files", self.k));
        assert_eq!(result.usage.tool_calls, self.k as u64);
        Ok(ms)
    }

    /// Check one bundle (outside the timing) and return its event count.
    pub(crate) fn check(&self, n: usize) -> u64 {
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

/// Files in a bundle and their bytes, `input/` excluded (the staged inputs are the
/// user's files, the same under any layout).
pub(crate) fn bundle_size(bundle: &Path) -> (u64, u64) {
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

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}
