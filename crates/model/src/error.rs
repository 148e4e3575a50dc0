//! [`ModelError`]: everything that can go wrong with a model request.

use std::fmt;
use std::time::Duration;

use crate::types::RawExchange;

/// Which timeout fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutKind {
    /// Opening the connection took too long.
    Connect,
    /// The server accepted the request but sent no response headers in time.
    FirstByte,
    /// The response body (or stream) went quiet for too long.
    Idle,
}

impl fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutKind::Connect => "connect",
            TimeoutKind::FirstByte => "first byte",
            TimeoutKind::Idle => "idle stream",
        })
    }
}

fn opt(label: &str, value: &Option<String>) -> String {
    match value {
        Some(v) => format!(", {label} {v}"),
        None => String::new(),
    }
}

fn show_retry_after(value: &Option<Duration>) -> String {
    match value {
        Some(d) => format!(", retry after {:.1}s", d.as_secs_f64()),
        None => String::new(),
    }
}

/// Why a model request failed.
///
/// Variants that involve an exchange with a server (real or recorded) carry the
/// [`RawExchange`] — what was sent, what came back, and every attempt — so a failed request
/// can be recorded as evidence too; [`ModelError::exchange`] returns it. No variant ever
/// contains the API key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The server refused because of a rate limit or quota (HTTP 429).
    #[error(
        "rate limited (HTTP {status}{}{}): {message}",
        opt("code", code),
        show_retry_after(retry_after)
    )]
    RateLimited {
        /// The HTTP status.
        status: u16,
        /// The provider's error code (integers are kept as text).
        code: Option<String>,
        /// The provider's message, or the body text.
        message: String,
        /// The wait the server asked for, when given.
        retry_after: Option<Duration>,
        /// What was sent and received.
        exchange: Box<RawExchange>,
    },
    /// The server failed (HTTP 5xx, Anthropic's 529 `overloaded_error` included).
    #[error("server error (HTTP {status}{}): {message}", opt("type", code))]
    ServerError {
        /// The HTTP status.
        status: u16,
        /// The provider's error type or code, when the native backends read one
        /// (`overloaded_error`, `api_error`, `server_error`).
        code: Option<String>,
        /// The provider's message, or the body text.
        message: String,
        /// What was sent and received.
        exchange: Box<RawExchange>,
    },
    /// The server did not accept the credentials (HTTP 401 or 403).
    #[error("not authorised (HTTP {status}{}): {message}", opt("type", code))]
    Unauthorized {
        /// The HTTP status.
        status: u16,
        /// The provider's error type or code, when the native backends read one
        /// (`authentication_error`, `permission_error`, `invalid_api_key`).
        code: Option<String>,
        /// The provider's message, or the body text.
        message: String,
        /// What was sent and received.
        exchange: Box<RawExchange>,
    },
    /// The server rejected the request (any other 4xx, e.g. an unsupported value, an
    /// unknown model, a tool call that failed server-side validation).
    #[error(
        "request rejected (HTTP {status}{}{}): {message}",
        opt("code", code),
        opt("param", param)
    )]
    BadRequest {
        /// The HTTP status.
        status: u16,
        /// The provider's error code (integers are kept as text).
        code: Option<String>,
        /// The request field the provider blamed, when given.
        param: Option<String>,
        /// The provider's message, or the body text.
        message: String,
        /// What was sent and received.
        exchange: Box<RawExchange>,
    },
    /// No connection could be made, or it broke before a response arrived.
    #[error("connection failed: {message}")]
    Connection {
        /// The transport's description.
        message: String,
        /// What was sent, and every attempt.
        exchange: Box<RawExchange>,
    },
    /// A timeout fired.
    #[error("{kind} timeout after {:.1}s", after.as_secs_f64())]
    Timeout {
        /// Which timeout.
        kind: TimeoutKind,
        /// Its configured length.
        after: Duration,
        /// What was sent and received up to then.
        exchange: Box<RawExchange>,
    },
    /// A successful status, but a body that is not a chat completion (not JSON, no
    /// choices, a non-JSON stream event, …).
    #[error("malformed response: {message}")]
    MalformedResponse {
        /// What is wrong with it.
        message: String,
        /// What was sent and received.
        exchange: Box<RawExchange>,
    },
    /// The provider reported an error inside a successful response: an `event: error` in
    /// a stream, or an `error` object in place of a completion.
    #[error("provider reported an error{}{}: {message}", opt("code", code), status.map(|s| format!(", status {s}")).unwrap_or_default())]
    ProviderError {
        /// The provider's error code (integers are kept as text).
        code: Option<String>,
        /// The status the provider put in the error object, when given.
        status: Option<u16>,
        /// The provider's message.
        message: String,
        /// What was sent and received.
        exchange: Box<RawExchange>,
    },
    /// A stream stopped before it was complete: the connection closed mid-body, or the
    /// body ended with neither `[DONE]` nor a finish reason.
    #[error("incomplete stream: {message}")]
    StreamIncomplete {
        /// What happened.
        message: String,
        /// What was sent and received up to then.
        exchange: Box<RawExchange>,
    },
    /// The model is configured wrongly (no API key, a bad base URL, …).
    #[error("model configuration: {0}")]
    Config(String),
    /// The request could not be built.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A script model was asked for more responses than its script holds.
    #[error("script exhausted: request {request} asked for a response, but the script holds {len}")]
    ScriptExhausted {
        /// The 1-based number of the request.
        request: usize,
        /// How many responses the script holds.
        len: usize,
        /// The request that was made.
        exchange: Box<RawExchange>,
    },
    /// A script could not be loaded.
    #[error("invalid script {source_name}{}{}: {message}", element.map(|e| format!(", element {e}")).unwrap_or_default(), opt("field", field))]
    InvalidScript {
        /// The file path, or `<value>` for an in-memory script.
        source_name: String,
        /// The 0-based index of the offending element, when one is to blame.
        element: Option<usize>,
        /// The offending field, when one is to blame.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A replayed run asked for something other than the recording holds.
    #[error("replay diverged at request {request}: {difference}")]
    ReplayDiverged {
        /// The 1-based number of the request.
        request: usize,
        /// The first difference found.
        difference: String,
        /// The request that was made (and the recorded response, when there was one).
        exchange: Box<RawExchange>,
    },
    /// A [`crate::FunctionModel`]'s function failed.
    #[error("model function failed: {0}")]
    Function(String),
    /// A request setting the model's API does not take, or a value it cannot send
    /// ([`crate::WireApi::check_settings`], [`crate::ModelSettings::check_values`]).
    #[error("setting `{setting}`: {message}")]
    Setting {
        /// The setting, as the agent spec's `[settings]` names it (`extra.KEY` for a key
        /// of `extra`).
        setting: String,
        /// What is wrong, and what to do instead.
        message: String,
    },
}

