//! provrun's evidence for agent loops it does not run.
//!
//! A framework with its own loop (rig, a hand-written loop, a Python run imported
//! afterwards) uses this crate to leave the same bundle a native `provrun run` leaves:
//! hash-chained events, staged inputs, outputs, `statement.json`, all checked offline by
//! `provrun verify`. It depends on the evidence and sandbox crates only: no agent loop,
//! no models, no MCP, no CLI.
//!
//! - [`Capture::builder`] declares the run (agent, model, tools, inputs) and
//!   [`CaptureBuilder::open`] creates the bundle, writes `run_started` and stages the
//!   inputs;
//! - [`Capture::model_exchange`] records one request and response: [`Body::Raw`] bytes
//!   are recorded `observed`, a [`Body::Parsed`] request or response makes the event
//!   `parsed` — the capture never claims to have seen bytes it was not given;
//! - [`Capture::tool_call`] and [`Capture::tool_deferred`] record tool calls;
//! - [`Capture::write_output`] (or tools on [`Capture::sandbox`]) put files in `output/`,
//!   and [`Capture::finish`] records them and ends the run.
//!
//! [`import_pydantic_ai`] turns a PydanticAI message history into such a bundle after the
//! fact (every model and tool event `parsed`; see [`pydantic_ai`]).
//!
//! [`record_model_exchange`] and [`record_tool_call`] are the same two steps on a bare
//! [`provrun_evidence::Recorder`]; provrun's own agent loop records through them, and
//! through [`processes`] the process trails its commands leave.
//!
//! # Example
//!
//! ```
//! use provrun_capture::{Body, Capture, ModelExchange, ToolCallRecord};
//! use provrun_evidence::{Confidence, RunStatus, read_events, verify};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let notes = dir.path().join("notes.txt");
//! std::fs::write(&notes, "buy milk")?;
//! let bundle = dir.path().join("bundle");
//!
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! rt.block_on(async {
//!     // 1. Open: declare the model and tools, stage the inputs.
//!     let capture = Capture::builder(&bundle)
//!         .agent("summariser")
//!         .model("openai:gpt-4o-mini")
//!         .tool("read_file", &json!({"type": "object", "properties": {"path": {"type": "string"}}}))?
//!         .input(&notes)
//!         .open()?;
//!
//!     // 2. A model exchange whose wire bytes the loop has: recorded `observed`.
//!     capture
//!         .model_exchange(ModelExchange {
//!             request: Some(Body::raw(&br#"{"messages":[]}"#[..], "application/json")),
//!             response: Some(Body::raw(&br#"{"choices":[]}"#[..], "application/json")),
//!             duration_ms: 12,
//!             ..ModelExchange::default()
//!         })
//!         .await?;
//!
//!     // 3. A tool call the loop ran.
//!     capture
//!         .tool_call(
//!             ToolCallRecord::new("read_file", "call_1", json!({"path": "/input/notes.txt"}))
//!                 .succeeded("buy milk"),
//!         )
//!         .await?;
//!
//!     // 4. An exchange the framework only hands over parsed: recorded `parsed`.
//!     capture
//!         .model_exchange(ModelExchange {
//!             request: Some(Body::parsed(json!({"messages": [{"role": "tool"}]}))),
//!             response: Some(Body::parsed(json!({"text": "Buy milk."}))),
//!             ..ModelExchange::default()
//!         })
//!         .await?;
//!
//!     // 5. Outputs, then finish.
//!     capture.write_output("summary.txt", b"Buy milk.")?;
//!     capture.finish(RunStatus::Finished, json!({"requests": 2}), None)?;
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//!
//! // The bundle verifies like a native one, and says which events were only parsed.
//! let report = verify(&bundle);
//! assert!(report.ok && report.complete, "{report:?}");
//! let events = read_events(&bundle)?;
//! let models: Vec<_> = events
//!     .iter()
//!     .filter(|e| e.kind.as_str() == "model_called")
//!     .map(|e| e.confidence)
//!     .collect();
//! assert_eq!(models, [Confidence::Observed, Confidence::Parsed]);
//! assert_eq!(std::fs::read(bundle.join("output/summary.txt"))?, b"Buy milk.");
//! # Ok(())
//! # }
//! ```

mod capture;
mod error;
pub mod processes;
pub mod pydantic_ai;
mod record;

pub use capture::{CAPTURE_BUILDER, Capture, CaptureBuilder, ToolCallRecord};
pub use error::CaptureError;
pub use pydantic_ai::{ImportOptions, ImportSummary, import_pydantic_ai};
pub use record::{Body, JSON_MEDIA_TYPE, ModelExchange, record_model_exchange, record_tool_call};
