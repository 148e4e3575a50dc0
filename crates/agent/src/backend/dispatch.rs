//! Dispatch of one tool call: waits, scheduling, deferral, hooks, and the call itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use provrun_model::ToolCall;
use provrun_tools::{RunContext, RunDeps, Tool, ToolMode, ToolOutput};
use serde_json::{Value, json};

use crate::arguments::arguments_text;
use crate::capability::DecidedBy;
use crate::control::RunEvent;
use crate::hooks::{BeforeOutcome, HookDecision, ToolCallInfo, ToolHooks};
use crate::recorded::Replaying;
use crate::spec::{Decision, DeferReason};

use super::{CANCEL_GRACE, MAX_TOOL_RESULT_BYTES, Run};

/// What came of one tool call, from the tool (or whatever answered instead: approval, a
/// hook, the recording, the runtime) up to the result the turn records: one type through
/// every step, each step filling in what it knows.
pub(super) struct Outcome {
    pub(super) output: ToolOutput,
    /// What decided the result.
    pub(super) by: DecidedBy,
    /// Taken from a recording (replay), not produced now.
    pub(super) from_log: bool,
    /// A `remote_mcp` call's MCP evidence details.
    pub(super) mcp: Option<Value>,
    /// The tool was stopped at its time limit.
    pub(super) timed_out: bool,
    /// The run was cancelled while the tool ran (or before it could run), and it was
    /// stopped.
    pub(super) cancelled: bool,
    /// The arguments a before hook rewrote the model's to (the tool ran with them), and
    /// who rewrote them.
    pub(super) rewritten: Option<(Value, String)>,
    /// How long the dispatch took (set when it ends).
    pub(super) duration_ms: u64,
    /// The tool's mode (`None` for an unknown tool; set when the dispatch ends).
    pub(super) mode: Option<String>,
    /// The process trails of the commands the call ran (recorded before the call).
    pub(super) trails: Vec<provrun_sandbox::Trail>,
}

impl Outcome {
    pub(super) fn new(output: ToolOutput, by: DecidedBy) -> Self {
        Self {
            output,
            by,
            from_log: false,
            mcp: None,
            timed_out: false,
            cancelled: false,
            rewritten: None,
            duration_ms: 0,
            mode: None,
            trails: Vec::new(),
        }
    }

    /// What the tool itself gave, as [`Run::call_tool`] gives it: decided by the tool,
    /// or by the runtime when it stopped the tool.
    pub(super) fn from_tool(output: ToolOutput) -> Self {
        Self::new(output, DecidedBy::Tool)
    }

    /// The runtime's word on a tool it stopped (time limit, cancellation).
    fn stopped(self) -> Self {
        if self.timed_out || self.cancelled {
            Self {
                by: DecidedBy::Runtime,
                ..self
            }
        } else {
            self
        }
    }

    /// A result taken from the recording.
    pub(super) fn recorded(output: &ToolOutput, by: DecidedBy) -> Self {
        Self {
            from_log: true,
            ..Self::new(output.clone(), by)
        }
    }

    /// A call that did not run because the run was cancelled before its turn came.
    pub(super) fn not_run_cancelled() -> Self {
        Self {
            cancelled: true,
            ..Self::new(
                ToolOutput::fail("not run: the run was cancelled"),
                DecidedBy::Runtime,
            )
        }
    }
}

/// A dispatched call's outcome and when it started and ended on its turn's clock (`None`
/// for a call that did not run).
pub(super) type Ordered = (Outcome, Option<(u64, u64)>);

pub(super) fn cut(mut out: ToolOutput) -> ToolOutput {
    if out.content.len() > MAX_TOOL_RESULT_BYTES {
        let total = out.content.len();
        let mut end = MAX_TOOL_RESULT_BYTES;
        while !out.content.is_char_boundary(end) {
            end -= 1;
        }
        out.content.truncate(end);
        out.content
            .push_str(&format!("\n[result cut: {end} of {total} bytes shown]"));
    }
    out
}

