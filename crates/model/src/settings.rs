//! Request settings per API: which [`ModelSettings`] each wire format takes
//! ([`WireApi::check_settings`]), the values any model accepts
//! ([`ModelSettings::check_values`]), and how `extra` joins a request body
//! ([`merge_extra`](crate::wire::merge_extra): never replacing what the builder set).
//!
//! | setting | Chat Completions | Responses | Anthropic Messages |
//! |---|---|---|---|
//! | `temperature` | `temperature` | `temperature` | `temperature` (0 to 1) |
//! | `top_p` | `top_p` | `top_p` | `top_p` |
//! | `max_tokens` | `max_tokens` | `max_output_tokens` | `max_tokens` (required; default 8192) |
//! | `seed` | `seed` | — | — |
//! | `stop` | `stop` | — | `stop_sequences` |
//! | `presence_penalty`, `frequency_penalty` | same names | — | — |
//! | `tool_choice` | `tool_choice` | `tool_choice` | `tool_choice` (`{"type": …}`) |
//! | `parallel_tool_calls` | `parallel_tool_calls` | `parallel_tool_calls` | `tool_choice.disable_parallel_tool_use` |
//! | `reasoning_effort` | `reasoning_effort` | `reasoning.effort` | — |
//! | `thinking_budget` | — | — | `thinking: {"type": "enabled", "budget_tokens": N}` |

use serde_json::{Map, Value, json};

use crate::error::ModelError;
use crate::native::WireApi;
use crate::types::{Message, ModelRequest, ModelSettings, ToolChoice, ToolDefinition};

/// The first key of `extra` (as a dotted path under `prefix`) that [`merge_extra`](crate::wire::merge_extra) would
/// leave out because `body` already has it.
fn collision(
    body: &Map<String, Value>,
    extra: &Map<String, Value>,
    prefix: &str,
) -> Option<String> {
    for (key, value) in extra {
        let path = format!("{prefix}{key}");
        match (body.get(key), value) {
            (None, _) => {}
            (Some(Value::Object(inner)), Value::Object(more)) => {
                if let Some(found) = collision(inner, more, &format!("{path}.")) {
                    return Some(found);
                }
            }
            (Some(_), _) => return Some(path),
        }
    }
    None
}

fn setting_error(setting: &str, message: impl Into<String>) -> ModelError {
    ModelError::Setting {
        setting: setting.to_string(),
        message: message.into(),
    }
}

/// `value`, when set, lies in `low..=high` (and is a number).
fn check_range(setting: &str, value: Option<f64>, low: f64, high: f64) -> Result<(), ModelError> {
    match value {
        Some(v) if !(v.is_finite() && (low..=high).contains(&v)) => Err(setting_error(
            setting,
            format!("{v} is not between {low} and {high}"),
        )),
        _ => Ok(()),
    }
}

impl ModelSettings {
    /// Checks the values every model accepts, whatever its API: `temperature` 0 to 2,
    /// `top_p` 0 to 1, the penalties -2 to 2, `max_tokens` at least 1, stop sequences
    /// that are not empty, a `reasoning_effort` word (lower-case letters), a thinking
    /// budget of at least 1024 tokens and a named tool in `tool_choice`. The offline
    /// models check nothing more (they take every setting and use none).
    ///
    /// # Errors
    ///
    /// [`ModelError::Setting`] naming the first setting out of its range.
    pub fn check_values(&self) -> Result<(), ModelError> {
        check_range("temperature", self.temperature, 0.0, 2.0)?;
        check_range("top_p", self.top_p, 0.0, 1.0)?;
        check_range("presence_penalty", self.presence_penalty, -2.0, 2.0)?;
        check_range("frequency_penalty", self.frequency_penalty, -2.0, 2.0)?;
        if self.max_tokens == Some(0) {
            return Err(setting_error("max_tokens", "must be at least 1"));
        }
        if self.stop.iter().any(String::is_empty) {
            return Err(setting_error("stop", "a stop sequence is empty"));
        }
        if let Some(effort) = &self.reasoning_effort
            && (effort.is_empty() || !effort.bytes().all(|b| b.is_ascii_lowercase()))
        {
            return Err(setting_error(
                "reasoning_effort",
                format!(
                    "`{effort}` is not an effort level (a word such as minimal, low, medium or high)"
                ),
            ));
        }
        if let Some(budget) = self.thinking_budget
            && budget < 1024
        {
            return Err(setting_error(
                "thinking",
                format!("a budget of {budget} tokens is below Anthropic's minimum of 1024"),
            ));
        }
        if let Some(ToolChoice::Tool { name }) = &self.tool_choice
            && name.trim().is_empty()
        {
            return Err(setting_error("tool_choice", "names no tool"));
        }
        Ok(())
    }
}

