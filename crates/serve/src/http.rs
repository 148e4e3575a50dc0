//! The HTTP side: one request in, one response out. The order of checks is the same for
//! every request: a CORS preflight is answered (when `--cors` allows the origin), then
//! the bearer token (401), then the route (404, 405), then the body (413), then the
//! route's own checks. Every request is logged in one line: method, path, status, time.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq as _;

use crate::error::ApiError;
use crate::state::State;

/// A response body: whole, or a stream of frames (an error ends the response early, so
/// the client sees a broken transfer rather than a short one).
pub(crate) type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// SHA-256 of `bytes`.
pub(crate) fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A whole body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A body streamed from a channel of frames; `first_out` fires once the first frame has
/// been handed to the connection.
pub(crate) fn streamed(
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    first_out: tokio::sync::oneshot::Sender<()>,
) -> Body {
    let frames =
        futures_util::stream::unfold((rx, Some(first_out)), |(mut rx, mut first)| async move {
            let frame = rx.recv().await?;
            if let Some(tell) = first.take() {
                let _ = tell.send(());
            }
            Some((Ok(Frame::data(frame)), (rx, first)))
        });
    BodyExt::boxed_unsync(StreamBody::new(frames))
}

/// A response with this status, content type and body.
pub(crate) fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: Body,
) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// A JSON response.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    respond(status, "application/json", full(value.to_string()))
}

/// A refusal as its JSON response (with `Retry-After` when it has one).
pub(crate) fn refusal(e: &ApiError) -> Response<Body> {
    let mut r = respond(e.status, "application/json", full(e.body()));
    if let Some(s) = e.retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    if e.status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"provrun\""),
        );
    }
    r
}

/// Whether the request carries the server's token (always, without one). The token and
/// the presented value are compared as SHA-256 digests, in constant time.
fn authorised(state: &State, req: &Request<Incoming>) -> bool {
    let Some(expected) = &state.token_digest else {
        return true;
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    bool::from(digest(presented).ct_eq(expected))
}

/// Read the body, at most `limit` bytes: 413 past it (by `Content-Length` before
/// reading, or while reading), 400 when it cannot be read.
pub(crate) async fn read_body(req: Request<Incoming>, limit: usize) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::too_large(
            "body_too_large",
            format!("the body is larger than this server takes ({limit} bytes)"),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(ApiError::bad_request(
            "bad_body",
            format!("the body cannot be read: {e}"),
        )),
    }
}

/// The CORS headers for a request from the allowed origin.
fn cors(state: &State, origin: Option<&HeaderValue>, r: &mut Response<Body>) {
    let (Some(allowed), Some(origin)) = (&state.config.cors_origin, origin) else {
        return;
    };
    if origin.as_bytes() != allowed.as_bytes() {
        return;
    }
    let h = r.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, accept"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
}

/// Answer one request, and log it in one line.
pub(crate) async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let began = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let origin = req.headers().get(header::ORIGIN).cloned();
    let mut response = if method == Method::OPTIONS && state.config.cors_origin.is_some() {
        respond(StatusCode::NO_CONTENT, "text/plain", full(Bytes::new()))
    } else if !authorised(&state, &req) {
        refusal(&ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required (Authorization: Bearer TOKEN)",
        ))
    } else {
        match crate::routes::route(&state, req).await {
            Ok(r) => r,
            Err(e) => {
                if e.status.is_server_error() {
                    tracing::error!(%method, path = ?path, "{e}");
                }
                refusal(&e)
            }
        }
    };
    cors(&state, origin.as_ref(), &mut response);
    tracing::info!(
        target: "provrun_serve::request",
        %method,
        path = ?path,
        status = response.status().as_u16(),
        ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
        "request"
    );
    Ok(response)
}

/// The query parameter `key` of a query string, if present (values are not decoded:
/// the parameters this server reads are ids, which need no encoding).
pub(crate) fn query_param<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// A tar from the store as a body (an error is logged and breaks the transfer).
pub(crate) fn tar_body(chunks: provrun_store::TarChunks, id: String) -> Body {
    let frames = chunks.map(move |chunk| match chunk {
        Ok(bytes) => Ok(Frame::data(bytes)),
        Err(e) => {
            tracing::error!(bundle = %id, "the tar stopped: {e}");
            Err(std::io::Error::other(e.to_string()))
        }
    });
    BodyExt::boxed_unsync(StreamBody::new(frames))
}
