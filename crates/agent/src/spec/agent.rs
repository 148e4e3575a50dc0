//! The agent spec: [`AgentSpec`], loaded from the TOML docs/contract.md §4 describes and
//! checked, and the [`ModelRef`] its `model` string parses to.

use std::path::{Path, PathBuf};

use provrun_sandbox::Limits;
use provrun_tools::McpServerSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ApprovePolicy;
use super::settings::SettingsSpec;
use crate::error::AgentError;

fn default_true() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

fn default_max_steps() -> u32 {
    20
}

fn default_tool_timeout_s() -> u64 {
    300
}

/// An agent: its model, instructions, tools and limits. Loadable from the TOML that
/// docs/contract.md §4 describes.
///
/// ```
/// let spec = provrun_agent::AgentSpec::from_toml_str(r#"
/// name = "hello"
/// model = "test"
/// instructions = "Summarise the files in /input."
/// tools = ["list_dir", "read_file"]
/// "#, None).unwrap();
/// assert_eq!(spec.max_steps, 20);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// The agent's name.
    pub name: String,
    /// `test`, `script:PATH`, `replay:BUNDLE`, `openai:MODEL_NAME`, `anthropic:MODEL_NAME`
    /// or `openai-responses:MODEL_NAME`.
    pub model: String,
    /// The system prompt.
    #[serde(default)]
    pub instructions: String,
    /// The tools it may call, by registered name; `sandbox` stands for the sandbox tool
    /// set (the file tools and `run_command`; see [`AgentSpec::tool_names`]).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Offer the sandbox tool set (`read_file`, `write_file`, `str_replace`, `list_dir`,
    /// `run_command`) besides `tools`, as `tools = ["sandbox"]` does. The host tools stay
    /// opt-in by name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox: bool,
    /// Model requests at most; the run fails when it needs more.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Use the model's streamed API.
    #[serde(default)]
    pub stream: bool,
    /// The name of the environment variable that holds the API key of an `openai:`,
    /// `anthropic:` or `openai-responses:` model (default `OPENAI_API_KEY` /
    /// `ANTHROPIC_API_KEY`). The spec names the variable, never the key: the spec's text
    /// goes into the bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The API base URL of an `openai:`, `anthropic:` or `openai-responses:` model
    /// (`http://` or `https://`, no credentials in it); it wins over `OPENAI_BASE_URL` /
    /// `ANTHROPIC_BASE_URL`, which win over the provider's public API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Ask the provider to cache the system prompt and the tools between requests
    /// (Anthropic: `cache_control` breakpoints on both), so a long run pays for them
    /// once; the cache's token counts are in each `model_called`'s usage. Other
    /// providers ignore it (OpenAI caches long prompts on its own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_caching: bool,
    /// The model request settings (`[settings]`: temperature, max_tokens, stop,
    /// reasoning effort, thinking, …), sent in each API's own names; a setting the run's
    /// API does not take is refused before the run starts.
    #[serde(default, skip_serializing_if = "SettingsSpec::is_empty")]
    pub settings: SettingsSpec,
    /// Seconds one tool call may take (default 300). At the timeout the call is answered
    /// as failed: an async tool is dropped there; a sync tool runs on a blocking thread
    /// that cannot be stopped, so it finishes in the background and its result is
    /// discarded. The sandbox's `[limits]` are separate.
    #[serde(default = "default_tool_timeout_s")]
    pub tool_timeout_s: u64,
    /// Which tool calls wait for approval.
    #[serde(default)]
    pub approve: ApprovePolicy,
    /// Sandbox quotas; the defaults are safe, not unlimited.
    #[serde(default)]
    pub limits: Limits,
    /// A JSON Schema for structured output (draft 2020-12 unless `$schema` names another;
    /// `type` must be `object`; it may refer only to itself): the model then answers
    /// through a `final_result` tool, whose arguments are checked against it — an answer
    /// that does not follow it is a failed result the model sees. A schema that does not
    /// compile is a spec error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Folders of skills (each skill a folder with a `SKILL.md`), relative to the spec file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<PathBuf>,
    /// Also look for skills in the default folders, after `skills`: `./.provrun/skills`,
    /// then `$XDG_CONFIG_HOME/provrun/skills` (default `true`; see
    /// [`crate::default_skill_folders`]).
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub default_skills: bool,
    /// Run even where a sandbox layer is missing, recording the degradation.
    #[serde(default)]
    pub allow_degraded_sandbox: bool,
    /// MCP servers whose tools the agent may call, next to `tools` (`[[mcp]]` sections):
    /// each server's tools are listed at run start and named `PREFIX_tool`. A section with
    /// only a `name` uses the tools folder's declaration of that name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<McpServerSpec>,
    /// Where relative paths in the spec (a script, skills) resolve; the spec file's folder.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
    /// The spec's own text, when it was loaded from one; evidence keeps it verbatim.
    #[serde(skip)]
    pub source: Option<String>,
    /// The default skill folders to search instead of looking them up (when
    /// `default_skills` is on): a resumed or replayed run searches the ones its run
    /// recorded, wherever it runs. `None` looks them up.
    #[serde(skip)]
    pub pinned_default_skills: Option<Vec<PathBuf>>,
}

