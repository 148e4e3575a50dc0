//! Reading a Responses answer: usage, provider errors, a response object's output items
//! into a [`Parsed`], and a whole body (JSON, or SSE through `stream.rs`).

use serde_json::Value;

use super::API_TAG;
use crate::types::{FinishReason, ProviderItem, ProviderToolCall, ToolCall, Usage};
use crate::wire::{BodyProblem, Parsed, error_info_from_value, number, snippet};

fn parse_usage(v: &Value) -> Option<Usage> {
    let input = number(v.get("input_tokens"));
    let output = number(v.get("output_tokens"));
    if input.is_none() && output.is_none() {
        return None;
    }
    let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
    Some(Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: number(v.get("total_tokens")).unwrap_or(input.saturating_add(output)),
        cached_input_tokens: number(
            v.get("input_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        ),
        cache_creation_input_tokens: None,
        reasoning_tokens: number(
            v.get("output_tokens_details")
                .and_then(|d| d.get("reasoning_tokens")),
        ),
    })
}

pub(super) fn provider_problem(err: &Value) -> BodyProblem {
    let info = error_info_from_value(err);
    BodyProblem::Provider {
        code: info.code.or(info.kind),
        status: info.status,
        message: info.message,
    }
}

fn texts(parts: Option<&Value>, kinds: &[&str]) -> String {
    parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| kinds.contains(&p.get("type").and_then(Value::as_str).unwrap_or("")))
        .filter_map(|p| {
            p.get("text")
                .or_else(|| p.get("refusal"))
                .and_then(Value::as_str)
        })
        .collect()
}

/// An output item as it goes back in `input`: `status` is output-only.
fn without_status(item: &Value) -> Value {
    let mut kept = item.clone();
    if let Some(o) = kept.as_object_mut() {
        o.remove("status");
    }
    kept
}

/// Reads a whole response object (a non-streamed body, or `response.completed`'s).
pub(super) fn parse_response_object(v: &Value) -> Result<Parsed, BodyProblem> {
    if !v.is_object() {
        return Err(BodyProblem::Malformed(
            "the response is not a JSON object".into(),
        ));
    }
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(provider_problem(err));
    }
    let output = v
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| BodyProblem::Malformed("no `output` array in the response".into()))?;
    let mut p = Parsed::default();
    let (mut text, mut reasoning, mut refused) = (String::new(), String::new(), false);
    for item in output {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "message" => {
                text.push_str(&texts(item.get("content"), &["output_text", "refusal"]));
                refused |= item
                    .get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|c| c.iter().any(|p| p["type"] == "refusal"));
                // Kept whole (its id included) beside the reasoning, so a reasoning item
                // goes back followed by the very item that followed it.
                p.provider_items.push(ProviderItem {
                    api: API_TAG.into(),
                    item: without_status(item),
                });
            }
            "function_call" => p.tool_calls.push(function_call(item)?),
            "reasoning" => {
                reasoning.push_str(&texts(item.get("summary"), &["summary_text"]));
                reasoning.push_str(&texts(item.get("content"), &["reasoning_text"]));
                p.provider_items.push(ProviderItem {
                    api: API_TAG.into(),
                    item: without_status(item),
                });
            }
            // Tools the server ran itself: web search, file search, code interpreter, …
            k if k.ends_with("_call") => p.provider_tool_calls.push(server_tool_call(k, item)),
            "" => {
                return Err(BodyProblem::Malformed(format!(
                    "an output item has no type: {}",
                    snippet(&item.to_string())
                )));
            }
            other => {
                return Err(BodyProblem::Malformed(format!(
                    "unknown output item type {other:?}"
                )));
            }
        }
    }
    p.text = (!text.is_empty()).then_some(text);
    p.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    p.usage = v.get("usage").and_then(parse_usage);
    p.finish_reason = Some(response_finish_reason(v, !p.tool_calls.is_empty(), refused));
    p.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
    p.id = v.get("id").and_then(Value::as_str).map(str::to_owned);
    Ok(p)
}

/// A `function_call` output item as a tool call (it must have a `call_id`).
fn function_call(item: &Value) -> Result<ToolCall, BodyProblem> {
    let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let id = field("call_id");
    if id.is_empty() {
        return Err(BodyProblem::Malformed(
            "a function_call item has no call_id".into(),
        ));
    }
    let arguments = match item.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    Ok(ToolCall {
        id,
        name: field("name"),
        arguments,
    })
}

/// A `…_call` output item of a tool the server ran itself (`kind` is the item's type).
fn server_tool_call(kind: &str, item: &Value) -> ProviderToolCall {
    ProviderToolCall {
        kind: kind.trim_end_matches("_call").to_owned(),
        arguments: item
            .get("action")
            .or_else(|| item.get("arguments"))
            .map(|a| a.to_string()),
        output: item
            .get("results")
            .or_else(|| item.get("output"))
            .filter(|o| !o.is_null())
            .map(|o| o.to_string()),
        details: item.clone(),
    }
}

/// Why the response ended, from its `status` (and `incomplete_details`): a completed
/// response with tool calls ends for them, one with a refusal for the content filter.
fn response_finish_reason(v: &Value, has_calls: bool, refused: bool) -> FinishReason {
    let status = v
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("completed");
    match status {
        "completed" if has_calls => FinishReason::ToolCalls,
        "completed" if refused => FinishReason::ContentFilter,
        "completed" => FinishReason::Stop,
        "incomplete" => match v
            .get("incomplete_details")
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
        {
            Some("max_output_tokens") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
            None => FinishReason::Other("incomplete".into()),
        },
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Parses a whole (not streamed) Responses body.
pub(super) fn parse_json(body: &[u8]) -> Result<Parsed, BodyProblem> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        BodyProblem::Malformed(format!(
            "body is not JSON ({e}): {}",
            snippet(&String::from_utf8_lossy(body))
        ))
    })?;
    parse_response_object(&v)
}
