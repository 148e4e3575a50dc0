//! Building a [`Backend`](super::Backend): its builder methods, MCP wiring, the choice of
//! model and the preparation of an agent's tools, instructions and skills.

use std::collections::BTreeMap;
use std::sync::Arc;

use provrun_model::{Model, ModelError, ScriptModel, TestModel, ToolDefinition};
use provrun_tools::{Tool, ToolMode, ToolRegistry};

use crate::error::AgentError;
use crate::hooks::ToolHooks;
use crate::output::OutputSchema;
use crate::recorded::Replaying;
use crate::remote::{RecordedMcp, Remote};
use crate::skills::{self, USE_SKILL_TOOL};
use crate::spec::{AgentSpec, ModelRef, RunResult};

use super::{Backend, Prepared};
use crate::output::OUTPUT_TOOL;

/// A run's live export: `None` when not asked for, else the exporter or why it could not
/// start.
#[cfg(feature = "otel")]
pub(super) type Live = Option<Result<provrun_otel::LiveExport, String>>;
/// No live export without the `otel` feature (a unit struct, not `()`, so binding it is
/// not a unit binding).
#[cfg(not(feature = "otel"))]
pub(super) struct Live;

/// The base URL and key of an HTTP model: the spec's `base_url`, else the variable
/// `base_var`; the key from the variable the spec's `api_key_env` names (which must then
/// be set), else from `key_var`.
#[cfg(feature = "openai")]
pub(super) fn endpoint(
    agent: &AgentSpec,
    base_var: &str,
    key_var: &str,
) -> Result<(Option<String>, Option<String>), String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let base = agent.base_url.clone().or_else(|| env(base_var));
    let key = match &agent.api_key_env {
        Some(var) => Some(env(var).ok_or_else(|| {
            format!("the agent spec's `api_key_env` names {var}, which is not set")
        })?),
        None => env(key_var),
    };
    Ok((base, key))
}

impl Backend {
    /// A backend with the linked tools and each spec's own model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Use this model instead of the spec's (for tests, or a model built in code).
    pub fn with_model(mut self, model: Arc<dyn Model>) -> Self {
        self.model = Some(model);
        self
    }

    /// Read an agent spec for this backend: as [`AgentSpec::load`], except that with a
    /// model given to [`Backend::with_model`] the spec's `model` may name any model (that
    /// model answers, whatever the spec names), so a program with a `Model` of its own can
    /// name it in `agent.toml`.
    ///
    /// # Errors
    ///
    /// As [`AgentSpec::load`].
    pub fn load_agent(&self, path: impl AsRef<std::path::Path>) -> Result<AgentSpec, AgentError> {
        if self.model.is_some() {
            AgentSpec::load_any_model(path)
        } else {
            AgentSpec::load(path)
        }
    }

    /// Hold one of `permits`' permits while each model request is sent: every run of
    /// this backend and of its clones (and of other backends given the same semaphore)
    /// together keep at most that many requests in flight. A request waiting for a permit
    /// has not been sent; the wait counts in its recorded duration.
    pub fn with_model_limit(mut self, permits: Arc<tokio::sync::Semaphore>) -> Self {
        self.model_limit = Some(permits);
        self
    }

