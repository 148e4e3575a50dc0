//! The agent spec's `[settings]` table: the model request settings a run sends
//! ([`SettingsSpec`]), each as the one key users write whatever the API, turned into the
//! model crate's [`ModelSettings`] (which maps it to each API's own field), changed by
//! `provrun run --set KEY=VALUE` ([`SettingsSpec::set`]).

use provrun_model::{ModelSettings, ToolChoice};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The model request settings of an agent spec's `[settings]` table. Each is left to the
/// provider's default when absent. Which API takes which key, and under what name, is in
/// docs/models.md; a key the run's API does not take is refused before the run starts.
/// The offline models (`test`, `script:`, `replay:`, a function model) take every key,
/// record it and use none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsSpec {
    /// Sampling temperature: 0 to 2 (Anthropic: 0 to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling: 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Most tokens one response may generate (Responses: `max_output_tokens`; Anthropic
    /// requires one and uses 8192 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling seed (Chat Completions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Stop sequences (Chat Completions `stop`, Anthropic `stop_sequences`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// -2 to 2 (Chat Completions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// -2 to 2 (Chat Completions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// Which tool the model may or must call: `"auto"`, `"none"`, `"required"`, or
    /// `{ tool = "NAME" }` (one of the agent's tools). With `output_schema` only
    /// `"required"` is possible (the answer comes through a tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoiceSpec>,
    /// Whether the model may ask for several tool calls in one response (Anthropic:
    /// `false` sends `disable_parallel_tool_use`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// How hard a reasoning model thinks: `minimal`, `low`, `medium`, `high` (Chat
    /// Completions `reasoning_effort`, Responses `reasoning.effort`; not Anthropic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Anthropic extended thinking with this budget of tokens (at least 1024, less than
    /// `max_tokens`): `thinking = {type = "enabled", budget_tokens = N}` on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<u32>,
    /// Fields added to the request body as they are, for a provider's own options
    /// (`top_k`, `metadata`, `max_completion_tokens`…): never replacing a field provrun
    /// sets (that is an error before the run starts); a table adds keys to a table
    /// provrun sets (`extra.reasoning.summary = "auto"` beside `reasoning_effort`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(with = "Map<String, Value>")]
    pub extra: Map<String, Value>,
}

/// `tool_choice` as written: a mode, or one tool by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ToolChoiceSpec {
    /// `"auto"`, `"none"` or `"required"`.
    Mode(ToolChoiceMode),
    /// `{ tool = "NAME" }`: the model must call this tool.
    Tool {
        /// The tool's name, as offered to the model.
        tool: String,
    },
}

/// A `tool_choice` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoiceMode {
    /// The model decides.
    Auto,
    /// The model may not call tools.
    None,
    /// The model must call a tool.
    Required,
}

impl SettingsSpec {
    /// Whether no setting is given.
    pub fn is_empty(&self) -> bool {
        *self == SettingsSpec::default()
    }

    /// The settings as the model crate sends them (before the run adds its own:
    /// `prompt_caching`, and `tool_choice = required` for an output schema).
    pub fn to_model_settings(&self) -> ModelSettings {
        ModelSettings {
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            stop: self.stop.clone(),
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            reasoning_effort: self.reasoning_effort.clone(),
            thinking_budget: self.thinking,
            tool_choice: self.tool_choice.as_ref().map(|c| match c {
                ToolChoiceSpec::Mode(ToolChoiceMode::Auto) => ToolChoice::Auto,
                ToolChoiceSpec::Mode(ToolChoiceMode::None) => ToolChoice::None,
                ToolChoiceSpec::Mode(ToolChoiceMode::Required) => ToolChoice::Required,
                ToolChoiceSpec::Tool { tool } => ToolChoice::Tool { name: tool.clone() },
            }),
            parallel_tool_calls: self.parallel_tool_calls,
            extra: self.extra.clone(),
            ..ModelSettings::default()
        }
    }

