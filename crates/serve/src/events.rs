//! A run's progress as AG-UI events: [`Mapper`] turns the agent's [`RunEvent`]s into the
//! protocol's events in an order the official client accepts (every message, reasoning,
//! step and tool call opened is closed before the run ends), and [`frame`] writes one as
//! an SSE `data:` frame.
//!
//! Ids on the wire are made unique across a thread: an assistant turn is `BUNDLE.STEP`,
//! its reasoning `BUNDLE.STEP.r`, a tool call `BUNDLE.CALL` (`CALL` the call's id in the
//! run, `STEP.N`), its result `BUNDLE.CALL.result`. An interrupt's id is its call's.

use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

use provrun_agent::RunEvent;
use provrun_model::StreamDelta;
use serde_json::{Map, Value, json};

/// The name of the `CUSTOM` event that names a run's bundle and its verdict.
pub const BUNDLE_EVENT: &str = "provrun.bundle";
/// The name of the `CUSTOM` event for a message the run was steered with.
pub const STEERED_EVENT: &str = "provrun.steered";

/// Milliseconds since the Unix epoch, as AG-UI's `timestamp` is in practice.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// An event of `kind` with these members and a timestamp.
pub(crate) fn event(kind: &str, members: Value) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), Value::String(kind.into()));
    if let Value::Object(m) = members {
        out.extend(m);
    }
    out.insert("timestamp".into(), json!(now_ms()));
    Value::Object(out)
}

/// One SSE frame: `data: JSON` and a blank line (compact JSON holds no newline).
pub(crate) fn frame(event: &Value) -> bytes::Bytes {
    bytes::Bytes::from(format!("data: {event}\n\n"))
}

/// The wire id of a call `run_call_id` of bundle `bundle`.
pub(crate) fn call_wire_id(bundle: &str, run_call_id: &str) -> String {
    format!("{bundle}.{run_call_id}")
}

/// The run call id a wire id of `bundle` names, if it is one.
pub(crate) fn run_call_id_of<'a>(bundle: &str, wire_id: &'a str) -> Option<&'a str> {
    wire_id
        .strip_prefix(bundle)
        .and_then(|rest| rest.strip_prefix('.'))
        .filter(|rest| !rest.is_empty())
}

/// Turns a run's [`RunEvent`]s into AG-UI events. One per request: a resumed run gets a
/// new one that knows which calls the earlier segment announced.
#[derive(Debug)]
pub(crate) struct Mapper {
    bundle: String,
    /// The model request whose step is open, if any.
    open_step: Option<u32>,
    /// A step whose response arrived: it closes after the answer's text.
    step_answered: Option<u32>,
    /// The step whose text message is open (streamed), and whether any text was sent.
    text_open: Option<u32>,
    /// The step whose reasoning is open (streamed).
    reasoning_open: Option<u32>,
    /// Steps whose text (or reasoning) was streamed, so the whole answer is not sent again.
    text_streamed: HashSet<u32>,
    reasoning_streamed: HashSet<u32>,
    /// Calls the earlier segment of this bundle announced: announced again without
    /// arguments (the client has them), their caller-given results not echoed.
    announced: HashSet<String>,
    /// Calls whose result the client itself gave (frontend tools, on resume).
    client_results: HashSet<String>,
}

impl Mapper {
    /// A mapper for a run writing `bundle`; `announced`: the run ids of calls an earlier
    /// segment streamed, `client_results`: those among them the client answered.
    pub(crate) fn new(
        bundle: impl Into<String>,
        announced: HashSet<String>,
        client_results: HashSet<String>,
    ) -> Self {
        Self {
            bundle: bundle.into(),
            open_step: None,
            step_answered: None,
            text_open: None,
            reasoning_open: None,
            text_streamed: HashSet::new(),
            reasoning_streamed: HashSet::new(),
            announced,
            client_results,
        }
    }

    fn turn_id(&self, step: u32) -> String {
        format!("{}.{step}", self.bundle)
    }

    fn reasoning_id(&self, step: u32) -> String {
        format!("{}.{step}.r", self.bundle)
    }