    /// Find tools in this registry instead of [`ToolRegistry::linked`].
    pub fn with_registry(mut self, registry: ToolRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Write new bundles' blobs in this layout: the pack (the default), or loose files
    /// as versions before the pack did (for readers that know only those, and for
    /// comparing the two). A resumed run keeps its bundle's layout.
    pub fn with_blob_layout(mut self, layout: provrun_evidence::BlobLayout) -> Self {
        self.blob_layout = layout;
        self
    }

    /// Name `builder` as what ran the agent in new bundles (`run_started.builder`, and so
    /// the statement's `builder.id`) instead of [`BUILDER`](crate::consts::BUILDER): an
    /// organisation's own builder URI, e.g. from
    /// [`provrun_evidence::builder_id_from_env`]. A resumed run keeps its bundle's.
    pub fn with_builder(mut self, builder: impl Into<String>) -> Self {
        self.builder = Some(builder.into());
        self
    }

    /// Run these hooks around every tool call.
    pub fn with_hooks(mut self, hooks: ToolHooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Export each run's spans over OTLP while it goes: a `chat` span when a model
    /// response is recorded, an `execute_tool` span when a call ends, the run's
    /// `invoke_agent` span when it ends or pauses (a resumed run sends only its new part,
    /// in the same trace), through the OpenTelemetry batch span processor (its bounded
    /// queue and `OTEL_BSP_*` variables). The run's trace id is recorded in its
    /// `run_started` event (`details.otel.trace_id`). Nothing on the run's path waits for
    /// the collector; at the end the last spans are flushed within `config.timeout`. The
    /// export never changes the run's outcome or its bundle: how it went is in
    /// [`RunResult::otel_export`]. [`provrun_otel::OtlpConfig::from_env`] reads the
    /// standard `OTEL_*` variables. Replays never export.
    ///
    /// Needs the `otel` feature (on by default).
    #[cfg(feature = "otel")]
    pub fn with_otlp(mut self, config: provrun_otel::OtlpConfig) -> Self {
        self.otlp = Some(config);
        self
    }

    /// The same backend without OTLP export (replays use it).
    pub(crate) fn without_otlp(self) -> Self {
        #[cfg(feature = "otel")]
        return Self { otlp: None, ..self };
        #[cfg(not(feature = "otel"))]
        self
    }

    /// Whether the run's spans are exported.
    pub(super) fn otlp_asked(&self) -> bool {
        #[cfg(feature = "otel")]
        return self.otlp.is_some();
        #[cfg(not(feature = "otel"))]
        return false;
    }

    /// Start exporting the run `recorder` writes, when asked to: its log so far is read
    /// (a resumed run's earlier part was sent when it paused) and the recorder tells the
    /// exporter of every write from now on.
    #[cfg(feature = "otel")]
    pub(super) fn watch(&self, recorder: &provrun_evidence::Recorder) -> Live {
        let config = self.otlp.as_ref()?;
        let live = provrun_evidence::read_events(recorder.bundle_dir())
            .map_err(provrun_otel::OtelError::from)
            .and_then(|events| provrun_otel::LiveExport::start(config, &events))
            .map_err(|e| e.to_string());
        if let Ok(l) = &live {
            let _ = recorder.observe(l.observer());
        }
        Some(live)
    }

    /// Start exporting the run `recorder` writes, when asked to (never without `otel`).
    #[cfg(not(feature = "otel"))]
    pub(super) fn watch(&self, _recorder: &provrun_evidence::Recorder) -> Live {
        Live
    }

    /// The run ended or paused: flush its last spans (within the bound, on a blocking
    /// thread) and note how the export went.
    #[cfg(feature = "otel")]
    pub(super) async fn finish_live(
        &self,
        live: Live,
        result: Result<RunResult, AgentError>,
    ) -> Result<RunResult, AgentError> {
        let Some(live) = live else {
            return result;
        };
        let sent = match live {
            Ok(l) => tokio::task::spawn_blocking(move || l.finish())
                .await
                .map_err(|e| format!("the export stopped: {e}"))
                .and_then(|r| r.map_err(|e| e.to_string())),
            Err(e) => Err(e),
        };
        let mut result = result?;
        if let Err(e) = &sent {
            tracing::warn!(bundle = %result.bundle.display(), "OpenTelemetry export failed: {e}");
        }
        result.otel_export = Some(sent);
        Ok(result)
    }

    /// The run ended or paused (no export without `otel`).
    #[cfg(not(feature = "otel"))]
    pub(super) async fn finish_live(
        &self,
        _live: Live,
        result: Result<RunResult, AgentError>,
    ) -> Result<RunResult, AgentError> {
        result
    }

    /// Replay mode: recorded decisions instead of hooks (see [`crate::replay`]).
    pub(crate) fn replaying(mut self, replaying: Arc<Replaying>) -> Self {
        self.replaying = Some(replaying);
        self
    }

    /// Answer the agent's MCP tools from a recording instead of connecting to the servers
    /// (what [`crate::replay`] does).
    pub fn with_recorded_mcp(mut self, recorded: RecordedMcp) -> Self {
        self.recorded_mcp = Some(recorded);
        self
    }

    /// Connect the agent's MCP servers (or stand in with the recording) and add their
    /// tools to the run's.
    /// `roots` are the run's own folders (see `provrun_sandbox::roots::run_roots`): no
    /// server may be granted one of them; `input` is the run's staged inputs, which a
    /// stdio server sees read-only at its `/input`.
    pub(super) async fn connect_remote(
        &self,
        agent: &AgentSpec,
        prepared: &mut Prepared,
        (roots, input): (
            Vec<provrun_sandbox::roots::HostRoot>,
            Option<std::path::PathBuf>,
        ),
    ) -> Result<(), AgentError> {
        if agent.mcp.is_empty() && self.recorded_mcp.is_none() {
            return Ok(());
        }
        let registry = self.registry.clone().unwrap_or_else(ToolRegistry::linked);
        let remote =
            Remote::start(agent, &registry, self.recorded_mcp.as_ref(), (roots, input)).await?;
        #[cfg(feature = "mcp")]
        for t in remote.tools() {
            if prepared.tools.contains_key(&t.name) || t.name == OUTPUT_TOOL {
                remote.shutdown().await;
                return Err(AgentError::UnusableTool {
                    name: t.name.clone(),
                    reason: format!(
                        "MCP server `{}` lists a tool of that name, and the agent already has \
                         one (give the server a different `prefix`)",
                        t.server
                    ),
                });
            }
            let tool = match crate::remote::as_tool(&t) {
                Ok(tool) => tool,
                Err(e) => {
                    remote.shutdown().await;
                    return Err(e);
                }
            };
            prepared.definitions().push(tool.definition());
            prepared.tools.insert(t.name.clone(), tool);
        }
        prepared.remote = remote;
        Ok(())
    }

    /// The script model at `path`: the one read before when the file is unchanged (same
    /// device, inode, size and modification time), else read now. A script model is
    /// stateless (it answers from the request's history), so runs can share it.
    fn script_model(&self, path: &std::path::Path) -> Result<Arc<dyn Model>, ModelError> {
        use std::os::unix::fs::MetadataExt as _;
        let stamp = std::fs::metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()));
        let mut cache = self.scripts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stamp) = stamp
            && let Some(entry) = cache.get(path)
            && entry.stamp == stamp
        {
            return Ok(Arc::clone(&entry.model));
        }
        let model: Arc<dyn Model> = Arc::new(ScriptModel::from_path(path)?);
        if let Some(stamp) = stamp {
            cache.insert(
                path.to_path_buf(),
                ScriptEntry {
                    stamp,
                    model: Arc::clone(&model),
                },
            );
        }
        Ok(model)
    }

    pub(super) fn model_for(&self, agent: &AgentSpec) -> Result<Arc<dyn Model>, AgentError> {
        if let Some(m) = &self.model {
            return Ok(Arc::clone(m));
        }
        let model_err = |message: String| AgentError::Model {
            model: agent.model.clone(),
            message,
        };
        match ModelRef::parse(&agent.model).map_err(model_err)? {
            ModelRef::Test => Ok(Arc::new(TestModel::new())),
            ModelRef::Script(path) => {
                let path = agent.resolve(&path);
                self.script_model(&path)
                    .map_err(|e| model_err(e.to_string()))
            }
            #[cfg(feature = "openai")]
            ModelRef::OpenAi(name) => {
                let (base, key) =
                    endpoint(agent, "OPENAI_BASE_URL", "OPENAI_API_KEY").map_err(model_err)?;
                let config = provrun_model::OpenAiConfig::from_values(&name, base, key)
                    .map_err(|e| model_err(e.to_string()))?;
                Ok(Arc::new(
                    provrun_model::OpenAiModel::new(config)
                        .map_err(|e| model_err(e.to_string()))?,
                ))
            }
            #[cfg(feature = "openai")]
            ModelRef::Anthropic(name) => {
                let (base, key) = endpoint(agent, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")
                    .map_err(model_err)?;
                let config = provrun_model::AnthropicConfig::from_values(&name, base, key)
                    .map_err(|e| model_err(e.to_string()))?;
                Ok(Arc::new(
                    provrun_model::AnthropicModel::new(config)
                        .map_err(|e| model_err(e.to_string()))?,
                ))
            }
            #[cfg(feature = "openai")]
            ModelRef::OpenAiResponses(name) => {
                let (base, key) =
                    endpoint(agent, "OPENAI_BASE_URL", "OPENAI_API_KEY").map_err(model_err)?;
                let config = provrun_model::OpenAiResponsesConfig::from_values(&name, base, key)
                    .map_err(|e| model_err(e.to_string()))?;
                Ok(Arc::new(
                    provrun_model::OpenAiResponsesModel::new(config)
                        .map_err(|e| model_err(e.to_string()))?,
                ))
            }
            // Without the `openai` feature: an error naming it.
            #[cfg(not(feature = "openai"))]
            ModelRef::OpenAi(name) => provrun_model::model_from_spec(&format!("openai:{name}"))
                .map_err(|e| model_err(e.to_string())),
            #[cfg(not(feature = "openai"))]
            ModelRef::Anthropic(name) => {
                provrun_model::model_from_spec(&format!("anthropic:{name}"))
                    .map_err(|e| model_err(e.to_string()))
            }
            #[cfg(not(feature = "openai"))]
            ModelRef::OpenAiResponses(name) => {
                provrun_model::model_from_spec(&format!("openai-responses:{name}"))
                    .map_err(|e| model_err(e.to_string()))
            }
            ModelRef::Replay(bundle) => {
                let bundle = agent.resolve(&bundle);
                Ok(Arc::new(crate::recorded::replay_model(&bundle)?))
            }
        }
    }

    /// Everything a run of `agent` needs that does not change while it runs: its tools
    /// (the registry's, then `client_tools`, which the caller runs), instructions,
    /// skills, output schema and model.
    pub(super) fn prepare(
        &self,
        agent: &AgentSpec,
        client_tools: &[ToolDefinition],
    ) -> Result<Prepared, AgentError> {
        agent.validate_with_model(
            &format!("agent spec `{}`", agent.name),
            self.model.is_some(),
        )?;
        let (mut tools, mut definitions) = self.agent_tools(agent)?;
        add_client_tools(&mut tools, &mut definitions, client_tools)?;
        check_approve_names(agent, &tools)?;
        let skills = agent.visible_skills()?;
        let mut instructions = agent.instructions.clone();
        if !skills.is_empty() {
            if tools.contains_key(USE_SKILL_TOOL) {
                return Err(AgentError::UnusableTool {
                    name: USE_SKILL_TOOL.into(),
                    reason: "the name is reserved for loading skills".into(),
                });
            }
            let tool = skills::use_skill_tool(&skills)?;
            definitions.push(tool.definition());
            tools.insert(USE_SKILL_TOOL.to_string(), tool);
            if !instructions.is_empty() {
                instructions.push_str("\n\n");
            }
            instructions.push_str(&skills::skills_prompt(&skills));
        }
        let mut output_schema = None;
        if let Some(schema) = &agent.output_schema {
            let (checked, definition) = output_tool(agent, schema, &tools)?;
            output_schema = Some(checked);
            definitions.push(definition);
        }
        let mut model = self.model_for(agent)?;
        if let Some(permits) = &self.model_limit {
            model = Arc::new(crate::limit::LimitedModel {
                inner: model,
                permits: Arc::clone(permits),
            });
        }
        Ok(Prepared {
            tools,
            definitions: std::sync::Mutex::new(definitions),
            instructions,
            skills,
            model,
            output_schema,
            remote: Remote::none(),
        })
    }

    /// The agent's tools from the registry (the linked one unless given), by name, and
    /// their definitions for the model; a tool that cannot run here is refused.
    fn agent_tools(
        &self,
        agent: &AgentSpec,
    ) -> Result<(BTreeMap<String, Tool>, Vec<ToolDefinition>), AgentError> {
        let registry = self.registry.clone().unwrap_or_else(ToolRegistry::linked);
        let mut tools = BTreeMap::new();
        let mut definitions = Vec::new();
        for tool in registry.get(&agent.tool_names())? {
            match tool.mode() {
                ToolMode::RemoteMcp => {
                    return Err(AgentError::UnusableTool {
                        name: tool.name().to_string(),
                        reason: "it is declared to run in an MCP server: name the server in \
                                 the agent spec's `[[mcp]]` section instead, and its tools are \
                                 listed at run start"
                            .to_string(),
                    });
                }
                ToolMode::InProcess if !tool.is_runnable() => {
                    return Err(AgentError::UnusableTool {
                        name: tool.name().to_string(),
                        reason: "it cannot run in this process (see `provrun tools`)".to_string(),
                    });
                }
                _ => {}
            }
            definitions.push(tool.definition());
            tools.insert(tool.name().to_string(), tool);
        }
        Ok((tools, definitions))
    }
}

