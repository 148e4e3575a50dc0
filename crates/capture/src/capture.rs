//! [`Capture`]: one bundle for one run of a loop provrun does not drive.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use provrun_evidence::{
    BlobLayout, CreateOptions, Declarer, Durability, Finished, Recorder, RunEnd, RunStarted,
    RunStatus, ToolCalled, ToolInfo, TraceImported,
};
use provrun_sandbox::{Limits, Sandbox};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::CaptureError;
use crate::record::{ModelExchange, record_model_exchange, record_tool_call};

/// The `builder` a capture writes into `run_started` and the statement unless told
/// otherwise.
pub const CAPTURE_BUILDER: &str = concat!("provrun-capture/", env!("CARGO_PKG_VERSION"));

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Everything `run_started` says about a run, gathered before the bundle is opened.
#[derive(Debug, Clone)]
pub struct CaptureBuilder {
    bundle: PathBuf,
    run_id: Option<String>,
    builder: String,
    agent: String,
    model: String,
    tools: Vec<ToolInfo>,
    inputs: Vec<PathBuf>,
    limits: Limits,
    durability: Durability,
    layout: BlobLayout,
    spec: Option<Vec<u8>>,
    details: Value,
    started_at: Option<SystemTime>,
}

impl CaptureBuilder {
    /// The run's id (default: `run-` and a fresh UUID).
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }

    /// What ran the loop, e.g. `my-app/1.2` (default [`CAPTURE_BUILDER`]); copied into the
    /// statement.
    pub fn builder(mut self, builder: impl Into<String>) -> Self {
        self.builder = builder.into();
        self
    }

    /// The agent's name (default `agent`).
    pub fn agent(mut self, name: impl Into<String>) -> Self {
        self.agent = name.into();
        self
    }

    /// The model the loop talks to, e.g. `openai:gpt-4o-mini`.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Declare a tool offered to the model, with its JSON Schema for the parameters (its
    /// canonical JSON's digest goes into `run_started`).
    ///
    /// # Errors
    ///
    /// [`CaptureError::Unrecordable`] when `parameters` cannot be written as canonical JSON.
    pub fn tool(
        mut self,
        name: impl Into<String>,
        parameters: &Value,
    ) -> Result<Self, CaptureError> {
        let canonical = provrun_evidence::to_canonical_string(parameters).map_err(|e| {
            CaptureError::Unrecordable {
                what: "a tool's parameter schema".into(),
                message: e.to_string(),
            }
        })?;
        self.tools.push(ToolInfo {
            name: name.into(),
            schema_sha256: sha256_hex(canonical.as_bytes()),
        });
        Ok(self)
    }

    /// A file or folder to stage into the bundle's `input/` (copied, made read-only, and
    /// recorded as `input_staged`; the same rules as a native run's inputs).
    pub fn input(mut self, path: impl Into<PathBuf>) -> Self {
        self.inputs.push(path.into());
        self
    }

    /// The limits staging (and [`Capture::sandbox`]) apply (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How durable each event is before its call returns (default
    /// [`Durability::default`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The blob layout (default: the pack).
    pub fn blob_layout(mut self, layout: BlobLayout) -> Self {
        self.layout = layout;
        self
    }

    /// The bytes of whatever configures the agent (a spec file, a prompt template): their
    /// SHA-256 becomes `agent_spec_digest`. Without it, the digest is that of the
    /// canonical JSON of `{agent, model, tools}`.
    pub fn spec_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.spec = Some(bytes.into());
        self
    }

    /// Anything else `run_started` should carry under `details` (JSON).
    pub fn details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// When the run started, for a run recorded after the fact (an imported trace):
    /// `run_started` and what follows are stamped with this time instead of the clock,
    /// until [`Capture::set_clock`] says otherwise.
    pub fn started_at(mut self, at: SystemTime) -> Self {
        self.started_at = Some(at);
        self
    }

    /// Create the bundle (it must not exist, or be an empty folder), write `run_started`,
    /// stage the inputs and record them. When staging fails, the half-made bundle is
    /// removed and nothing is left behind.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Evidence`] when the bundle cannot be created (it exists and is not empty,
    /// or its folder or log cannot be written); [`CaptureError::Input`] when an input cannot be
    /// staged, and [`CaptureError::Evidence`] when the staged inputs cannot be recorded (in both
    /// cases the half-made bundle is removed).
    pub fn open(self) -> Result<Capture, CaptureError> {
        let run_id = self
            .run_id
            .clone()
            .unwrap_or_else(|| format!("run-{}", uuid::Uuid::new_v4()));
        let tools_json: Vec<Value> = self
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "schema_sha256": t.schema_sha256}))
            .collect();
        let digest = match &self.spec {
            Some(bytes) => sha256_hex(bytes),
            None => {
                let described = json!({
                    "agent": self.agent,
                    "model": self.model,
                    "tools": tools_json,
                });
                sha256_hex(provrun_evidence::to_canonical_string(&described)?.as_bytes())
            }
        };
        let mut details = self.details.clone();
        if details.is_null() {
            details = json!({});
        }
        if let Value::Object(map) = &mut details {
            map.insert("capture".into(), json!({"loop": "foreign"}));
        }
        let started = RunStarted {
            builder: self.builder.clone(),
            agent_spec_digest: digest,
            agent: self.agent.clone(),
            model: self.model.clone(),
            tools: self.tools.clone(),
            limits: serde_json::to_value(&self.limits).unwrap_or(Value::Null),
            details,
        };
        let existed = self.bundle.exists();
        let mut options = CreateOptions::default().layout(self.layout);
        options.clock = self.started_at;
        let recorder =
            Recorder::create_with(&self.bundle, &run_id, self.durability, &started, &options)?;
        let staged =
            provrun_sandbox::stage_inputs(&recorder.input_dir(), &self.inputs, &self.limits)
                .map_err(|e| CaptureError::Input {
                    path: self.inputs.first().cloned().unwrap_or_default(),
                    message: e.to_string(),
                })
                .and_then(|_| recorder.record_inputs().map_err(CaptureError::from));
        if let Err(e) = staged {
            drop(recorder);
            remove_bundle(&self.bundle, existed);
            return Err(e);
        }
        tracing::debug!(bundle = %self.bundle.display(), run_id, "capture opened");
        Ok(Capture {
            recorder,
            model: self.model,
            limits: self.limits,
        })
    }
}