impl AgentSpec {
    /// A JSON Schema (draft 2020-12) of the agent spec file, for editors that complete and
    /// check `agent.toml` (e.g. through taplo or Even Better TOML); `provrun schema agent`
    /// prints it. Every key, its type, default and description; unknown keys are refused,
    /// as the loader refuses them.
    pub fn json_schema() -> Value {
        let mut schema = schemars::schema_for!(AgentSpec).to_value();
        if let Some(map) = schema.as_object_mut() {
            map.insert(
                "title".into(),
                Value::String("provrun agent spec (agent.toml)".into()),
            );
        }
        schema
    }

    /// A spec with defaults for everything but the name and model.
    pub fn new(name: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            model: model.into(),
            instructions: String::new(),
            tools: Vec::new(),
            sandbox: false,
            max_steps: default_max_steps(),
            stream: false,
            api_key_env: None,
            base_url: None,
            prompt_caching: false,
            settings: SettingsSpec::default(),
            tool_timeout_s: default_tool_timeout_s(),
            approve: ApprovePolicy::None,
            limits: Limits::default(),
            output_schema: None,
            skills: Vec::new(),
            default_skills: true,
            allow_degraded_sandbox: false,
            mcp: Vec::new(),
            base_dir: None,
            source: None,
            pinned_default_skills: None,
        }
    }

    /// Parse a spec from TOML text; `origin` names the file in error messages (with the
    /// line and column of the problem) and is where relative paths resolve.
    ///
    /// # Errors
    ///
    /// [`AgentError::InvalidSpec`] when the text is not TOML of a spec, or the spec fails
    /// [`AgentSpec::validate`].
    pub fn from_toml_str(text: &str, origin: Option<&Path>) -> Result<Self, AgentError> {
        Self::parse_toml(text, origin, false)
    }

    /// [`AgentSpec::from_toml_str`]; with `custom_model`, `model` may name any model (see
    /// [`AgentSpec::validate_with_model`]).
    pub(crate) fn parse_toml(
        text: &str,
        origin: Option<&Path>,
        custom_model: bool,
    ) -> Result<Self, AgentError> {
        let shown = origin
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "agent spec".to_string());
        let mut spec: AgentSpec = toml::from_str(text).map_err(|e| AgentError::InvalidSpec {
            origin: shown.clone(),
            message: one_line(&e.to_string()),
        })?;
        spec.source = Some(text.to_string());
        spec.base_dir = origin
            .and_then(Path::parent)
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .map(Path::to_path_buf);
        spec.validate_with_model(&shown, custom_model)?;
        Ok(spec)
    }

    /// Read and parse a spec file.
    ///
    /// # Errors
    ///
    /// [`AgentError::ReadSpec`] when the file cannot be read; otherwise as
    /// [`AgentSpec::from_toml_str`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self, AgentError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| AgentError::ReadSpec {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text, Some(path))
    }

    /// [`AgentSpec::load`] for a spec whose model a program supplies
    /// (`Backend::with_model`, e.g. a downstream crate's own `Model`): `model` may be any
    /// name, such as that model's own, and every other check still applies. A backend
    /// picks the right one itself with `Backend::load_agent`.
    ///
    /// # Errors
    ///
    /// As [`AgentSpec::load`], but never for the model's name.
    pub fn load_any_model(path: impl AsRef<Path>) -> Result<Self, AgentError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| AgentError::ReadSpec {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str_any_model(&text, Some(path))
    }

    /// [`AgentSpec::from_toml_str`] for a spec whose model a program supplies: `model` may
    /// be any name (see [`AgentSpec::load_any_model`]).
    ///
    /// # Errors
    ///
    /// As [`AgentSpec::from_toml_str`], but never for the model's name.
    pub fn from_toml_str_any_model(text: &str, origin: Option<&Path>) -> Result<Self, AgentError> {
        Self::parse_toml(text, origin, true)
    }

    /// Check what TOML's types cannot: a name, a known model scheme, sane limits, unique
    /// tool names.
    ///
    /// # Errors
    ///
    /// [`AgentError::InvalidSpec`], with `origin` and what is wrong, for the first check
    /// that fails.
    pub fn validate(&self, origin: &str) -> Result<(), AgentError> {
        self.validate_with_model(origin, false)
    }

    /// [`AgentSpec::validate`]; with `custom_model` (a model given to
    /// `Backend::with_model`, or a replay's) the spec's `model` may be any name, such as
    /// that model's own: the given model answers, whatever the spec names.
    pub(crate) fn validate_with_model(
        &self,
        origin: &str,
        custom_model: bool,
    ) -> Result<(), AgentError> {
        // Messages quote the spec's own values, which may hold any character: control
        // characters are shown escaped, so that an error stays on one line.
        let invalid = |message: String| AgentError::InvalidSpec {
            origin: origin.to_string(),
            message: escape_controls(&message),
        };
        if self.name.trim().is_empty() {
            return Err(invalid("`name` is empty".into()));
        }
        if !custom_model {
            ModelRef::parse(&self.model).map_err(|m| invalid(format!("`model`: {m}")))?;
        }
        if let Some(var) = &self.api_key_env
            && !is_env_name(var)
        {
            return Err(invalid(format!(
                "`api_key_env` must name an environment variable (letters, digits and `_`, \
                 not starting with a digit), not `{var}`: the key itself never goes in the spec"
            )));
        }
        if let Some(url) = &self.base_url {
            check_base_url(url).map_err(|m| invalid(format!("`base_url`: {m}")))?;
        }
        if self.max_steps == 0 {
            return Err(invalid("`max_steps` must be at least 1".into()));
        }
        if self.tool_timeout_s == 0 {
            return Err(invalid("`tool_timeout_s` must be at least 1".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.tools {
            if !seen.insert(t.as_str()) {
                return Err(invalid(format!("tool `{t}` is listed twice in `tools`")));
            }
        }
        if let ApprovePolicy::Listed(entries) = &self.approve
            && let Some(bad) = entries.iter().find(|e| e.trim().is_empty())
        {
            return Err(invalid(format!(
                "`approve` lists an empty entry ({bad:?}): name tool categories or tools"
            )));
        }
        let mut servers = std::collections::BTreeSet::new();
        for server in &self.mcp {
            server
                .check(true)
                .map_err(|m| invalid(format!("`[[mcp]]`: {m}")))?;
            if !servers.insert(server.name.as_str()) {
                return Err(invalid(format!(
                    "`[[mcp]]`: MCP server `{}` is listed twice",
                    server.name
                )));
            }
        }
        if let Some(schema) = &self.output_schema
            && schema.get("type").and_then(Value::as_str) != Some("object")
        {
            return Err(invalid(
                "`output_schema` must be a JSON Schema with `type = \"object\"`".into(),
            ));
        }
        if let Some(schema) = &self.output_schema {
            crate::output::OutputSchema::new(schema)
                .map_err(|e| invalid(format!("`output_schema` is not a valid JSON Schema: {e}")))?;
        }
        self.check_settings(&self.model, custom_model)
            .map_err(|m| invalid(m.to_string()))?;
        Ok(())
    }

    /// Checks the `[settings]` for a run of `model` (the spec's, or one given instead):
    /// every value, and, for a live model, that its API takes each setting (the message
    /// names the setting and the API). A custom or offline model takes every setting.
    ///
    /// # Errors
    ///
    /// [`AgentError::InvalidSpec`] naming the setting (and the API) that does not fit.
    pub fn check_settings_for(&self, model: &str) -> Result<(), AgentError> {
        self.check_settings(model, false)
            .map_err(|message| AgentError::InvalidSpec {
                origin: format!("agent spec `{}`", self.name),
                message: escape_controls(&message),
            })
    }

    fn check_settings(&self, model: &str, custom_model: bool) -> Result<(), String> {
        use provrun_model::WireApi;
        let settings = self.settings.to_model_settings();
        let api = match ModelRef::parse(model) {
            Ok(ModelRef::OpenAi(_)) if !custom_model => Some(WireApi::ChatCompletions),
            Ok(ModelRef::Anthropic(_)) if !custom_model => Some(WireApi::AnthropicMessages),
            Ok(ModelRef::OpenAiResponses(_)) if !custom_model => Some(WireApi::OpenAiResponses),
            _ => None,
        };
        match api {
            Some(api) => api.check_settings(&settings),
            None => settings.check_values(),
        }
        .map_err(|e| format!("`[settings]`: {e}"))?;
        let forced = self.output_schema.is_some()
            && !matches!(
                settings.tool_choice,
                None | Some(provrun_model::ToolChoice::Required)
            );
        if forced {
            return Err(
                "`[settings]`: with `output_schema` the answer comes through a tool, so \
                 `tool_choice` can only be \"required\" (or left out)"
                    .into(),
            );
        }
        Ok(())
    }

    /// The spec's text as evidence keeps it: the original file when loaded from one,
    /// else the spec serialised as TOML.
    pub fn source_text(&self) -> String {
        match &self.source {
            Some(s) => s.clone(),
            None => toml::to_string(self).unwrap_or_else(|e| format!("# unserialisable: {e}")),
        }
    }

    /// SHA-256 hex of [`AgentSpec::source_text`].
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.source_text().as_bytes()))
    }

    /// The skill folders this spec's runs search, in order: its own `skills` (resolved
    /// against the spec's folder), then, unless `default_skills = false`, the default
    /// folders that exist ([`crate::default_skill_folders`]). The second list is
    /// the defaults.
    pub fn skill_folders(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let own: Vec<PathBuf> = self.skills.iter().map(|p| self.resolve(p)).collect();
        let defaults = if self.default_skills {
            match &self.pinned_default_skills {
                Some(pinned) => pinned.clone(),
                None => crate::skills::default_skill_folders(),
            }
        } else {
            Vec::new()
        };
        (own, defaults)
    }

    /// The skills this spec's runs are offered ([`AgentSpec::skill_folders`], a skill of a
    /// default folder left out when an earlier folder has its name): what `provrun
    /// skills` lists.
    ///
    /// # Errors
    ///
    /// [`AgentError::Skill`] when a skill folder or `SKILL.md` cannot be read or is
    /// invalid, or two of the spec's own skills share a name.
    pub fn visible_skills(&self) -> Result<Vec<crate::skills::Skill>, AgentError> {
        let (own, defaults) = self.skill_folders();
        crate::skills::load_skills_layered(&own, &defaults)
    }

    /// The names of the tools the agent is given, in order: `tools` with `sandbox`
    /// replaced by the sandbox tool set ([`provrun_tools::SANDBOX_TOOLS`]), then that set
    /// when `sandbox = true`; each name once.
    ///
    /// ```
    /// let mut spec = provrun_agent::AgentSpec::new("a", "test");
    /// spec.tools = vec!["copy_to_host".into(), "sandbox".into(), "read_file".into()];
    /// assert_eq!(
    ///     spec.tool_names(),
    ///     ["copy_to_host", "read_file", "write_file", "str_replace", "list_dir", "run_command"]
    /// );
    /// ```
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let mut add = |name: &str| {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        };
        for tool in &self.tools {
            if tool == provrun_tools::SANDBOX_TOOL_SET {
                provrun_tools::SANDBOX_TOOLS.iter().for_each(|t| add(t));
            } else {
                add(tool);
            }
        }
        if self.sandbox {
            provrun_tools::SANDBOX_TOOLS.iter().for_each(|t| add(t));
        }
        names
    }

    /// Resolve a path written in the spec against the spec's folder.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        match &self.base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path.to_path_buf(),
        }
    }
}