/// Add the tools the caller runs (client round trips) to the agent's: each needs a valid
/// name, an object schema, and a name no other tool of the run has.
fn add_client_tools(
    tools: &mut BTreeMap<String, Tool>,
    definitions: &mut Vec<ToolDefinition>,
    client_tools: &[ToolDefinition],
) -> Result<(), AgentError> {
    for d in client_tools {
        let unusable = |reason: String| AgentError::UnusableTool {
            name: d.name.clone(),
            reason,
        };
        if tools.contains_key(&d.name) || d.name == OUTPUT_TOOL || d.name == USE_SKILL_TOOL {
            return Err(unusable(
                "the caller offers a tool of that name, and the run already has one".into(),
            ));
        }
        let tool = Tool::builder(d.name.clone(), d.description.clone())
            .schema(d.parameters.clone())
            .mode(ToolMode::ClientRoundTrip)
            .build()
            .map_err(|e| unusable(format!("the caller's tool is not usable: {e}")))?;
        definitions.push(tool.definition());
        tools.insert(d.name.clone(), tool);
    }
    Ok(())
}

/// A tool name in an `approve` list must be one of the agent's tools (an MCP server's
/// tools are listed only at run start, so with servers any name goes).
fn check_approve_names(
    agent: &AgentSpec,
    tools: &BTreeMap<String, Tool>,
) -> Result<(), AgentError> {
    if agent.mcp.is_empty()
        && let Some(unknown) = agent
            .approve
            .tool_names()
            .into_iter()
            .find(|n| !tools.contains_key(*n))
    {
        return Err(AgentError::InvalidSpec {
            origin: format!("agent spec `{}`", agent.name),
            message: format!(
                "`approve` names `{unknown}`, which is neither a tool category (read, \
                 write, execute, network, search, other), `destructive`, nor one of the \
                 agent's tools"
            ),
        });
    }
    Ok(())
}

