//! `POST /agents/NAME`: everything checked before the stream starts — the agent (a file
//! of the agents folder), the body, the thread (not busy; a paused run answered in full),
//! a slot among `--concurrency` — so a refusal is a typed 4xx and nothing is written; then
//! the run's plan: a new run (a thread's later turn starts from the last run's messages)
//! or the paused run resumed with the client's answers.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use provrun_agent::{AgentSpec, Continuation, Decision, DeferReason, RunSpec};
use provrun_model::{Message, ToolDefinition};
use serde_json::json;

use crate::agui::{self, InputLimits, RunInput};
use crate::config::RETRY_AFTER_S;
use crate::error::ApiError;
use crate::events::{call_wire_id, run_call_id_of};
use crate::state::{LastRun, State};

/// What a request runs.
#[derive(Debug)]
pub(crate) enum Work {
    /// A new bundle.
    New(Box<RunSpec>),
    /// The thread's paused bundle, continued with these decisions.
    Resume {
        decisions: Vec<Decision>,
        /// The waiting calls' run ids (announced by the earlier segment).
        announced: HashSet<String>,
        /// Those the client ran (frontend tools): their results are the client's own.
        client_results: HashSet<String>,
    },
}

/// A request checked and ready to run.
#[derive(Debug)]
pub(crate) struct Planned {
    pub(crate) agent_name: String,
    pub(crate) agent: AgentSpec,
    pub(crate) thread: String,
    pub(crate) agui_run_id: String,
    pub(crate) bundle: String,
    pub(crate) work: Work,
}

/// Whether `name` is an agent of the folder: a plain file name (no path, not hidden) with
/// a `NAME.toml` there. 404 otherwise.
pub(crate) fn agent_file(agents: &Path, name: &str) -> Result<PathBuf, ApiError> {
    let plain = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    let path = agents.join(format!("{name}.toml"));
    if plain && path.is_file() {
        Ok(path)
    } else {
        Err(ApiError::not_found(
            "unknown_agent",
            "no agent of that name (agents are the NAME.toml files of the agents folder)",
        ))
    }
}

/// Check a request and plan its run. On success the thread is claimed (busy); on
/// failure nothing is held.
pub(crate) async fn plan(state: &Arc<State>, name: &str, body: &[u8]) -> Result<Planned, ApiError> {
    if state.stopping.is_cancelled() {
        return Err(ApiError::new(
            hyper::StatusCode::SERVICE_UNAVAILABLE,
            "stopping",
            "the server is stopping and takes no new runs",
        )
        .retry_after(RETRY_AFTER_S));
    }
    let path = agent_file(&state.config.agents, name)?;
    let limits = InputLimits {
        max_messages: state.config.max_messages,
        max_tools: state.config.max_tools,
    };
    let input = agui::parse(body, limits)?;
    let agent = AgentSpec::load(&path).map_err(|e| {
        tracing::error!(agent = name, "the agent spec cannot be used: {e}");
        ApiError::internal(format!(
            "agent `{name}` cannot be loaded: its spec is invalid"
        ))
    })?;
    let last = state.claim_thread(&input.thread_id)?;
    match plan_claimed(state, name, agent, &input, last).await {
        Ok(p) => Ok(p),
        Err(e) => {
            state.release_thread(&input.thread_id, None);
            Err(e)
        }
    }
}

