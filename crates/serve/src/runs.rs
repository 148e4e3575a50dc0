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
use crate::state::{BundleClaim, LastRun, State, ThreadTurn};

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
    /// The thread held for this run, released when it ends.
    pub(crate) turn: ThreadTurn,
    pub(crate) agui_run_id: String,
    pub(crate) bundle: String,
    /// A new run's hold on its bundle id, kept until the run has ended (a resumed run
    /// continues a bundle that is already its own).
    pub(crate) claim: Option<BundleClaim>,
    pub(crate) work: Work,
}

/// Whether `name` is an agent of the folder: a plain file name (no path, not hidden) with
/// a `NAME.toml` there that is a file of the folder — a link is followed only when it
/// stays inside the folder. 404 otherwise. Gives the spec's path, links resolved.
pub(crate) fn agent_file(agents: &Path, name: &str) -> Result<PathBuf, ApiError> {
    let unknown = || {
        ApiError::not_found(
            "unknown_agent",
            "no agent of that name (agents are the NAME.toml files of the agents folder)",
        )
    };
    let plain = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !plain {
        return Err(unknown());
    }
    let path = agents.join(format!("{name}.toml"));
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => Ok(path),
        Ok(meta) if meta.is_symlink() => {
            // Where the link leads must be a file inside the agents folder itself.
            let (Ok(folder), Ok(target)) = (agents.canonicalize(), path.canonicalize()) else {
                return Err(unknown());
            };
            if target.starts_with(&folder) && target.is_file() {
                Ok(target)
            } else {
                tracing::warn!(
                    agent = name,
                    "the agent's spec is a link that leads out of the agents folder: not served"
                );
                Err(unknown())
            }
        }
        _ => Err(unknown()),
    }
}

/// Whether an error (or one of its causes) is the process running out of file
/// descriptors (EMFILE, or ENFILE for the whole system).
pub(crate) fn is_out_of_descriptors(e: &(dyn std::error::Error + 'static)) -> bool {
    let out = [
        rustix::io::Errno::MFILE.raw_os_error(),
        rustix::io::Errno::NFILE.raw_os_error(),
    ];
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && io.raw_os_error().is_some_and(|code| out.contains(&code))
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The refusal for a request the server has no file descriptors left to serve.
pub(crate) fn no_descriptors() -> ApiError {
    ApiError::new(
        hyper::StatusCode::SERVICE_UNAVAILABLE,
        "out_of_files",
        "the server has too many files open to take this run now (EMFILE); try again later",
    )
    .retry_after(RETRY_AFTER_S)
}

/// Read the agent's spec; its model may be any name when the backend supplies the model.
fn load_agent(state: &State, name: &str, path: &Path) -> Result<AgentSpec, ApiError> {
    state.config.backend.load_agent(path).map_err(|e| {
        if is_out_of_descriptors(&e) {
            tracing::error!(agent = name, "the agent spec cannot be read: {e}");
            return no_descriptors();
        }
        tracing::error!(agent = name, "the agent spec cannot be used: {e}");
        ApiError::internal(format!(
            "agent `{name}` cannot be loaded: its spec is invalid"
        ))
    })
}

/// Check a request and plan its run. On success the thread is claimed (busy) and, for a
/// new run, its bundle id; on failure nothing is held.
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
    let agui_run_id = if provrun_store::check_id(&input.run_id).is_ok() {
        input.run_id.clone()
    } else {
        format!("run-{}", uuid::Uuid::new_v4())
    };
    // The one step that gives this request a bundle id, before anything is read or
    // written: the client's id when no other run has it, else a fresh one. A resume
    // lets it go again (it continues its paused bundle).
    let claim = state.claim_bundle(&agui_run_id).await?;
    let agent = match load_agent(state, name, &path) {
        Ok(agent) => agent,
        Err(e) => {
            claim.release().await;
            return Err(e);
        }
    };
    let turn = match crate::lease::claim_thread(state, &input.thread_id).await {
        Ok(turn) => turn,
        Err(e) => {
            claim.release().await;
            return Err(e);
        }
    };
    match plan_claimed(state, name, agent, &input, &turn, claim, agui_run_id).await {
        Ok(p) => Ok(p),
        Err(e) => {
            state.release_thread(&turn, None).await;
            Err(e)
        }
    }
}

async fn plan_claimed(
    state: &Arc<State>,
    name: &str,
    agent: AgentSpec,
    input: &RunInput,
    turn: &ThreadTurn,
    claim: BundleClaim,
    agui_run_id: String,
) -> Result<Planned, ApiError> {
    let last = turn.last.clone();
    let paused = last.as_ref().filter(|l| l.status == "paused");
    let (bundle, claim, work) = match paused {
        Some(last) => {
            // The paused bundle continues: the id claimed for a new run is not needed.
            claim.release().await;
            (
                last.id.clone(),
                None,
                resume_work(state, name, input, last).await?,
            )
        }
        None => {
            if !input.resume.is_empty() {
                claim.release().await;
                return Err(ApiError::bad_request(
                    "bad_resume",
                    "the input answers interrupts, but no run of this thread waits",
                ));
            }
            let bundle = claim.id().to_string();
            let spec = match new_run(state, input, last.as_ref(), &bundle).await {
                Ok(spec) => spec,
                Err(e) => {
                    claim.release().await;
                    return Err(e);
                }
            };
            (bundle, Some(claim), Work::New(Box::new(spec)))
        }
    };
    Ok(Planned {
        agent_name: name.to_string(),
        agent,
        thread: input.thread_id.clone(),
        turn: turn.clone(),
        agui_run_id,
        bundle,
        claim,
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
                .schema()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        });
    }
    if let Some(last) = last
        && let Some((id, history, statement_sha256)) =
            continued_turn(state, &input.thread_id, last).await?
    {
        spec = spec.history(history).continues(Continuation {
            run_id: id,
            statement_sha256,
        });
    }
    Ok(spec)
}