/// The agent's output schema, checked, and the output tool's definition for the model;
/// refused when the schema is not valid or one of the agent's tools has the name.
fn output_tool(
    agent: &AgentSpec,
    schema: &serde_json::Value,
    tools: &BTreeMap<String, Tool>,
) -> Result<(OutputSchema, ToolDefinition), AgentError> {
    let checked = OutputSchema::new(schema).map_err(|message| AgentError::InvalidSpec {
        origin: format!("agent spec `{}`", agent.name),
        message: format!("`output_schema` is not a valid JSON Schema: {message}"),
    })?;
    if tools.contains_key(OUTPUT_TOOL) {
        return Err(AgentError::UnusableTool {
            name: OUTPUT_TOOL.into(),
            reason: "the name is reserved for the output tool".into(),
        });
    }
    let definition = ToolDefinition {
        name: OUTPUT_TOOL.to_string(),
        description: "Give your final answer, as arguments that follow this schema.".to_string(),
        parameters: schema.clone(),
    };
    Ok((checked, definition))
}

/// A script model read before, and the file's stamp (device, inode, size, modification
/// time in seconds and nanoseconds) when it was read.
pub(super) struct ScriptEntry {
    stamp: (u64, u64, u64, i64, i64),
    model: Arc<dyn Model>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A script read once is shared by later runs; a changed file is read again.
    #[test]
    fn a_script_model_is_read_once_until_its_file_changes() {
        let dir = std::env::temp_dir().join(format!("provrun-script-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("script.json");
        std::fs::write(&path, r#"[{"text": "one"}]"#).unwrap();
        let backend = Backend::new();
        let a = backend.script_model(&path).unwrap();
        let b = backend.clone().script_model(&path).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "read again although unchanged");
        std::fs::write(&path, r#"[{"text": "two, longer"}]"#).unwrap();
        let c = backend.script_model(&path).unwrap();
        assert!(!Arc::ptr_eq(&a, &c), "a changed script was not read again");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
