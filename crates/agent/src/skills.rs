//! Skills: instruction packs in folders holding a `SKILL.md`, loaded on demand by the
//! `use_skill` tool.
//!
//! A `SKILL.md` opens with front matter between `---` lines holding `name:` and
//! `description:` (one line each; quotes around the value are optional); the rest of the
//! file is the skill's instructions. The agent lists every skill's name and description to
//! the model, and `use_skill(name)` returns the instructions when the model asks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use provrun_tools::{Tool, ToolCategory, ToolOutput};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::AgentError;

/// The name of the tool that loads a skill.
pub const USE_SKILL_TOOL: &str = "use_skill";

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name, from the front matter.
    pub name: String,
    /// What it is for, from the front matter.
    pub description: String,
    /// The instructions: the file after the front matter.
    pub instructions: String,
    /// SHA-256 hex of the whole `SKILL.md`.
    pub sha256: String,
    /// The `SKILL.md` it came from.
    pub path: PathBuf,
}

/// Parse a `SKILL.md`'s text.
///
/// # Errors
///
/// [`AgentError::Skill`] when the text does not open with front matter closed by `---`, a
/// front-matter line is not `key: value`, or `name` or `description` is missing or empty.
pub fn parse_skill(path: &Path, text: &str) -> Result<Skill, AgentError> {
    let bad = |message: String| AgentError::Skill {
        path: path.to_path_buf(),
        message,
    };
    let text_nl = text.replace("\r\n", "\n");
    let rest = text_nl
        .strip_prefix("---\n")
        .ok_or_else(|| bad("SKILL.md must open with front matter: a `---` line".into()))?;
    let end = rest
        .find("\n---\n")
        .map(|i| (i, i + 5))
        .or_else(|| rest.strip_suffix("\n---").map(|r| (r.len(), rest.len())))
        .ok_or_else(|| bad("the front matter has no closing `---` line".into()))?;
    let (front, body) = (&rest[..end.0], &rest[end.1..]);
    let mut name = None;
    let mut description = None;
    for (i, line) in front.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once(':').ok_or_else(|| {
            bad(format!(
                "front matter line {}: expected `key: value`, got `{line}`",
                i + 2
            ))
        })?;
        let value = value
            .trim()
            .trim_matches('"')
            .trim_matches('\'')
            .to_string();
        match key.trim() {
            "name" => name = Some(value),
            "description" => description = Some(value),
            _ => {} // other keys are allowed and ignored
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad("the front matter has no `name:`".into()))?;
    let description = description
        .filter(|d| !d.is_empty())
        .ok_or_else(|| bad("the front matter has no `description:`".into()))?;
    Ok(Skill {
        name,
        description,
        instructions: body.trim().to_string(),
        sha256: hex::encode(Sha256::digest(text.as_bytes())),
        path: path.to_path_buf(),
    })
}

/// The default skill folders, in the order they are searched after a spec's own:
/// `./.provrun/skills` (under the current folder), then `$XDG_CONFIG_HOME/provrun/skills`
/// (`~/.config/provrun/skills` when `XDG_CONFIG_HOME` is unset or not absolute). Only the
/// folders that exist are given.
pub fn default_skill_folders() -> Vec<PathBuf> {
    let mut folders = vec![PathBuf::from(".provrun").join("skills")];
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|home| home.join(".config"))
        });
    if let Some(config) = config {
        folders.push(config.join("provrun").join("skills"));
    }
    folders.retain(|f| f.is_dir());
    folders
}

/// Load the skills of these folders: a folder holding `SKILL.md` is one skill; otherwise
/// each of its sub-folders holding one is. Two skills with one name are an error.
///
/// # Errors
///
/// [`AgentError::Skill`] when a folder or `SKILL.md` cannot be read, a `SKILL.md` is
/// invalid (see [`parse_skill`]), or two skills share a name.
pub fn load_skills(folders: &[PathBuf]) -> Result<Vec<Skill>, AgentError> {
    load_skills_layered(folders, &[])
}

