//! Parsing a non-streamed (JSON) chat completion body.

use serde_json::Value;

use crate::types::{FinishReason, ProviderToolCall, ToolCall, Usage};

use super::errors::error_info_from_value;
use super::{BodyProblem, Parsed, number, snippet};

pub(super) fn parse_json_completion(body: &[u8]) -> Result<Parsed, BodyProblem> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        BodyProblem::Malformed(format!(
            "body is not JSON ({e}): {}",
            snippet(&String::from_utf8_lossy(body))
        ))
    })?;
    let obj = v
        .as_object()
        .ok_or_else(|| BodyProblem::Malformed("body is not a JSON object".into()))?;
    if let Some(err) = obj.get("error").filter(|e| !e.is_null()) {
        let info = error_info_from_value(err);
        return Err(BodyProblem::Provider {
            code: info.code,
            status: info.status,
            message: info.message,
        });
    }
    let choices = obj
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(|| BodyProblem::Malformed("no `choices` array in the completion".into()))?;
    let choice = choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        .or_else(|| choices.first())
        .ok_or_else(|| BodyProblem::Malformed("`choices` is empty".into()))?;
    let message = choice.get("message").cloned().unwrap_or(Value::Null);
    let mut p = Parsed {
        text: message.get("content").and_then(content_text),
        reasoning: reasoning_text(&message),
        usage: obj.get("usage").and_then(parse_usage),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(FinishReason::from),
        model: obj.get("model").and_then(Value::as_str).map(str::to_owned),
        id: obj.get("id").and_then(Value::as_str).map(str::to_owned),
        ..Parsed::default()
    };
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (i, c) in calls.iter().enumerate() {
            let f = c.get("function").cloned().unwrap_or(Value::Null);
            p.tool_calls.push(ToolCall {
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("call_{i}")),
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                arguments: f.get("arguments").map(arguments_text).unwrap_or_default(),
            });
        }
    }
    if let Some(tools) = message.get("executed_tools").and_then(Value::as_array) {
        p.provider_tool_calls = tools.iter().map(provider_tool_call).collect();
    }
    Ok(p)
}

/// Text of a `content` value: a string, or an array of parts whose `text` is joined.
pub(super) fn content_text(v: &Value) -> Option<String> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<String>(),
        _ => return None,
    };
    (!s.is_empty()).then_some(s)
}

pub(super) fn reasoning_text(v: &Value) -> Option<String> {
    ["reasoning", "reasoning_content"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_str))
        .find(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Arguments as text: a string as is, an object (some servers send one) serialised,
/// null as empty.
pub(super) fn arguments_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub(super) fn provider_tool_call(v: &Value) -> ProviderToolCall {
    let text = |k: &str| {
        v.get(k).filter(|x| !x.is_null()).map(|x| match x {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    ProviderToolCall {
        kind: text("type")
            .or_else(|| text("name"))
            .unwrap_or_else(|| "unknown".into()),
        arguments: text("arguments"),
        output: text("output"),
        details: v.clone(),
    }
}

pub(super) fn parse_usage(v: &Value) -> Option<Usage> {
    let o = v.as_object()?;
    let input = number(o.get("prompt_tokens")).or_else(|| number(o.get("input_tokens")));
    let output = number(o.get("completion_tokens")).or_else(|| number(o.get("output_tokens")));
    if input.is_none() && output.is_none() {
        return None;
    }
    let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
    Some(Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: number(o.get("total_tokens")).unwrap_or(input.saturating_add(output)),
        cached_input_tokens: number(
            o.get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        ),
        cache_creation_input_tokens: None,
        reasoning_tokens: number(
            o.get("completion_tokens_details")
                .and_then(|d| d.get("reasoning_tokens")),
        ),
    })
}
