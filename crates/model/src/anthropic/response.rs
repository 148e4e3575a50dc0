//! Reading a Messages response: stop reasons, usage, content blocks assembled into a
//! [`Parsed`], and a whole body (JSON, or SSE through `stream.rs`).

use serde_json::{Value, json};

use super::API_TAG;
use crate::types::{FinishReason, ProviderItem, ProviderToolCall, ToolCall, Usage};
use crate::wire::{BodyProblem, Parsed, error_info_from_value, number, snippet};

/// Maps a `stop_reason`: `end_turn` and `stop_sequence` are a stop, `tool_use` tool calls,
/// `max_tokens` the length limit, `refusal` a content filter; anything else (such as
/// `pause_turn`) is kept as sent.
pub(crate) fn finish_reason(stop_reason: &str) -> FinishReason {
    match stop_reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Token counts from a `usage` object, merged into `acc` (a stream reports some in
/// `message_start` and the final ones in `message_delta`).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RawUsage {
    input: Option<u64>,
    output: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    thinking: Option<u64>,
}

impl RawUsage {
    pub(super) fn merge(&mut self, v: &Value) {
        let get = |k: &str| number(v.get(k));
        self.input = get("input_tokens").or(self.input);
        self.output = get("output_tokens").or(self.output);
        self.cache_creation = get("cache_creation_input_tokens").or(self.cache_creation);
        self.cache_read = get("cache_read_input_tokens").or(self.cache_read);
        self.thinking = number(
            v.get("output_tokens_details")
                .and_then(|d| d.get("thinking_tokens")),
        )
        .or(self.thinking);
    }

    /// `input_tokens` counts the whole prompt: Anthropic's uncached input plus the cache
    /// writes and reads (which its `input_tokens` leaves out).
    pub(super) fn usage(&self) -> Option<Usage> {
        if self.input.is_none() && self.output.is_none() {
            return None;
        }
        let input = self
            .input
            .unwrap_or(0)
            .saturating_add(self.cache_creation.unwrap_or(0))
            .saturating_add(self.cache_read.unwrap_or(0));
        let output = self.output.unwrap_or(0);
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input.saturating_add(output),
            cached_input_tokens: self.cache_read,
            cache_creation_input_tokens: self.cache_creation,
            reasoning_tokens: self.thinking,
        })
    }
}

/// One content block as it is assembled.
#[derive(Debug)]
pub(super) enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(Value),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
        streamed: bool,
    },
    Server(Value),
}

pub(super) fn block_type(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

/// A content block from a response (or a `content_block_start`), or a typed problem.
pub(super) fn read_block(v: &Value) -> Result<Block, BodyProblem> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match block_type(v) {
        "text" => Ok(Block::Text(text("text"))),
        "thinking" => Ok(Block::Thinking {
            thinking: text("thinking"),
            signature: text("signature"),
        }),
        "redacted_thinking" => Ok(Block::Redacted(v.clone())),
        "tool_use" => {
            let input = v.get("input").cloned().unwrap_or_else(|| json!({}));
            if !input.is_object() {
                return Err(BodyProblem::Malformed(format!(
                    "tool_use {} has an input that is not a JSON object: {}",
                    text("id"),
                    snippet(&input.to_string())
                )));
            }
            let id = text("id");
            if id.is_empty() {
                return Err(BodyProblem::Malformed("a tool_use block has no id".into()));
            }
            Ok(Block::ToolUse {
                id,
                name: text("name"),
                start_input: input,
                json: String::new(),
                streamed: false,
            })
        }
        // Tools Anthropic runs itself (web search, code execution) and their results.
        t if t == "server_tool_use" || t.ends_with("_tool_result") => Ok(Block::Server(v.clone())),
        "" => Err(BodyProblem::Malformed(format!(
            "a content block has no type: {}",
            snippet(&v.to_string())
        ))),
        other => Err(BodyProblem::Malformed(format!(
            "unknown content block type {other:?}"
        ))),
    }
}

/// The blocks of one message, assembled into a [`Parsed`].
pub(super) fn assemble(blocks: Vec<Block>) -> Result<Parsed, BodyProblem> {
    let mut p = Parsed::default();
    let mut text = String::new();
    let mut reasoning = String::new();
    for b in blocks {
        match b {
            Block::Text(t) => text.push_str(&t),
            Block::Thinking {
                thinking,
                signature,
            } => {
                reasoning.push_str(&thinking);
                p.provider_items.push(ProviderItem {
                    api: API_TAG.into(),
                    item: json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                });
            }
            Block::Redacted(v) => p.provider_items.push(ProviderItem {
                api: API_TAG.into(),
                item: v,
            }),
            Block::ToolUse {
                id,
                name,
                start_input,
                json,
                streamed,
            } => {
                let arguments = if streamed && !json.trim().is_empty() {
                    match serde_json::from_str::<Value>(&json) {
                        Ok(Value::Object(_)) => json,
                        _ => {
                            return Err(BodyProblem::Malformed(format!(
                                "tool_use {id}: the streamed input is not a JSON object: {}",
                                snippet(&json)
                            )));
                        }
                    }
                } else {
                    start_input.to_string()
                };
                p.tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments,
                });
            }
            Block::Server(v) => {
                let kind = v
                    .get("name")
                    .or_else(|| v.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("server_tool")
                    .to_owned();
                let arguments = v.get("input").map(|i| i.to_string());
                let output = v.get("content").map(|c| c.to_string());
                p.provider_tool_calls.push(ProviderToolCall {
                    kind,
                    arguments,
                    output,
                    details: v,
                });
            }
        }
    }
    p.text = (!text.is_empty()).then_some(text);
    p.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    Ok(p)
}

pub(super) fn provider_problem(err: &Value) -> BodyProblem {
    let info = error_info_from_value(err);
    BodyProblem::Provider {
        code: info.code.or(info.kind),
        status: info.status,
        message: info.message,
    }
}

pub(super) fn parse_json(body: &[u8]) -> Result<Parsed, BodyProblem> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        BodyProblem::Malformed(format!(
            "body is not JSON ({e}): {}",
            snippet(&String::from_utf8_lossy(body))
        ))
    })?;
    if !v.is_object() {
        return Err(BodyProblem::Malformed("body is not a JSON object".into()));
    }
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(provider_problem(err));
    }
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| BodyProblem::Malformed("no `content` array in the message".into()))?;
    let blocks = content
        .iter()
        .map(read_block)
        .collect::<Result<Vec<_>, _>>()?;
    let mut p = assemble(blocks)?;
    let mut usage = RawUsage::default();
    if let Some(u) = v.get("usage") {
        usage.merge(u);
    }
    p.usage = usage.usage();
    p.finish_reason = v
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(finish_reason);
    p.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
    p.id = v.get("id").and_then(Value::as_str).map(str::to_owned);
    Ok(p)
}
