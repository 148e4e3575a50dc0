//! The front door: one request in, one response out. The order of checks is the same for
//! every request: without a token, the `Host`, the `Origin` and a POST's content type
//! (403, 415); a CORS preflight is answered (when `--cors` allows the origin), then
//! the bearer token (401, or 400 for two `Authorization` headers), then the route (404,
//! 405), then the body (413), then the route's own checks. `GET /healthz` comes before
//! all of them: it needs no token and names no host. Every request is logged in one line:
//! method, path, status, time.

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

/// Whether the request carries the server's token (always, without one): one
/// `Authorization` header (two are refused: which one counts would be a guess), scheme
/// `Bearer` in any case (RFC 9110 §11.1), compared with the token as SHA-256 digests, in
/// constant time.
fn authorised(state: &State, req: &Request<Incoming>) -> Result<(), ApiError> {
    let Some(expected) = &state.token_digest else {
        return Ok(());
    };
    let mut values = req.headers().get_all(header::AUTHORIZATION).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError::bad_request(
            "bad_authorization",
            "the request has more than one Authorization header: send one",
        ));
    }
    let presented = first
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim_start_matches(' '))
        })
        .unwrap_or("");
    if bool::from(digest(presented).ct_eq(expected)) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required (Authorization: Bearer TOKEN)",
        ))
    }
}

/// A `Host` value's name and port (`[::1]:8787` → `::1`, `8787`).
fn split_host(host: &str) -> (&str, Option<&str>) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, tail)) => (name, tail.strip_prefix(':')),
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, Some(port)),
        _ => (host, None),
    }
}

/// Without a token, only requests meant for this server from no page but its own or the
/// `--cors` origin are taken (a token, which a page cannot send across sites, makes
/// these checks the browser's business):
///
/// - `Host` names the address served (with its port), `localhost` (with its port) when
///   that address is loopback, or a name given with `--allow-host` (any port): a page of
///   another name that a DNS rebinding pointed here is refused;
/// - `Origin`, when present, is the `--cors` origin or the server's own;
/// - a POST with a body is `application/json` (a page can send `text/plain` or a form
///   across sites without asking).
///
/// A client that sends no `Origin` (curl, a script) and JSON is served as before.
fn open_door(state: &State, req: &Request<Incoming>) -> Result<(), ApiError> {
    if state.token_digest.is_some() {
        return Ok(());
    }
    let forbidden = |code, message: String| ApiError::new(StatusCode::FORBIDDEN, code, message);
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let (name, port) = split_host(host);
    let served = state.served;
    let port_ok = port.and_then(|p| p.parse::<u16>().ok()).unwrap_or(80) == served.port();
    let ours = name.parse::<std::net::IpAddr>().ok() == Some(served.ip())
        || (served.ip().is_loopback() && name.eq_ignore_ascii_case("localhost"));
    let allowed = state
        .config
        .allowed_hosts
        .iter()
        .any(|a| a.eq_ignore_ascii_case(name));
    if !((ours && port_ok) || allowed) {
        return Err(forbidden(
            "bad_host",
            format!(
                "this server answers requests for {served} (or localhost, or the names given                  with --allow-host), not for `{host}`"
            ),
        ));
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let own = origin
            .strip_prefix("http://")
            .is_some_and(|o| o.eq_ignore_ascii_case(host));
        let cors = state.config.cors_origin.as_deref() == Some(origin);
        if !(own || cors) {
            return Err(forbidden(
                "bad_origin",
                format!(
                    "requests from pages of origin `{origin}` are not taken (allow one with --cors)"
                ),
            ));
        }
    }
    let has_body = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .is_some_and(|n| n.as_bytes() != b"0")
        || req.headers().contains_key(header::TRANSFER_ENCODING);
    if req.method() == Method::POST && has_body {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "bad_content_type",
                "a POST body must be sent as Content-Type: application/json",
            ));
        }
    }
    Ok(())
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
    // A liveness probe (a load balancer, a kubelet) carries no token and may name any
    // host; the answer says nothing but that the server answers.
    let mut response = if method == Method::GET && path == "/healthz" {
        respond(
            StatusCode::OK,
            "application/json",
            full(Bytes::from_static(b"{\"status\":\"ok\"}")),
        )
    } else if let Err(e) = open_door(&state, &req) {
        refusal(&e)
    } else if method == Method::OPTIONS && state.config.cors_origin.is_some() {
        respond(StatusCode::NO_CONTENT, "text/plain", full(Bytes::new()))
    } else if let Err(e) = authorised(&state, &req) {
        refusal(&e)
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

#[cfg(test)]
mod tests {
    use super::split_host;

    #[test]
    fn host_values_split_into_name_and_port() {
        assert_eq!(split_host("127.0.0.1:8787"), ("127.0.0.1", Some("8787")));
        assert_eq!(split_host("localhost"), ("localhost", None));
        assert_eq!(split_host("[::1]:80"), ("::1", Some("80")));
        assert_eq!(split_host("[::1]"), ("::1", None));
        assert_eq!(split_host("::1"), ("::1", None));
    }
}
