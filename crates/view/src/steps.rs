//! The page's steps and the run's totals, gathered while the log is read: [`Steps`]
//! (step 0 before the first model request, then one step per request, with deferred and
//! completed tool calls linked) and [`Tally`] (requests, tokens, tool calls, how the run
//! ended).

use std::collections::HashMap;

use provrun_evidence::{Event, EventType, ModelCalled, RunFinished, ToolCalled};
use serde_json::{Map, Value, json};

/// The page's steps: step 0 holds what came before the first model request, each later
/// step one request and what followed it.
#[derive(Default)]
pub(crate) struct Steps {
    pub(crate) steps: Vec<Value>,
    /// The call's run-unique id (the model's id in logs from before run ids) → index
    /// (step, entry) of its deferred event, to link it with its completion: models reuse
    /// their ids, even within one response, so the model's id alone can pair the wrong
    /// events.
    deferred_at: HashMap<String, (usize, usize)>,
}

impl Steps {
    /// Opens the step of a model request (`model`), marked when the run resumed there.
    pub(crate) fn push_model(&mut self, model: Value, resumed: bool) {
        let n = self.steps.iter().filter(|s| !s["model"].is_null()).count() + 1;
        self.steps
            .push(json!({"n": n, "model": model, "entries": [], "resumed": resumed}));
    }

    /// Adds `entry`, stamped with its event `e`, to the latest step; a tool call that
    /// completes a deferred one is linked with it both ways.
    pub(crate) fn push_entry(&mut self, mut entry: Value, e: &Event, resumed: bool) {
        let steps = &mut self.steps;
        entry["seq"] = json!(e.seq);
        entry["ts"] = json!(e.ts);
        entry["confidence"] = serde_json::to_value(e.confidence).unwrap_or_default();
        if steps.is_empty() {
            steps.push(json!({"n": 0, "model": null, "entries": [], "resumed": false}));
        }
        let si = steps.len() - 1;
        if resumed {
            entry["resumed"] = json!(true);
        }
        let ei = steps[si]["entries"].as_array().map_or(0, Vec::len);
        if entry["kind"] == "tool" {
            let call_id = entry["run_call_id"]
                .as_str()
                .or(entry["call_id"].as_str())
                .unwrap_or("")
                .to_owned();
            if entry["deferred"] == true {
                self.deferred_at.insert(call_id, (si, ei));
            } else if let Some((dsi, dei)) = self.deferred_at.remove(&call_id) {
                entry["deferred_seq"] = steps[dsi]["entries"][dei]["seq"].clone();
                let completed = e.seq;
                steps[dsi]["entries"][dei]["completed_seq"] = json!(completed);
            }
        }
        steps[si]["entries"]
            .as_array_mut()
            .expect("entries is an array")
            .push(entry);
    }
}

/// How the run went: counted from the log, and as its last `run_finished` records it.
#[derive(Default)]
pub(crate) struct Tally {
    requests: u64,
    input_tokens: u64,
    output_tokens: u64,
    tool_calls: u64,
    status: Option<String>,
    error: Value,
    usage: Option<Value>,
}

impl Tally {
    /// Counts a model request and its tokens.
    pub(crate) fn model_called(&mut self, p: &ModelCalled) {
        self.requests += 1;
        // `usage` is as the model reported it: free-form JSON.
        self.input_tokens += num(&p.usage["input_tokens"]);
        self.output_tokens += num(&p.usage["output_tokens"]);
    }

    /// Counts a tool call the run made (not a deferral, nor one the provider ran).
    pub(crate) fn tool_called(&mut self, p: &ToolCalled) {
        if !p.deferred && !p.provider_run {
            self.tool_calls += 1;
        }
    }

    /// Keeps how a run segment ended, and returns its entry.
    pub(crate) fn run_finished(&mut self, p: &RunFinished) -> Value {
        let s = p.status.as_str().to_owned();
        self.status = Some(s.clone());
        self.error = json!(p.error);
        self.usage = Some(p.usage.clone());
        json!({"kind": "end", "status": s, "error": p.error, "outputs": p.outputs})
    }

    /// The run's status, error, end and totals, into `run`: the usage the finished run
    /// recorded, else what the log counts.
    pub(crate) fn summarize(self, run: &mut Map<String, Value>, events: &[Event]) {
        run.insert(
            "status".into(),
            json!(self.status.as_deref().unwrap_or("never finished")),
        );
        let finished = events.last().map(|e| e.kind) == Some(EventType::RunFinished);
        if !finished && !events.is_empty() {
            run.insert("status".into(), json!("never finished"));
        }
        run.insert("error".into(), self.error);
        run.insert("ended".into(), json!(events.last().map(|e| e.ts.clone())));
        run.insert("events".into(), json!(events.len()));
        let usage = self.usage.filter(|_| finished).unwrap_or(Value::Null);
        let pick = |key: &str, counted: u64| usage[key].as_u64().unwrap_or(counted);
        run.insert("requests".into(), json!(pick("requests", self.requests)));
        run.insert(
            "tool_calls".into(),
            json!(pick("tool_calls", self.tool_calls)),
        );
        run.insert(
            "input_tokens".into(),
            json!(pick("input_tokens", self.input_tokens)),
        );
        run.insert(
            "output_tokens".into(),
            json!(pick("output_tokens", self.output_tokens)),
        );
    }
}

/// A JSON number as a count: anything else (absent, negative, text) counts as 0.
pub(crate) fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}