/// The `tool_called` payload of a completed call.
fn tool_called(call: ToolCallRecord) -> ToolCalled {
    ToolCalled {
        name: call.name,
        call_id: call.call_id,
        run_call_id: call.run_call_id,
        arguments: call.arguments,
        result: call.result,
        ok: call.ok,
        duration_ms: millis(call.duration),
        mode: call.mode,
        decided_by: call.decided_by,
        output_tool: call.output_tool,
        provider_run: call.provider_run,
        ..ToolCalled::default()
    }
}

/// Remove a bundle whose staging failed (staged files are read-only: make them writable
/// first). An empty folder the caller gave is kept, emptied.
fn remove_bundle(path: &Path, existed: bool) {
    fn writable(p: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let is_dir = std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
        if is_dir {
            let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700));
            if let Ok(entries) = std::fs::read_dir(p) {
                for e in entries.flatten() {
                    writable(&e.path());
                }
            }
        }
    }
    writable(path);
    if existed {
        if let Ok(entries) = std::fs::read_dir(path) {
            for entry in entries.flatten() {
                let p = entry.path();
                let _ = if p.is_dir() && !p.is_symlink() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
    } else {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// One tool call as a foreign loop saw it, for [`Capture::tool_call`].
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    /// The tool's name.
    pub name: String,
    /// The call's id (the model's, or one the loop made up).
    pub call_id: String,
    /// The arguments (a JSON object, or the raw text as a JSON string when it did not
    /// parse).
    pub arguments: Value,
    /// What the model was given back.
    pub result: Value,
    /// Whether the tool succeeded.
    pub ok: bool,
    /// Wall time of the call.
    pub duration: Duration,
    /// The tool's mode, if known (e.g. `in_process`).
    pub mode: Option<String>,
    /// What decided the result (`tool`, `caller`, `runtime`, ...; see the evidence
    /// format). Default `tool`.
    pub decided_by: Option<String>,
    /// Read from another party's account (an imported trace) rather than seen: recorded
    /// with confidence `parsed`.
    pub parsed: bool,
    /// The call's id in the run (`STEP.N`, `STEP.pN`; see the evidence format), when the
    /// loop counts its requests; a deferred call and its completion share it.
    pub run_call_id: Option<String>,
    /// The call is the answer given through an output tool.
    pub output_tool: bool,
    /// The provider ran the tool itself (always recorded `parsed`).
    pub provider_run: bool,
}

impl ToolCallRecord {
    /// A call of `name` with id `call_id` and `arguments`, not yet given a result.
    pub fn new(name: impl Into<String>, call_id: impl Into<String>, arguments: Value) -> Self {
        ToolCallRecord {
            name: name.into(),
            call_id: call_id.into(),
            arguments,
            result: Value::Null,
            ok: false,
            duration: Duration::ZERO,
            mode: None,
            decided_by: Some("tool".into()),
            parsed: false,
            run_call_id: None,
            output_tool: false,
            provider_run: false,
        }
    }

    /// The call's id in the run (`STEP.N`: the `N`th call of the response to model request
    /// `STEP`, `STEP.pN` for the `N`th tool the provider ran itself).
    pub fn run_call_id(mut self, id: impl Into<String>) -> Self {
        self.run_call_id = Some(id.into());
        self
    }

    /// Mark the call as the answer given through an output tool (`output_tool`).
    pub fn output_tool(mut self) -> Self {
        self.output_tool = true;
        self
    }

    /// Mark the call as one the provider ran itself (`provider_run`, confidence `parsed`,
    /// decided by `provider`).
    pub fn provider_run(mut self) -> Self {
        self.provider_run = true;
        self.parsed = true;
        self.decided_by = Some("provider".into());
        self
    }

    /// The call succeeded with `result`.
    pub fn succeeded(mut self, result: impl Into<Value>) -> Self {
        self.result = result.into();
        self.ok = true;
        self
    }

    /// The call failed; `result` is what the model was told.
    pub fn failed(mut self, result: impl Into<Value>) -> Self {
        self.result = result.into();
        self.ok = false;
        self
    }

    /// How long the call took.
    pub fn took(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// The tool's mode.
    pub fn mode(mut self, mode: impl Into<String>) -> Self {
        self.mode = Some(mode.into());
        self
    }

    /// What decided the result.
    pub fn decided_by(mut self, by: impl Into<String>) -> Self {
        self.decided_by = Some(by.into());
        self
    }

    /// Mark the call as read from another party's account (confidence `parsed`).
    pub fn parsed(mut self) -> Self {
        self.parsed = true;
        self
    }
}

/// An open bundle that a foreign loop records into: model exchanges, tool calls, the
/// trace, and at the end its outputs. Cheap to clone; clones share one log.
///
/// Dropping it without [`Capture::finish`] leaves a bundle that verifies as incomplete.
#[derive(Debug, Clone)]
pub struct Capture {
    recorder: Recorder,
    model: String,
    limits: Limits,
}

impl Capture {
    /// Start describing a run whose bundle will be `bundle`.
    pub fn builder(bundle: impl Into<PathBuf>) -> CaptureBuilder {
        CaptureBuilder {
            bundle: bundle.into(),
            run_id: None,
            builder: CAPTURE_BUILDER.to_string(),
            agent: "agent".to_string(),
            model: String::new(),
            tools: Vec::new(),
            inputs: Vec::new(),
            limits: Limits::default(),
            durability: Durability::default(),
            layout: BlobLayout::default(),
            spec: None,
            details: Value::Null,
            started_at: None,
        }
    }

    /// The recorder underneath, for events this API does not cover.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Stamp the events recorded from now on with `at` instead of the clock (`None`: the
    /// clock again), for a run recorded after the fact whose record says when each step
    /// happened ([`Recorder::set_clock`]).
    pub fn set_clock(&self, at: Option<SystemTime>) {
        self.recorder.set_clock(at);
    }

    /// The bundle's folder.
    pub fn bundle_dir(&self) -> &Path {
        self.recorder.bundle_dir()
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        self.recorder.run_id()
    }

    /// The model declared at open.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// A handle for tools to add `declared` claims (and nothing else) under `source`.
    pub fn declarer(&self, source: impl Into<String>) -> Declarer {
        self.recorder.declarer_for(source)
    }

    /// A [`Sandbox`] over the bundle's `input/` (read-only) and `output/`, with a fresh
    /// `/scratch`, for tools whose files should land in the bundle.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Sandbox`] when the sandbox cannot be opened over the bundle's folders or
    /// its scratch folder cannot be made.
    pub fn sandbox(&self) -> Result<Sandbox, CaptureError> {
        Ok(Sandbox::with_temp_scratch(
            self.recorder.input_dir(),
            self.recorder.output_dir(),
            self.limits.clone(),
        )?)
    }

    /// Record one model exchange (`model_called`). An empty `exchange.model` is filled
    /// with the model declared at open. Raw bodies are recorded `observed`; a parsed one
    /// makes the event `parsed`.
    ///
    /// # Errors
    ///
    /// As [`record_model_exchange`](crate::record_model_exchange).
    pub async fn model_exchange(&self, exchange: ModelExchange<'_>) -> Result<u64, CaptureError> {
        let mut exchange = exchange;
        if exchange.model.is_empty() {
            exchange.model = self.model.clone();
        }
        record_model_exchange(&self.recorder, &exchange).await
    }

    /// Record one completed tool call (`tool_called`).
    ///
    /// # Errors
    ///
    /// As [`record_tool_call`](crate::record_tool_call).
    pub async fn tool_call(&self, call: ToolCallRecord) -> Result<u64, CaptureError> {
        let parsed = call.parsed;
        record_tool_call(&self.recorder, tool_called(call), parsed).await
    }

    /// Record that `call` waits (for approval, or for the caller to run it): a deferred
    /// `tool_called` with its name, ids, arguments and mode (its result, `ok` and
    /// `decided_by` are not recorded yet), to be followed by [`Capture::tool_call`] with
    /// the same ids once it completes.
    ///
    /// # Errors
    ///
    /// As [`record_tool_call`](crate::record_tool_call).
    pub async fn tool_call_deferred(&self, call: ToolCallRecord) -> Result<u64, CaptureError> {
        let mut event = tool_called(call);
        event.deferred = true;
        event.result = Value::Null;
        event.ok = false;
        event.duration_ms = 0;
        event.decided_by = None;
        record_tool_call(&self.recorder, event, false).await
    }

    /// Record that a call waits (for approval, or for the caller to run it): a deferred
    /// `tool_called`, to be followed by [`Capture::tool_call`] with the same id once it
    /// completes (`verify` fails a run that finishes with a call still waiting).
    ///
    /// # Errors
    ///
    /// As [`record_tool_call`](crate::record_tool_call).
    pub async fn tool_deferred(
        &self,
        name: impl Into<String>,
        call_id: impl Into<String>,
        arguments: Value,
    ) -> Result<u64, CaptureError> {
        self.tool_call_deferred(ToolCallRecord::new(name, call_id, arguments))
            .await
    }

    /// Record the whole message history once (`trace_imported`, always `parsed`):
    /// `bytes` in the framework's own `format` (e.g. `pydantic-ai-messages/1`), holding
    /// `messages` messages.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Evidence`] when the trace blob or the event cannot be written.
    pub async fn trace(
        &self,
        format: &str,
        bytes: &[u8],
        messages: u64,
    ) -> Result<u64, CaptureError> {
        let trace = self
            .recorder
            .put_blob_for_next_event(bytes, "application/json")
            .await?;
        Ok(self
            .recorder
            .record_async(&TraceImported {
                trace,
                format: format.to_string(),
                messages,
                source: None,
            })
            .await?)
    }

    /// Write one output file: `path` is relative to `output/` (`report.txt`), or the
    /// sandbox path of a file under `/output` (`/output/report.txt`), `/`-separated; the
    /// sandbox refuses `..` and links. Returns the bytes written.
    ///
    /// # Errors
    ///
    /// [`CaptureError::NotAnOutput`] for an absolute path outside `/output` (`/input/x`,
    /// `/scratch/x`, `/report.txt`); [`CaptureError::Sandbox`] when the sandbox cannot be
    /// opened, or refuses the path or the write (a bad path, a link, a limit); see
    /// [`Capture::sandbox`].
    pub fn write_output(&self, path: &str, bytes: &[u8]) -> Result<u64, CaptureError> {
        let virtual_path = if !path.starts_with('/') {
            format!("/output/{path}")
        } else if path.starts_with("/output/") {
            path.to_string()
        } else {
            return Err(CaptureError::NotAnOutput {
                path: path.to_string(),
            });
        };
        let sandbox = self.sandbox()?;
        let out = sandbox.write_file(&virtual_path, bytes)?;
        Ok(out.bytes)
    }

    /// Finish the run: record every file under `output/` and `run_finished` with `status`,
    /// and write `statement.json`. `usage` is any JSON (token totals...), `error` the
    /// message of a failed run.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Evidence`] when the outputs, `run_finished` or `statement.json` cannot be
    /// recorded or written.
    pub fn finish(
        self,
        status: RunStatus,
        usage: Value,
        error: Option<String>,
    ) -> Result<Finished, CaptureError> {
        Ok(self.recorder.finish(RunEnd {
            status,
            usage,
            error,
        })?)
    }
}
