//! The lines of RUNS.jsonl: each parsed and resolved into a [`Job`] (its paths made
//! absolute, its id, agent spec, model script, inputs and host folder checked), and the
//! first pass, which checks every line before anything runs.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use provrun_agent::{AgentSpec, ModelRef};
use serde::Deserialize;

use super::shard::Shard;
use crate::DEFAULT_PROMPT;

/// One line of RUNS.jsonl.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Line {
    /// The run's name: its bundle is DEST/<id>.
    id: String,
    /// The agent spec (TOML).
    agent: PathBuf,
    /// Files and folders to stage into /input.
    #[serde(default)]
    input: Vec<PathBuf>,
    /// The user's prompt.
    prompt: Option<String>,
    /// Replaces the spec's model.
    model: Option<String>,
    /// The host folder the host tools may use.
    host_dir: Option<PathBuf>,
}

/// A line ready to run: its paths resolved.
pub(super) struct Job {
    pub(super) line: usize,
    pub(super) id: String,
    pub(super) agent: Arc<AgentSpec>,
    pub(super) model: Option<String>,
    pub(super) inputs: Vec<PathBuf>,
    pub(super) prompt: String,
    pub(super) host_dir: Option<PathBuf>,
}

/// An id must be usable as a file name everywhere (the store crate's rule: 1 to 128 of
/// `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`).
fn check_id(id: &str) -> Result<(), String> {
    provrun_store::check_id(id).map_err(|e| e.to_string())
}

/// The agent specs met so far, by resolved path: loaded once each.
type Agents = HashMap<PathBuf, Arc<AgentSpec>>;

/// Everything that is true of the whole file after the first pass.
pub(super) struct Checked {
    pub(super) agents: Agents,
    /// Lines of this shard.
    pub(super) ours: u64,
}

/// Resolve a line's paths and check what can be checked before running; `set` are the
/// `--set` overrides of every agent's settings.
pub(super) fn resolve(
    line: Line,
    number: usize,
    (base, set): (&Path, &[(String, String)]),
    agents: &mut Agents,
    registry: &provrun_tools::ToolRegistry,
) -> Result<Job, String> {
    check_id(&line.id)?;
    let agent_path = base.join(&line.agent);
    let agent = match agents.get(&agent_path) {
        Some(a) => Arc::clone(a),
        None => {
            let mut spec = AgentSpec::load(&agent_path).map_err(|e| e.to_string())?;
            crate::settings::apply_settings(&mut spec, set)?;
            spec.validate(&format!("agent spec `{}`", agent_path.display()))
                .map_err(|e| e.to_string())?;
            registry
                .get(&spec.tools)
                .map_err(|e| format!("agent spec `{}`: {e}", agent_path.display()))?;
            let spec = Arc::new(spec);
            agents.insert(agent_path.clone(), Arc::clone(&spec));
            spec
        }
    };
    let model = match &line.model {
        None => None,
        Some(text) => Some(
            match ModelRef::parse(text).map_err(|e| format!("model: {e}"))? {
                ModelRef::Script(p) => format!("script:{}", base.join(p).display()),
                ModelRef::Replay(p) => format!("replay:{}", base.join(p).display()),
                _ => text.trim().to_string(),
            },
        ),
    };
    // The settings must suit the line's own model too.
    if let Some(model) = &model {
        agent
            .check_settings_for(model)
            .map_err(|e| format!("model `{model}`: {e}"))?;
    }
    // A script the run would read must be there (a spec's own script resolves against
    // the spec's folder; a line's against the JSONL file's).
    let script = match ModelRef::parse(model.as_deref().unwrap_or(&agent.model)) {
        Ok(ModelRef::Script(p)) => Some(agent.resolve(&p)),
        _ => None,
    };
    if let Some(script) = script
        && !script.is_file()
    {
        return Err(format!("model script `{}` is not a file", script.display()));
    }
    let inputs: Vec<PathBuf> = line.input.iter().map(|p| base.join(p)).collect();
    for input in &inputs {
        std::fs::symlink_metadata(input)
            .map_err(|e| format!("input `{}`: {e}", input.display()))?;
    }
    let host_dir = line.host_dir.as_ref().map(|p| base.join(p));
    if let Some(host) = &host_dir
        && !host.is_dir()
    {
        return Err(format!(
            "host_dir `{}` does not exist or is not a folder",
            host.display()
        ));
    }
    Ok(Job {
        line: number,
        id: line.id,
        agent,
        model,
        inputs,
        prompt: line.prompt.unwrap_or_else(|| DEFAULT_PROMPT.to_string()),
        host_dir,
    })
}

/// The first pass: every line parses, names a safe, unique id, a loadable agent with known
/// tools, inputs that exist. Errors name the line; at most 20 are listed.
pub(super) fn check_file(
    path: &Path,
    base: &Path,
    (shard, set): (Shard, &[(String, String)]),
    registry: &provrun_tools::ToolRegistry,
) -> Result<Checked, Vec<String>> {
    let file = std::fs::File::open(path)
        .map_err(|e| vec![format!("cannot read `{}`: {e}", path.display())])?;
    let mut agents = Agents::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut errors = Vec::new();
    let mut ours = 0u64;
    let mut any = false;
    for (i, text) in BufReader::new(file).lines().enumerate() {
        let number = i + 1;
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("{}: line {number}: {e}", path.display()));
                break;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        any = true;
        let checked = serde_json::from_str::<Line>(&text)
            .map_err(|e| e.to_string())
            .and_then(|line| {
                if let Some(first) = ids.get(&line.id) {
                    return Err(format!("id `{}` is already used on line {first}", line.id));
                }
                let id = line.id.clone();
                resolve(line, number, (base, set), &mut agents, registry)?;
                ids.insert(id, number);
                Ok(())
            });
        match checked {
            Ok(()) => ours += u64::from(shard.owns(number)),
            Err(e) => errors.push(format!("{}: line {number}: {e}", path.display())),
        }
        if errors.len() >= 20 {
            errors.push("(stopped after 20 errors)".to_string());
            break;
        }
    }
    if !any && errors.is_empty() {
        errors.push(format!("`{}` holds no runs", path.display()));
    }
    if errors.is_empty() {
        Ok(Checked { agents, ours })
    } else {
        Err(errors)
    }
}
