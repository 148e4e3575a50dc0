//! The HTTP client of the live backends (rustls, the connect timeout, no redirects),
//! request headers checked, an error's chain of causes, and secrets redacted from
//! what is kept.

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::Timeouts;
use crate::error::ModelError;

/// A reqwest client with the connect timeout, and no proxy for loopback servers.
pub(crate) fn http_client(base: &str, timeouts: &Timeouts) -> Result<reqwest::Client, ModelError> {
    let url = reqwest::Url::parse(base)
        .map_err(|e| ModelError::Config(format!("the base URL {base:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ModelError::Config(format!(
            "the base URL must start with http:// or https://, not {base:?}"
        )));
    }
    // No redirects: a redirect would carry the request body, and headers reqwest does not
    // know are secret (`x-api-key`), to wherever the server points; a 3xx is an error
    // that names the status instead.
    let mut builder = reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .redirect(reqwest::redirect::Policy::none());
    // A server on this machine (Ollama, vLLM, a test server) is never reached through
    // a proxy from the environment.
    if matches!(
        url.host_str(),
        Some("localhost" | "127.0.0.1" | "[::1]" | "::1")
    ) {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| ModelError::Config(format!("cannot build the HTTP client: {e}")))
}

/// A header for `name: value`, refusing values that cannot be sent (the value is secret,
/// so it is never shown).
pub(crate) fn header(
    headers: &mut HeaderMap,
    name: &str,
    value: &str,
    sensitive: bool,
) -> Result<(), ModelError> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ModelError::Config(format!("invalid header name {name:?}")))?;
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        ModelError::Config(format!(
            "the value for header {name:?} holds characters that cannot go in an HTTP header"
        ))
    })?;
    v.set_sensitive(sensitive);
    headers.insert(n, v);
    Ok(())
}

/// `text` with every secret replaced by `[REDACTED]`.
pub(super) fn redact(secrets: &[String], text: &str) -> String {
    let mut t = text.to_owned();
    for s in secrets {
        t = t.replace(s.as_str(), "[REDACTED]");
    }
    t
}

/// `bytes` with every secret replaced by `[REDACTED]` (a warning logged when one is found,
/// under the target it had before the live module gathered the request path, so that
/// `RUST_LOG` filters written for it still work).
pub(super) fn redact_bytes(secrets: &[String], bytes: Bytes) -> Bytes {
    let hit = secrets
        .iter()
        .any(|s| bytes.windows(s.len()).any(|w| w == s.as_bytes()));
    if !hit {
        return bytes;
    }
    tracing::warn!(target: "provrun_model::native::http", "the response echoed a secret; it is redacted in the kept bytes");
    let mut out = bytes.to_vec();
    for s in secrets {
        let needle = s.as_bytes();
        let mut next = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            if out[i..].starts_with(needle) {
                next.extend_from_slice(b"[REDACTED]");
                i += needle.len();
            } else {
                next.push(out[i]);
                i += 1;
            }
        }
        out = next;
    }
    Bytes::from(out)
}