impl WireApi {
    /// The API's name in messages, with the model prefix that selects it.
    pub fn label(self) -> &'static str {
        match self {
            WireApi::ChatCompletions => "Chat Completions (`openai:`)",
            WireApi::AnthropicMessages => "Anthropic Messages (`anthropic:`)",
            WireApi::OpenAiResponses => "OpenAI Responses (`openai-responses:`)",
        }
    }

    /// The settings this API has no field for, each with what to use instead.
    fn unsupported(self, s: &ModelSettings) -> Vec<(&'static str, &'static str)> {
        let mut found = Vec::new();
        let mut not = |set: bool, name: &'static str, instead: &'static str| {
            if set {
                found.push((name, instead));
            }
        };
        match self {
            WireApi::ChatCompletions => {
                not(
                    s.thinking_budget.is_some(),
                    "thinking",
                    "`thinking` is Anthropic's; use `reasoning_effort`, or `extra` for a server's own field",
                );
            }
            WireApi::OpenAiResponses => {
                let why = "the Responses API has no such field";
                not(s.seed.is_some(), "seed", why);
                not(!s.stop.is_empty(), "stop", why);
                not(s.presence_penalty.is_some(), "presence_penalty", why);
                not(s.frequency_penalty.is_some(), "frequency_penalty", why);
                not(
                    s.thinking_budget.is_some(),
                    "thinking",
                    "`thinking` is Anthropic's; use `reasoning_effort`",
                );
            }
            WireApi::AnthropicMessages => {
                let why = "the Messages API has no such field";
                not(s.seed.is_some(), "seed", why);
                not(s.presence_penalty.is_some(), "presence_penalty", why);
                not(s.frequency_penalty.is_some(), "frequency_penalty", why);
                not(
                    s.reasoning_effort.is_some(),
                    "reasoning_effort",
                    "Anthropic models reason with extended thinking: use `thinking` (a budget of tokens)",
                );
            }
        }
        found
    }

    /// Checks `settings` for this API before anything is sent: every value as
    /// [`ModelSettings::check_values`], no setting the API has no field for (the error
    /// names the setting and the API), the API's own ranges (Anthropic: `temperature` at
    /// most 1, a thinking budget below `max_tokens`), and no key of `extra` that would
    /// replace a field the request builder sets (objects may add keys to the builder's
    /// objects: `extra.reasoning.summary` beside `reasoning_effort`).
    ///
    /// # Errors
    ///
    /// [`ModelError::Setting`] naming the first setting refused, and why.
    pub fn check_settings(self, settings: &ModelSettings) -> Result<(), ModelError> {
        settings.check_values()?;
        if let Some((name, instead)) = self.unsupported(settings).first() {
            return Err(setting_error(
                name,
                format!("{} does not take it ({instead})", self.label()),
            ));
        }
        if self == WireApi::AnthropicMessages {
            check_range("temperature", settings.temperature, 0.0, 1.0)?;
            let max = settings
                .max_tokens
                .unwrap_or(crate::anthropic::ANTHROPIC_DEFAULT_MAX_TOKENS);
            if let Some(budget) = settings.thinking_budget
                && budget >= max
            {
                return Err(setting_error(
                    "thinking",
                    format!(
                        "a budget of {budget} tokens must be less than max_tokens ({max}{}): \
                         raise max_tokens",
                        if settings.max_tokens.is_none() {
                            ", the default"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
        if settings.extra.is_empty() {
            return Ok(());
        }
        // What the builder sets, for a request with a history, a tool and these settings,
        // streamed and not: `extra` may add to it, never replace any of it.
        let probe = ModelRequest {
            messages: vec![Message::system("s"), Message::user("u")],
            tools: vec![ToolDefinition {
                name: "t".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            settings: ModelSettings {
                extra: Map::new(),
                ..settings.clone()
            },
        };
        for stream in [false, true] {
            if let Value::Object(body) = self.body_value("m", &probe, stream)
                && let Some(path) = collision(&body, &settings.extra, "")
            {
                return Err(setting_error(
                    &format!("extra.{path}"),
                    format!(
                        "provrun sets `{path}` in a {} request itself (from the spec or its \
                         settings); `extra` may only add fields",
                        self.label()
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::merge_extra;

    fn with(f: impl FnOnce(&mut ModelSettings)) -> ModelSettings {
        let mut s = ModelSettings::default();
        f(&mut s);
        s
    }

    #[test]
    fn each_api_refuses_the_settings_it_has_no_field_for_by_name() {
        let cases: [(WireApi, ModelSettings, Option<&str>); 8] = [
            (WireApi::ChatCompletions, with(|s| s.seed = Some(1)), None),
            (
                WireApi::ChatCompletions,
                with(|s| s.thinking_budget = Some(2048)),
                Some("thinking"),
            ),
            (
                WireApi::OpenAiResponses,
                with(|s| s.stop = vec!["x".into()]),
                Some("stop"),
            ),
            (
                WireApi::OpenAiResponses,
                with(|s| s.reasoning_effort = Some("low".into())),
                None,
            ),
            (
                WireApi::AnthropicMessages,
                with(|s| s.frequency_penalty = Some(0.5)),
                Some("frequency_penalty"),
            ),
            (
                WireApi::AnthropicMessages,
                with(|s| s.reasoning_effort = Some("high".into())),
                Some("reasoning_effort"),
            ),
            (
                WireApi::AnthropicMessages,
                with(|s| s.thinking_budget = Some(8192)),
                Some("thinking"),
            ),
            (
                WireApi::AnthropicMessages,
                with(|s| {
                    s.thinking_budget = Some(8192);
                    s.max_tokens = Some(16000);
                }),
                None,
            ),
        ];
        for (api, settings, refused) in cases {
            let got = api.check_settings(&settings);
            match refused {
                None => assert!(got.is_ok(), "{api:?} {settings:?}: {got:?}"),
                Some(name) => {
                    let e = got.expect_err(name);
                    assert!(
                        matches!(&e, ModelError::Setting { setting, .. } if setting == name),
                        "{e}"
                    );
                    let text = e.to_string();
                    assert!(text.contains(name), "{text}");
                    if !name.starts_with("thinking") || api != WireApi::AnthropicMessages {
                        assert!(text.contains(api.label()), "{text}");
                    }
                }
            }
        }
    }

    #[test]
    fn values_out_of_range_are_refused_for_every_model() {
        for bad in [
            with(|s| s.temperature = Some(2.5)),
            with(|s| s.temperature = Some(f64::NAN)),
            with(|s| s.top_p = Some(1.5)),
            with(|s| s.presence_penalty = Some(-3.0)),
            with(|s| s.max_tokens = Some(0)),
            with(|s| s.stop = vec![String::new()]),
            with(|s| s.reasoning_effort = Some("High".into())),
            with(|s| s.thinking_budget = Some(100)),
            with(|s| s.tool_choice = Some(ToolChoice::Tool { name: " ".into() })),
        ] {
            assert!(bad.check_values().is_err(), "{bad:?}");
        }
        assert!(
            WireApi::AnthropicMessages
                .check_settings(&with(|s| s.temperature = Some(1.5)))
                .is_err()
        );
        assert!(
            WireApi::ChatCompletions
                .check_settings(&with(|s| s.temperature = Some(1.5)))
                .is_ok()
        );
    }

    #[test]
    fn extra_may_add_fields_and_object_keys_but_never_replace_one() {
        let extra = |v: Value| with(|s| s.extra = v.as_object().unwrap().clone());
        // Added beside what provrun sets.
        for (api, ok) in [
            (
                WireApi::ChatCompletions,
                json!({"max_completion_tokens": 100, "logprobs": true}),
            ),
            (
                WireApi::AnthropicMessages,
                json!({"top_k": 5, "metadata": {"user_id": "u"}}),
            ),
            (WireApi::OpenAiResponses, json!({"truncation": "auto"})),
        ] {
            assert!(api.check_settings(&extra(ok.clone())).is_ok(), "{ok}");
        }
        // Merged into an object provrun sets.
        let summary = with(|s| {
            s.reasoning_effort = Some("high".into());
            s.extra = json!({"reasoning": {"summary": "auto"}})
                .as_object()
                .unwrap()
                .clone();
        });
        assert!(WireApi::OpenAiResponses.check_settings(&summary).is_ok());
        // Replacing a field: refused, named by its path.
        for (api, bad, path) in [
            (
                WireApi::ChatCompletions,
                json!({"model": "x"}),
                "extra.model",
            ),
            (
                WireApi::ChatCompletions,
                json!({"stream_options": 1}),
                "extra.stream_options",
            ),
            (
                WireApi::OpenAiResponses,
                json!({"store": true}),
                "extra.store",
            ),
            (
                WireApi::AnthropicMessages,
                json!({"max_tokens": 10}),
                "extra.max_tokens",
            ),
        ] {
            let e = api.check_settings(&extra(bad)).unwrap_err();
            assert!(
                matches!(&e, ModelError::Setting { setting, .. } if setting == path),
                "{e}"
            );
        }
        let e = WireApi::OpenAiResponses
            .check_settings(&with(|s| {
                s.reasoning_effort = Some("high".into());
                s.extra = json!({"reasoning": {"effort": "low"}})
                    .as_object()
                    .unwrap()
                    .clone();
            }))
            .unwrap_err();
        assert!(e.to_string().contains("extra.reasoning.effort"), "{e}");
    }

    #[test]
    fn merging_keeps_every_field_the_builder_set() {
        let mut body = json!({"a": 1, "o": {"x": 1}}).as_object().unwrap().clone();
        let extra = json!({"a": 2, "b": 3, "o": {"x": 2, "y": 4}})
            .as_object()
            .unwrap()
            .clone();
        merge_extra(&mut body, &extra);
        assert_eq!(
            Value::Object(body),
            json!({"a": 1, "b": 3, "o": {"x": 1, "y": 4}})
        );
    }
}