async fn plan_claimed(
    state: &Arc<State>,
    name: &str,
    agent: AgentSpec,
    input: &RunInput,
    last: Option<LastRun>,
) -> Result<Planned, ApiError> {
    let agui_run_id = if provrun_store::check_id(&input.run_id).is_ok() {
        input.run_id.clone()
    } else {
        format!("run-{}", uuid::Uuid::new_v4())
    };
    let paused = last.as_ref().filter(|l| l.status == "paused");
    let (bundle, work) = match paused {
        Some(last) => (
            last.id.clone(),
            resume_work(state, name, input, last).await?,
        ),
        None => {
            if !input.resume.is_empty() {
                return Err(ApiError::bad_request(
                    "bad_resume",
                    "the input answers interrupts, but no run of this thread waits",
                ));
            }
            let bundle = if state.id_taken(&agui_run_id) {
                format!("run-{}", uuid::Uuid::new_v4())
            } else {
                agui_run_id.clone()
            };
            let spec = new_run(state, input, last.as_ref(), &bundle).await?;
            (bundle, Work::New(Box::new(spec)))
        }
    };
    Ok(Planned {
        agent_name: name.to_string(),
        agent,
        thread: input.thread_id.clone(),
        agui_run_id,
        bundle,
        work,
    })
}

/// A new run: the last user message is the prompt, the client's tools its client tools,
/// and a thread's earlier run (if any) what it continues.
async fn new_run(
    state: &Arc<State>,
    input: &RunInput,
    last: Option<&LastRun>,
    bundle: &str,
) -> Result<RunSpec, ApiError> {
    let prompt = input
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .map(agui::InputMessage::text)
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            ApiError::bad_request("no_prompt", "the input has no user message with text")
        })?;
    let mut spec = RunSpec::new(prompt, state.folder_of(bundle))
        .run_id(bundle)
        .thread(input.thread_id.clone());
    for tool in &input.tools {
        spec = spec.client_tool(ToolDefinition {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: tool
                .parameters
                .clone()
                .filter(|p| !p.is_null())
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        });
    }
    if let Some(last) = last {
        let (history, statement_sha256) = earlier_turn(state, &last.id).await?;
        spec = spec.history(history).continues(Continuation {
            run_id: last.id.clone(),
            statement_sha256,
        });
    }
    Ok(spec)
}

/// The messages of the thread's last run (no system message) and the SHA-256 of its
/// statement, read from its bundle in the store.
async fn earlier_turn(state: &Arc<State>, id: &str) -> Result<(Vec<Message>, String), ApiError> {
    let broken = |why: String| {
        tracing::error!(bundle = id, "the thread's last run cannot be read: {why}");
        ApiError::conflict(
            "thread_unreadable",
            format!("the thread's last run `{id}` cannot be read, so it cannot be continued"),
        )
    };
    let opened = state
        .config
        .store
        .open_bundle(id)
        .await
        .map_err(|e| broken(e.to_string()))?
        .ok_or_else(|| broken("it is not in the store".into()))?;
    let dir = opened.dir().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let _keep = opened;
        let messages = provrun_agent::read::recorded_messages(&dir).map_err(|e| e.to_string())?;
        let statement = std::fs::read(dir.join("statement.json")).map_err(|e| e.to_string())?;
        let history = messages
            .into_iter()
            .filter(|m| !matches!(m, Message::System { .. }))
            .collect();
        Ok::<_, String>((history, crate::digest::sha256_hex(&statement)))
    })
    .await
    .map_err(|e| broken(e.to_string()))?
    .map_err(broken)
}

