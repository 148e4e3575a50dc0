//! What a user asks for: [`AgentSpec`] (the agent) and [`RunSpec`] (one run of it), and
//! what they get back: [`RunResult`].

use std::path::{Path, PathBuf};

use provrun_evidence::{Durability, RunStatus};
use provrun_sandbox::Limits;
use provrun_tools::McpServerSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::AgentError;

/// Which tool calls pause the run for a human's approval.
///
/// In the spec, one word (`"none"`, `"destructive"`, `"all"`) or a list of tool
/// categories (`read`, `write`, `execute`, `network`, `search`, `other`), tool names and
/// the word `destructive`: `approve = ["write", "execute", "copy_to_host"]` pauses on
/// every call of a tool in one of those categories, of a tool of that name, or (with
/// `destructive` in the list) of a destructive tool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ApprovePolicy {
    /// None: unattended runs and scripts are never left waiting (the default).
    #[default]
    None,
    /// Calls of tools marked `destructive`.
    Destructive,
    /// Every tool call.
    All,
    /// Calls of tools in one of these categories, of these names, or (the entry
    /// `destructive`) marked destructive.
    Listed(Vec<String>),
}

/// The words a listed approval policy knows besides tool names.
const APPROVE_CATEGORIES: [&str; 6] = ["read", "write", "execute", "network", "search", "other"];

impl ApprovePolicy {
    /// Whether a call of a tool named `name`, in `category` (as
    /// [`provrun_tools::ToolCategory::as_str`] spells it), destructive or not, waits for
    /// approval under this policy.
    pub fn wants(&self, name: &str, category: &str, destructive: bool) -> bool {
        match self {
            ApprovePolicy::None => false,
            ApprovePolicy::Destructive => destructive,
            ApprovePolicy::All => true,
            ApprovePolicy::Listed(entries) => entries
                .iter()
                .any(|e| e == name || e == category || (destructive && e == "destructive")),
        }
    }

    /// The entries of a list that are neither a category nor `destructive`: tool names.
    pub fn tool_names(&self) -> Vec<&str> {
        match self {
            ApprovePolicy::Listed(entries) => entries
                .iter()
                .map(String::as_str)
                .filter(|e| *e != "destructive" && !APPROVE_CATEGORIES.contains(e))
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Serialize for ApprovePolicy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ApprovePolicy::None => serializer.serialize_str("none"),
            ApprovePolicy::Destructive => serializer.serialize_str("destructive"),
            ApprovePolicy::All => serializer.serialize_str("all"),
            ApprovePolicy::Listed(entries) => entries.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ApprovePolicy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ApprovePolicy;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "\"none\", \"destructive\", \"all\" or a list of tool categories and tool names",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ApprovePolicy, E> {
                match v {
                    "none" => Ok(ApprovePolicy::None),
                    "destructive" => Ok(ApprovePolicy::Destructive),
                    "all" => Ok(ApprovePolicy::All),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ApprovePolicy, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element::<String>()? {
                    entries.push(entry);
                }
                Ok(ApprovePolicy::Listed(entries))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl schemars::JsonSchema for ApprovePolicy {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ApprovePolicy".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Which tool calls pause the run for approval: a word, or a list \
                            of tool categories, tool names and `destructive`.",
            "oneOf": [
                {"type": "string", "enum": ["none", "destructive", "all"]},
                {"type": "array", "items": {"type": "string"}}
            ]
        })
    }
}

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
    pub fn load(path: impl AsRef<Path>) -> Result<Self, AgentError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| AgentError::ReadSpec {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text, Some(path))
    }

