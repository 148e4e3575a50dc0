//! The front door: one request in, one response out. The order of checks is the same for
//! every request: a CORS preflight is answered (when `--cors` allows the origin), then
//! the bearer token (401), then the route (404, 405), then the body (413), then the
//! route's own checks. Every request is logged in one line: method, path, status, time.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use subtle::ConstantTimeEq as _;

use crate::digest::digest;
use crate::error::ApiError;
use crate::http::{Body, full, refusal, respond};
use crate::state::State;

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