    /// The AG-UI events for one run event, in order.
    pub(crate) fn on(&mut self, ev: RunEvent) -> Vec<Value> {
        let mut out = Vec::new();
        if !matches!(ev, RunEvent::ModelAnswer { .. } | RunEvent::ModelDelta(_)) {
            self.finish_answered_step(&mut out);
        }
        match ev {
            RunEvent::ModelRequest { step } => {
                self.close_step(&mut out);
                self.open_step = Some(step);
                out.push(event("STEP_STARTED", json!({"stepName": step_name(step)})));
            }
            RunEvent::ModelDelta(delta) => self.delta(delta, &mut out),
            RunEvent::ModelResponse { step, .. } => {
                self.step_answered = Some(step);
            }
            RunEvent::ModelAnswer {
                step,
                text,
                reasoning,
            } => {
                self.answer(step, text, reasoning, &mut out);
                self.finish_answered_step(&mut out);
            }
            RunEvent::CallBegin {
                run_call_id,
                name,
                arguments,
                summary,
                confirm,
                ..
            } => self.call_begin(&run_call_id, &name, &arguments, summary, confirm, &mut out),
            RunEvent::ToolResult {
                run_call_id,
                content,
                ok,
                ..
            } if !self.client_results.contains(&run_call_id) => {
                let id = call_wire_id(&self.bundle, &run_call_id);
                let mut members = json!({
                    "messageId": format!("{id}.result"),
                    "toolCallId": id,
                    "content": content,
                    "role": "tool",
                });
                if !ok {
                    members["metadata"] = json!({"ok": false});
                }
                out.push(event("TOOL_CALL_RESULT", members));
            }
            RunEvent::Steered { step, text } => out.push(event(
                "CUSTOM",
                json!({"name": STEERED_EVENT, "value": {"text": text, "beforeRequest": step}}),
            )),
            // Deferred calls become interrupts or pending calls at the run's end; the
            // end itself is the caller's to send.
            _ => {}
        }
        out
    }

    fn delta(&mut self, delta: StreamDelta, out: &mut Vec<Value>) {
        let Some(step) = self.open_step else { return };
        match delta {
            StreamDelta::Reasoning(piece) if !piece.is_empty() => {
                if self.reasoning_open != Some(step) {
                    self.close_text(out);
                    self.open_reasoning(step, out);
                }
                self.reasoning_streamed.insert(step);
                out.push(event(
                    "REASONING_MESSAGE_CONTENT",
                    json!({"messageId": self.reasoning_id(step), "delta": piece}),
                ));
            }
            StreamDelta::Text(piece) if !piece.is_empty() => {
                if self.text_open != Some(step) {
                    self.close_reasoning(out);
                    self.text_open = Some(step);
                    out.push(event(
                        "TEXT_MESSAGE_START",
                        json!({"messageId": self.turn_id(step), "role": "assistant"}),
                    ));
                }
                self.text_streamed.insert(step);
                out.push(event(
                    "TEXT_MESSAGE_CONTENT",
                    json!({"messageId": self.turn_id(step), "delta": piece}),
                ));
            }
            // Tool calls are announced whole when they begin; empty pieces say nothing.
            _ => {}
        }
    }

    /// A response's whole text and reasoning: sent now unless they were streamed.
    fn answer(
        &mut self,
        step: u32,
        text: Option<String>,
        reasoning: Option<String>,
        out: &mut Vec<Value>,
    ) {
        if let Some(r) = reasoning.filter(|r| !r.is_empty())
            && !self.reasoning_streamed.contains(&step)
        {
            self.open_reasoning(step, out);
            out.push(event(
                "REASONING_MESSAGE_CONTENT",
                json!({"messageId": self.reasoning_id(step), "delta": r}),
            ));
        }
        self.close_reasoning(out);
        if let Some(t) = text.filter(|t| !t.is_empty())
            && !self.text_streamed.contains(&step)
        {
            let id = self.turn_id(step);
            out.push(event(
                "TEXT_MESSAGE_START",
                json!({"messageId": id, "role": "assistant"}),
            ));
            out.push(event(
                "TEXT_MESSAGE_CONTENT",
                json!({"messageId": id, "delta": t}),
            ));
            out.push(event("TEXT_MESSAGE_END", json!({"messageId": id})));
        }
        self.close_text(out);
    }

    fn call_begin(
        &mut self,
        run_call_id: &str,
        name: &str,
        arguments: &str,
        summary: Option<String>,
        confirm: Option<String>,
        out: &mut Vec<Value>,
    ) {
        self.close_reasoning(out);
        self.close_text(out);
        let id = call_wire_id(&self.bundle, run_call_id);
        // The assistant turn that made the call: its step is the call id's first part.
        let parent = run_call_id
            .split('.')
            .next()
            .and_then(|s| s.parse::<u32>().ok())
            .map(|step| self.turn_id(step));
        let mut start = json!({"toolCallId": id, "toolCallName": name});
        if let Some(parent) = parent {
            start["parentMessageId"] = Value::String(parent);
        }
        let mut metadata = Map::new();
        if let Some(s) = summary {
            metadata.insert("summary".into(), Value::String(s));
        }
        if let Some(c) = confirm {
            metadata.insert("confirm".into(), Value::String(c));
        }
        if !metadata.is_empty() {
            start["metadata"] = Value::Object(metadata);
        }
        out.push(event("TOOL_CALL_START", start));
        // A call an earlier segment announced is announced again (the client's reducer
        // takes it as the same call) without its arguments, which it already holds.
        if !self.announced.contains(run_call_id) && !arguments.is_empty() {
            out.push(event(
                "TOOL_CALL_ARGS",
                json!({"toolCallId": id, "delta": arguments}),
            ));
        }
        out.push(event("TOOL_CALL_END", json!({"toolCallId": id})));
    }