    /// Sets `key` (a key of the table, or `extra.NAME…` for a field of `extra`) to `value`
    /// read as a TOML value (`0.2`, `true`, `"x"`, `["a", "b"]`, `{ tool = "t" }`); text
    /// that is no TOML value is taken as a string (`--set reasoning_effort=high`). An
    /// unknown key or a value of the wrong type is an error that names the key.
    ///
    /// # Errors
    ///
    /// A message naming `key` when it is not a setting or `value` has the wrong type for
    /// it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let parsed = parse_value(value);
        let Value::Object(mut table) = serde_json::to_value(&*self).map_err(|e| e.to_string())?
        else {
            return Err("the settings are not a table".into());
        };
        let mut names = key.split('.');
        let first = names.next().unwrap_or_default();
        let rest: Vec<&str> = names.collect();
        if first.is_empty() || rest.iter().any(|n| n.is_empty()) {
            return Err(format!("`{key}` is not a setting's name"));
        }
        if rest.is_empty() {
            table.insert(first.to_string(), parsed);
        } else if first == "extra" {
            let not_table = || format!("`{key}`: a value on its way is not a table");
            let mut at = table
                .entry("extra")
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .ok_or_else(not_table)?;
            for name in &rest[..rest.len() - 1] {
                at = at
                    .entry(name.to_string())
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                    .ok_or_else(not_table)?;
            }
            at.insert(rest[rest.len() - 1].to_string(), parsed);
        } else {
            return Err(format!(
                "`{key}`: only `extra` holds fields of its own (`extra.NAME`)"
            ));
        }
        *self =
            serde_json::from_value(Value::Object(table)).map_err(|e| format!("`{key}`: {e}"))?;
        Ok(())
    }
}

/// `text` as a TOML value, or as a string when it is none.
fn parse_value(text: &str) -> Value {
    #[derive(Deserialize)]
    struct One {
        v: toml::Value,
    }
    match toml::from_str::<One>(&format!("v = {text}")) {
        Ok(one) => serde_json::to_value(one.v).unwrap_or(Value::String(text.to_string())),
        Err(_) => Value::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_reads_toml_values_and_names_what_is_wrong() {
        let mut s = SettingsSpec::default();
        s.set("temperature", "0.2").unwrap();
        s.set("stop", r#"["END", "x"]"#).unwrap();
        s.set("reasoning_effort", "high").unwrap();
        s.set("parallel_tool_calls", "false").unwrap();
        s.set("tool_choice", r#"{ tool = "read_file" }"#).unwrap();
        s.set("thinking", "2048").unwrap();
        s.set("extra.top_k", "5").unwrap();
        s.set("extra.reasoning.summary", "auto").unwrap();
        assert_eq!(s.temperature, Some(0.2));
        assert_eq!(s.stop, ["END", "x"]);
        assert_eq!(s.reasoning_effort.as_deref(), Some("high"));
        assert_eq!(
            s.tool_choice,
            Some(ToolChoiceSpec::Tool {
                tool: "read_file".into()
            })
        );
        assert_eq!(
            Value::Object(s.extra.clone()),
            serde_json::json!({"top_k": 5, "reasoning": {"summary": "auto"}})
        );
        let m = s.to_model_settings();
        assert_eq!(m.thinking_budget, Some(2048));
        assert_eq!(m.parallel_tool_calls, Some(false));
        s.set("tool_choice", "required").unwrap();
        assert_eq!(
            s.to_model_settings().tool_choice,
            Some(ToolChoice::Required)
        );
        for (key, value, says) in [
            ("tempreature", "1", "unknown field `tempreature`"),
            ("temperature", "hot", "temperature"),
            ("max_tokens", "-1", "max_tokens"),
            ("top_p.x", "1", "only `extra`"),
            ("extra.top_k.x", "1", "not a table"),
            ("", "1", "not a setting"),
        ] {
            let before = s.clone();
            let e = s.set(key, value).unwrap_err();
            assert!(e.contains(says), "{key}: {e}");
            assert_eq!(s, before, "a refused --set changes nothing");
        }
    }
}