    /// Check what TOML's types cannot: a name, a known model scheme, sane limits, unique
    /// tool names.
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

/// One run of an agent: its prompt, inputs, and where the bundle goes.
///
/// Built with [`RunSpec::new`] and the chainable setters; the fields stay readable.
/// New fields may be added (hence `#[non_exhaustive]`), each with a default and a setter.
///
/// ```
/// use provrun_agent::{Durability, RunSpec};
/// let run = RunSpec::new("Summarise the inputs.", "/tmp/bundle")
///     .input("notes.txt")
///     .input("data")
///     .host_dir("/tmp/share")
///     .durability(Durability::Flush)
///     .run_id("nightly-0001");
/// assert_eq!(run.inputs.len(), 2);
/// assert_eq!(run.run_id.as_deref(), Some("nightly-0001"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunSpec {
    /// The user's prompt.
    pub prompt: String,
    /// Host files and folders to stage into `/input` (a file as `/input/<name>`, a
    /// folder's contents at `/input`'s root).
    pub inputs: Vec<PathBuf>,
    /// The bundle folder to create; it must not exist or be empty.
    pub bundle: PathBuf,
    /// A host folder the host tools may use; without one they are refused.
    pub host_dir: Option<PathBuf>,
    /// When evidence reaches stable storage.
    pub durability: Durability,
    /// The run's id; one is generated when absent.
    pub run_id: Option<String>,
}

impl RunSpec {
    /// A run with this prompt writing its bundle to `bundle`, with no inputs, no host
    /// folder, a generated run id, and evidence flushed per event (fsynced at the end:
    /// [`Durability::AtEnd`]).
    pub fn new(prompt: impl Into<String>, bundle: impl Into<PathBuf>) -> Self {
        Self {
            prompt: prompt.into(),
            inputs: Vec::new(),
            bundle: bundle.into(),
            host_dir: None,
            durability: Durability::AtEnd,
            run_id: None,
        }
    }

    /// Set the user's prompt (replacing the one given to [`RunSpec::new`]).
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }

    /// Add an input to stage, after those already added.
    pub fn input(mut self, path: impl Into<PathBuf>) -> Self {
        self.inputs.push(path.into());
        self
    }

    /// Set the inputs to stage, replacing those already added.
    pub fn inputs<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.inputs = paths.into_iter().map(Into::into).collect();
        self
    }

    /// Set the bundle folder to create (replacing the one given to [`RunSpec::new`]).
    pub fn bundle(mut self, path: impl Into<PathBuf>) -> Self {
        self.bundle = path.into();
        self
    }

    /// Grant the host tools this host folder (without one they are refused).
    pub fn host_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.host_dir = Some(path.into());
        self
    }

    /// Choose when evidence reaches stable storage.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Give the run this id (without one, an id is generated).
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }
}

/// How a paused run is continued, beside the decisions (see
/// [`crate::Backend::resume_with`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResumeSpec {
    /// The host folder to grant again: needed when the run was granted one, refused
    /// when it was not.
    pub host_dir: Option<PathBuf>,
}

impl ResumeSpec {
    /// No options: for a run without a host folder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Grant this host folder again.
    pub fn host_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.host_dir = Some(path.into());
        self
    }
}

/// Token and call counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunUsage {
    /// Input (prompt) tokens over all model requests.
    pub input_tokens: u64,
    /// Output (completion) tokens over all model requests.
    pub output_tokens: u64,
    /// Model requests made.
    pub requests: u64,
    /// Tool calls completed (deferred calls count when they complete).
    pub tool_calls: u64,
}

/// A tool call that waits: for approval, or for the caller to run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferredCall {
    /// The call id as the model sent it. `--approve` / `--deny` accept it while it
    /// names one waiting call only.
    pub call_id: String,
    /// The call's id in the run, unique whatever the model sent (`STEP.N`): what
    /// `--approve` / `--deny` name. Empty only when read from an old serialisation.
    #[serde(default)]
    pub run_call_id: String,
    /// The tool.
    pub name: String,
    /// The arguments as the model sent them.
    pub arguments: String,
    /// Why it waits.
    pub reason: DeferReason,
    /// The tool's confirmation prompt with the call's arguments filled in (its
    /// `x-confirm`, e.g. `Delete /output/a.txt?`), when it has one: what to ask a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<String>,
}

