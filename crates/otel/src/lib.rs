//! OpenTelemetry export for provrun: a run's evidence events become spans that follow
//! the OpenTelemetry GenAI semantic conventions (`invoke_agent {agent}`, `chat {model}`,
//! `execute_tool {tool}`), sent over OTLP with the official `opentelemetry-otlp` exporter.
//!
//! The same mapping serves a live run ([`LiveExport`]: the recorder tells it of each event
//! as it is written, and the SDK's batch span processor sends each span soon after) and
//! `provrun export otlp BUNDLE` ([`export_bundle`], after the fact, from any bundle):
//! spans carry the times recorded in the evidence, `provrun.run_id`, the event's
//! `provrun.seq` and the blob digests, and their trace id is derived from the run id
//! ([`trace_id_for_run`]). `chat` spans are read per model API from the recorded bodies
//! with `provrun-model`'s wire parsers.
//!
//! Nothing here runs unless asked: [`OtlpConfig::from_env`] is `None` without an OTLP
//! endpoint variable. An export is bounded by [`OtlpConfig::timeout`] and returns an
//! error the caller reports; it never touches the bundle.
//!
//! ```no_run
//! # async fn demo() -> Result<(), provrun_otel::OtelError> {
//! if let Some(config) = provrun_otel::OtlpConfig::from_env()? {
//!     let sent = provrun_otel::export_bundle("bundle", &config).await?;
//!     println!("{} spans in trace {}", sent.spans, sent.trace_id);
//! }
//! # Ok(()) }
//! ```

mod chat;
mod config;
mod error;
mod export;
mod live;
mod mapping;
mod messages;

pub use config::{
    CAPTURE_CONTENT_VAR, DEFAULT_TIMEOUT, ENDPOINT_VAR, OtlpConfig, PROTOCOL_VAR, Protocol,
    TIMEOUT_VAR, TRACES_ENDPOINT_VAR, TRACES_PROTOCOL_VAR, TRACES_TIMEOUT_VAR,
};
pub use error::OtelError;
pub use export::{ExportSummary, export_bundle, export_spans};
pub use live::LiveExport;
pub use mapping::{spans_from_events, trace_id_for_run};
/// The span type the mapping produces (from `opentelemetry_sdk`).
pub use opentelemetry_sdk::trace::SpanData;
