//! Where and how spans are sent: the standard `OTEL_*` variables, or explicit settings.

use std::time::Duration;

use crate::OtelError;

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL (`/v1/traces` is added for HTTP).
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the full URL for traces; wins over the base URL.
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (the default) or `grpc`.
pub const PROTOCOL_VAR: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`: the same, for traces only; wins.
pub const TRACES_PROTOCOL_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_TIMEOUT`: the bound on the whole flush, in milliseconds.
pub const TIMEOUT_VAR: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`: the same, for traces only; wins.
pub const TRACES_TIMEOUT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: `true` attaches message contents.
pub const CAPTURE_CONTENT_VAR: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The flush bound when no timeout variable is set: a dead collector costs at most this.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP over HTTP with protobuf bodies (`http/protobuf`), the default.
    HttpProtobuf,
    /// OTLP over gRPC (`grpc`); needs the crate's `grpc` feature.
    Grpc,
}

impl Protocol {
    /// Parse the value of `OTEL_EXPORTER_OTLP_PROTOCOL`.
    ///
    /// # Errors
    ///
    /// [`OtelError::Config`] for a value other than `http/protobuf`, `grpc` or empty.
    pub fn parse(value: &str) -> Result<Protocol, OtelError> {
        match value.trim() {
            "" | "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "grpc" => Ok(Protocol::Grpc),
            other => Err(OtelError::Config(format!(
                "protocol `{other}` is not supported (use http/protobuf or grpc)"
            ))),
        }
    }
}

/// Settings for one export: where to, how, how long at most, and whether message contents
/// go along. Headers, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` are read from the
/// environment by the OpenTelemetry crates themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// An explicit endpoint (the base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`); `None` reads
    /// the variables.
    pub endpoint: Option<String>,
    /// The transport.
    pub protocol: Protocol,
    /// The bound on the whole flush (connect, send, retries).
    pub timeout: Duration,
    /// Attach prompts, answers, tool arguments and results to the spans.
    pub capture_content: bool,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl OtlpConfig {
    /// The settings the standard variables give, or `None` when neither
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` nor `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set: then
    /// nothing is exported and nothing is set up.
    ///
    /// # Errors
    ///
    /// [`OtelError::Config`] when an endpoint is set and the protocol or timeout variable
    /// is not valid, as for [`OtlpConfig::env_defaults`].
    pub fn from_env() -> Result<Option<OtlpConfig>, OtelError> {
        if var(ENDPOINT_VAR).is_none() && var(TRACES_ENDPOINT_VAR).is_none() {
            return Ok(None);
        }
        OtlpConfig::env_defaults().map(Some)
    }

    /// Settings from the variables, endpoint aside (which the exporter reads itself).
    ///
    /// # Errors
    ///
    /// [`OtelError::Config`] when the protocol variable names a protocol not supported or
    /// the timeout variable is not a number of milliseconds.
    pub fn env_defaults() -> Result<OtlpConfig, OtelError> {
        let protocol = match var(TRACES_PROTOCOL_VAR).or_else(|| var(PROTOCOL_VAR)) {
            Some(p) => Protocol::parse(&p)?,
            None => Protocol::HttpProtobuf,
        };
        let timeout = match var(TRACES_TIMEOUT_VAR).or_else(|| var(TIMEOUT_VAR)) {
            Some(ms) => Duration::from_millis(ms.trim().parse().map_err(|_| {
                OtelError::Config(format!(
                    "the timeout `{ms}` is not a number of milliseconds"
                ))
            })?),
            None => DEFAULT_TIMEOUT,
        };
        let capture_content =
            var(CAPTURE_CONTENT_VAR).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        Ok(OtlpConfig {
            endpoint: None,
            protocol,
            timeout,
            capture_content,
        })
    }

    /// Send to this endpoint (a base URL as `OTEL_EXPORTER_OTLP_ENDPOINT`: `/v1/traces` is
    /// added for HTTP unless the URL already ends with it).
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> OtlpConfig {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Bound the whole flush to this long.
    pub fn with_timeout(mut self, timeout: Duration) -> OtlpConfig {
        self.timeout = timeout;
        self
    }

    /// The explicit endpoint as the exporter takes it (the full traces URL for HTTP).
    pub(crate) fn resolved_endpoint(&self) -> Option<String> {
        let base = self.endpoint.as_deref()?.trim();
        if self.protocol == Protocol::Grpc || base.ends_with("/v1/traces") {
            return Some(base.to_string());
        }
        Some(format!("{}/v1/traces", base.trim_end_matches('/')))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_and_unknown_ones_are_refused() {
        assert_eq!(Protocol::parse("grpc").unwrap(), Protocol::Grpc);
        assert_eq!(
            Protocol::parse("http/protobuf").unwrap(),
            Protocol::HttpProtobuf
        );
        let err = Protocol::parse("http/json").unwrap_err().to_string();
        assert!(err.contains("http/json"), "{err}");
    }

    #[test]
    fn an_explicit_base_url_gets_the_traces_path_once() {
        let cfg = OtlpConfig {
            endpoint: Some("http://127.0.0.1:4318/".into()),
            protocol: Protocol::HttpProtobuf,
            timeout: DEFAULT_TIMEOUT,
            capture_content: false,
        };
        assert_eq!(
            cfg.resolved_endpoint().unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        let full = cfg.with_endpoint("http://h:1/v1/traces");
        assert_eq!(full.resolved_endpoint().unwrap(), "http://h:1/v1/traces");
    }
}