/// Why a call waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferReason {
    /// The approval policy wants a human to approve it.
    Approval,
    /// A client round-trip tool: the caller runs it.
    ClientRoundTrip,
}

/// What the caller decides for a deferred call, given to `resume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Approve(String),
    /// Do not run it; the model is told why.
    Deny {
        /// The call id.
        call_id: String,
        /// What the model is told.
        message: String,
    },
    /// The caller ran it (client round trip): here is its result.
    Result {
        /// The call id.
        call_id: String,
        /// The result the model sees.
        content: String,
        /// Whether it succeeded.
        ok: bool,
    },
}

/// How a denied call's result begins: the model is told `denied: MESSAGE`, and the log
/// records that text as the call's result (the file format), which is how replay
/// recovers the message ([`denial_message`]).
const DENIED_PREFIX: &str = "denied: ";

/// The result the model is told for a call denied with `message`.
pub(crate) fn denial_text(message: &str) -> String {
    format!("{DENIED_PREFIX}{message}")
}

/// The message of a recorded denial ([`denial_text`]'s inverse), `None` when `result`
/// is not one.
pub(crate) fn denial_message(result: &str) -> Option<&str> {
    result.strip_prefix(DENIED_PREFIX)
}

impl Decision {
    /// The call this decision is for: its run-unique id (`DeferredCall::run_call_id`),
    /// or the model's id when only one waiting call has it.
    pub fn call_id(&self) -> &str {
        match self {
            Decision::Approve(id) => id,
            Decision::Deny { call_id, .. } | Decision::Result { call_id, .. } => call_id,
        }
    }
}

/// How a run ended, with what only that ending has: the answer of a finished run, the
/// reason of a failed or cancelled one, the waiting calls of a paused one.
///
/// ```
/// # fn show(result: &provrun_agent::RunResult) {
/// use provrun_agent::RunOutcome;
/// match &result.outcome {
///     RunOutcome::Finished { output } => println!("{output}"),
///     RunOutcome::Failed { error } => eprintln!("failed: {error}"),
///     RunOutcome::Cancelled { reason } => eprintln!("cancelled: {reason}"),
///     RunOutcome::Paused { deferred } => eprintln!("{} calls wait", deferred.len()),
///     _ => eprintln!("ended: {}", result.status().as_str()),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// The agent answered ([`RunStatus::Finished`]).
    Finished {
        /// The agent's final answer (the output tool's arguments as canonical JSON when
        /// the spec has an `output_schema`); empty when the model's last message had no
        /// text.
        output: String,
    },
    /// The run failed ([`RunStatus::Failed`]); the bundle still verifies.
    Failed {
        /// What went wrong, as `run_end` records it.
        error: String,
    },
    /// The run was cancelled ([`RunStatus::Cancelled`]).
    Cancelled {
        /// Where it stopped, as `run_end` records it (e.g. `the run was cancelled while
        /// waiting for the model`).
        reason: String,
    },
    /// The run waits ([`RunStatus::Paused`]): resume it with decisions for these calls
    /// ([`crate::Backend::resume`]).
    Paused {
        /// The calls it waits on, in the order the model made them.
        deferred: Vec<DeferredCall>,
    },
}

impl RunOutcome {
    /// How the loop's ending reads as an outcome: the part of `output`, `error` and
    /// `deferred` that `status` has, the rest dropped (a missing error reads as empty).
    pub(crate) fn from_status(
        status: RunStatus,
        output: String,
        error: Option<String>,
        deferred: Vec<DeferredCall>,
    ) -> Self {
        match status {
            RunStatus::Finished => RunOutcome::Finished { output },
            RunStatus::Failed => RunOutcome::Failed {
                error: error.unwrap_or_default(),
            },
            RunStatus::Cancelled => RunOutcome::Cancelled {
                reason: error.unwrap_or_default(),
            },
            RunStatus::Paused => RunOutcome::Paused { deferred },
        }
    }

