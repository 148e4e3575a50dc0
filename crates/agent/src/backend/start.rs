//! Starting a run: staging the bundle and sandbox, recording `run_started`, and handing
//! the run to the loop.

use std::collections::HashMap;
use std::sync::Arc;

use provrun_evidence::{PendingBundle, Recorder, RunStarted, ToolInfo, to_canonical_string};
use provrun_model::Message;
use provrun_sandbox::Sandbox;
use provrun_tools::{RunContext, RunDeps, RunInfo, ToolCategory};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::capability::{EvidenceModel, Templates, ToolEvidence};
use crate::control::RunControl;
use crate::error::AgentError;
use crate::spec::{AgentSpec, RunResult, RunSpec};

use super::{BUILDER, Backend, Prepared, Run};
use crate::output::OUTPUT_TOOL;
use crate::state::LoopState;

/// The default folders `agent`'s runs search for skills, as `run_started` records them.
pub(super) fn default_skill_folders(agent: &AgentSpec) -> Vec<String> {
    let (_, defaults) = agent.skill_folders();
    defaults
        .iter()
        .map(|p| {
            std::path::absolute(p)
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string()
        })
        .collect()
}

/// Whether any of the agent's tools may run a program: category `execute`, or no
/// category declared (a command tool from a manifest may leave it out).
pub(super) fn may_run_commands(prepared: &Prepared) -> bool {
    prepared
        .tools
        .values()
        .any(|t| matches!(t.category(), ToolCategory::Execute | ToolCategory::Other))
}

