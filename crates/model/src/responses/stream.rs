//! A Responses stream read event by event ([`StreamState`]): text, reasoning and call
//! argument deltas handed out as they come, and the final response parsed whole.

use serde_json::Value;

use super::response;
use super::response::{parse_response_object, provider_problem};
use crate::native::{self, LiveEvents};
use crate::types::StreamDelta;
use crate::wire::{BodyProblem, Parsed, event_json, number};

/// The state of a Responses stream: which output items are function calls (for delta
/// indices), and the final response once it arrives.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    /// The tool-call position of each function_call item, by output index.
    calls: Vec<(u64, usize)>,
    final_response: Option<Value>,
}

impl LiveEvents for StreamState {
    /// Reads one SSE event.
    fn push(
        &mut self,
        event: &str,
        data: &str,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        if data.trim().is_empty() && event != "error" || self.final_response.is_some() {
            return Ok(());
        }
        let v = event_json(event, data)?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(event);
        match kind {
            "error" => return Err(provider_problem(v.get("error").unwrap_or(&v))),
            "response.failed" => {
                let err = v
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .filter(|e| !e.is_null())
                    .unwrap_or(&v);
                return Err(provider_problem(err));
            }
            "response.output_item.added" => self.item_added(&v, on_delta)?,
            "response.function_call_arguments.delta" => self.arguments_delta(&v, on_delta)?,
            "response.output_text.delta" | "response.refusal.delta" => {
                let piece = delta(&v);
                if !piece.is_empty() {
                    on_delta(StreamDelta::Text(piece));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let piece = delta(&v);
                if !piece.is_empty() {
                    on_delta(StreamDelta::Reasoning(piece));
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = v
                    .get("response")
                    .cloned()
                    .ok_or_else(|| BodyProblem::Malformed(format!("{kind} without a response")))?;
                // Checked now, so a live stream stops reporting on a bad final event.
                parse_response_object(&response)?;
                self.final_response = Some(response);
            }
            // Created, in progress, part and item boundaries, `.done` repeats: the final
            // response holds all of it.
            _ => {}
        }
        Ok(())
    }
}

impl StreamState {
    /// `response.output_item.added`: a function call's position, id and name, handed out
    /// at once (other items wait for the final response).
    fn item_added(
        &mut self,
        v: &Value,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        let item = v.get("item").cloned().unwrap_or(Value::Null);
        if item["type"] == "function_call" {
            let index = number(v.get("output_index")).ok_or_else(|| {
                BodyProblem::Malformed("output_item.added without an output_index".into())
            })?;
            let pos = self.calls.len();
            self.calls.push((index, pos));
            on_delta(StreamDelta::ToolCall {
                index: pos,
                id: item["call_id"].as_str().map(str::to_owned),
                name: item["name"].as_str().map(str::to_owned),
                arguments: String::new(),
            });
        }
        Ok(())
    }

    /// `response.function_call_arguments.delta`: a piece of a known call's arguments.
    fn arguments_delta(
        &mut self,
        v: &Value,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        let index = number(v.get("output_index"));
        let pos = self
            .calls
            .iter()
            .find(|(i, _)| Some(*i) == index)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                BodyProblem::Malformed(
                    "function call arguments for an output item that is not a function call".into(),
                )
            })?;
        let piece = delta(v);
        if !piece.is_empty() {
            on_delta(StreamDelta::ToolCall {
                index: pos,
                id: None,
                name: None,
                arguments: piece,
            });
        }
        Ok(())
    }

    /// Ends the stream: it must have reached `response.completed` (or
    /// `response.incomplete`), whose response is the result.
    pub(crate) fn finish(self) -> Result<Parsed, BodyProblem> {
        match self.final_response {
            Some(r) => parse_response_object(&r),
            None => Err(BodyProblem::Incomplete(
                "the stream ended before response.completed".into(),
            )),
        }
    }
}

/// An event's `delta` text (empty if none).
fn delta(v: &Value) -> String {
    v.get("delta")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// Parses a successful Responses body, JSON or SSE. Stream deltas go to `on_delta`.
pub(crate) fn parse_body(
    body: &[u8],
    media_type: Option<&str>,
    on_delta: &mut dyn FnMut(StreamDelta),
) -> Result<Parsed, BodyProblem> {
    native::parse_sse_or_json(
        body,
        media_type,
        on_delta,
        StreamState::finish,
        response::parse_json,
    )
}