/// [`load_skills`] over a spec's own `folders`, then the `defaults` (see
/// [`default_skill_folders`]): a skill in a default folder whose name an earlier folder
/// already has is left out (the nearer one wins), where two of the spec's own skills with
/// one name are an error.
pub(crate) fn load_skills_layered(
    folders: &[PathBuf],
    defaults: &[PathBuf],
) -> Result<Vec<Skill>, AgentError> {
    let mut found: BTreeMap<String, Skill> = BTreeMap::new();
    let strict = folders.len();
    for (index, folder) in folders.iter().chain(defaults).enumerate() {
        let mut files = Vec::new();
        let direct = folder.join("SKILL.md");
        if direct.is_file() {
            files.push(direct);
        } else {
            let entries = std::fs::read_dir(folder).map_err(|e| AgentError::Skill {
                path: folder.clone(),
                message: format!("cannot list the folder: {e}"),
            })?;
            for entry in entries.flatten() {
                let file = entry.path().join("SKILL.md");
                if file.is_file() {
                    files.push(file);
                }
            }
            files.sort();
        }
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(|e| AgentError::Skill {
                path: file.clone(),
                message: format!("cannot read: {e}"),
            })?;
            let skill = parse_skill(&file, &text)?;
            if index >= strict && found.contains_key(&skill.name) {
                continue;
            }
            if let Some(other) = found.get(&skill.name) {
                return Err(AgentError::Skill {
                    path: file,
                    message: format!(
                        "skill `{}` is also defined in `{}`",
                        skill.name,
                        other.path.display()
                    ),
                });
            }
            found.insert(skill.name.clone(), skill);
        }
    }
    Ok(found.into_values().collect())
}

/// The paragraph added to the instructions that tells the model which skills exist.
pub(crate) fn skills_prompt(skills: &[Skill]) -> String {
    let mut text = String::from(
        "Skills are available: call `use_skill` with a skill's name to read its instructions \
         before you do work it covers.\n",
    );
    for s in skills {
        text.push_str(&format!("- {}: {}\n", s.name, s.description));
    }
    text
}

/// The `use_skill` tool over these skills.
pub(crate) fn use_skill_tool(skills: &[Skill]) -> Result<Tool, AgentError> {
    let names: Vec<String> = skills.iter().map(|s| s.name.clone()).collect();
    let by_name: Arc<BTreeMap<String, String>> = Arc::new(
        skills
            .iter()
            .map(|s| (s.name.clone(), s.instructions.clone()))
            .collect(),
    );
    let tool = Tool::builder(
        USE_SKILL_TOOL,
        "Read the instructions of one of the skills listed in your instructions.",
    )
    .category(ToolCategory::Read)
    .schema(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": names, "description": "The skill's name."}
        },
        "required": ["name"],
        "additionalProperties": false
    }))
    .sync_handler(false, move |_ctx, args| {
        match args.get("name").and_then(|v| v.as_str()) {
            Some(name) => match by_name.get(name) {
                Some(text) => ToolOutput::succeed(text.clone()),
                None => ToolOutput::fail(format!(
                    "no skill named `{name}`; the skills are: {}",
                    by_name.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
            },
            None => {
                ToolOutput::fail("invalid arguments for tool `use_skill`: missing field `name`")
            }
        }
    })
    .build()?;
    Ok(tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_and_body_are_split() {
        let s = parse_skill(
            Path::new("SKILL.md"),
            "---\nname: summarise\ndescription: \"How to summarise\"\nextra: ignored\n---\n\nDo it well.\n",
        )
        .unwrap();
        assert_eq!(s.name, "summarise");
        assert_eq!(s.description, "How to summarise");
        assert_eq!(s.instructions, "Do it well.");
    }

    #[test]
    fn missing_parts_are_named() {
        for (text, want) in [
            ("no front matter", "must open"),
            ("---\nname: x\n", "closing"),
            ("---\ndescription: d\n---\nbody", "no `name:`"),
            ("---\nname: x\n---\nbody", "no `description:`"),
            ("---\njust words\n---\n", "key: value"),
        ] {
            let err = parse_skill(Path::new("S.md"), text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{text:?} → {err}");
        }
    }

    #[test]
    fn use_skill_returns_instructions_or_names_the_skills() {
        let skills =
            vec![parse_skill(Path::new("a"), "---\nname: a\ndescription: d\n---\nA body").unwrap()];
        let tool = use_skill_tool(&skills).unwrap();
        assert_eq!(
            tool.call(r#"{"name":"a"}"#, None).unwrap(),
            ToolOutput::succeed("A body")
        );
        let out = tool.call(r#"{"name":"b"}"#, None).unwrap();
        assert!(
            !out.ok && out.content.contains("the skills are: a"),
            "{out:?}"
        );
    }
}