/// The names of the agent's tools whose calls run a confined program.
pub(super) fn command_tools(prepared: &Prepared) -> Vec<String> {
    prepared
        .tools
        .values()
        .filter(|t| t.runs_program())
        .map(|t| t.name().to_string())
        .collect()
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Backend {
    /// Run `agent` once as `run` describes, and finish its bundle.
    ///
    /// `Err` means the run could not start (a bad spec, an unknown tool, a missing input, a
    /// bundle folder that is not empty) and nothing was left behind, or that evidence
    /// could not be written. A run that started and then failed returns `Ok` with status
    /// `failed` and a bundle that verifies.
    ///
    /// # Errors
    ///
    /// [`AgentError::InvalidSpec`], [`AgentError::Tool`], [`AgentError::Model`] and the
    /// like when the agent cannot be set up; [`AgentError::Input`] for an input that is
    /// missing or cannot be staged; [`AgentError::Evidence`] when the bundle cannot be
    /// created or written.
    pub async fn execute(
        &self,
        control: &RunControl,
        agent: &AgentSpec,
        run: &RunSpec,
    ) -> Result<RunResult, AgentError> {
        let mut prepared = self.prepare(agent, &run.client_tools)?;
        for input in &run.inputs {
            if let Err(e) = std::fs::symlink_metadata(input) {
                return Err(AgentError::Input {
                    path: input.clone(),
                    message: e.to_string(),
                });
            }
        }
        if let Some(host) = &run.host_dir
            && !host.is_dir()
        {
            return Err(AgentError::Input {
                path: host.clone(),
                message: "the host folder does not exist or is not a folder".into(),
            });
        }
        // No root may hold another (the bundle, /scratch's TMPDIR, inputs, host folder):
        // checked before anything is written.
        let roots = provrun_sandbox::roots::run_roots(
            &run.bundle,
            &std::env::temp_dir(),
            &run.inputs,
            run.host_dir.as_deref(),
        );
        provrun_sandbox::roots::check_disjoint(&roots)?;
        // An MCP server may be granted an input folder, but no other of the run's folders.
        let roots = provrun_sandbox::roots::run_roots(
            &run.bundle,
            &std::env::temp_dir(),
            &[],
            run.host_dir.as_deref(),
        );
        let run_id = run
            .run_id
            .clone()
            .unwrap_or_else(|| format!("run-{}", uuid::Uuid::new_v4()));
        // The bundle is begun (locked, aside) and the inputs staged into it before the MCP
        // servers start, so a stdio server sees them at /input as commands do; a failure
        // up to `run_started` leaves nothing behind.
        let pending = Recorder::begin(&run.bundle, &run_id, run.durability, self.blob_layout)?;
        // Boxed (as the other parts a waiting run is not in): see `Run::drive`.
        Box::pin(stage(&pending, run, agent)).await?;
        Box::pin(self.connect_remote(agent, &mut prepared, (roots, Some(pending.input_dir()))))
            .await?;
        if let Err(e) = check_tool_choice(agent, &prepared) {
            prepared.remote.shutdown().await;
            return Err(e);
        }
        let result = self
            .execute_prepared(control, agent, &prepared, run, (pending, run_id))
            .await;
        prepared.remote.shutdown().await;
        result
    }

    /// The run itself, once its inputs are staged in the begun bundle and its tools (MCP
    /// servers included) are ready: `run_started`, the inputs on record, the loop.
    pub(super) async fn execute_prepared(
        &self,
        control: &RunControl,
        agent: &AgentSpec,
        prepared: &Prepared,
        run: &RunSpec,
        (pending, run_id): (PendingBundle, String),
    ) -> Result<RunResult, AgentError> {
        let started = self.run_started(agent, prepared, run, &run_id)?;
        let recorder = pending.start(&started)?;
        // On record now: not kept for the whole run by every waiting run.
        drop(started);
        let live = self.watch(&recorder);
        let result = self
            .execute_started(control, agent, prepared, run, (recorder, run_id))
            .await;
        Box::pin(self.finish_live(live, result)).await
    }

    /// The run once its `run_started` is written: its inputs on record, the loop.
    async fn execute_started(
        &self,
        control: &RunControl,
        agent: &AgentSpec,
        prepared: &Prepared,
        run: &RunSpec,
        (recorder, run_id): (Recorder, String),
    ) -> Result<RunResult, AgentError> {
        let sandbox = match set_up(agent, run, &recorder).await {
            Ok(s) => s,
            // `run_started` is on record: the run ends as failed, its bundle whole.
            Err(e) => return Box::pin(super::finish::fail_started(control, recorder, e)).await,
        };
        let mut state = LoopState {
            messages: Vec::new(),
            ..LoopState::default()
        };
        if !prepared.instructions.is_empty() {
            state
                .messages
                .push(Message::system(prepared.instructions.clone()));
        }
        // A later turn of a conversation: the earlier messages, never a system message
        // (the instructions above open every run).
        state.messages.extend(
            run.history
                .iter()
                .filter(|m| !matches!(m, Message::System { .. }))
                .cloned(),
        );
        state.messages.push(Message::user(run.prompt.clone()));
        let active = self.start(control, agent, prepared, recorder, sandbox, (run_id, 0));
        active.drive(state, None).await
    }

    pub(super) fn start<'a>(
        &'a self,
        control: &'a RunControl,
        agent: &'a AgentSpec,
        prepared: &'a Prepared,
        recorder: Recorder,
        sandbox: Sandbox,
        // The run's id, and the model requests it made before (a resumed run's).
        (run_id, requests_made): (String, u64),
    ) -> Run<'a> {
        let ctx = RunContext::new(RunDeps {
            sandbox,
            run: RunInfo {
                run_id,
                declarer: Some(recorder.declarer()),
            },
        });
        let mut model = EvidenceModel::new(Arc::clone(&prepared.model), recorder.clone())
            .with_requests_made(requests_made);
        if let Some(schema) = &prepared.output_schema {
            model = model
                .with_output_tool(OUTPUT_TOOL)
                .with_output_schema(schema.clone());
        }
        Run {
            backend: self,
            control,
            agent,
            prepared,
            evidence: ToolEvidence::new(recorder.clone())
                .with_command_tools(command_tools(prepared))
                .with_templates(prepared.tools.values().map(|t| {
                    let templates = Templates {
                        summary: t.summary().map(str::to_string),
                        confirm: t.confirm().map(str::to_string),
                    };
                    (t.name().to_string(), templates)
                })),
            recorder,
            model,
            ctx,
        }
    }

    pub(super) fn run_started(
        &self,
        agent: &AgentSpec,
        prepared: &Prepared,
        run: &RunSpec,
        run_id: &str,
    ) -> Result<RunStarted, AgentError> {
        let tools = tool_infos(prepared)?;
        let mcp = mcp_description(prepared, &tools);
        let skills: Vec<Value> = prepared
            .skills
            .iter()
            .map(|s| json!({"name": s.name, "sha256": s.sha256}))
            .collect();
        let mut details = json!({
            "agent_spec": agent.source_text(),
            // Absolute, so a replay or resume from another folder finds the spec's files.
            "spec_dir": agent
                .base_dir
                .as_ref()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()).display().to_string()),
            "prompt": run.prompt,
            "host_dir_granted": run.host_dir.is_some(),
            "skills": skills,
            // The default folders searched for skills (absolute): a resume or a replay
            // searches these, not the defaults of the folder it runs in.
            "default_skill_folders": default_skill_folders(agent),
            "sandbox": sandbox_details(agent, prepared, !mcp.is_null()),
            // The `[settings]` the run's requests carry (after `--set`), by their names in
            // the spec; a resume or a replay uses these.
            "model_settings": agent.settings,
        });
        if !mcp.is_null() {
            // The MCP servers and their tools, full schemas included (see docs/evidence.md).
            details["mcp"] = mcp;
        }
        record_conversation(&mut details, run)?;
        if let Some(base) = prepared.model.base_url() {
            // Where the model's requests go, credentials left out (telemetry's
            // `server.address`).
            details["model_base_url"] = json!(without_credentials(base));
        }
        #[cfg(not(feature = "otel"))]
        let _ = run_id;
        #[cfg(feature = "otel")]
        if self.otlp.is_some() {
            // The trace the run's spans are exported in, derived from the run id.
            details["otel"] = json!({ "trace_id": provrun_otel::trace_id_for_run(run_id) });
        }
        Ok(RunStarted {
            builder: self.builder.clone().unwrap_or_else(|| BUILDER.to_string()),
            agent_spec_digest: agent.digest(),
            agent: agent.name.clone(),
            model: prepared.model.name().to_string(),
            tools,
            limits: json!({
                "max_steps": agent.max_steps,
                "tool_timeout_s": agent.tool_timeout_s,
                "approve": agent.approve,
                "stream": agent.stream,
                "sandbox": agent.limits,
            }),
            details,
        })
    }
}