/// What the hooks see of `call` to `tool`: its ids, arguments (parsed too), what the tool
/// is, and the tool schema's `x-` metadata.
fn call_info(tool: &Tool, uid: &str, call: &ToolCall) -> ToolCallInfo {
    ToolCallInfo {
        call_id: call.id.clone(),
        run_call_id: uid.to_string(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        destructive: tool.is_destructive(),
        category: tool.category(),
        parsed_arguments: crate::arguments::arguments_value(&call.arguments),
        metadata: tool
            .schema()
            .as_object()
            .map(|root| {
                root.iter()
                    .filter(|(k, _)| k.starts_with("x-"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// `call` with the arguments a before hook rewrote it to, if one did.
fn with_arguments(call: &ToolCall, rewritten: Option<&(Value, String)>) -> Option<ToolCall> {
    rewritten.map(|(arguments, _)| ToolCall {
        arguments: arguments_text(arguments),
        ..call.clone()
    })
}

impl Run<'_> {
    /// Why `call` waits, when it does: it needs a decision and has none (and, in a
    /// replay, the recording did not record it as not run because the run was cancelled).
    pub(super) fn waits(
        &self,
        step: u64,
        uid: &str,
        call: &ToolCall,
        decision: Option<&Decision>,
    ) -> Option<DeferReason> {
        let not_run = (self.backend.replaying.as_ref())
            .is_some_and(|r| r.not_run_cancelled(step, r.key(uid, &call.id)));
        if decision.is_some() || not_run {
            return None;
        }
        self.prepared
            .tools
            .get(&call.name)
            .and_then(|t| self.needs_deferral(t))
    }

    /// The batches `calls` run in, each a list of indices into `calls`, in call order: a
    /// call that may conflict alone, neighbouring read-only calls together. A replay
    /// follows the recording's batches instead (where the recording has them).
    pub(super) fn schedule(&self, step: u64, calls: &[(&str, &ToolCall)]) -> Vec<Vec<usize>> {
        let replaying = self.backend.replaying.as_ref();
        let recorded = replaying.and_then(|r| r.batches(step));
        let mut batches: Vec<Vec<usize>> = Vec::new();
        let mut previous: Option<usize> = None;
        for (i, &(uid, call)) in calls.iter().enumerate() {
            // The batch a call joins: in a replay, the recorded one; else "the read-only
            // batch" for a call that only reads. A call with none runs alone.
            let group = match &recorded {
                Some(recorded) => replaying
                    .and_then(|r| recorded.get(r.key(uid, &call.id)))
                    .copied(),
                None => self
                    .prepared
                    .tools
                    .get(&call.name)
                    .filter(|t| t.is_read_only())
                    .map(|_| 0),
            };
            match (group, previous, batches.last_mut()) {
                (Some(g), Some(p), Some(last)) if g == p => last.push(i),
                _ => batches.push(vec![i]),
            }
            previous = group;
        }
        batches
    }

    pub(super) fn needs_deferral(&self, tool: &Tool) -> Option<DeferReason> {
        if tool.mode() == ToolMode::ClientRoundTrip {
            return Some(DeferReason::ClientRoundTrip);
        }
        self.agent
            .approve
            .wants(tool.name(), tool.category().as_str(), tool.is_destructive())
            .then_some(DeferReason::Approval)
    }

    /// Tell a subscriber that `call` begins (with the tool's summary of it, if any).
    pub(super) fn emit_call_begin(&self, tool: Option<&Tool>, uid: &str, call: &ToolCall) {
        if self.control.has_subscriber() {
            self.control.emit(RunEvent::CallBegin {
                call_id: call.id.clone(),
                run_call_id: uid.to_string(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                summary: tool.and_then(|t| t.summary_for(&call.arguments)),
                confirm: tool.and_then(|t| t.confirm_for(&call.arguments)),
            });
        }
    }

    /// One call of the turn answering request `step`: approval, hooks and the tool. The
    /// caller records the result (exactly one completed `tool_called`, or a deferred one).
    pub(super) async fn dispatch(
        &self,
        uid: &str,
        call: &ToolCall,
        decision: Option<&Decision>,
        step: u64,
    ) -> Outcome {
        let started = Instant::now();
        let tool = self.prepared.tools.get(&call.name);
        self.emit_call_begin(tool, uid, call);
        let mode = tool.map(|t| t.mode().as_str().to_string());
        let decided = match tool {
            None => self.unknown_tool(call),
            Some(tool) => self.decide(tool, uid, call, decision, step).await,
        };
        // A result taken from a recording was cut when it was recorded.
        let output = if decided.from_log {
            decided.output
        } else {
            cut(decided.output)
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if self.control.has_subscriber() {
            self.control.emit(RunEvent::ToolResult {
                call_id: call.id.clone(),
                run_call_id: uid.to_string(),
                name: call.name.clone(),
                ok: output.ok,
                content: output.content.clone(),
            });
        }
        Outcome {
            output,
            duration_ms,
            mode,
            ..decided
        }
    }

    fn unknown_tool(&self, call: &ToolCall) -> Outcome {
        let known: Vec<&str> = self.prepared.tools.keys().map(String::as_str).collect();
        Outcome::new(
            ToolOutput::fail(format!(
                "unknown tool `{}`; this agent's tools are: {}",
                call.name,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )),
            DecidedBy::Runtime,
        )
    }

    /// A call to one of the agent's tools: the decision a resume gave it (a denial, the
    /// caller's result), else the hooks and the tool.
    async fn decide(
        &self,
        tool: &Tool,
        uid: &str,
        call: &ToolCall,
        decision: Option<&Decision>,
        step: u64,
    ) -> Outcome {
        match decision {
            Some(Decision::Deny { message, .. }) => Outcome::new(
                ToolOutput::fail(crate::spec::denial_text(message)),
                DecidedBy::Approval,
            ),
            Some(Decision::Result { content, ok, .. }) => Outcome::new(
                ToolOutput {
                    content: content.clone(),
                    ok: *ok,
                    confinement: None,
                },
                DecidedBy::Caller,
            ),
            _ => {
                let info = call_info(tool, uid, call);
                self.run_tool(tool, uid, call, &info, step).await
            }
        }
    }

    /// The hooks and the tool; in a replay, the recorded decisions instead of hooks. For a
    /// tool in an MCP server, the result also carries its `mcp` evidence details.
    pub(super) async fn run_tool(
        &self,
        tool: &Tool,
        uid: &str,
        call: &ToolCall,
        info: &ToolCallInfo,
        step: u64,
    ) -> Outcome {
        if let Some(replaying) = &self.backend.replaying {
            return self.replay_tool(replaying, tool, uid, call, step).await;
        }
        let hooks: &ToolHooks = &self.backend.hooks;
        let before = if hooks.before.is_empty() {
            BeforeOutcome {
                decision: HookDecision::Allow,
                rewritten: None,
            }
        } else {
            // A hook that waits for a permit has the call recorded as waiting first.
            self.control
                .register_wait(self.permit_wait(tool, uid, call));
            let before = hooks.run_before(info, self.control).await;
            self.control.unregister_wait(uid);
            before
        };
        let rewritten = before.rewritten;
        let rewritten_call = with_arguments(call, rewritten.as_ref());
        let called = match before.decision {
            HookDecision::Deny(message) => Outcome::new(ToolOutput::fail(message), DecidedBy::Hook),
            HookDecision::Replace(content) => {
                Outcome::new(ToolOutput::succeed(content), DecidedBy::Hook)
            }
            HookDecision::Allow | HookDecision::Rewrite { .. } => Outcome::stopped(
                self.call_tool(tool, uid, rewritten_call.as_ref().unwrap_or(call))
                    .await,
            ),
        };
        let called = Outcome {
            rewritten,
            ..called
        };
        if hooks.after.is_empty() || called.by != DecidedBy::Tool {
            return called;
        }
        let after = hooks.run_after(info, called.output.clone()).await;
        let by = if after != called.output {
            DecidedBy::AfterHook
        } else {
            DecidedBy::Tool
        };
        Outcome {
            output: after,
            by,
            ..called
        }
    }

    /// A call in a replay: what the recording decided instead of hooks. A call the
    /// recording stopped is answered from it; a hook's answer is the recorded one; else
    /// the tool runs again (with the arguments a hook rewrote, and after waiting for a
    /// permit where a hook did).
    async fn replay_tool(
        &self,
        replaying: &Replaying,
        tool: &Tool,
        uid: &str,
        call: &ToolCall,
        step: u64,
    ) -> Outcome {
        let recorded = replaying.call(step, replaying.key(uid, &call.id));
        if let Some(r) = recorded.filter(|r| r.timed_out || r.cancelled) {
            // A call the recording stopped (its time limit, or a cancelled run) is not
            // run again: what it did before it was stopped cannot be reproduced, so
            // it is answered from the recording, like a call to an MCP server.
            return Outcome {
                timed_out: r.timed_out,
                cancelled: r.cancelled,
                ..Outcome::recorded(&r.output, r.decided_by.unwrap_or(DecidedBy::Runtime))
            };
        }
        // Arguments a hook rewrote: the tool runs with them again, as it did.
        let rewritten = recorded.and_then(|r| r.rewritten.clone());
        let rewritten_call = with_arguments(call, rewritten.as_ref());
        let runs_with = rewritten_call.as_ref().unwrap_or(call);
        if replaying
            .recorded
            .waited_for_permit(step, replaying.key(uid, &call.id))
        {
            // A hook held it for a permit: it waits again, as recorded.
            let wait = self.permit_wait(tool, uid, call);
            wait.record.await;
            self.control.emit(wait.event);
        }
        let decided = match recorded.and_then(|r| r.decided_by.map(|by| (by, &r.output))) {
            Some((DecidedBy::Hook, output)) => Outcome::recorded(output, DecidedBy::Hook),
            Some((DecidedBy::AfterHook, output)) => {
                // The tool runs (its effects on /output count), the model saw the
                // rewritten output.
                let _ = self.call_tool(tool, uid, runs_with).await;
                Outcome::recorded(output, DecidedBy::AfterHook)
            }
            _ => Outcome::stopped(self.call_tool(tool, uid, runs_with).await),
        };
        Outcome {
            rewritten,
            ..decided
        }
    }

    pub(super) fn permit_wait(
        &self,
        tool: &Tool,
        uid: &str,
        call: &ToolCall,
    ) -> crate::control::PermitWait {
        crate::steer::permit_wait(
            &self.evidence,
            call,
            uid,
            Some(tool.mode().as_str().to_string()),
            tool.confirm_for(&call.arguments),
        )
    }

    /// The tool itself, bounded by `tool_timeout_s` and stopped by a cancellation; for a
    /// tool in an MCP server, also its `mcp` evidence details.
    ///
    /// On cancellation an async tool is dropped at once (at its next await), a command
    /// (`run_command`, a manifest command tool) has its whole process tree killed, and any
    /// other sync tool is waited for up to [`CANCEL_GRACE`]: what it gives back within the
    /// grace is its result, else the call is recorded as cancelled (its thread cannot be
    /// stopped, and is left to finish in the background).
    pub(super) async fn call_tool(&self, tool: &Tool, uid: &str, call: &ToolCall) -> Outcome {
        let limit = std::time::Duration::from_secs(self.agent.tool_timeout_s);
        if tool.mode() == ToolMode::RemoteMcp {
            let called =
                self.prepared
                    .remote
                    .call(&call.name, uid, &call.id, &call.arguments, limit);
            // A cancelled run does not wait for a slow server.
            return tokio::select! {
                (output, details) = called => Outcome {
                    mcp: Some(details),
                    ..Outcome::from_tool(output)
                },
                () = self.control.cancelled() => Outcome {
                    mcp: Some(json!({"error": "the run was cancelled during the call"})),
                    cancelled: true,
                    ..Outcome::from_tool(ToolOutput::fail(
                        "cancelled: the run was cancelled during the MCP call",
                    ))
                },
            };
        }
        if tool.is_bounded_builtin_read() {
            // A bounded read of the sandbox: cheaper right here than handed to the
            // blocking pool and back (and the size limits bound it, not a timeout).
            let output = match tool.call(call.arguments.as_str(), Some(&self.ctx)) {
                Ok(out) => out,
                Err(e) => ToolOutput::fail(e.to_string()),
            };
            return Outcome::from_tool(output);
        }
        let timed_out = || Outcome {
            timed_out: true,
            ..Outcome::from_tool(ToolOutput::fail(format!(
                "tool `{}` timed out after {} s (tool_timeout_s)",
                call.name, self.agent.tool_timeout_s
            )))
        };
        let cancelled = || Outcome {
            cancelled: true,
            ..Outcome::from_tool(ToolOutput::fail(
                "cancelled: the run was cancelled while the tool ran",
            ))
        };
        let done = |r: Result<ToolOutput, provrun_tools::ToolError>| {
            Outcome::from_tool(r.unwrap_or_else(|e| ToolOutput::fail(e.to_string())))
        };
        // The call's own stop switch: set, it kills the commands this call runs (and
        // only those), tree and all. Its own trail sink: the processes those commands
        // start, recorded with the call.
        let stop = Arc::new(AtomicBool::new(false));
        let sink = provrun_sandbox::TrailSink::new();
        let ctx = RunContext::new(RunDeps {
            sandbox: self
                .ctx
                .sandbox()
                .clone()
                .with_stop(Arc::clone(&stop))
                .with_trail_sink(sink.clone()),
            run: self.ctx.deps().run.clone(),
        });
        let mut called = std::pin::pin!(tool.acall(call.arguments.as_str(), Some(&ctx)));
        // A sync tool's thread cannot be stopped: it is given a moment after its commands
        // are killed, so that it is (nearly always) gone before the next call starts,
        // and is otherwise left to finish in the background, its result dropped.
        let stopped = async |called: std::pin::Pin<&mut _>| {
            stop.store(true, Ordering::SeqCst);
            if tool.is_async() {
                None
            } else {
                tokio::time::timeout(CANCEL_GRACE, called).await.ok()
            }
        };
        let outcome = tokio::select! {
            r = &mut called => done(r),
            () = tokio::time::sleep(limit) => {
                let _ = stopped(called).await;
                timed_out()
            }
            () = self.control.cancelled() => match stopped(called).await {
                Some(r) => Outcome {
                    cancelled: true,
                    ..done(r)
                },
                None => cancelled(),
            },
        };
        Outcome {
            trails: sink.take(),
            ..outcome
        }
    }
}