    /// The status the bundle's `run_end` records for this outcome.
    pub fn status(&self) -> RunStatus {
        match self {
            RunOutcome::Finished { .. } => RunStatus::Finished,
            RunOutcome::Failed { .. } => RunStatus::Failed,
            RunOutcome::Cancelled { .. } => RunStatus::Cancelled,
            RunOutcome::Paused { .. } => RunStatus::Paused,
        }
    }

    /// The agent's final answer; empty unless the run finished.
    pub fn output(&self) -> &str {
        match self {
            RunOutcome::Finished { output } => output,
            _ => "",
        }
    }

    /// Why the run did not finish, as `run_end` records it: the error of a failed run,
    /// the reason of a cancelled one; `None` for a finished or paused run.
    pub fn error(&self) -> Option<&str> {
        match self {
            RunOutcome::Failed { error } => Some(error),
            RunOutcome::Cancelled { reason } => Some(reason),
            _ => None,
        }
    }

    /// The calls a paused run waits on; empty unless the run paused.
    pub fn deferred(&self) -> &[DeferredCall] {
        match self {
            RunOutcome::Paused { deferred } => deferred,
            _ => &[],
        }
    }
}

/// What a run gives back: its id, its [`RunOutcome`], its usage and where its bundle is.
///
/// Only this crate builds one (hence `#[non_exhaustive]`). Read how the run ended from
/// [`RunResult::outcome`], or through [`RunResult::status`], [`RunResult::output`],
/// [`RunResult::error`] and [`RunResult::deferred`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunResult {
    /// The run's id.
    pub run_id: String,
    /// How it ended, with the answer, the reason or the waiting calls.
    pub outcome: RunOutcome,
    /// Tokens and calls.
    pub usage: RunUsage,
    /// The bundle folder.
    pub bundle: PathBuf,
    /// With [`crate::Backend::with_otlp`]: what the export of the run's spans at its end
    /// gave (`Err` holds the reason it failed, which never changes the run's outcome);
    /// `None` when export was not asked for. Needs the `otel` feature (on by default).
    #[cfg(feature = "otel")]
    pub otel_export: Option<Result<provrun_otel::ExportSummary, String>>,
    /// How it ended: a copy of `outcome.status()`.
    #[deprecated(
        note = "a copy of `outcome`'s status: read `outcome` or the method of the \
                         same name, `status()`"
    )]
    pub status: RunStatus,
    /// The agent's final answer (empty unless finished): a copy of `outcome.output()`.
    #[deprecated(
        note = "a copy of `outcome`'s answer: read `outcome` or the method of the \
                         same name, `output()`"
    )]
    pub output: String,
    /// The calls a paused run waits on: a copy of `outcome.deferred()`.
    #[deprecated(
        note = "a copy of `outcome`'s waiting calls: read `outcome` or the method \
                         of the same name, `deferred()`"
    )]
    pub deferred: Vec<DeferredCall>,
    /// What went wrong, for a failed or cancelled run: a copy of `outcome.error()`.
    #[deprecated(
        note = "a copy of `outcome`'s error: read `outcome` or the method of the \
                         same name, `error()`"
    )]
    pub error: Option<String>,
}

impl RunResult {
    /// The result of a run that ended with `outcome`: the one place a result is built,
    /// so the deprecated copies of the outcome's parts always agree with it.
    #[allow(deprecated)] // it fills the copies kept for existing readers
    pub(crate) fn new(
        run_id: String,
        outcome: RunOutcome,
        usage: RunUsage,
        bundle: PathBuf,
    ) -> Self {
        Self {
            run_id,
            status: outcome.status(),
            output: outcome.output().to_string(),
            deferred: outcome.deferred().to_vec(),
            error: outcome.error().map(str::to_string),
            outcome,
            usage,
            bundle,
            #[cfg(feature = "otel")]
            otel_export: None,
        }
    }