/// What `run_started.details` records of a run's place in a conversation and of the tools
/// its caller runs, each only when there is one: `client_tools` (their definitions, so a
/// resume or replay offers them again), `continues` (the earlier run) and `history` (the
/// messages it started from).
fn record_conversation(details: &mut Value, run: &RunSpec) -> Result<(), AgentError> {
    let value = |what: &str, v: Result<Value, serde_json::Error>| {
        v.map_err(|e| AgentError::Bundle {
            path: run.bundle.clone(),
            message: format!("cannot record the run's {what}: {e}"),
        })
    };
    if !run.client_tools.is_empty() {
        details["client_tools"] = value("client tools", serde_json::to_value(&run.client_tools))?;
    }
    if let Some(thread) = &run.thread {
        details["thread"] = json!(thread);
    }
    if let Some(earlier) = &run.continues {
        details["continues"] = value("continuation", serde_json::to_value(earlier))?;
    }
    if !run.history.is_empty() {
        details["history"] = value("history", serde_json::to_value(&run.history))?;
    }
    Ok(())
}

/// Copies the run's inputs into the begun bundle's `input/` (off the async executor),
/// within the agent's limits; a failure is the input's error.
async fn stage(
    pending: &PendingBundle,
    run: &RunSpec,
    agent: &AgentSpec,
) -> Result<(), AgentError> {
    let input_dir = pending.input_dir();
    let inputs = run.inputs.clone();
    let limits = agent.limits.clone();
    let staged = tokio::task::spawn_blocking(move || {
        provrun_sandbox::stage_inputs(&input_dir, &inputs, &limits)
    })
    .await
    .map_err(|e| AgentError::Bundle {
        path: run.bundle.clone(),
        message: format!("staging stopped: {e}"),
    })?;
    staged.map(drop).map_err(|e| AgentError::Input {
        path: run.inputs.first().cloned().unwrap_or_default(),
        message: e.to_string(),
    })
}

