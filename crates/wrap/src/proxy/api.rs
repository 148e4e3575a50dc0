//! One API request: read the program's request, send it upstream with the real
//! credential, give the response back to the program as it arrives (each chunk passed on
//! at once, secrets masked), and record the exchange once it has ended.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use http_body_util::channel::{Channel, Sender};
use hyper::body::Incoming;
use hyper::{Request, Response};
use provrun_model::error_chain;
use serde_json::{Value, json};

use super::headers;
use super::redact::Redactor;
use super::route::{Api, Route, classify, upstream_url};
use super::{
    InFlightGuard, MAX_RECORDED_RESPONSE_BYTES, MAX_REQUEST_BYTES, ProxyBody, Shared, json_error,
};
use crate::record::Exchange;

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What is known of an exchange before its response body has been read.
struct Pending {
    api: Api,
    route: Route,
    request: Bytes,
    request_type: String,
    http: Value,
    started: Instant,
    _guard: InFlightGuard,
}

impl Pending {
    /// The exchange to record, and the guard that keeps it counted in flight until it
    /// has been recorded.
    fn exchange(
        self,
        status: Option<u16>,
        response: Bytes,
        response_type: Option<String>,
        error: Option<String>,
    ) -> (Exchange, InFlightGuard) {
        let ex = Exchange {
            api: self.api,
            route: self.route,
            request: self.request,
            request_type: self.request_type,
            response,
            response_type,
            status,
            http: self.http,
            duration_ms: millis(self.started),
            error,
        };
        (ex, self._guard)
    }
}

/// Records `ex`, logging (not failing the program's exchange) when the bundle refuses it;
/// the exchange counts as in flight until then.
async fn record(shared: &Shared, (ex, _guard): (Exchange, InFlightGuard)) {
    if let Err(e) = shared.recording.exchange(ex).await {
        tracing::error!("an exchange could not be recorded: {e}");
    }
}

