//! `Backend::with_model_limit`: many runs sharing one semaphore never have more model
//! requests in flight than it has permits, and every run still finishes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use provrun_agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun_model::{Model, ModelError, ModelRequest, ModelResponse, ScriptModel, StreamDelta};
use provrun_tools::ToolRegistry;
use serde_json::json;

/// Answers from a script after a pause, counting the requests in flight and the most seen.
struct Counting {
    inner: ScriptModel,
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Counting {
    async fn answer(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        self.inner.request(request).await
    }
}

#[async_trait]
impl Model for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.answer(request).await
    }
    async fn request_stream(
        &self,
        request: &ModelRequest,
        _on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.answer(request).await
    }
}

async fn most_in_flight(limit: Option<usize>) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(Counting {
        inner: ScriptModel::from_value(&json!([
            {"tool_calls": [{"id": "l", "name": "list_dir", "arguments": {"path": "/input"}}]},
            {"text": "done"}
        ]))
        .unwrap(),
        now: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
    });
    let mut backend = Backend::new()
        .with_model(Arc::clone(&model) as Arc<dyn Model>)
        .with_registry(ToolRegistry::linked());
    if let Some(n) = limit {
        backend = backend.with_model_limit(Arc::new(tokio::sync::Semaphore::new(n)));
    }
    let mut agent = AgentSpec::new("limited", "test");
    agent.tools = vec!["list_dir".into()];
    let runs = (0..12).map(|i| {
        let backend = backend.clone();
        let agent = agent.clone();
        let bundle = dir.path().join(format!("b{i}"));
        tokio::spawn(async move {
            backend
                .execute(&RunControl::new(), &agent, &RunSpec::new("go", bundle))
                .await
                .unwrap()
        })
    });
    for run in runs.collect::<Vec<_>>() {
        let r = run.await.unwrap();
        assert_eq!(r.status(), RunStatus::Finished, "{:?}", r.error());
    }
    model.most.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_sharing_a_limit_keep_at_most_that_many_requests_in_flight() {
    assert_eq!(most_in_flight(Some(1)).await, 1);
    let three = most_in_flight(Some(3)).await;
    assert!((2..=3).contains(&three), "{three}");
    // Without the limit the same runs overlap more: the bound above is the limit's doing.
    assert!(most_in_flight(None).await > 3);
}
