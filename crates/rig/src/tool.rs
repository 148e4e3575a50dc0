//! [`EvidenceTool`]: any rig tool, its calls recorded.

use std::future::Future;
use std::time::{Duration, Instant};

use provrun_capture::ToolCallRecord;
use rig_core::tool::{ToolCallExtensions, ToolDyn, ToolError, ToolExecutionResult, ToolOutcome};
use rig_core::wasm_compat::WasmBoxedFuture;
use serde_json::Value;

use crate::error::RigError;
use crate::evidence::RigEvidence;
use provrun_sandbox::Sandbox;

/// A rig tool whose every call is recorded as one `tool_called` event: the arguments (as
/// JSON, or the raw text when the model sent something that does not parse), the text the
/// model gets back, whether the call succeeded, and how long it took. The call id is the
/// one the model gave when a wrapped model saw the request for it, else `rig-call-N`.
///
/// It is a `ToolDyn`, so it goes wherever rig takes tools
/// (`AgentBuilder::tool`, `AgentBuilder::tools`, a `ToolSet`).
pub struct EvidenceTool {
    inner: Box<dyn ToolDyn>,
    evidence: RigEvidence,
}

impl std::fmt::Debug for EvidenceTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvidenceTool")
            .field("name", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl EvidenceTool {
    /// Wrap `inner`, recording into `evidence` (see [`RigEvidence::tool`]).
    pub fn new(inner: Box<dyn ToolDyn>, evidence: RigEvidence) -> Self {
        EvidenceTool { inner, evidence }
    }

    async fn recorded<F>(&self, args: String, run: F) -> Result<(String, bool), ToolError>
    where
        F: Future<Output = Result<(String, bool), ToolError>>,
    {
        let name = self.inner.name();
        let arguments =
            serde_json::from_str::<Value>(&args).unwrap_or_else(|_| Value::String(args.clone()));
        let call_id = self.evidence.call_id(&name, &arguments);
        let started = Instant::now();
        let outcome = run.await;
        let duration: Duration = started.elapsed();
        let record = ToolCallRecord::new(name, call_id, arguments)
            .took(duration)
            .mode("in_process");
        let record = match &outcome {
            Ok((text, true)) => record.succeeded(text.as_str()),
            Ok((text, false)) => record.failed(text.as_str()),
            Err(e) => record.failed(e.to_string()),
        };
        if let Err(e) = self.evidence.record_tool(record).await {
            tracing::error!(error = %e, "provrun-rig: a tool call could not be recorded");
            return Err(ToolError::ToolCallError(
                format!("provrun-rig: evidence could not be recorded: {e}").into(),
            ));
        }
        outcome
    }
}

impl ToolDyn for EvidenceTool {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn description(&self) -> String {
        self.inner.description()
    }

    fn parameters(&self) -> Value {
        self.inner.parameters()
    }

    fn call<'a>(&'a self, args: String) -> WasmBoxedFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let run = self.inner.call(args.clone());
            self.recorded(args, async move { run.await.map(|text| (text, true)) })
                .await
                .map(|(text, _)| text)
        })
    }

    fn call_with_extensions<'a>(
        &'a self,
        args: String,
        extensions: &'a ToolCallExtensions,
    ) -> WasmBoxedFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let run = self.inner.call_with_extensions(args.clone(), extensions);
            self.recorded(args, async move { run.await.map(|text| (text, true)) })
                .await
                .map(|(text, _)| text)
        })
    }

    fn call_structured<'a>(
        &'a self,
        args: String,
        extensions: &'a ToolCallExtensions,
    ) -> WasmBoxedFuture<'a, ToolExecutionResult> {
        Box::pin(async move {
            let mut result = None;
            let sent = args.clone();
            let run = async {
                let r = self.inner.call_structured(sent, extensions).await;
                let ok = matches!(r.outcome(), ToolOutcome::Success);
                let text = r.model_output().to_string();
                result = Some(r);
                Ok((text, ok))
            };
            match self.recorded(args, run).await {
                Ok(_) => match result {
                    Some(r) => r,
                    None => ToolExecutionResult::failed(
                        "provrun-rig: the tool gave no result",
                        rig_core::tool::ToolFailure::other("no result"),
                    ),
                },
                Err(e) => ToolExecutionResult::failed(
                    e.to_string(),
                    rig_core::tool::ToolFailure::other(e.to_string()),
                ),
            }
        })
    }
}

/// The evidence's door to this wrapper.
impl RigEvidence {
    /// Wrap a rig tool: every call is recorded as one `tool_called` event (arguments,
    /// result, ok, duration).
    pub fn tool<T: ToolDyn + 'static>(&self, tool: T) -> EvidenceTool {
        EvidenceTool::new(Box::new(tool), self.clone())
    }

    /// Wrap already boxed rig tools (what `AgentBuilder::tools` takes).
    pub fn tools(&self, tools: Vec<Box<dyn ToolDyn>>) -> Vec<Box<dyn ToolDyn>> {
        tools
            .into_iter()
            .map(|t| Box::new(EvidenceTool::new(t, self.clone())) as Box<dyn ToolDyn>)
            .collect()
    }

    /// Build a tool on a fresh [`Sandbox`] over the bundle's `input/` (read-only) and
    /// `output/`, and wrap it: the files it writes through the sandbox land in the bundle's
    /// `output/` and are recorded at [`RigEvidence::finish`]; paths that leave it (`..`,
    /// links, absolute host paths) are refused by the sandbox. Sandbox operations block on
    /// file I/O: a tool on a busy runtime calls them through `spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`RigError::Capture`] when the sandbox over the bundle's folders cannot be opened.
    pub fn sandboxed<T, F>(&self, make: F) -> Result<EvidenceTool, RigError>
    where
        T: ToolDyn + 'static,
        F: FnOnce(Sandbox) -> T,
    {
        let sandbox = self.capture().sandbox()?;
        Ok(self.tool(make(sandbox)))
    }
}
