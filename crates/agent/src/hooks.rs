//! Tool hooks: code that runs around every tool call.
//!
//! Order for each call: `CallBegin` is emitted, then the `before` hooks run in order, then
//! the tool (or not, if a hook denied or replaced it), then the `after` hooks, then the
//! `ToolResult` event. Exactly one `tool_called` evidence event is written either way.

use std::sync::Arc;

use async_trait::async_trait;
use provrun_tools::{ToolCategory, ToolOutput};
use serde_json::Value;

use crate::control::{Permit, RunControl};

/// What a hook sees of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallInfo {
    /// The call id as the model sent it (models reuse ids, and some send none).
    pub call_id: String,
    /// The call's id in this run, unique whatever the model sent (`STEP.N`: the `N`th
    /// call of the response to model request `STEP`), as `RunEvent`s carry it;
    /// [`WaitForPermit`] takes a permit given by either id.
    pub run_call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model sent them.
    pub arguments: String,
    /// Whether the tool is marked destructive.
    pub destructive: bool,
    /// The tool's category (`read`, `write`, `execute`, ...), for a policy written in
    /// code.
    pub category: ToolCategory,
    /// The arguments parsed: a JSON object (`{}` for none), or the raw text as a JSON
    /// string when it is not JSON. After a hook rewrote them, the later hooks see the
    /// rewritten ones here and in `arguments`.
    pub parsed_arguments: Value,
    /// The tool's metadata as its schema root states it (`x-destructive`, `x-category`,
    /// `x-confirm`, `x-summary`, … — every `x-*` key of the tool's argument schema).
    pub metadata: serde_json::Map<String, Value>,
}

/// A `before` hook's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// Go on (to the next hook, then the tool).
    Allow,
    /// Skip the tool; the model sees a failed result with this message.
    Deny(String),
    /// Skip the tool; the model sees a successful result with this content.
    Replace(String),
    /// Run the tool with these arguments instead of the model's. `tool_called` records
    /// both, and `by` as who rewrote them; replay runs the tool with the rewritten ones.
    /// Later hooks see the rewritten arguments and may rewrite, deny or replace again.
    Rewrite {
        /// The arguments to run the tool with (a JSON object).
        arguments: Value,
        /// Who rewrote them (a hook's name), recorded as `rewritten_by`.
        by: String,
    },
}

impl HookDecision {
    /// [`HookDecision::Rewrite`]: run the tool with `arguments`, recorded as rewritten by
    /// `by`.
    pub fn rewrite(by: impl Into<String>, arguments: Value) -> Self {
        HookDecision::Rewrite {
            arguments,
            by: by.into(),
        }
    }
}

/// What the `before` hooks decided about a call, with any rewrite of its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BeforeOutcome {
    /// `Allow`, `Deny` or `Replace` (never `Rewrite`: that is folded into `rewritten`).
    pub decision: HookDecision,
    /// The arguments the last rewrite gave and who gave them, if any hook rewrote them.
    pub rewritten: Option<(Value, String)>,
}

/// Runs before a tool call and may stop or replace it.
#[async_trait]
pub trait BeforeToolHook: Send + Sync {
    /// Decide about this call. To wait for a human, await
    /// [`RunControl::wait_permit`] here.
    async fn before(&self, call: &ToolCallInfo, control: &RunControl) -> HookDecision;
}

/// Runs after a tool call (or its replacement) and may rewrite the output.
#[async_trait]
pub trait AfterToolHook: Send + Sync {
    /// Return the output the model should see.
    async fn after(&self, call: &ToolCallInfo, output: ToolOutput) -> ToolOutput;
}

/// The hooks of a backend. Empty by default: then no hook code runs at all.
#[derive(Clone, Default)]
pub struct ToolHooks {
    /// Run before each call, in order; the first that does not allow wins.
    pub before: Vec<Arc<dyn BeforeToolHook>>,
    /// Run after each call, in order, each on the previous one's output.
    pub after: Vec<Arc<dyn AfterToolHook>>,
}

impl std::fmt::Debug for ToolHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHooks")
            .field("before", &self.before.len())
            .field("after", &self.after.len())
            .finish()
    }
}

impl ToolHooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a `before` hook.
    pub fn before(mut self, hook: impl BeforeToolHook + 'static) -> Self {
        self.before.push(Arc::new(hook));
        self
    }

    /// Add an `after` hook.
    pub fn after(mut self, hook: impl AfterToolHook + 'static) -> Self {
        self.after.push(Arc::new(hook));
        self
    }

    pub(crate) async fn run_before(
        &self,
        call: &ToolCallInfo,
        control: &RunControl,
    ) -> BeforeOutcome {
        let mut seen = call.clone();
        let mut rewritten = None;
        for hook in &self.before {
            match hook.before(&seen, control).await {
                HookDecision::Allow => {}
                HookDecision::Rewrite { arguments, by } => {
                    seen.arguments = arguments.to_string();
                    seen.parsed_arguments = arguments.clone();
                    rewritten = Some((arguments, by));
                }
                other => {
                    return BeforeOutcome {
                        decision: other,
                        rewritten,
                    };
                }
            }
        }
        BeforeOutcome {
            decision: HookDecision::Allow,
            rewritten,
        }
    }

    pub(crate) async fn run_after(
        &self,
        call: &ToolCallInfo,
        mut output: ToolOutput,
    ) -> ToolOutput {
        for hook in &self.after {
            output = hook.after(call, output).await;
        }
        output
    }
}

/// A ready-made `before` hook: calls of the named tools (or of every destructive tool,
/// when `tools` is empty) wait for [`RunControl::permit`] / [`RunControl::deny`] in the
/// same process. For approval across processes, use the agent spec's `approve` policy.
///
/// A call it holds is recorded as waiting (`tool_called` with `deferred: true` and
/// `waits_for: "permit"`) when the wait begins, and [`crate::RunEvent::Deferred`] is sent,
/// so a run killed while it waits leaves a log that ends with the waiting call. Any hook
/// that awaits [`RunControl::wait_permit`] gets the same.
#[derive(Debug, Clone, Default)]
pub struct WaitForPermit {
    /// The tools that need a permit; empty means every destructive tool.
    pub tools: Vec<String>,
}

#[async_trait]
impl BeforeToolHook for WaitForPermit {
    async fn before(&self, call: &ToolCallInfo, control: &RunControl) -> HookDecision {
        let gated = if self.tools.is_empty() {
            call.destructive
        } else {
            self.tools.contains(&call.name)
        };
        if !gated {
            return HookDecision::Allow;
        }
        // By the run id, or by the model's id (which models may reuse).
        match control
            .wait_permit_for(&[&call.run_call_id, &call.call_id])
            .await
        {
            Permit::Granted => HookDecision::Allow,
            Permit::Denied(message) => HookDecision::Deny(message),
            Permit::Cancelled => HookDecision::Deny("the run was cancelled".to_string()),
        }
    }
}
