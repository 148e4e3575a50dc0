//! Sending spans to a collector with the official OTLP exporter, within a bound.

use std::path::Path;
use std::time::Duration;

use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};

use crate::config::{OtlpConfig, Protocol};
use crate::{OtelError, spans_from_events};

/// What an export sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSummary {
    /// The trace the spans are in (32 hex digits).
    pub trace_id: String,
    /// How many spans were sent.
    pub spans: usize,
}

/// The resource every span is sent with: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`
/// as the SDK reads them, and `service.name = provrun` when neither names a service.
fn resource() -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    let builder = Resource::builder();
    if named {
        builder.build()
    } else {
        builder.with_service_name("provrun").build()
    }
}

/// An HTTP client that works on any thread, runtime or not (the batch processor's thread
/// has none): reqwest's blocking client, built on a thread of its own (it may not be
/// built inside an async runtime). Its requests give up after `timeout`.
pub(crate) fn blocking_client(timeout: Duration) -> Result<reqwest::blocking::Client, OtelError> {
    std::thread::spawn(move || {
        reqwest::blocking::Client::builder()
            .timeout(timeout)
            .build()
    })
    .join()
    .map_err(|_| OtelError::Config("building the HTTP client panicked".into()))?
    .map_err(|e| OtelError::Config(format!("cannot build the HTTP client: {e}")))
}

/// The OTLP exporter `config` describes; over HTTP with `client` when one is given (else
/// reqwest's async client, which needs a Tokio runtime).
pub(crate) fn exporter(
    config: &OtlpConfig,
    client: Option<reqwest::blocking::Client>,
) -> Result<opentelemetry_otlp::SpanExporter, OtelError> {
    let built = match config.protocol {
        Protocol::HttpProtobuf => {
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_timeout(config.timeout);
            if let Some(client) = client {
                b = b.with_http_client(client);
            }
            if let Some(endpoint) = config.resolved_endpoint() {
                b = b.with_endpoint(endpoint);
            }
            b.build()
        }
        #[cfg(feature = "grpc")]
        Protocol::Grpc => {
            let _ = client;
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_protocol(opentelemetry_otlp::Protocol::Grpc)
                .with_timeout(config.timeout);
            if let Some(endpoint) = config.resolved_endpoint() {
                b = b.with_endpoint(endpoint);
            }
            b.build()
        }
        #[cfg(not(feature = "grpc"))]
        Protocol::Grpc => {
            let _ = client;
            return Err(OtelError::Config(
                "OTLP over gRPC needs provrun built with the `otel-grpc` feature; \
                 use OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"
                    .into(),
            ));
        }
    };
    let mut exporter = built.map_err(|e| OtelError::Config(e.to_string()))?;
    exporter.set_resource(&resource());
    Ok(exporter)
}

/// Send spans, taking at most `config.timeout` in all (connect, send, retries).
///
/// # Errors
///
/// [`OtelError::Config`] when the exporter cannot be built for `config`;
/// [`OtelError::TimedOut`] when the collector does not answer within `config.timeout`;
/// [`OtelError::Export`] when it refuses the spans.
pub async fn export_spans(spans: Vec<SpanData>, config: &OtlpConfig) -> Result<(), OtelError> {
    let exporter = exporter(config, None)?;
    let sent = tokio::time::timeout(config.timeout, exporter.export(spans)).await;
    let _ = exporter.shutdown();
    match sent {
        Err(_) => Err(OtelError::TimedOut(config.timeout)),
        Ok(Err(e)) => Err(OtelError::Export(e.to_string())),
        Ok(Ok(())) => Ok(()),
    }
}

/// Read a bundle's events and send its spans, with the times recorded in the evidence:
/// the one path both live export (at a run's end) and `provrun export otlp` take.
///
/// # Errors
///
/// [`OtelError::Evidence`] when the bundle's log cannot be read; [`OtelError::NoRun`] when
/// it does not start with `run_started`; otherwise as [`export_spans`].
pub async fn export_bundle(
    bundle: impl AsRef<Path>,
    config: &OtlpConfig,
) -> Result<ExportSummary, OtelError> {
    let bundle = bundle.as_ref();
    let events = provrun_evidence::read_events(bundle)?;
    let spans = spans_from_events(bundle, &events, config.capture_content)?;
    let summary = ExportSummary {
        trace_id: spans
            .first()
            .map(|s| s.span_context.trace_id().to_string())
            .unwrap_or_default(),
        spans: spans.len(),
    };
    export_spans(spans, config).await?;
    Ok(summary)
}