/// The exchange an error holds, by reference or mutably as `$error` is borrowed: one list
/// of the variants that carry one, for [`ModelError::exchange`] and `exchange_mut`.
macro_rules! exchange_of {
    ($error:expr) => {
        match $error {
            ModelError::RateLimited { exchange, .. }
            | ModelError::ServerError { exchange, .. }
            | ModelError::Unauthorized { exchange, .. }
            | ModelError::BadRequest { exchange, .. }
            | ModelError::Connection { exchange, .. }
            | ModelError::Timeout { exchange, .. }
            | ModelError::MalformedResponse { exchange, .. }
            | ModelError::ProviderError { exchange, .. }
            | ModelError::StreamIncomplete { exchange, .. }
            | ModelError::ScriptExhausted { exchange, .. }
            | ModelError::ReplayDiverged { exchange, .. } => Some(exchange),
            ModelError::Config(_)
            | ModelError::InvalidRequest(_)
            | ModelError::InvalidScript { .. }
            | ModelError::Function(_)
            | ModelError::Setting { .. } => None,
        }
    };
}

impl ModelError {
    /// The exchange this error carries, when it involved one.
    pub fn exchange(&self) -> Option<&RawExchange> {
        exchange_of!(self)
    }

    /// The exchange this error carries, to attach the attempts to.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn exchange_mut(&mut self) -> Option<&mut RawExchange> {
        exchange_of!(self)
    }

    /// Every message text this error holds, for redaction.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            ModelError::RateLimited { code, message, .. } => {
                let mut v = vec![message];
                v.extend(code.as_mut());
                v
            }
            ModelError::BadRequest {
                code,
                param,
                message,
                ..
            } => {
                let mut v = vec![message];
                v.extend(code.as_mut());
                v.extend(param.as_mut());
                v
            }
            ModelError::ProviderError { code, message, .. } => {
                let mut v = vec![message];
                v.extend(code.as_mut());
                v
            }
            ModelError::ServerError { code, message, .. }
            | ModelError::Unauthorized { code, message, .. } => {
                let mut v = vec![message];
                v.extend(code.as_mut());
                v
            }
            ModelError::Connection { message, .. }
            | ModelError::MalformedResponse { message, .. }
            | ModelError::StreamIncomplete { message, .. } => vec![message],
            ModelError::Config(m) | ModelError::InvalidRequest(m) | ModelError::Function(m) => {
                vec![m]
            }
            ModelError::InvalidScript { message, .. } | ModelError::Setting { message, .. } => {
                vec![message]
            }
            ModelError::ReplayDiverged { difference, .. } => vec![difference],
            ModelError::Timeout { .. } | ModelError::ScriptExhausted { .. } => Vec::new(),
        }
    }
}

/// An error's text followed by each of its causes that adds something ("error sending
/// request: … : connection refused"): what a transport error of an HTTP client says in
/// full, for a recorded attempt or a log line. Shared with `provrun-wrap`'s proxy.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}