fn content_type(headers: &hyper::HeaderMap) -> Option<String> {
    headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The `Content-Encoding` of a response, when it has one other than `identity`.
fn unasked_coding(headers: &hyper::HeaderMap) -> Option<String> {
    let codings: Vec<String> = headers
        .get_all(hyper::header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .into_owned()
                .split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty() && c != "identity")
        .collect();
    (!codings.is_empty()).then(|| codings.join(", "))
}

/// Serves one request that came in on `api`'s side (`path_and_query` in origin form).
pub(super) async fn handle(
    req: Request<Incoming>,
    api: Api,
    shared: &Arc<Shared>,
) -> Response<ProxyBody> {
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    serve(req, api, path, shared).await
}

/// [`handle`] for a request whose path the caller already took from it (an absolute-form
/// request the CONNECT side passes on).
pub(super) async fn serve(
    req: Request<Incoming>,
    api: Api,
    path: String,
    shared: &Arc<Shared>,
) -> Response<ProxyBody> {
    let guard = shared.in_flight.enter();
    let started = Instant::now();
    let method = req.method().clone();
    let route = classify(api, method.as_str(), &path);
    let base = match api {
        Api::OpenAi => &shared.config.upstreams.openai,
        Api::Anthropic => &shared.config.upstreams.anthropic,
    };
    let url = upstream_url(api, base, &path);
    let (parts, body) = req.into_parts();
    let (request_headers, removed) = headers::recorded_masked(&parts.headers, &shared.masker);
    let mut pending = Pending {
        api,
        route,
        request: Bytes::new(),
        request_type: content_type(&parts.headers)
            .unwrap_or_else(|| "application/octet-stream".to_owned()),
        http: json!({
            "api": api.as_str(),
            "method": method.as_str(),
            "path": path,
            "upstream": url,
            "request_headers": request_headers,
        }),
        started,
        _guard: guard,
    };
    match http_body_util::Limited::new(body, MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(collected) => pending.request = collected.to_bytes(),
        Err(e) => {
            let message = format!(
                "provrun wrap: the request body could not be read whole (at most {MAX_REQUEST_BYTES} bytes): {e}"
            );
            pending.http["removed_headers"] = json!(removed);
            record(
                shared,
                pending.exchange(None, Bytes::new(), None, Some(message.clone())),
            )
            .await;
            return json_error(413, &message);
        }
    }
    let upstream_headers = headers::upstream_request(&parts.headers, api, &shared.config.secrets);
    pending.http["removed_headers"] = json!(removed);
    // The exchange goes on in a task of its own: a program that goes away meanwhile does
    // not stop the upstream's answer from being read and recorded.
    let (reply, replied) = tokio::sync::oneshot::channel();
    let upstream = Upstream {
        method,
        url,
        headers: upstream_headers,
    };
    tokio::spawn(forward(upstream, pending, reply, Arc::clone(shared)));
    replied.await.unwrap_or_else(|_| {
        json_error(
            502,
            "provrun wrap: the exchange ended without an answer (the proxy is stopping)",
        )
    })
}

/// Where and how a request goes upstream.
struct Upstream {
    method: hyper::Method,
    url: String,
    headers: hyper::HeaderMap,
}

/// Sends the request upstream, gives the program the response's head through `reply` (or
/// an error body when the upstream cannot be reached), then passes the body on.
async fn forward(
    upstream: Upstream,
    mut pending: Pending,
    reply: tokio::sync::oneshot::Sender<Response<ProxyBody>>,
    shared: Arc<Shared>,
) {
    let sent = shared
        .client_for(&upstream.url)
        .request(upstream.method, &upstream.url)
        .headers(upstream.headers)
        .body(pending.request.clone())
        .send()
        .await;
    let response = match sent {
        Ok(r) => r,
        Err(e) => {
            let message = shared.masker.mask_str(&format!(
                "provrun wrap: the upstream {} could not be reached: {}",
                upstream.url,
                error_chain(&e)
            ));
            let _ = reply.send(json_error(502, &message));
            record(
                &shared,
                pending.exchange(None, Bytes::new(), None, Some(message)),
            )
            .await;
            return;
        }
    };
    let status = response.status();
    let (response_headers, removed_back) =
        headers::recorded_masked(response.headers(), &shared.masker);
    if let Some(removed) = pending.http["removed_headers"].as_array_mut() {
        removed.extend(
            removed_back
                .into_iter()
                .map(|h| json!(format!("response:{h}"))),
        );
    }
    pending.http["status"] = json!(status.as_u16());
    pending.http["first_byte_ms"] = json!(millis(pending.started));
    pending.http["response_headers"] = json!(response_headers);
    let response_type = content_type(response.headers());
    if let Some(coding) = unasked_coding(response.headers()) {
        // The proxy asked for `identity`: a body it cannot read could hold the key in a
        // form the masker cannot see, so it is neither passed on nor kept.
        let message = shared.masker.mask_str(&format!(
            "provrun wrap: the upstream answered with `Content-Encoding: {coding}`, which the \
             proxy did not ask for (it asks for identity) and does not decode: the body was \
             refused, neither passed on nor kept"
        ));
        let _ = reply.send(json_error(502, &message));
        record(
            &shared,
            pending.exchange(
                Some(status.as_u16()),
                Bytes::new(),
                response_type,
                Some(message),
            ),
        )
        .await;
        return;
    }
    let (sender, body) = Channel::<Bytes, std::io::Error>::new(16);
    let mut out = Response::new(body.boxed());
    *out.status_mut() = status;
    *out.headers_mut() = headers::to_program_masked(response.headers(), &shared.masker);
    let _ = reply.send(out);
    pump(response, sender, pending, response_type, shared).await;
}

/// Passes the upstream's body to the program chunk by chunk as it arrives (secrets
/// masked), keeping a copy, and records the exchange when it has ended.
async fn pump(
    response: reqwest::Response,
    mut to_program: Sender<Bytes, std::io::Error>,
    mut pending: Pending,
    response_type: Option<String>,
    shared: Arc<Shared>,
) {
    let status = response.status().as_u16();
    let mut redactor = Redactor::with(shared.masker.clone());
    let mut kept: Vec<u8> = Vec::new();
    let mut too_long = false;
    let mut error = None;
    let mut stream = response.bytes_stream();
    let mut program_gone = false;
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                error = Some(format!(
                    "the upstream's response broke off: {}",
                    error_chain(&e)
                ));
                break;
            }
        };
        // A program that went away gets nothing more, but the upstream's answer is
        // still read to its end and recorded whole.
        if let Some(b) = pass(redactor.push(&chunk), &mut kept, &mut too_long)
            && !program_gone
            && to_program.send_data(b).await.is_err()
        {
            program_gone = true;
        }
    }
    if program_gone {
        error.get_or_insert_with(|| {
            "the program closed the connection before the response ended".into()
        });
    }
    if let Some(b) = pass(redactor.finish(), &mut kept, &mut too_long)
        && !program_gone
    {
        let _ = to_program.send_data(b).await;
    }
    if error.is_some() && !program_gone {
        to_program.abort(std::io::Error::other("the upstream's response broke off"));
    } else {
        drop(to_program);
    }
    if redactor.hit() {
        pending.http["redacted"] = json!(true);
    }
    if too_long {
        kept.clear();
        error.get_or_insert_with(|| {
            format!("the response is longer than {MAX_RECORDED_RESPONSE_BYTES} bytes: passed on, not kept")
        });
    }
    record(
        &shared,
        pending.exchange(Some(status), Bytes::from(kept), response_type, error),
    )
    .await;
}

/// Keeps `bytes` (unless the response grew too long to keep) and hands them back to be
/// passed on, when there are any.
fn pass(bytes: Vec<u8>, kept: &mut Vec<u8>, too_long: &mut bool) -> Option<Bytes> {
    if kept.len() + bytes.len() > MAX_RECORDED_RESPONSE_BYTES {
        *too_long = true;
    } else if !*too_long {
        kept.extend_from_slice(&bytes);
    }
    (!bytes.is_empty()).then(|| Bytes::from(bytes))
}
