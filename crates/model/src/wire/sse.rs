//! Reading a streamed (SSE) chat completion, live or recorded: its events
//! ([`ChatEvents`]) and the deltas accumulated into one response.

use serde_json::Value;

use crate::native::LiveEvents;
use crate::types::{FinishReason, ProviderToolCall, StreamDelta, ToolCall, Usage};

use super::completion::{
    arguments_text, content_text, parse_usage, provider_tool_call, reasoning_text,
};
use super::errors::{ErrorInfo, error_info_from_value};
use super::event_stream::parse_event_stream;
use super::{BodyProblem, Parsed, snippet};

/// Parses an SSE body event by event, as the live stream was read.
pub(super) fn parse_sse(
    body: &[u8],
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<Parsed, BodyProblem> {
    let mut events = ChatEvents::default();
    for event in parse_event_stream(body) {
        if events.done {
            break;
        }
        events.push(&event.event, &event.data, on_delta)?;
    }
    events.finish()
}

/// Reads a chat completion stream's events: its chunks into a [`StreamAccumulator`],
/// `[DONE]`, keep-alives and `error` events. What follows `[DONE]` is ignored.
#[derive(Debug, Default)]
pub(crate) struct ChatEvents {
    acc: StreamAccumulator,
    done: bool,
}

impl ChatEvents {
    /// Ends the stream (see [`StreamAccumulator::finish`]).
    pub(crate) fn finish(self) -> Result<Parsed, BodyProblem> {
        self.acc.finish(self.done)
    }
}

impl LiveEvents for ChatEvents {
    fn push(
        &mut self,
        event: &str,
        data: &str,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        if self.done {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if event == "keepalive" || data.trim().is_empty() && event != "error" {
            return Ok(());
        }
        if event == "error" {
            let info = match serde_json::from_str::<Value>(data) {
                Ok(v) => error_info_from_value(v.get("error").unwrap_or(&v)),
                Err(_) => ErrorInfo::text(data),
            };
            return Err(BodyProblem::Provider {
                code: info.code,
                status: info.status,
                message: info.message,
            });
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            BodyProblem::Malformed(format!("stream event is not JSON ({e}): {}", snippet(data)))
        })?;
        self.acc.push(&chunk, on_delta)
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    key: Option<u64>,
    id: String,
    name: String,
    arguments: String,
}

/// Reassembles streamed chunks into one response, reporting deltas.
#[derive(Debug, Default)]
struct StreamAccumulator {
    text: String,
    reasoning: String,
    calls: Vec<PartialCall>,
    provider: Vec<(Option<u64>, ProviderToolCall)>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    model: Option<String>,
    id: Option<String>,
}

impl StreamAccumulator {
    /// Adds one chunk. A chunk holding an `error` object is a provider error.
    fn push(
        &mut self,
        chunk: &Value,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let info = error_info_from_value(err);
            return Err(BodyProblem::Provider {
                code: info.code,
                status: info.status,
                message: info.message,
            });
        }
        if self.model.is_none() {
            self.model = chunk
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        if self.id.is_none() {
            self.id = chunk.get("id").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(u) = chunk.get("usage").and_then(parse_usage) {
            self.usage = Some(u);
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(());
        };
        for choice in choices {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(FinishReason::from(r));
            }
            let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
                continue;
            };
            if let Some(t) = delta.get("content").and_then(content_text) {
                self.text.push_str(&t);
                on_delta(StreamDelta::Text(t));
            }
            if let Some(r) = reasoning_text(delta) {
                self.reasoning.push_str(&r);
                on_delta(StreamDelta::Reasoning(r));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for c in calls {
                    self.push_call(c, on_delta);
                }
            }
            if let Some(tools) = delta.get("executed_tools").and_then(Value::as_array) {
                for t in tools {
                    let key = t.get("index").and_then(Value::as_u64);
                    let call = provider_tool_call(t);
                    match self
                        .provider
                        .iter_mut()
                        .find(|(k, _)| key.is_some() && *k == key)
                    {
                        Some(slot) => slot.1 = call,
                        None => self.provider.push((key, call)),
                    }
                }
            }
        }
        Ok(())
    }

    fn push_call(&mut self, c: &Value, on_delta: &mut dyn FnMut(StreamDelta)) {
        let key = c.get("index").and_then(Value::as_u64);
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let pos = match (key, id) {
            (Some(k), _) => self.calls.iter().position(|p| p.key == Some(k)),
            (None, Some(id)) => self.calls.iter().position(|p| p.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let pos = pos.unwrap_or_else(|| {
            self.calls.push(PartialCall {
                key,
                ..PartialCall::default()
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[pos];
        let mut new_id = None;
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.to_owned();
            new_id = Some(call.id.clone());
        }
        let f = c.get("function");
        let mut new_name = None;
        if let Some(name) = f
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            && call.name.is_empty()
        {
            call.name = name.to_owned();
            new_name = Some(call.name.clone());
        }
        let fragment = f
            .and_then(|f| f.get("arguments"))
            .map(arguments_text)
            .unwrap_or_default();
        // Some providers resend the complete arguments in a later chunk; appending them
        // again would corrupt the call, so a repeat of a complete object is dropped.
        let repeat = !call.arguments.is_empty()
            && fragment == call.arguments
            && serde_json::from_str::<Value>(&fragment).is_ok();
        let added = if repeat { String::new() } else { fragment };
        call.arguments.push_str(&added);
        if new_id.is_some() || new_name.is_some() || !added.is_empty() {
            on_delta(StreamDelta::ToolCall {
                index: pos,
                id: new_id,
                name: new_name,
                arguments: added,
            });
        }
    }

    /// Ends the stream. Without `[DONE]`, a finish reason must have been seen.
    fn finish(self, saw_done: bool) -> Result<Parsed, BodyProblem> {
        if !saw_done && self.finish.is_none() {
            return Err(BodyProblem::Incomplete(
                "the stream ended with neither [DONE] nor a finish reason".into(),
            ));
        }
        if !saw_done {
            tracing::warn!("stream ended without [DONE] after a finish reason; accepted");
        }
        Ok(Parsed {
            text: (!self.text.is_empty()).then_some(self.text),
            reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
            tool_calls: self
                .calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: if c.id.is_empty() {
                        format!("call_{i}")
                    } else {
                        c.id
                    },
                    name: c.name,
                    arguments: c.arguments,
                })
                .collect(),
            provider_items: Vec::new(),
            provider_tool_calls: self.provider.into_iter().map(|(_, c)| c).collect(),
            usage: self.usage,
            finish_reason: self.finish,
            model: self.model,
            id: self.id,
        })
    }
}
