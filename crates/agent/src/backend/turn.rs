//! The loop: model requests, steering, the output turn, and one turn's tool calls.

use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::join_all;
use provrun_evidence::to_canonical_string;
use provrun_model::{
    Message, Model, ModelError, ModelRequest, ModelResponse, ModelSettings, ToolCall, ToolChoice,
};
use provrun_tools::ToolOutput;

use crate::capability::{CallFlags, DecidedBy, OUTPUT_ACCEPTED};
use crate::control::RunEvent;
use crate::error::AgentError;
use crate::spec::{DeferReason, DeferredCall, RunOutcome, RunResult};

use super::dispatch::{Ordered, Outcome};
use super::{PendingTurn, Run};
use crate::output::OUTPUT_TOOL;
use crate::state::{LoopState, call_uid};

/// What a turn's answer through the output tool came to.
pub(super) enum Answer {
    /// The turn has no answer (or the agent no output schema): its calls run as usual.
    None,
    /// The answer does not follow the schema; every call of the turn is answered.
    Rejected,
    /// The run ends with this answer.
    Accepted(RunOutcome),
}

impl Run<'_> {
    /// The settings of every request of the run: the spec's `[settings]`, its
    /// `prompt_caching`, and a required tool call when the answer comes through the
    /// output tool.
    pub(super) fn settings(&self) -> ModelSettings {
        let mut settings = ModelSettings {
            prompt_caching: self.agent.prompt_caching,
            ..self.agent.settings.to_model_settings()
        };
        if self.agent.output_schema.is_some() {
            settings.tool_choice = Some(ToolChoice::Required);
        }
        settings
    }

    /// The loop: request → tool calls → … → an answer, a pause, or a failure; then the
    /// trace, `response.txt` and the bundle's end.
    pub(super) async fn drive(
        self,
        mut state: LoopState,
        pending: Option<PendingTurn>,
    ) -> Result<RunResult, AgentError> {
        let outcome = match self.steps(&mut state, pending).await {
            Ok(o) => o,
            // Out of descriptors: a file could not be opened, nothing was written with it
            // and the log is whole, so the run ends as failed (if the end cannot be
            // written either, that is the error returned).
            Err(AgentError::Evidence(e)) if e.is_out_of_descriptors() => RunOutcome::Failed {
                error: format!("out of file descriptors: {e}"),
            },
            Err(AgentError::Evidence(e)) => return Err(AgentError::Evidence(e)),
            Err(other) => RunOutcome::Failed {
                error: other.to_string(),
            },
        };
        // Boxed, as the turns above: a future holds room for its largest part at every
        // await, so the parts a waiting run is not in (finishing, tool calls) are kept
        // out of the memory every waiting run holds.
        Box::pin(self.finish(state, outcome)).await
    }

    pub(super) async fn steps(
        &self,
        state: &mut LoopState,
        mut pending: Option<PendingTurn>,
    ) -> Result<RunOutcome, AgentError> {
        // One request for the whole run: the tools and settings do not change. It takes
        // the prepared definitions (one `Prepared` serves one run).
        let mut request = ModelRequest {
            messages: Vec::new(),
            tools: std::mem::take(&mut *self.prepared.definitions()),
            settings: self.settings(),
        };
        loop {
            if let Some(turn) = pending.take() {
                if let Some(outcome) = Box::pin(self.turn(state, turn)).await? {
                    return Ok(outcome);
                }
                self.recorder.step_async().await?;
            }
            let step = u32::try_from(state.requests + 1).unwrap_or(u32::MAX);
            // Messages the caller steered with are on record before the run can stop here,
            // so a replay of a run cancelled at this point adds them too.
            Box::pin(self.steer(state, step)).await?;
            let replay_cancels =
                (self.backend.replaying.as_ref()).is_some_and(|r| r.cancels_at(state.requests));
            if self.control.is_cancelled() || replay_cancels {
                return Ok(RunOutcome::Cancelled {
                    reason: "the run was cancelled".into(),
                });
            }
            if state.requests >= u64::from(self.agent.max_steps) {
                return Ok(RunOutcome::Failed {
                    error: format!(
                        "max_steps reached: the agent made {} model requests without a final answer",
                        state.requests
                    ),
                });
            }
            self.control.emit(RunEvent::ModelRequest { step });
            // The history moves into the request and back: no copy of it per request.
            request.messages = std::mem::take(&mut state.messages);
            let response = tokio::select! {
                r = self.request_idle(&request) => Some(r),
                () = self.control.cancelled() => None,
            };
            state.messages = std::mem::take(&mut request.messages);
            let Some(response) = response else {
                return Ok(RunOutcome::Cancelled {
                    reason: "the run was cancelled while waiting for the model".into(),
                });
            };
            state.requests += 1;
            let response = match response {
                Ok(r) => r,
                Err(e) => {
                    return Ok(RunOutcome::Failed {
                        error: format!("model request {step} failed: {e}"),
                    });
                }
            };
            state.usage.add(&response.usage);
            self.control.emit(RunEvent::ModelResponse {
                step,
                usage: response.usage,
            });
            if (response.text.is_some() || response.reasoning.is_some())
                && self.control.has_subscriber()
            {
                self.control.emit(RunEvent::ModelAnswer {
                    step,
                    text: response.text.clone(),
                    reasoning: response.reasoning.clone(),
                });
            }
            Box::pin(self.evidence.provider_runs_at(u64::from(step), &response)).await?;
            state.messages.push(response.to_message());

            if response.tool_calls.is_empty() {
                return Ok(RunOutcome::Finished {
                    output: response.text.unwrap_or_default(),
                });
            }
            match Box::pin(self.output_turn(state, &response)).await? {
                Answer::Accepted(outcome) => return Ok(outcome),
                // Every call of the turn is answered: the model tries again.
                Answer::Rejected => {}
                Answer::None => {
                    let turn = PendingTurn {
                        calls: response.tool_calls.clone(),
                        ..PendingTurn::default()
                    };
                    if let Some(outcome) = Box::pin(self.turn(state, turn)).await? {
                        return Ok(outcome);
                    }
                }
            }
            self.recorder.step_async().await?;
        }
    }

    /// Add the messages the caller steered the run with (a replay: the recording's, at
    /// the same point) to the history before model request `step`, each recorded.
    pub(super) async fn steer(&self, state: &mut LoopState, step: u32) -> Result<(), AgentError> {
        let texts = match &self.backend.replaying {
            Some(replaying) => replaying.recorded.steering(state.requests),
            None => self.control.take_steering(),
        };
        for text in texts {
            crate::steer::record_steered(&self.recorder, u64::from(step), &text).await?;
            self.control.emit(RunEvent::Steered {
                step,
                text: text.clone(),
            });
            state.messages.push(Message::user(text));
        }
        Ok(())
    }

    /// [`Self::request`], giving back the sandbox's folder handles and the pack's
    /// descriptor when the answer is not there at once: a run waiting on a model (or on
    /// its evidence sync) then holds one descriptor, its locked log, so many thousands
    /// can wait together. A model that answers at
    /// once (the offline models) keeps them and costs no reopen.
    pub(super) async fn request_idle(
        &self,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        let mut answer = std::pin::pin!(self.request(request));
        match std::future::poll_fn(|cx| std::task::Poll::Ready(answer.as_mut().poll(cx))).await {
            std::task::Poll::Ready(r) => r,
            std::task::Poll::Pending => {
                self.ctx.sandbox().release_handles();
                self.recorder.release_handles();
                answer.await
            }
        }
    }

    pub(super) async fn request(
        &self,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        if self.agent.stream {
            let control = self.control.clone();
            let listening = control.has_subscriber();
            let on_delta = move |delta| {
                if listening {
                    control.emit(RunEvent::ModelDelta(delta));
                }
            };
            self.model.request_stream(request, &on_delta).await
        } else {
            self.model.request(request).await
        }
    }

    /// A response that answers through the output tool ends the run with that answer,
    /// when it follows the output schema; other calls in it are recorded as not run.
    /// An answer that does not is a failed result the model sees, and the run goes on.
    pub(super) async fn output_turn(
        &self,
        state: &mut LoopState,
        response: &ModelResponse,
    ) -> Result<Answer, AgentError> {
        let Some(schema) = &self.prepared.output_schema else {
            return Ok(Answer::None);
        };
        let Some(answer_index) = response
            .tool_calls
            .iter()
            .position(|c| c.name == OUTPUT_TOOL)
        else {
            return Ok(Answer::None);
        };
        let answer = &response.tool_calls[answer_index];
        let checked = schema.check(&answer.arguments);
        let verdict = match &checked {
            Ok(_) => ToolOutput::succeed(OUTPUT_ACCEPTED),
            Err(why) => ToolOutput::fail(why.clone()),
        };
        if !self.agent.stream {
            // Streamed: the evidence model already wrote it, before its model_called.
            let uid = call_uid(state.requests, answer_index);
            self.evidence
                .output_verdict_as(answer, &uid, &verdict, 0)
                .await?;
        }
        state.messages.push(Message::tool_result(
            &answer.id,
            OUTPUT_TOOL,
            verdict.content,
            verdict.ok,
        ));
        let Ok(parsed) = checked else {
            self.skip_others(
                state,
                response,
                answer_index,
                "not run: the final result was not valid",
            )
            .await?;
            return Ok(Answer::Rejected);
        };
        self.skip_others(
            state,
            response,
            answer_index,
            "not run: a final result was already given",
        )
        .await?;
        let output = to_canonical_string(&parsed).unwrap_or_else(|_| parsed.to_string());
        Ok(Answer::Accepted(RunOutcome::Finished { output }))
    }

    /// Record every call of `response` but the answer `answer_id` as not run, and tell the
    /// model why.
    pub(super) async fn skip_others(
        &self,
        state: &mut LoopState,
        response: &ModelResponse,
        answer_index: usize,
        why: &str,
    ) -> Result<(), AgentError> {
        let step = state.requests;
        for (i, other) in response.tool_calls.iter().enumerate() {
            if i == answer_index {
                continue;
            }
            let skipped = ToolOutput::fail(why);
            let flags = CallFlags {
                decided_by: Some(DecidedBy::Runtime),
                run_call_id: Some(call_uid(step, i)),
                ..CallFlags::default()
            };
            self.evidence
                .completed_with(other, &skipped, 0, flags)
                .await?;
            state.messages.push(Message::tool_result(
                &other.id,
                &other.name,
                skipped.content,
                false,
            ));
        }
        Ok(())
    }

    /// Run one turn's calls so that their effect is that of running them one by one in
    /// the order the model listed them: a call that may conflict with another (it writes,
    /// runs a program, reaches the host folder, or is a manifest or MCP tool not marked
    /// read-only) runs alone, after every call listed before it and before every call
    /// listed after it; calls that only read and are listed next to each other run
    /// together. A call that waits for a decision stops the turn there: the calls before
    /// it run, the calls after it run when the run resumes (in order, after it), and every
    /// call of the turn that waits is recorded `deferred` at once.
    ///
    /// The calls are recorded in call order, each with when it started and ended on the
    /// turn's clock (`start_order`, `end_order`); results go to the model in call order.
    /// In a replay the recording's order is followed. Returns an outcome when the turn
    /// pauses the run.
    pub(super) async fn turn(
        &self,
        state: &mut LoopState,
        turn: PendingTurn,
    ) -> Result<Option<RunOutcome>, AgentError> {
        let step = state.requests;
        let uids: Vec<String> = (0..turn.calls.len()).map(|i| call_uid(step, i)).collect();
        let todo: Vec<(&str, &ToolCall)> = turn
            .calls
            .iter()
            .zip(&uids)
            .filter(|(_, uid)| !turn.completed.contains_key(*uid))
            .map(|(c, uid)| (uid.as_str(), c))
            .collect();
        let waits: Vec<Option<DeferReason>> = todo
            .iter()
            .map(|&(uid, c)| self.waits(step, uid, c, turn.decisions.get(uid)))
            .collect();
        let runnable = waits.iter().position(Option::is_some).unwrap_or(todo.len());
        let results = self.run_batches(step, &todo, runnable, &turn).await;
        // A run cancelled during the turn does not pause: the calls that would wait, and
        // those after them, are recorded as not run, and the run ends cancelled.
        let cancelled = self.control.is_cancelled();
        let mut results = results.into_iter();
        let mut outputs = Vec::with_capacity(turn.calls.len());
        let mut deferred = Vec::new();
        let mut index = 0usize;
        for (call, uid) in turn.calls.iter().zip(&uids) {
            if let Some(out) = turn.completed.get(uid) {
                outputs.push((call, out.clone()));
                continue;
            }
            let waiting = waits.get(index).copied().flatten();
            let mut result = results.next().flatten();
            index += 1;
            if cancelled && result.is_none() {
                result = Some((Outcome::not_run_cancelled(), None));
            } else if let Some(reason) = waiting {
                deferred.push(self.defer(call, uid, reason).await?);
                continue;
            }
            // A call after one that waits runs when the run resumes.
            let Some((result, order)) = result else {
                continue;
            };
            let output = self.record_completed(call, uid, result, order).await?;
            state.tool_calls += 1;
            outputs.push((call, output));
        }
        if !deferred.is_empty() {
            return Ok(Some(RunOutcome::Paused { deferred }));
        }
        for (call, out) in outputs {
            state.messages.push(Message::tool_result(
                &call.id,
                &call.name,
                out.content,
                out.ok,
            ));
        }
        Ok(None)
    }

    /// Run the calls of `todo` before the first that waits (`runnable` of them) in their
    /// batches, each call's result with where it ran on the turn's clock; a call the run's
    /// cancellation kept from starting is not run. Indexed like `todo`, `None` for a call
    /// not run here.
    async fn run_batches(
        &self,
        step: u64,
        todo: &[(&str, &ToolCall)],
        runnable: usize,
        turn: &PendingTurn,
    ) -> Vec<Option<Ordered>> {
        // Each call done before a pause in this turn took two ticks (its start and end).
        let done_before = u64::try_from(turn.completed.len()).unwrap_or(u64::MAX / 4);
        let clock = AtomicU64::new(2 * done_before);
        let mut results: Vec<Option<Ordered>> = (0..todo.len()).map(|_| None).collect();
        for mut batch in self.schedule(step, &todo[..runnable]) {
            // Cancelled before a call started: it does not run (a replay follows the
            // recording's cancellation).
            let replaying = self.backend.replaying.as_ref();
            batch.retain(|&i| {
                let stopped = self.control.is_cancelled()
                    || replaying.is_some_and(|r| {
                        r.not_run_cancelled(step, r.key(todo[i].0, &todo[i].1.id))
                    });
                if stopped {
                    results[i] = Some((Outcome::not_run_cancelled(), None));
                }
                !stopped
            });
            if batch.is_empty() {
                continue;
            }
            // Every call of a batch starts before any of them ends, so the recorded order
            // says which calls ran together whatever order they finish in.
            let starts: Vec<u64> = batch
                .iter()
                .map(|_| clock.fetch_add(1, Ordering::SeqCst) + 1)
                .collect();
            let clock = &clock;
            let futures = batch.iter().zip(starts).map(|(&i, start)| {
                let (uid, call) = todo[i];
                let decision = turn.decisions.get(uid);
                async move {
                    let result = self.dispatch(uid, call, decision, step).await;
                    let end = clock.fetch_add(1, Ordering::SeqCst) + 1;
                    (result, Some((start, end)))
                }
            });
            let done = join_all(futures).await;
            for (&i, r) in batch.iter().zip(done) {
                results[i] = Some(r);
            }
        }
        results
    }

    /// Record `call` as waiting for a decision (`reason`), tell a subscriber, and give
    /// back what the caller is to decide on.
    async fn defer(
        &self,
        call: &ToolCall,
        uid: &str,
        reason: DeferReason,
    ) -> Result<DeferredCall, AgentError> {
        let tool = self.prepared.tools.get(&call.name);
        let mode = tool.map(|t| t.mode().as_str().to_string());
        let confirm = tool.and_then(|t| t.confirm_for(&call.arguments));
        self.emit_call_begin(tool, uid, call);
        self.control.emit(RunEvent::Deferred {
            call_id: call.id.clone(),
            run_call_id: uid.to_string(),
            name: call.name.clone(),
            confirm: confirm.clone(),
        });
        self.evidence.deferred_as(call, uid, mode).await?;
        Ok(DeferredCall {
            run_call_id: uid.to_string(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            reason,
            confirm,
        })
    }

    /// Record a dispatched call's completion, with when it started and ended on the
    /// turn's clock (`order`); gives back the output the model is to see.
    async fn record_completed(
        &self,
        call: &ToolCall,
        uid: &str,
        result: Outcome,
        order: Option<(u64, u64)>,
    ) -> Result<ToolOutput, AgentError> {
        for trail in &result.trails {
            self.evidence
                .command_trail(&call.id, Some(uid), trail)
                .await?;
        }
        let flags = CallFlags {
            mode: result.mode,
            decided_by: Some(result.by),
            mcp: result.mcp,
            order,
            timed_out: result.timed_out,
            cancelled: result.cancelled,
            run_call_id: Some(uid.to_string()),
            rewritten: result.rewritten,
            ..CallFlags::default()
        };
        self.evidence
            .completed_with(call, &result.output, result.duration_ms, flags)
            .await?;
        Ok(result.output)
    }
}