/// The decisions that resume the thread's paused run: every interrupt (approval) answered
/// by a resume entry, every frontend call by a `tool` message. 400 `bad_resume` names what
/// is missing or unknown.
async fn resume_work(
    state: &Arc<State>,
    name: &str,
    input: &RunInput,
    last: &LastRun,
) -> Result<Work, ApiError> {
    if last.agent != name {
        return Err(ApiError::conflict(
            "agent_mismatch",
            format!(
                "the thread's paused run is of agent `{}`: resume it there",
                last.agent
            ),
        ));
    }
    let folder = state.folder_of(&last.id);
    let waiting = tokio::task::spawn_blocking(move || provrun_agent::read::waiting_calls(&folder))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| {
            tracing::error!(bundle = %last.id, "the paused run cannot be read: {e}");
            ApiError::conflict(
                "paused_run_unreadable",
                "the thread's paused run cannot be read here, so it cannot be resumed",
            )
        })?;
    let mut entries = HashMap::new();
    for entry in &input.resume {
        if entries.insert(entry.interrupt_id.as_str(), entry).is_some() {
            return Err(bad_resume(format!(
                "interrupt `{}` is answered twice",
                entry.interrupt_id
            )));
        }
        let known = run_call_id_of(&last.id, &entry.interrupt_id).is_some_and(|id| {
            waiting
                .iter()
                .any(|w| w.run_call_id == id && w.reason == DeferReason::Approval)
        });
        if !known {
            return Err(bad_resume(format!(
                "no interrupt `{}` is open on this thread",
                entry.interrupt_id
            )));
        }
    }
    if input.resume.is_empty()
        && !input
            .messages
            .iter()
            .any(|m| answers_a_call(m, &last.id, &waiting))
    {
        return Err(ApiError::conflict(
            "run_waits",
            format!(
                "the thread's run `{}` waits for {}: answer them (resume entries, tool messages)",
                last.id,
                waiting
                    .iter()
                    .map(|w| call_wire_id(&last.id, &w.run_call_id))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let mut decisions = Vec::new();
    let mut announced = HashSet::new();
    let mut client_results = HashSet::new();
    for call in &waiting {
        announced.insert(call.run_call_id.clone());
        if call.reason == DeferReason::ClientRoundTrip {
            client_results.insert(call.run_call_id.clone());
        }
        decisions.push(decision_for(call, &last.id, &entries, input)?);
    }
    Ok(Work::Resume {
        decisions,
        announced,
        client_results,
    })
}

/// The decision on one waiting call: from its resume entry (an approval) or its `tool`
/// message (a frontend call).
fn decision_for(
    call: &provrun_agent::DeferredCall,
    bundle: &str,
    entries: &HashMap<&str, &agui::ResumeEntry>,
    input: &RunInput,
) -> Result<Decision, ApiError> {
    let wire = call_wire_id(bundle, &call.run_call_id);
    match call.reason {
        DeferReason::Approval => {
            let entry = entries
                .get(wire.as_str())
                .ok_or_else(|| bad_resume(format!("interrupt `{wire}` is not answered")))?;
            Ok(if entry.approves() {
                Decision::Approve(call.run_call_id.clone())
            } else {
                Decision::Deny {
                    call_id: call.run_call_id.clone(),
                    message: entry.denial(),
                }
            })
        }
        DeferReason::ClientRoundTrip => {
            let message = input
                .messages
                .iter()
                .rev()
                .find(|m| m.role == "tool" && m.tool_call_id.as_deref() == Some(&wire))
                .ok_or_else(|| {
                    bad_resume(format!(
                        "frontend tool call `{wire}` ({}) has no result: send it as a tool message",
                        call.name
                    ))
                })?;
            let text = message.text();
            Ok(Decision::Result {
                call_id: call.run_call_id.clone(),
                ok: message.error.is_none(),
                content: match &message.error {
                    Some(error) if text.is_empty() => error.clone(),
                    _ => text,
                },
            })
        }
    }
}

fn answers_a_call(
    m: &agui::InputMessage,
    bundle: &str,
    waiting: &[provrun_agent::DeferredCall],
) -> bool {
    m.role == "tool"
        && m.tool_call_id.as_deref().is_some_and(|id| {
            waiting
                .iter()
                .any(|w| call_wire_id(bundle, &w.run_call_id) == id)
        })
}

fn bad_resume(message: String) -> ApiError {
    ApiError::bad_request("bad_resume", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_of_existing_files_are_agents() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("chat.toml"), "").unwrap();
        std::fs::write(dir.path().join(".hidden.toml"), "").unwrap();
        assert!(agent_file(dir.path(), "chat").is_ok());
        for bad in [
            "",
            "nope",
            "../chat",
            "a/chat",
            ".hidden",
            "chat.toml/..",
            "%2e%2e",
        ] {
            let e = agent_file(dir.path(), bad).unwrap_err();
            assert_eq!((e.status.as_u16(), e.code), (404, "unknown_agent"), "{bad}");
        }
    }
}