/// What a run needs once its `run_started` is written and before its loop: its inputs on
/// record, its sandbox.
async fn set_up(
    agent: &AgentSpec,
    run: &RunSpec,
    recorder: &Recorder,
) -> Result<Sandbox, AgentError> {
    let rec = recorder.clone();
    tokio::task::spawn_blocking(move || rec.record_inputs())
        .await
        .map_err(|e| AgentError::Bundle {
            path: run.bundle.clone(),
            message: format!("recording the inputs stopped: {e}"),
        })??;
    let mut sandbox = Sandbox::with_temp_scratch(
        recorder.input_dir(),
        recorder.output_dir(),
        agent.limits.clone(),
    )?
    .allow_degraded_commands(agent.allow_degraded_sandbox);
    if let Some(host) = &run.host_dir {
        sandbox = sandbox.with_host_dir(host)?;
    }
    Ok(sandbox)
}

/// A `tool_choice` that names one tool must name one the model is offered.
fn check_tool_choice(agent: &AgentSpec, prepared: &Prepared) -> Result<(), AgentError> {
    let Some(crate::spec::ToolChoiceSpec::Tool { tool }) = &agent.settings.tool_choice else {
        return Ok(());
    };
    if prepared.definitions().iter().any(|d| &d.name == tool) {
        return Ok(());
    }
    Err(AgentError::InvalidSpec {
        origin: format!("agent spec `{}`", agent.name),
        message: format!(
            "`[settings]`: `tool_choice` names `{tool}`, which is not one of the agent's tools"
        ),
    })
}

/// `run_started.tools`: each tool offered to the model, with the digest of its schema.
fn tool_infos(prepared: &Prepared) -> Result<Vec<ToolInfo>, AgentError> {
    let mut tools = Vec::new();
    for d in prepared.definitions().iter() {
        let canonical = to_canonical_string(&d.parameters)?;
        tools.push(ToolInfo {
            name: d.name.clone(),
            schema_sha256: sha256_hex(canonical.as_bytes()),
        });
    }
    Ok(tools)
}

/// `run_started.details.mcp`: the MCP servers and their tools (`null` without servers),
/// each tool with the digest `tools` has for it.
fn mcp_description(prepared: &Prepared, tools: &[ToolInfo]) -> Value {
    // Each MCP tool's digest is the one `tools` has: of the schema as offered to the
    // model (the listed one, as `Tool` normalises it).
    let digests: HashMap<&str, &str> = tools
        .iter()
        .map(|t| (t.name.as_str(), t.schema_sha256.as_str()))
        .collect();
    let mut mcp = prepared.remote.describe(|_| String::new());
    // (A replayed recording's description is a bundle's data: never index into it
    // blindly.)
    let servers = mcp.as_array_mut().into_iter().flatten();
    for server in servers.filter_map(Value::as_object_mut) {
        let tools = server.get_mut("tools").and_then(Value::as_array_mut);
        for tool in tools.into_iter().flatten().filter_map(Value::as_object_mut) {
            let digest = tool
                .get("name")
                .and_then(Value::as_str)
                .and_then(|n| digests.get(n))
                .map(|d| Value::String(d.to_string()))
                .unwrap_or(Value::Null);
            tool.insert("schema_sha256".into(), digest);
        }
    }
    mcp
}

/// `run_started.details.sandbox`: what confines the run's commands and MCP servers
/// (`has_mcp`: the run has MCP servers).
fn sandbox_details(agent: &AgentSpec, prepared: &Prepared, has_mcp: bool) -> Value {
    json!({
        // What confines run_command on this machine; `degraded` names missing layers
        // (commands then run only if allow_degraded_sandbox is set, without those layers).
        // Probing runs the real confinement once per process (a bubblewrap child),
        // so it is done only for an agent with a tool that may run a program
        // (category `execute`, or none declared) or an MCP server; otherwise `null`.
        "command_confinement": (may_run_commands(prepared) || has_mcp)
            .then(Sandbox::command_support),
        "allow_degraded_sandbox": agent.allow_degraded_sandbox,
        // Version marker: every command event of this log records its
        // confinement (`tool_called.confinement`), which verify then requires of
        // the calls of these tools.
        "command_records": 1,
        "command_tools": command_tools(prepared),
        // The host user commands and MCP servers run as: `dedicated` (provrun is
        // root; `uid`/`gid` are the limits' `command_uid`/`command_gid`), `root`
        // (provrun is root and `command_uid = 0` opted out) or `runtime` (provrun
        // is not root: its own uid, nothing changed).
        "command_user": provrun_sandbox::CommandUser::for_limits(&agent.limits),
    })
}

/// A base URL without any user name, password, query or fragment in it.
fn without_credentials(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}
