//! Provider error bodies, and HTTP statuses mapped to typed errors.

use std::time::Duration;

use serde_json::Value;

use crate::error::ModelError;
use crate::types::RawExchange;

use super::{number, snippet};

/// The fields of a provider error object.
#[derive(Debug, Default)]
pub(crate) struct ErrorInfo {
    pub message: String,
    pub code: Option<String>,
    pub param: Option<String>,
    pub kind: Option<String>,
    pub status: Option<u16>,
}

impl ErrorInfo {
    pub(super) fn text(s: &str) -> Self {
        ErrorInfo {
            message: snippet(s),
            ..ErrorInfo::default()
        }
    }
}

fn scalar_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(crate) fn error_info_from_value(err: &Value) -> ErrorInfo {
    match err {
        Value::String(s) => ErrorInfo::text(s),
        Value::Object(o) => {
            let mut message = scalar_text(o.get("message"))
                .or_else(|| scalar_text(o.get("detail")))
                .unwrap_or_else(|| snippet(&err.to_string()));
            // OpenRouter puts the upstream provider's words in `metadata.raw`.
            if let Some(meta) = o.get("metadata") {
                let raw = scalar_text(meta.get("raw"));
                let provider = scalar_text(meta.get("provider_name"));
                match (provider, raw) {
                    (Some(p), Some(r)) => message = format!("{message} ({p}: {})", snippet(&r)),
                    (None, Some(r)) => message = format!("{message} ({})", snippet(&r)),
                    _ => {}
                }
            }
            ErrorInfo {
                message,
                code: scalar_text(o.get("code")),
                param: scalar_text(o.get("param")),
                kind: scalar_text(o.get("type")),
                status: number(o.get("status_code").or_else(|| o.get("status")))
                    .and_then(|n| u16::try_from(n).ok()),
            }
        }
        other => ErrorInfo::text(&other.to_string()),
    }
}

/// Reads an error body: an OpenAI-style `{"error": {…}}`, `{"error": "…"}`,
/// `{"message"|"detail": …}`, or any non-JSON text.
pub(crate) fn error_info(body: &[u8]) -> ErrorInfo {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => match v.get("error").filter(|e| !e.is_null()) {
            Some(e) => error_info_from_value(e),
            None => error_info_from_value(&v),
        },
        Err(_) => ErrorInfo::text(&String::from_utf8_lossy(body)),
    }
}

/// Maps an error status and its body to a typed error.
pub(crate) fn http_status_error(
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
    exchange: RawExchange,
) -> ModelError {
    let info = error_info(body);
    let exchange = Box::new(exchange);
    match status {
        429 => ModelError::RateLimited {
            status,
            code: info.code.or(info.kind),
            message: info.message,
            retry_after,
            exchange,
        },
        401 | 403 => ModelError::Unauthorized {
            status,
            code: None,
            message: info.message,
            exchange,
        },
        500..=599 => ModelError::ServerError {
            status,
            code: None,
            message: info.message,
            exchange,
        },
        _ => ModelError::BadRequest {
            status,
            code: info.code,
            param: info.param,
            message: info.message,
            exchange,
        },
    }
}