    fn open_reasoning(&mut self, step: u32, out: &mut Vec<Value>) {
        let id = self.reasoning_id(step);
        self.reasoning_open = Some(step);
        out.push(event("REASONING_START", json!({"messageId": id})));
        out.push(event(
            "REASONING_MESSAGE_START",
            json!({"messageId": id, "role": "reasoning"}),
        ));
    }

    fn close_reasoning(&mut self, out: &mut Vec<Value>) {
        if let Some(step) = self.reasoning_open.take() {
            let id = self.reasoning_id(step);
            out.push(event("REASONING_MESSAGE_END", json!({"messageId": id})));
            out.push(event("REASONING_END", json!({"messageId": id})));
        }
    }

    fn close_text(&mut self, out: &mut Vec<Value>) {
        if let Some(step) = self.text_open.take() {
            out.push(event(
                "TEXT_MESSAGE_END",
                json!({"messageId": self.turn_id(step)}),
            ));
        }
    }

    fn close_step(&mut self, out: &mut Vec<Value>) {
        self.close_reasoning(out);
        self.close_text(out);
        if let Some(step) = self.open_step.take() {
            out.push(event("STEP_FINISHED", json!({"stepName": step_name(step)})));
        }
        self.step_answered = None;
    }

    /// Close the step whose response arrived, once its answer is out.
    fn finish_answered_step(&mut self, out: &mut Vec<Value>) {
        if self.step_answered.is_some() {
            self.close_step(out);
        }
    }

    /// Close whatever is still open (a run cancelled mid-request), before the run's end.
    pub(crate) fn close(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        self.close_step(&mut out);
        out
    }
}

/// The `stepName` of model request `step`.
fn step_name(step: u32) -> String {
    format!("model_request_{step}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(events: &[Value]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    #[test]
    fn a_whole_answer_is_one_message_inside_its_step() {
        let mut m = Mapper::new("b", HashSet::new(), HashSet::new());
        let mut all = m.on(RunEvent::ModelRequest { step: 1 });
        all.extend(m.on(RunEvent::ModelResponse {
            step: 1,
            usage: Default::default(),
        }));
        all.extend(m.on(RunEvent::ModelAnswer {
            step: 1,
            text: Some("hi".into()),
            reasoning: Some("think".into()),
        }));
        all.extend(m.close());
        assert_eq!(
            kinds(&all),
            [
                "STEP_STARTED",
                "REASONING_START",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "REASONING_MESSAGE_END",
                "REASONING_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "STEP_FINISHED"
            ]
        );
        assert_eq!(all[7]["messageId"], "b.1");
        assert_eq!(all[7]["delta"], "hi");
    }

    #[test]
    fn streamed_text_is_not_sent_twice_and_a_cancelled_step_is_closed() {
        let mut m = Mapper::new("b", HashSet::new(), HashSet::new());
        let mut all = m.on(RunEvent::ModelRequest { step: 2 });
        all.extend(m.on(RunEvent::ModelDelta(StreamDelta::Text("a".into()))));
        all.extend(m.on(RunEvent::ModelDelta(StreamDelta::Text(String::new()))));
        all.extend(m.on(RunEvent::ModelDelta(StreamDelta::Text("b".into()))));
        all.extend(m.close());
        assert_eq!(
            kinds(&all),
            [
                "STEP_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "STEP_FINISHED"
            ]
        );
    }

    #[test]
    fn a_call_carries_its_texts_and_an_announced_one_comes_back_without_arguments() {
        let call = |m: &mut Mapper| {
            m.on(RunEvent::CallBegin {
                call_id: "c".into(),
                run_call_id: "1.1".into(),
                name: "write_file".into(),
                arguments: "{}".into(),
                summary: Some("Write a".into()),
                confirm: Some("Write a?".into()),
            })
        };
        let first = call(&mut Mapper::new("b", HashSet::new(), HashSet::new()));
        assert_eq!(
            kinds(&first),
            ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
        );
        assert_eq!(first[0]["toolCallId"], "b.1.1");
        assert_eq!(first[0]["parentMessageId"], "b.1");
        assert_eq!(first[0]["metadata"]["confirm"], "Write a?");
        let announced: HashSet<String> = ["1.1".to_string()].into();
        let mut again = Mapper::new("b", announced.clone(), announced);
        assert_eq!(
            kinds(&call(&mut again)),
            ["TOOL_CALL_START", "TOOL_CALL_END"]
        );
        let result = again.on(RunEvent::ToolResult {
            call_id: "c".into(),
            run_call_id: "1.1".into(),
            name: "write_file".into(),
            ok: true,
            content: "x".into(),
        });
        assert!(result.is_empty(), "a client's own result is not echoed");
        assert_eq!(run_call_id_of("b", "b.1.1"), Some("1.1"));
        assert_eq!(run_call_id_of("b", "c.1.1"), None);
    }
}