/// Where a thread's new run continues from: its last run's bundle, or — when that one
/// cannot be read (removed from the store, broken) — the latest earlier bundle of the
/// thread that can, or none (the run starts afresh). Each bundle skipped is logged; the
/// new bundle's `continues` names the one it really continued, so the gap shows.
async fn continued_turn(
    state: &Arc<State>,
    thread: &str,
    last: &LastRun,
) -> Result<Option<(String, Vec<Message>, String)>, ApiError> {
    let mut candidates = vec![last.id.clone()];
    let mut tried_index = false;
    let mut i = 0;
    while i < candidates.len() {
        let id = candidates[i].clone();
        i += 1;
        match earlier_turn(state, &id).await {
            Ok((history, digest)) => return Ok(Some((id, history, digest))),
            Err(why) => {
                tracing::warn!(
                    bundle = %id,
                    thread,
                    "a run of the thread cannot be read, so the new run does not continue it: {why}"
                );
            }
        }
        if !tried_index {
            tried_index = true;
            // The thread's other ended runs, newest first.
            let mut entries: Vec<_> = state
                .entries()
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?
                .into_iter()
                .filter(|e| e.thread == thread && e.id != last.id && e.status != "paused")
                .collect();
            entries.sort_by(|a, b| b.started.cmp(&a.started).then_with(|| b.id.cmp(&a.id)));
            candidates.extend(entries.into_iter().map(|e| e.id));
        }
    }
    tracing::warn!(
        thread,
        "no run of the thread can be read: the new run starts without a history"
    );
    Ok(None)
}

