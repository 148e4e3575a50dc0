//! [`Run`]: one bundle opened from Python, recorded into through the capture API and
//! finished with its statement.

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::Duration;

use provrun_capture::{Body, Capture, ModelExchange, ToolCallRecord};
use provrun_evidence::{Durability, RunStatus};
use provrun_sandbox::Limits;
use pyo3::prelude::*;
use serde_json::{Value, json};

use crate::error::{BindingError, json, to_json};
use crate::sandbox::Sandbox;

/// An open bundle that a Python loop records into (`provrun._core.Run`). The
/// `provrun.RunContext` of the Python package holds one.
#[pyclass(module = "provrun._core", frozen)]
pub struct Run {
    /// `None` once finished.
    capture: Mutex<Option<Capture>>,
    run_id: String,
    bundle: String,
}

/// A parsed body, or raw bytes with their media type; neither when both are absent.
fn body<'a>(
    raw: Option<&'a [u8]>,
    media_type: Option<&'a str>,
    parsed: Option<&str>,
    what: &'static str,
) -> Result<Option<Body<'a>>, BindingError> {
    match (raw, parsed) {
        (Some(_), Some(_)) => Err(BindingError::Argument(format!(
            "the {what} is given both as bytes and parsed: give one"
        ))),
        (Some(bytes), None) => Ok(Some(Body::Raw {
            bytes: Cow::Borrowed(bytes),
            media_type: Cow::Borrowed(media_type.unwrap_or("application/octet-stream")),
        })),
        (None, Some(text)) => Ok(Some(Body::parsed(json(what, text)?))),
        (None, None) => Ok(None),
    }
}

fn status(text: &str) -> Result<RunStatus, BindingError> {
    serde_json::from_value(Value::String(text.to_owned())).map_err(|_| {
        BindingError::Argument(format!(
            "unknown run status `{text}`: it is one of finished, failed, cancelled, paused"
        ))
    })
}

fn durability(text: &str) -> Result<Durability, BindingError> {
    Ok(match text {
        "flush" => Durability::Flush,
        "per_event" => Durability::PerEvent,
        "per_step" => Durability::PerStep,
        "at_end" => Durability::AtEnd,
        "group_commit" => Durability::GroupCommit,
        other => {
            return Err(BindingError::Argument(format!(
                "unknown durability `{other}`: it is one of flush, per_event, per_step, at_end, group_commit"
            )));
        }
    })
}

impl Run {
    /// The open capture, or why there is none.
    fn capture(&self) -> Result<Capture, BindingError> {
        self.capture
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| BindingError::Finished(self.run_id.clone()))
    }
}

