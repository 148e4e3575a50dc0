//! A downstream crate's own `Model`, named in `agent.toml`: `AgentSpec::load` refuses a
//! model name it does not know, `Backend::load_agent` with `Backend::with_model` takes it,
//! and the run answers from the given model, its bundle verifying with the spec's name.

use std::sync::Arc;

use async_trait::async_trait;
use provrun_agent::{AgentError, AgentSpec, Backend, RunControl, RunSpec, RunStatus};
use provrun_model::{Model, ModelError, ModelRequest, ModelResponse, ScriptModel, StreamDelta};
use serde_json::json;

/// A model of the downstream crate's own (answers from a script).
struct House(ScriptModel);

#[async_trait]
impl Model for House {
    fn name(&self) -> &str {
        "acme:house-model"
    }
    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.0.request(request).await
    }
    async fn request_stream(
        &self,
        request: &ModelRequest,
        _on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.0.request(request).await
    }
}

#[tokio::test]
async fn a_custom_model_named_in_the_spec_runs_when_the_backend_supplies_it() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("agent.toml");
    std::fs::write(
        &spec,
        "name = \"house\"\nmodel = \"acme:house-model\"\nmax_steps = 3\n",
    )
    .unwrap();

    // Without a model of its own, the name is no model provrun knows.
    let refused = AgentSpec::load(&spec).unwrap_err();
    assert!(
        matches!(refused, AgentError::InvalidSpec { .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains("model"), "{refused}");
    let refused = Backend::new().load_agent(&spec).unwrap_err();
    assert!(
        matches!(refused, AgentError::InvalidSpec { .. }),
        "{refused}"
    );

    // Other checks still hold with a model supplied.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"house\"\nmodel = \"acme:x\"\nmax_steps = 0\n",
    )
    .unwrap();
    let model = Arc::new(House(
        ScriptModel::from_value(&json!([{"text": "from the house model"}])).unwrap(),
    ));
    let backend = Backend::new().with_model(model as Arc<dyn Model>);
    assert!(backend.load_agent(&bad).is_err());

    let agent = backend.load_agent(&spec).unwrap();
    assert_eq!(agent.model, "acme:house-model");
    let bundle = dir.path().join("bundle");
    let result = backend
        .execute(&RunControl::new(), &agent, &RunSpec::new("hello", &bundle))
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Finished, "{:?}", result.error());
    assert_eq!(result.output(), "from the house model");
    let report = provrun_evidence::verify(&bundle);
    assert!(report.ok && report.complete, "{report:?}");
}
