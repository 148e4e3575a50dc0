//! What a replay answers `remote_mcp` calls with, and how: the recorded servers and
//! results, with no MCP client. Built with and without the `mcp` feature.

use std::collections::HashMap;

use provrun_tools::ToolOutput;
use serde_json::Value;

/// What a replay answers `remote_mcp` calls with: the recorded tools and, by call, the
/// recorded result and `mcp` details.
#[derive(Debug, Clone, Default)]
pub struct RecordedMcp {
    /// The recording's `run_started.details.mcp`.
    pub description: Value,
    /// Each recorded `remote_mcp` call's result and `mcp` object, by the call's run-unique
    /// id (`run_call_id`; the model's `call_id` in recordings older than it).
    pub results: HashMap<String, (ToolOutput, Value)>,
}

impl RecordedMcp {
    /// The recorded answer to call `run_call_id` (the model's `call_id` in a recording
    /// older than run-unique ids) of tool `name`: its result and `mcp` details, marked
    /// as replayed; a failed result when the recording has none.
    // Without the MCP client a replay of a run that used MCP servers is refused, so
    // nothing asks for a recorded answer in that build.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn answer(
        &self,
        name: &str,
        run_call_id: &str,
        call_id: &str,
    ) -> (ToolOutput, Value) {
        // By the call's run-unique id; a recording older than those ids has the
        // model's id.
        match (self.results.get(run_call_id)).or_else(|| self.results.get(call_id)) {
            Some((output, mcp)) => {
                let mut mcp = mcp.clone();
                if let Value::Object(map) = &mut mcp {
                    map.insert("replayed".into(), Value::Bool(true));
                    // What decided the result in this log: the recording (the
                    // event's `decided_by` stays the recording's, for comparison).
                    map.insert("answered_by".into(), Value::from("recording"));
                }
                (output.clone(), mcp)
            }
            None => (
                ToolOutput::fail(format!(
                    "replay: the recording has no result for MCP call `{run_call_id}` of `{name}`"
                )),
                serde_json::json!({
                    "replayed": true,
                    "answered_by": "runtime",
                    "error": "no recorded result",
                }),
            ),
        }
    }
}