#[pymethods]
impl Run {
    /// Open the bundle `bundle` (it must not exist, or be an empty folder): write
    /// `run_started`, stage `inputs` into `input/`. `tools` are `(name, schema JSON)`
    /// pairs; `details` and `limits` are JSON text.
    #[staticmethod]
    #[pyo3(signature = (bundle, *, inputs, agent, model, tools, run_id=None, builder=None, details=None, limits=None, durability=None, spec=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        bundle: std::path::PathBuf,
        inputs: Vec<std::path::PathBuf>,
        agent: String,
        model: String,
        tools: Vec<(String, String)>,
        run_id: Option<String>,
        builder: Option<String>,
        details: Option<String>,
        limits: Option<String>,
        durability: Option<String>,
        spec: Option<Vec<u8>>,
    ) -> PyResult<Run> {
        let mut b = Capture::builder(&bundle)
            .agent(agent)
            .model(model)
            .builder(builder.unwrap_or_else(|| crate::BUILDER.to_owned()));
        for (name, schema) in &tools {
            b = b
                .tool(name, &json("a tool's schema", schema)?)
                .map_err(BindingError::from)?;
        }
        for input in inputs {
            b = b.input(input);
        }
        if let Some(id) = run_id {
            b = b.run_id(id);
        }
        if let Some(text) = details {
            b = b.details(json("details", &text)?);
        }
        if let Some(text) = limits {
            let limits: Limits =
                serde_json::from_value(json("limits", &text)?).map_err(|e| BindingError::Json {
                    what: "limits",
                    message: e.to_string(),
                })?;
            b = b.limits(limits);
        }
        if let Some(text) = durability {
            b = b.durability(self::durability(&text)?);
        }
        if let Some(bytes) = spec {
            b = b.spec_bytes(bytes);
        }
        let capture = py.detach(|| b.open()).map_err(BindingError::from)?;
        Ok(Run {
            run_id: capture.run_id().to_owned(),
            bundle: capture.bundle_dir().display().to_string(),
            capture: Mutex::new(Some(capture)),
        })
    }

    /// The run's id.
    #[getter]
    fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The bundle's folder.
    #[getter]
    fn bundle(&self) -> &str {
        &self.bundle
    }

    /// Whether `finish` was called.
    #[getter]
    fn finished(&self) -> bool {
        self.capture
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Record one model request (`model_called`). Each side is raw bytes (`request`,
    /// `response`, with their media types: recorded `observed` when both are) or the
    /// framework's parsed value as JSON text (`request_json`, `response_json`: `parsed`).
    /// `usage`, `attempts` and `http` are JSON text. Returns the event's seq.
    #[pyo3(signature = (*, model, stream, duration_ms, request=None, request_type=None, request_json=None, response=None, response_type=None, response_json=None, usage=None, finish_reason=None, error=None, attempts=None, http=None))]
    #[allow(clippy::too_many_arguments)]
    fn model_called(
        &self,
        py: Python<'_>,
        model: String,
        stream: bool,
        duration_ms: u64,
        request: Option<Vec<u8>>,
        request_type: Option<String>,
        request_json: Option<String>,
        response: Option<Vec<u8>>,
        response_type: Option<String>,
        response_json: Option<String>,
        usage: Option<String>,
        finish_reason: Option<String>,
        error: Option<String>,
        attempts: Option<String>,
        http: Option<String>,
    ) -> PyResult<u64> {
        let capture = self.capture()?;
        let attempts = match attempts {
            Some(text) => match json("attempts", &text)? {
                Value::Array(items) => items,
                _ => {
                    return Err(
                        BindingError::Argument("attempts must be a JSON array".into()).into(),
                    );
                }
            },
            None => Vec::new(),
        };
        let exchange = ModelExchange {
            model,
            stream,
            request: body(
                request.as_deref(),
                request_type.as_deref(),
                request_json.as_deref(),
                "request",
            )?,
            response: body(
                response.as_deref(),
                response_type.as_deref(),
                response_json.as_deref(),
                "response",
            )?,
            usage: usage
                .map(|t| json("usage", &t))
                .transpose()?
                .unwrap_or(Value::Null),
            finish_reason,
            duration_ms,
            error,
            attempts,
            http: http.map(|t| json("http", &t)).transpose()?,
            ..ModelExchange::default()
        };
        let seq = py
            .detach(|| pollster::block_on(capture.model_exchange(exchange)))
            .map_err(BindingError::from)?;
        Ok(seq)
    }

    /// Record one tool call (`tool_called`): completed, or `deferred` (waiting for approval
    /// or for the caller; complete it later with the same ids). `arguments` and `result`
    /// are JSON text. Returns the event's seq.
    #[pyo3(signature = (*, name, call_id, arguments, run_call_id=None, result="null", ok=false, duration_ms=0, mode=None, decided_by=None, deferred=false, output_tool=false, provider_run=false, parsed=false))]
    #[allow(clippy::too_many_arguments)]
    fn tool_called(
        &self,
        py: Python<'_>,
        name: String,
        call_id: String,
        arguments: &str,
        run_call_id: Option<String>,
        result: &str,
        ok: bool,
        duration_ms: u64,
        mode: Option<String>,
        decided_by: Option<String>,
        deferred: bool,
        output_tool: bool,
        provider_run: bool,
        parsed: bool,
    ) -> PyResult<u64> {
        let capture = self.capture()?;
        let mut call = ToolCallRecord::new(name, call_id, json("arguments", arguments)?);
        call.result = json("result", result)?;
        call.ok = ok;
        call.duration = Duration::from_millis(duration_ms);
        call.mode = mode;
        if decided_by.is_some() {
            call.decided_by = decided_by;
        }
        call.run_call_id = run_call_id;
        call.parsed = parsed;
        if output_tool {
            call = call.output_tool();
        }
        if provider_run {
            call = call.provider_run();
        }
        let seq = py
            .detach(|| {
                pollster::block_on(async {
                    if deferred {
                        capture.tool_call_deferred(call).await
                    } else {
                        capture.tool_call(call).await
                    }
                })
            })
            .map_err(BindingError::from)?;
        Ok(seq)
    }

    /// Record the whole message history once (`trace_imported`, always `parsed`): `data`
    /// in `format` (e.g. `pydantic-ai-messages/1`), holding `messages` messages.
    fn trace(&self, py: Python<'_>, format: &str, data: Vec<u8>, messages: u64) -> PyResult<u64> {
        let capture = self.capture()?;
        let seq = py
            .detach(|| pollster::block_on(capture.trace(format, &data, messages)))
            .map_err(BindingError::from)?;
        Ok(seq)
    }

    /// Append a `declared` event (a claim a tool makes; the only event a tool may add):
    /// `kind`, `data` as JSON text, and the tool it came from.
    #[pyo3(signature = (kind, data, source=None))]
    fn declare(
        &self,
        py: Python<'_>,
        kind: &str,
        data: &str,
        source: Option<String>,
    ) -> PyResult<u64> {
        let capture = self.capture()?;
        let data = json("data", data)?;
        let declarer = match source {
            Some(s) => capture.declarer(s),
            None => capture.recorder().declarer(),
        };
        let seq = py
            .detach(|| declarer.declare(kind, data))
            .map_err(BindingError::from)?;
        Ok(seq)
    }

    /// Write one output file under `output/` (a path relative to it); returns the bytes
    /// written.
    fn write_output(&self, py: Python<'_>, path: &str, data: Vec<u8>) -> PyResult<u64> {
        let capture = self.capture()?;
        Ok(py
            .detach(|| capture.write_output(path, &data))
            .map_err(BindingError::from)?)
    }

    /// A sandbox over the bundle's `input/` (read-only) and `output/`, with a fresh
    /// `/scratch` that lives as long as the sandbox.
    fn sandbox(&self) -> PyResult<Sandbox> {
        let capture = self.capture()?;
        Ok(Sandbox::new(capture.sandbox().map_err(BindingError::from)?))
    }

    /// Finish the run: `output_produced` for every file under `output/`, `run_finished`
    /// with `status` (`finished`, `failed`, `cancelled`, `paused`), `usage` (JSON text) and
    /// `error`, then `statement.json`. Returns the statement's facts as JSON text.
    #[pyo3(signature = (status, usage="null", error=None))]
    fn finish(
        &self,
        py: Python<'_>,
        status: &str,
        usage: &str,
        error: Option<String>,
    ) -> PyResult<String> {
        let status = self::status(status)?;
        let usage = json("usage", usage)?;
        let capture = self
            .capture
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| BindingError::Finished(self.run_id.clone()))?;
        let finished = py
            .detach(|| capture.finish(status, usage, error))
            .map_err(BindingError::from)?;
        let facts = &finished.facts;
        Ok(to_json(&json!({
            "statement": finished.statement_path,
            "status": facts.status,
            "event_count": facts.event_count,
            "head": facts.head,
            "events_sha256": facts.events_sha256,
            "outputs": facts.outputs,
            "inputs": facts.inputs,
        })))
    }
}
