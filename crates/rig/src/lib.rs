//! provrun evidence for [rig](https://docs.rs/rig-core/0.40.0) agents: wrap the agent's
//! completion model, its provider's HTTP client and its tools, run the agent exactly as
//! before, and its `prompt()` leaves a provrun bundle (hash-chained events, outputs,
//! statement) that `provrun verify` and `provrun show` accept.
//!
//! It records through [`provrun_capture`] (no provrun agent loop, MCP or CLI):
//!
//! - [`RigEvidence::model`] wraps any `rig_core::completion::CompletionModel`: each
//!   completion becomes one `model_called` event. With the provider's HTTP client wrapped
//!   too ([`RigEvidence::http_client`]), the event holds the exact bytes that went over the
//!   wire and is `observed`; without it, it holds rig's request and its parsed response
//!   (including the provider's response as rig deserialised it) and is `parsed`. The bundle
//!   never claims bytes it did not see.
//! - [`RigEvidence::tool`] / [`RigEvidence::tools`] wrap rig tools: each call becomes one
//!   `tool_called` event (arguments, result, ok, duration), with the model's call id.
//!   [`RigEvidence::sandboxed`] builds a tool on a provrun [`provrun_sandbox::Sandbox`]
//!   whose `/output` is the bundle's `output/`.
//! - [`RigEvidence::finish`] records the outputs and ends the run, with the totals of
//!   [`RigEvidence::usage`] (requests, tool calls, tokens) in `run_finished`.
//!
//! Supported: rig-core 0.40 (the last release whose single crate has `CompletionModel`,
//! `Tool` and `Agent`, and that builds on this project's toolchain). Streamed completions
//! are refused rather than left unrecorded.
//!
//! # Example
//!
//! An OpenAI agent whose model exchanges are recorded byte for byte (the crate's tests run
//! the same against a loopback server, and an agent on an offline model of their own):
//!
//! ```no_run
//! use provrun_evidence::RunStatus;
//! use provrun_rig::{DeclareRigTools, RigEvidence};
//! use rig_core::client::CompletionClient;
//! use rig_core::completion::Prompt;
//! use rig_core::providers::openai;
//! # struct Weather;
//! # impl rig_core::tool::Tool for Weather {
//! #     const NAME: &'static str = "weather";
//! #     type Error = std::io::Error;
//! #     type Args = serde_json::Value;
//! #     type Output = String;
//! #     fn description(&self) -> String { "weather".into() }
//! #     fn parameters(&self) -> serde_json::Value { serde_json::json!({"type": "object"}) }
//! #     async fn call(&self, _: serde_json::Value) -> Result<String, std::io::Error> { Ok("sun".into()) }
//! # }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // 1. Open a bundle, declaring the model and tools.
//! let capture = RigEvidence::builder("bundle")
//!     .model("openai:gpt-4o-mini")
//!     .rig_tool(&Weather)?
//!     .open()?;
//! let evidence = RigEvidence::new(capture);
//!
//! // 2. The provider's client sends through the evidence's HTTP client ...
//! let client = openai::CompletionsClient::builder()
//!     .api_key(std::env::var("OPENAI_API_KEY")?)
//!     .http_client(evidence.http_client(rig_core::http_client::ReqwestClient::new()))
//!     .build()?;
//! // ... and the agent gets the wrapped model and tools. Nothing else changes.
//! let model = evidence.model(client.completion_model("gpt-4o-mini"));
//! let agent = rig_core::agent::AgentBuilder::new(model)
//!     .preamble("Answer briefly.")
//!     .tools(evidence.tools(vec![Box::new(Weather)]))
//!     .build();
//! let answer = agent.prompt("Weather in Paris?").max_turns(3).await?;
//!
//! // 3. Finish: outputs, run_finished, statement.json. `provrun verify bundle` exits 0.
//! evidence.finish(RunStatus::Finished, serde_json::Value::Null, None).await?;
//! # let _ = answer; Ok(())
//! # }
//! ```

mod error;
mod evidence;
mod http;
mod model;
mod tool;

pub use error::RigError;
pub use evidence::{DeclareRigTools, RIG_BUILDER, RigEvidence};
pub use http::EvidenceHttpClient;
pub use model::{EvidenceClient, EvidenceModel};
pub use tool::EvidenceTool;