/// The messages of a bundle in the store (no system message) and the SHA-256 of its
/// statement; `Err` says why it cannot be read.
async fn earlier_turn(state: &Arc<State>, id: &str) -> Result<(Vec<Message>, String), String> {
    let opened = state
        .config
        .store
        .open_bundle(id)
        .await
        .map_err(|e| {
            state.metrics.store_error(crate::metrics::StoreOp::Read);
            e.to_string()
        })?
        .ok_or_else(|| "it is not in the store".to_string())?;
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
    .map_err(|e| e.to_string())?
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
    if state.shared.is_some() {
        fetch_paused(state, last).await?;
    }
    let folder = state.folder_of(&last.id);
    let (waiting, made) = tokio::task::spawn_blocking(move || {
        let waiting = provrun_agent::read::waiting_calls(&folder)?;
        Ok::<_, provrun_agent::AgentError>((waiting, calls_made(&folder)?))
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(|e| {
        tracing::error!(bundle = %last.id, "the paused run cannot be read: {e}");
        ApiError::conflict(
            "paused_run_unreadable",
            "the thread's paused run cannot be read here, so it cannot be resumed",
        )
    })?;
    check_tool_results(input, &last.id, &made)?;
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

/// With a bucket store, the paused bundle `last` may have paused on another replica (or
/// paused again there after this one kept an older copy): unless the work folder holds it
/// as it paused (its statement's SHA-256 is the one the thread names), its tar is fetched
/// from the store and unpacked there.
async fn fetch_paused(state: &Arc<State>, last: &LastRun) -> Result<(), ApiError> {
    let folder = state.folder_of(&last.id);
    let unreadable = |why: String| {
        tracing::error!(bundle = %last.id, "the paused run cannot be fetched from the store: {why}");
        ApiError::conflict(
            "paused_run_unreadable",
            "the thread's paused run cannot be read here, so it cannot be resumed",
        )
    };
    let current = std::fs::read(folder.join("statement.json"))
        .is_ok_and(|s| crate::digest::sha256_hex(&s) == last.statement_sha256);
    if current {
        return Ok(());
    }
    let Some(shared) = &state.shared else {
        return Ok(());
    };
    let tar = shared
        .bundle_tar(&last.id)
        .await
        .map_err(|e| unreadable(e.to_string()))?
        .ok_or_else(|| unreadable("the store has no tar of it".into()))?;
    let (build, id, want) = (
        state.build_dir.clone(),
        last.id.clone(),
        last.statement_sha256.clone(),
    );
    tokio::task::spawn_blocking(move || {
        let fresh = tempfile::Builder::new()
            .prefix(".fetch-")
            .tempdir_in(&build)
            .map_err(|e| e.to_string())?;
        let into = fresh.path().join(&id);
        provrun_store::untar(&tar, &into, &format!("{id}.tar")).map_err(|e| e.to_string())?;
        let statement = std::fs::read(into.join("statement.json")).map_err(|e| e.to_string())?;
        if crate::digest::sha256_hex(&statement) != want {
            return Err("the store's tar is not the bundle as it paused".to_string());
        }
        let folder = build.join(&id);
        if std::fs::symlink_metadata(&folder).is_ok() {
            std::fs::remove_dir_all(&folder).map_err(|e| e.to_string())?;
        }
        std::fs::rename(&into, &folder).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| unreadable(e.to_string()))?
    .map_err(unreadable)
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

/// The run call ids of every call a bundle recorded (done or waiting).
fn calls_made(bundle: &Path) -> Result<HashSet<String>, provrun_agent::AgentError> {
    Ok(provrun_evidence::read_typed_events(bundle)?
        .into_iter()
        .filter_map(|e| match e.body {
            provrun_evidence::EventPayload::ToolCalled(t) => t.run_call_id,
            _ => None,
        })
        .collect())
}

/// Every `tool` message sent since the last user message (the turn being resumed) must
/// answer a call the paused run made: a result for any other call is refused (400
/// `bad_resume`) rather than dropped. Earlier turns' results are the client's history and
/// are not read.
fn check_tool_results(
    input: &RunInput,
    bundle: &str,
    made: &HashSet<String>,
) -> Result<(), ApiError> {
    let turn = input
        .messages
        .iter()
        .rposition(|m| m.role == "user")
        .map_or(0, |i| i + 1);
    for m in input.messages[turn..].iter().filter(|m| m.role == "tool") {
        let id = m.tool_call_id.as_deref().unwrap_or("");
        if !run_call_id_of(bundle, id).is_some_and(|rid| made.contains(rid)) {
            return Err(bad_resume(format!(
                "a tool message answers `{id}`, which is no call of the paused run `{bundle}`"
            )));
        }
    }
    Ok(())
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
    fn running_out_of_descriptors_is_told_apart_from_other_errors() {
        let emfile = std::io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        assert!(is_out_of_descriptors(&emfile));
        // As the agent crate wraps it, one cause down.
        let wrapped = provrun_agent::AgentError::ReadSpec {
            path: "a.toml".into(),
            source: emfile,
        };
        assert!(is_out_of_descriptors(&wrapped));
        let other = std::io::Error::from_raw_os_error(rustix::io::Errno::NOENT.raw_os_error());
        assert!(!is_out_of_descriptors(&other));
        assert_eq!(no_descriptors().status.as_u16(), 503);
    }

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