    /// How the run ended ([`RunOutcome::status`]).
    pub fn status(&self) -> RunStatus {
        self.outcome.status()
    }

    /// The agent's final answer; empty unless the run finished ([`RunOutcome::output`]).
    pub fn output(&self) -> &str {
        self.outcome.output()
    }

    /// The error of a failed run or the reason of a cancelled one
    /// ([`RunOutcome::error`]).
    pub fn error(&self) -> Option<&str> {
        self.outcome.error()
    }

    /// The calls a paused run waits on; empty unless it paused ([`RunOutcome::deferred`]).
    pub fn deferred(&self) -> &[DeferredCall] {
        self.outcome.deferred()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> DeferredCall {
        DeferredCall {
            call_id: "c1".into(),
            run_call_id: "1.1".into(),
            name: "delete_file".into(),
            arguments: "{}".into(),
            reason: DeferReason::Approval,
            confirm: None,
        }
    }

    /// The loop's ending for `status`, with every part filled, so each case shows which
    /// part its outcome keeps.
    fn outcome(status: RunStatus) -> RunOutcome {
        RunOutcome::from_status(
            status,
            "the answer".into(),
            Some("what happened".into()),
            vec![waiting()],
        )
    }

    #[test]
    fn a_finished_run_keeps_its_answer_only() {
        let o = outcome(RunStatus::Finished);
        assert_eq!(
            o,
            RunOutcome::Finished {
                output: "the answer".into()
            }
        );
        assert_eq!(o.status(), RunStatus::Finished);
        assert_eq!(o.output(), "the answer");
        assert_eq!(o.error(), None);
        assert!(o.deferred().is_empty());
    }

    #[test]
    fn a_failed_run_keeps_its_error_only() {
        let o = outcome(RunStatus::Failed);
        assert_eq!(
            o,
            RunOutcome::Failed {
                error: "what happened".into()
            }
        );
        assert_eq!(o.status(), RunStatus::Failed);
        assert_eq!(o.output(), "");
        assert_eq!(o.error(), Some("what happened"));
        assert!(o.deferred().is_empty());
    }

    #[test]
    fn a_cancelled_run_keeps_its_reason_only() {
        let o = outcome(RunStatus::Cancelled);
        assert_eq!(
            o,
            RunOutcome::Cancelled {
                reason: "what happened".into()
            }
        );
        assert_eq!(o.status(), RunStatus::Cancelled);
        assert_eq!(o.output(), "");
        assert_eq!(o.error(), Some("what happened"));
        assert!(o.deferred().is_empty());
    }

    #[test]
    fn a_paused_run_keeps_its_waiting_calls_only() {
        let o = outcome(RunStatus::Paused);
        assert_eq!(
            o,
            RunOutcome::Paused {
                deferred: vec![waiting()]
            }
        );
        assert_eq!(o.status(), RunStatus::Paused);
        assert_eq!(o.output(), "");
        assert_eq!(o.error(), None);
        assert_eq!(o.deferred(), [waiting()]);
    }

    #[test]
    fn a_failure_without_a_message_still_reads_as_an_error() {
        let o = RunOutcome::from_status(RunStatus::Failed, String::new(), None, Vec::new());
        assert_eq!(o.error(), Some(""));
    }

    #[test]
    #[allow(deprecated)] // the copies are what is checked
    fn the_copies_kept_for_old_readers_follow_the_outcome() {
        for status in [
            RunStatus::Finished,
            RunStatus::Failed,
            RunStatus::Cancelled,
            RunStatus::Paused,
        ] {
            let r = RunResult::new(
                "run".into(),
                outcome(status),
                RunUsage::default(),
                "/b".into(),
            );
            assert_eq!(r.status, status);
            assert_eq!(r.status(), status);
            assert_eq!(r.output, r.outcome.output());
            assert_eq!(r.error.as_deref(), r.outcome.error());
            assert_eq!(r.deferred, r.outcome.deferred());
        }
    }
}
