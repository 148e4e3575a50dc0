//! A Messages stream read event by event ([`StreamState`]): content blocks started,
//! extended by deltas and stopped, usage and the stop reason, handed out as they come.

use serde_json::{Value, json};

use super::finish_reason;
use super::response;
use super::response::{Block, RawUsage, assemble, block_type, provider_problem, read_block};
use crate::native::{self, LiveEvents};
use crate::types::StreamDelta;
use crate::wire::{BodyProblem, Parsed, event_json, number};

/// The state of a Messages stream: the blocks by index, usage, stop reason, and whether
/// `message_stop` arrived.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    blocks: Vec<(u64, Block)>,
    /// The position among tool calls of each tool_use block, by block index.
    call_index: Vec<(u64, usize)>,
    usage: RawUsage,
    stop_reason: Option<String>,
    model: Option<String>,
    id: Option<String>,
    started: bool,
    stopped: bool,
}

impl LiveEvents for StreamState {
    /// Reads one SSE event.
    fn push(
        &mut self,
        event: &str,
        data: &str,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        if data.trim().is_empty() && event != "error" {
            return Ok(());
        }
        if self.stopped {
            // Nothing may follow message_stop; a proxy's trailing comment is ignored.
            return Ok(());
        }
        let v = event_json(event, data)?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event)
            .to_owned();
        match kind.as_str() {
            "ping" => {}
            "error" => return Err(provider_problem(v.get("error").unwrap_or(&v))),
            "message_start" => self.message_start(&v),
            "content_block_start" => self.block_start(&v, on_delta)?,
            "content_block_delta" => self.block_delta(&v, on_delta)?,
            "content_block_stop" => {
                let index = block_index(&v, "content_block_stop")?;
                self.block_mut(index)?;
            }
            "message_delta" => self.message_delta(&v),
            "message_stop" => self.stopped = true,
            // The API may add event types; they carry nothing this backend uses.
            other => tracing::debug!(event = other, "unknown Messages stream event ignored"),
        }
        Ok(())
    }
}

impl StreamState {
    fn block_mut(&mut self, index: u64) -> Result<&mut Block, BodyProblem> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
            .ok_or_else(|| {
                BodyProblem::Malformed(format!("a delta for content block {index}, never started"))
            })
    }

    /// `message_start`: the model, the response id and the first usage.
    fn message_start(&mut self, v: &Value) {
        let m = v.get("message").cloned().unwrap_or(Value::Null);
        self.model = m.get("model").and_then(Value::as_str).map(str::to_owned);
        self.id = m.get("id").and_then(Value::as_str).map(str::to_owned);
        if let Some(u) = m.get("usage") {
            self.usage.merge(u);
        }
        self.started = true;
    }

    /// `content_block_start`: a new block (its opening text, or a tool call's id and name,
    /// handed out at once).
    fn block_start(
        &mut self,
        v: &Value,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        let index = block_index(v, "content_block_start")?;
        if self.blocks.iter().any(|(i, _)| *i == index) {
            return Err(BodyProblem::Malformed(format!(
                "content block {index} started twice"
            )));
        }
        let block = read_block(v.get("content_block").unwrap_or(&Value::Null))?;
        match &block {
            Block::Text(t) if !t.is_empty() => on_delta(StreamDelta::Text(t.clone())),
            Block::ToolUse { id, name, .. } => {
                let pos = self.call_index.len();
                self.call_index.push((index, pos));
                on_delta(StreamDelta::ToolCall {
                    index: pos,
                    id: Some(id.clone()),
                    name: Some(name.clone()),
                    arguments: String::new(),
                });
            }
            _ => {}
        }
        self.blocks.push((index, block));
        Ok(())
    }

    /// `content_block_delta`: a piece appended to a started block, of the block's kind.
    fn block_delta(
        &mut self,
        v: &Value,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), BodyProblem> {
        let index = block_index(v, "content_block_delta")?;
        let delta = v.get("delta").cloned().unwrap_or(Value::Null);
        let field = |k: &str| {
            delta
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let pos = self
            .call_index
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, p)| *p);
        let block = self.block_mut(index)?;
        match (block_type(&delta), block) {
            ("text_delta", Block::Text(t)) => {
                let piece = field("text");
                t.push_str(&piece);
                if !piece.is_empty() {
                    on_delta(StreamDelta::Text(piece));
                }
            }
            ("thinking_delta", Block::Thinking { thinking, .. }) => {
                let piece = field("thinking");
                thinking.push_str(&piece);
                if !piece.is_empty() {
                    on_delta(StreamDelta::Reasoning(piece));
                }
            }
            ("signature_delta", Block::Thinking { signature, .. }) => {
                signature.push_str(&field("signature"));
            }
            ("input_json_delta", Block::ToolUse { json, streamed, .. }) => {
                let piece = field("partial_json");
                json.push_str(&piece);
                *streamed = true;
                if !piece.is_empty() {
                    on_delta(StreamDelta::ToolCall {
                        index: pos.unwrap_or(0),
                        id: None,
                        name: None,
                        arguments: piece,
                    });
                }
            }
            ("input_json_delta", Block::Server(s)) => {
                // A server tool's input is kept as its text.
                let piece = field("partial_json");
                let mut text = s
                    .get("_input_json")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                text.push_str(&piece);
                s["_input_json"] = json!(text);
            }
            // Citations and other annotations are kept in the raw bytes only.
            ("citations_delta", _) => {}
            (t, b) => {
                return Err(BodyProblem::Malformed(format!(
                    "a {t:?} delta for content block {index}, which is {}",
                    match b {
                        Block::Text(_) => "text",
                        Block::Thinking { .. } => "thinking",
                        Block::Redacted(_) => "redacted_thinking",
                        Block::ToolUse { .. } => "tool_use",
                        Block::Server(_) => "a server tool block",
                    }
                )));
            }
        }
        Ok(())
    }

    /// `message_delta`: the stop reason and the final usage.
    fn message_delta(&mut self, v: &Value) {
        if let Some(r) = v
            .get("delta")
            .and_then(|d| d.get("stop_reason"))
            .and_then(Value::as_str)
        {
            self.stop_reason = Some(r.to_owned());
        }
        if let Some(u) = v.get("usage") {
            self.usage.merge(u);
        }
    }

    /// Ends the stream: it must have reached `message_stop`.
    pub(crate) fn finish(self) -> Result<Parsed, BodyProblem> {
        if !self.stopped {
            return Err(BodyProblem::Incomplete(if self.started {
                "the stream ended before message_stop".into()
            } else {
                "the stream ended before message_start".into()
            }));
        }
        let mut blocks = self.blocks;
        blocks.sort_by_key(|(i, _)| *i);
        let mut p = assemble(blocks.into_iter().map(|(_, b)| b).collect())?;
        p.usage = self.usage.usage();
        p.finish_reason = self.stop_reason.as_deref().map(finish_reason);
        p.model = self.model;
        p.id = self.id;
        Ok(p)
    }
}

/// The `index` of a content block event, which `kind` must carry.
fn block_index(v: &Value, kind: &str) -> Result<u64, BodyProblem> {
    number(v.get("index")).ok_or_else(|| BodyProblem::Malformed(format!("{kind} without an index")))
}

/// Parses a successful Messages body, JSON or SSE. Stream deltas go to `on_delta`.
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
