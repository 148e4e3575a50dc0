//! [`model_from_spec`]: a model from the `model` string of an agent spec.

use std::sync::Arc;

use crate::Model;
use crate::error::ModelError;
use crate::offline::script::ScriptModel;
use crate::offline::test_model::TestModel;
#[cfg(feature = "http")]
use crate::{AnthropicModel, OpenAiModel, OpenAiResponsesModel};

/// Builds a model from an agent spec's `model` string: `test`, `script:PATH`,
/// `openai:MODEL_NAME`, `anthropic:MODEL_NAME` or `openai-responses:MODEL_NAME`
/// (configured from the environment, see [`OpenAiConfig::from_env`](crate::OpenAiConfig::from_env),
/// [`AnthropicConfig::from_env`](crate::AnthropicConfig::from_env) and [`OpenAiResponsesConfig::from_env`](crate::OpenAiResponsesConfig::from_env)).
///
/// `replay:BUNDLE` is refused here: reading a bundle is not this crate's business, so the
/// caller extracts the recorded responses and builds a [`ReplayModel`](crate::ReplayModel) itself.
///
/// # Errors
///
/// [`ModelError::Config`] for an unknown or `replay:` spec, a live backend when the `http`
/// feature is off, or a live backend's configuration error (a missing key for a public
/// API, a bad base URL); [`ModelError::InvalidScript`] for a `script:` file that cannot be
/// read or is not a valid script.
pub fn model_from_spec(spec: &str) -> Result<Arc<dyn Model>, ModelError> {
    let spec = spec.trim();
    if spec == "test" {
        return Ok(Arc::new(TestModel::new()));
    }
    match spec.split_once(':') {
        Some(("script", path)) if !path.is_empty() => Ok(Arc::new(ScriptModel::from_path(path)?)),
        #[cfg(feature = "http")]
        Some(("openai", name)) if !name.is_empty() => Ok(Arc::new(OpenAiModel::from_env(name)?)),
        #[cfg(feature = "http")]
        Some(("anthropic", name)) if !name.is_empty() => {
            Ok(Arc::new(AnthropicModel::from_env(name)?))
        }
        #[cfg(feature = "http")]
        Some(("openai-responses", name)) if !name.is_empty() => {
            Ok(Arc::new(OpenAiResponsesModel::from_env(name)?))
        }
        #[cfg(not(feature = "http"))]
        Some((provider @ ("openai" | "anthropic" | "openai-responses"), name))
            if !name.is_empty() =>
        {
            Err(ModelError::Config(format!(
                "model {spec:?} needs the live {provider} backend, which this build leaves out: \
                 enable the `http` feature of provrun-model (the `openai` feature of \
                 provrun-agent or the provrun facade)"
            )))
        }
        Some(("replay", _)) => Err(ModelError::Config(
            "a replay model is built from a bundle's recorded responses (ReplayModel::new)".into(),
        )),
        _ => Err(ModelError::Config(format!(
            "unknown model {spec:?}: expected test, script:PATH, replay:BUNDLE, openai:MODEL_NAME, anthropic:MODEL_NAME or openai-responses:MODEL_NAME"
        ))),
    }
}
