//! [`ScriptModel`]: answers from a JSON script (the `script:PATH` format of docs/contract.md §6).

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{Reply, request_only, respond};
use crate::Model;
use crate::error::ModelError;
use crate::types::{Message, ModelRequest, ModelResponse, StreamDelta, ToolCall};
use crate::wire::RequestRenderer;

/// One scripted answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptStep {
    /// What to answer.
    pub reply: Reply,
    /// How long to wait before answering.
    pub delay: Duration,
}

/// An offline model that answers the n-th request with the n-th element of a script.
///
/// The script is a JSON array of objects with the fields `text` (a string), `tool_calls`
/// (an array of `{"id"?, "name", "arguments"?}`), `reasoning` (a string, optional: sent
/// as the response's `reasoning_content`) and `delay_ms` (optional); each element needs
/// `text` or `tool_calls`. `arguments` is a JSON object (sent serialised) or a string
/// (sent as is, so invalid JSON can be scripted); when absent it is `{}`. A missing `id`
/// becomes `call_<element>_<position>`; an `id` given is kept as written (reused or empty
/// ids stand for models that send them). Unknown fields are errors, so typos are caught.
/// A request past the end fails with [`ModelError::ScriptExhausted`].
///
/// "The n-th request" is counted from the request's history (the number of assistant
/// messages in it), so the model keeps no state: it can serve many runs at once, and a
/// run resumed from its history continues where it stopped.
#[derive(Debug)]
pub struct ScriptModel {
    name: String,
    steps: Vec<ScriptStep>,
    /// Keeps recent request bodies, so a run's next request appends to its last one.
    renderer: RequestRenderer,
}

fn invalid(source: &str, element: Option<usize>, field: Option<String>, msg: &str) -> ModelError {
    ModelError::InvalidScript {
        source_name: source.to_owned(),
        element,
        field,
        message: msg.to_owned(),
    }
}

impl ScriptModel {
    /// Loads a script file. The model is named `script:PATH`.
    ///
    /// # Errors
    ///
    /// [`ModelError::InvalidScript`] when the file cannot be read, is not JSON, or is not
    /// a valid script (the error names the step and field).
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, ModelError> {
        let path = path.as_ref();
        let source = path.display().to_string();
        let bytes = std::fs::read(path)
            .map_err(|e| invalid(&source, None, None, &format!("cannot read the file: {e}")))?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| invalid(&source, None, None, &format!("not valid JSON: {e}")))?;
        let mut model = Self::parse(&value, &source)?;
        model.name = format!("script:{source}");
        Ok(model)
    }

    /// Builds a script model from a JSON value. The model is named `script`.
    ///
    /// # Errors
    ///
    /// [`ModelError::InvalidScript`] when the value is not a valid script.
    pub fn from_value(value: &Value) -> Result<Self, ModelError> {
        Self::parse(value, "<value>")
    }

    /// The parsed steps.
    pub fn steps(&self) -> &[ScriptStep] {
        &self.steps
    }

    fn parse(value: &Value, source: &str) -> Result<Self, ModelError> {
        let items = value
            .as_array()
            .ok_or_else(|| invalid(source, None, None, "a script must be a JSON array"))?;
        let steps = items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_step(source, i, item))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ScriptModel {
            name: "script".into(),
            steps,
            renderer: RequestRenderer::default(),
        })
    }

    async fn answer(
        &self,
        request: &ModelRequest,
        on_delta: Option<&(dyn Fn(StreamDelta) + Send + Sync)>,
    ) -> Result<ModelResponse, ModelError> {
        // The position in the script is the number of answers already in the history, not a
        // counter: one script then serves many concurrent runs, and a run paused in one
        // process resumes in another at the right element.
        let n = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let Some(step) = self.steps.get(n) else {
            let body = self
                .renderer
                .render(&self.name, request, on_delta.is_some());
            return Err(ModelError::ScriptExhausted {
                request: n + 1,
                len: self.steps.len(),
                exchange: Box::new(request_only(body)),
            });
        };
        if !step.delay.is_zero() {
            tokio::time::sleep(step.delay).await;
        }
        respond(&self.name, &self.renderer, request, &step.reply, on_delta)
    }
}

fn parse_step(source: &str, i: usize, item: &Value) -> Result<ScriptStep, ModelError> {
    let err =
        |field: Option<&str>, msg: &str| invalid(source, Some(i), field.map(str::to_owned), msg);
    let obj = item
        .as_object()
        .ok_or_else(|| err(None, "each element must be a JSON object"))?;
    if let Some(k) = obj
        .keys()
        .find(|k| !["text", "reasoning", "tool_calls", "delay_ms"].contains(&k.as_str()))
    {
        return Err(err(
            Some(k),
            "unknown field (expected text, reasoning, tool_calls, delay_ms)",
        ));
    }
    let text = match obj.get("text") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(err(Some("text"), "must be a string")),
    };
    let reasoning = match obj.get("reasoning") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(err(Some("reasoning"), "must be a string")),
    };
    let mut tool_calls = Vec::new();
    match obj.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (j, c) in calls.iter().enumerate() {
                tool_calls.push(parse_call(source, i, j, c)?);
            }
        }
        Some(_) => return Err(err(Some("tool_calls"), "must be an array")),
    }
    let delay = match obj.get("delay_ms") {
        None | Some(Value::Null) => Duration::ZERO,
        Some(v) => Duration::from_millis(
            v.as_u64()
                .ok_or_else(|| err(Some("delay_ms"), "must be a non-negative integer"))?,
        ),
    };
    if text.is_none() && tool_calls.is_empty() {
        return Err(err(None, "needs `text` or a non-empty `tool_calls`"));
    }
    Ok(ScriptStep {
        reply: Reply {
            text,
            tool_calls,
            reasoning,
        },
        delay,
    })
}

fn parse_call(source: &str, i: usize, j: usize, c: &Value) -> Result<ToolCall, ModelError> {
    let err = |field: &str, msg: &str| {
        let f = if field.is_empty() {
            format!("tool_calls[{j}]")
        } else {
            format!("tool_calls[{j}].{field}")
        };
        invalid(source, Some(i), Some(f), msg)
    };
    let obj = c
        .as_object()
        .ok_or_else(|| err("", "each tool call must be a JSON object"))?;
    if let Some(k) = obj
        .keys()
        .find(|k| !["id", "name", "arguments"].contains(&k.as_str()))
    {
        return Err(err(k, "unknown field (expected id, name, arguments)"));
    }
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(err("name", "must be a non-empty string")),
    };
    let id = match obj.get("id") {
        None | Some(Value::Null) => format!("call_{i}_{j}"),
        // Kept as written, empty too: a script can stand for a model that reuses ids or
        // sends none (the runtime gives every call its own run id whatever it gets).
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(err("id", "must be a string")),
    };
    let arguments = match obj.get("arguments") {
        None => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => return Err(err("arguments", "must be a JSON object or a string")),
    };
    Ok(ToolCall {
        id,
        name,
        arguments,
    })
}

#[async_trait]
impl Model for ScriptModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.answer(request, None).await
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.answer(request, Some(on_delta)).await
    }
}
