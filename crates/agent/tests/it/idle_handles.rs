//! A run waiting on a model that does not answer at once holds no descriptor for its
//! sandbox folders (so thousands of waiting runs fit under the open-files limit), and its
//! tools still work afterwards: the folders are opened again on the next call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use provrun_agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun_evidence::{EventType, read_events, verify};
use provrun_model::{Model, ModelError, ModelRequest, ModelResponse, ScriptModel, StreamDelta};
use provrun_tools::ToolRegistry;
use serde_json::json;

/// Open descriptors of this process naming `dir` or anything under it.
fn fds_under(dir: &Path) -> usize {
    let dir = std::fs::canonicalize(dir).unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.starts_with(&dir)))
        .count()
}

/// Answers from a script, but only after yielding once (as a network model would), and
/// notes how many descriptors the run held on its `input/` and `output/` while waiting.
struct Waiting {
    inner: ScriptModel,
    bundle: PathBuf,
    seen: Mutex<Vec<usize>>,
}

impl Waiting {
    async fn wait(&self) {
        tokio::task::yield_now().await;
        let held = fds_under(&self.bundle.join("input")) + fds_under(&self.bundle.join("output"));
        self.seen.lock().unwrap().push(held);
    }
}

#[async_trait]
impl Model for Waiting {
    fn name(&self) -> &str {
        "waiting"
    }
    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.wait().await;
        self.inner.request(request).await
    }
    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.wait().await;
        self.inner.request_stream(request, on_delta).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_holds_no_sandbox_folder_and_its_tools_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a.txt"), "alpha").unwrap();
    let bundle = dir.path().join("bundle");
    let model = Arc::new(Waiting {
        inner: ScriptModel::from_value(&json!([
            {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "/input/a.txt"}}]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "/output/b.txt", "content": "beta"}}]},
            {"tool_calls": [{"id": "r2", "name": "read_file", "arguments": {"path": "/output/b.txt"}}]},
            {"text": "done"}
        ]))
        .unwrap(),
        bundle: bundle.clone(),
        seen: Mutex::new(Vec::new()),
    });
    let mut agent = AgentSpec::new("idle", "test");
    agent.tools = vec!["read_file".into(), "write_file".into()];
    let backend = Backend::new()
        .with_model(Arc::clone(&model) as Arc<dyn Model>)
        .with_registry(ToolRegistry::linked());
    let r = backend
        .execute(
            &RunControl::new(),
            &agent,
            &RunSpec::new("go", &bundle).input(src.join("a.txt")),
        )
        .await
        .unwrap();
    assert_eq!(r.status(), RunStatus::Finished, "{:?}", r.error());
    assert_eq!(r.output(), "done");
    // Every wait, the first one and those after the run had used /input and /output.
    assert_eq!(*model.seen.lock().unwrap(), vec![0, 0, 0, 0]);
    let results: Vec<(bool, String)> = read_events(&bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::ToolCalled)
        .map(|e| {
            (
                e.payload["ok"] == true,
                e.payload["result"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|(ok, _)| *ok), "{results:?}");
    assert!(results[0].1.contains("alpha"), "{}", results[0].1);
    assert!(results[2].1.contains("beta"), "{}", results[2].1);
    assert_eq!(std::fs::read(bundle.join("output/b.txt")).unwrap(), b"beta");
    let report = verify(&bundle);
    assert!(
        report.ok && report.complete,
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
}
