//! The end of a run: the trace, `response.txt`, `run_end` and the run's result.

use provrun_evidence::RunEnd;
use serde_json::Value;

use crate::control::RunEvent;
use crate::error::AgentError;
use crate::spec::{RunOutcome, RunResult, RunUsage};

use super::Run;
use crate::state::LoopState;

impl Run<'_> {
    pub(super) async fn finish(
        self,
        state: LoopState,
        mut outcome: RunOutcome,
    ) -> Result<RunResult, AgentError> {
        // The MCP stdio servers' processes, as they stand (the servers outlive the run).
        for (name, feed) in self.prepared.remote.trail_feeds() {
            self.evidence.server_trail(&name, &feed).await?;
        }
        match self.evidence.trace(&state.messages).await {
            Ok(_) => {}
            // Out of descriptors: the trace is not on record, the run ends as failed.
            Err(AgentError::Evidence(e)) if e.is_out_of_descriptors() => {
                outcome = RunOutcome::Failed {
                    error: format!("out of file descriptors recording the trace: {e}"),
                };
            }
            Err(e) => return Err(e),
        }
        if let RunOutcome::Finished { output } = &outcome {
            let response = self.recorder.output_dir().join("response.txt");
            if std::fs::symlink_metadata(&response).is_err()
                && let Err(e) = self
                    .ctx
                    .sandbox()
                    .write_file("/output/response.txt", output.as_bytes())
            {
                tracing::warn!(error = %e, "could not write /output/response.txt");
            }
        }
        let usage = RunUsage {
            input_tokens: state.usage.input_tokens,
            output_tokens: state.usage.output_tokens,
            requests: state.requests,
            tool_calls: state.tool_calls,
        };
        let end = run_end(&outcome, usage);
        // The loop is done with the sandbox's folders and the pack: while this run waits
        // for a thread to finish on, it holds only its log (see `Run::request_idle`).
        self.ctx.sandbox().release_handles();
        self.recorder.release_handles();
        let recorder = self.recorder.clone();
        // The outputs count against the sandbox's quota by apparent size: whatever a
        // command left in /output, the recorder reads no more than that.
        let policy = provrun_evidence::OutputPolicy {
            max_total_bytes: self.ctx.sandbox().limits().max_total_bytes,
        };
        tokio::task::spawn_blocking(move || recorder.finish_with(end, &policy))
            .await
            .map_err(|e| AgentError::Bundle {
                path: self.recorder.bundle_dir().to_path_buf(),
                message: format!("finishing stopped: {e}"),
            })??;
        self.control.emit(RunEvent::Finished {
            status: outcome.status(),
        });
        Ok(RunResult::new(
            self.recorder.run_id().to_string(),
            outcome,
            usage,
            self.recorder.bundle_dir().to_path_buf(),
        ))
    }
}

/// The end `run_finished` records for `outcome` and `usage`.
fn run_end(outcome: &RunOutcome, usage: RunUsage) -> RunEnd {
    RunEnd {
        status: outcome.status(),
        usage: serde_json::to_value(usage).unwrap_or(Value::Null),
        error: outcome.error().map(str::to_string),
    }
}

/// A run whose `run_started` is written but that could not be set up (its inputs not on
/// record, its sandbox not made: out of descriptors, say): ended as failed with `error`'s
/// message, so that its bundle is a failed run's, not an unfinished one. When even that
/// cannot be written, `error` is returned.
pub(super) async fn fail_started(
    control: &crate::control::RunControl,
    recorder: provrun_evidence::Recorder,
    error: AgentError,
) -> Result<RunResult, AgentError> {
    let outcome = RunOutcome::Failed {
        error: error.to_string(),
    };
    let usage = RunUsage::default();
    let end = run_end(&outcome, usage);
    let rec = recorder.clone();
    match tokio::task::spawn_blocking(move || rec.finish(end)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "a run that could not be set up could not be ended either");
            return Err(error);
        }
        Err(_) => return Err(error),
    }
    tracing::warn!(run_id = recorder.run_id(), %error, "the run could not be set up; it ended as failed");
    control.emit(RunEvent::Finished {
        status: outcome.status(),
    });
    Ok(RunResult::new(
        recorder.run_id().to_string(),
        outcome,
        usage,
        recorder.bundle_dir().to_path_buf(),
    ))
}