/// Whether `name` can name an environment variable: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A base URL is `http://` or `https://` with a host, and holds no credentials (the
/// spec's text is kept in the bundle).
fn check_base_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("`{url}` is not an http:// or https:// URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return Err(format!("`{url}` names no host"));
    }
    if authority.contains('@') {
        return Err(
            "a URL with credentials in it (`user:password@`) would be kept in the \
                    bundle: give the key through `api_key_env` instead"
                .to_string(),
        );
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{url}` holds spaces or control characters"));
    }
    Ok(())
}

/// `text` with every control character (a newline among them) written as its Rust
/// escape (`\n`, `\u{1b}`).
fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '|' || c == '^' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A parsed `model` string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRef {
    /// The embedded `TestModel`.
    Test,
    /// A `ScriptModel` file.
    Script(PathBuf),
    /// The recorded responses of a bundle.
    Replay(PathBuf),
    /// An OpenAI-compatible server's model.
    OpenAi(String),
    /// A model of Anthropic's Messages API.
    Anthropic(String),
    /// A model of OpenAI's Responses API.
    OpenAiResponses(String),
}

impl ModelRef {
    /// Parse `test`, `script:PATH`, `replay:BUNDLE`, `openai:MODEL_NAME`,
    /// `anthropic:MODEL_NAME` or `openai-responses:MODEL_NAME`.
    ///
    /// # Errors
    ///
    /// A message when `text` is none of these forms.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "test" {
            return Ok(ModelRef::Test);
        }
        match text.split_once(':') {
            Some(("script", p)) if !p.is_empty() => Ok(ModelRef::Script(PathBuf::from(p))),
            Some(("replay", p)) if !p.is_empty() => Ok(ModelRef::Replay(PathBuf::from(p))),
            Some(("openai", m)) if !m.is_empty() => Ok(ModelRef::OpenAi(m.to_string())),
            Some(("anthropic", m)) if !m.is_empty() => Ok(ModelRef::Anthropic(m.to_string())),
            Some(("openai-responses", m)) if !m.is_empty() => {
                Ok(ModelRef::OpenAiResponses(m.to_string()))
            }
            _ => Err(format!(
                "unknown model `{text}`: expected test, script:PATH, replay:BUNDLE, \
                 openai:MODEL_NAME, anthropic:MODEL_NAME or openai-responses:MODEL_NAME"
            )),
        }
    }
}
