//! One API request: read the program's request (within the proxy's bounds), send it
//! upstream with the real credential, give the response back to the program as it
//! arrives (each chunk passed on at once, secrets masked), and record the exchange once
//! it has ended — or, when it is still in flight after wrap stopped waiting for it, as
//! cut, with what it has.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use http_body_util::channel::{Channel, Sender};
use hyper::body::Incoming;
use hyper::{Request, Response};
use provrun_model::error_chain;
use serde_json::{Value, json};
use tokio::sync::OwnedSemaphorePermit;

use super::headers;
use super::redact::Redactor;
use super::route::{Api, Route, classify, refusal, upstream_url};
use super::{
    InFlightGuard, MAX_RECORDED_RESPONSE_BYTES, MAX_REQUEST_BYTES, ProxyBody, Shared, cut_message,
    json_error,
};
use crate::record::Exchange;

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What keeps an exchange counted until it has been recorded: its place among the
/// exchanges in flight and the bytes of its request body in the proxy's budget.
struct Held {
    _guard: InFlightGuard,
    _budget: Option<OwnedSemaphorePermit>,
}

/// What is known of an exchange before its response body has been read.
struct Pending {
    api: Api,
    route: Route,
    request: Bytes,
    request_type: String,
    http: Value,
    started: Instant,
    held: Held,
}

impl Pending {
    /// The exchange to record, and what keeps it counted until it has been recorded.
    fn exchange(
        self,
        status: Option<u16>,
        response: Bytes,
        response_type: Option<String>,
        error: Option<String>,
    ) -> (Exchange, Held) {
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
        (ex, self.held)
    }
}

/// Records `ex`, logging (not failing the program's exchange) when the bundle refuses it;
/// the exchange counts as in flight until then. A `cut` exchange is counted as such.
async fn record(shared: &Shared, (ex, _held): (Exchange, Held), cut: bool) {
    match shared.recording.exchange(ex).await {
        Ok(()) if cut => shared.recording.count_cut().await,
        Ok(()) => {}
        Err(e) => tracing::error!("an exchange could not be recorded: {e}"),
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
/// request the CONNECT side passes on). The exchange goes on in a task of its own from
/// the start: a program that goes away meanwhile stops neither the reading of its request
/// nor the upstream's answer from being recorded.
pub(super) async fn serve(
    req: Request<Incoming>,
    api: Api,
    path: String,
    shared: &Arc<Shared>,
) -> Response<ProxyBody> {
    let (reply, replied) = tokio::sync::oneshot::channel();
    tokio::spawn(exchange(req, api, path, Arc::clone(shared), reply));
    replied.await.unwrap_or_else(|_| {
        json_error(
            502,
            "provrun wrap: the exchange ended without an answer (the proxy is stopping)",
        )
    })
}

/// Why a request body was not read whole: what to answer, and what was read.
struct BodyFailure {
    status: u16,
    message: String,
    read: Bytes,
    budget: Option<OwnedSemaphorePermit>,
    cut: bool,
    /// The rest of a body refused for its size, to be read and thrown away after the
    /// answer (so that the program reads the answer rather than a reset connection).
    rest: Option<Incoming>,
}

/// Reads a request body within the proxy's bounds: [`MAX_REQUEST_BYTES`] for one body,
/// the bytes in flight for all of them, the idle and total times; and until wrap stops
/// waiting for exchanges. The permit holds the body's bytes in the budget.
async fn read_body(
    mut body: Incoming,
    shared: &Shared,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), BodyFailure> {
    use hyper::body::Body as _;
    let limits = shared.limits;
    let total = tokio::time::Instant::now() + limits.body_total;
    let mut read = BytesMut::new();
    let mut budget: Option<OwnedSemaphorePermit> = None;
    let fail = |status: u16, message: String, read: BytesMut, budget, cut| BodyFailure {
        status,
        message: format!("provrun wrap: {message}"),
        read: read.freeze(),
        budget,
        cut,
        rest: None,
    };
    let too_long = || format!("the request body is longer than {MAX_REQUEST_BYTES} bytes: refused");
    let over_budget = || {
        format!(
            "the proxy holds as many request bytes as it may at once ({} bytes across the \
             exchanges in flight): refused, try again",
            limits.max_request_bytes_in_flight
        )
    };
    // A body whose length is known takes its whole share of the budget before a byte is
    // read, or none: bodies that cannot all fit are refused at once, rather than all read
    // half-way and all refused.
    let declared = body.size_hint().exact();
    if let Some(len) = declared {
        let whole = usize::try_from(len)
            .ok()
            .filter(|n| *n <= MAX_REQUEST_BYTES);
        let Some(whole) = whole else {
            return Err(BodyFailure {
                rest: Some(body),
                ..fail(413, too_long(), read, None, false)
            });
        };
        let reserved = u32::try_from(whole).ok().and_then(|n| {
            Arc::clone(&shared.request_bytes)
                .try_acquire_many_owned(n)
                .ok()
        });
        let Some(reserved) = reserved else {
            return Err(BodyFailure {
                rest: Some(body),
                ..fail(503, over_budget(), read, None, false)
            });
        };
        budget = Some(reserved);
        read.reserve(whole);
    }
    loop {
        let deadline = total.min(tokio::time::Instant::now() + limits.body_idle);
        let frame = tokio::select! {
            frame = tokio::time::timeout_at(deadline, body.frame()) => frame,
            () = shared.in_flight.cut() => {
                let message = cut_message("its request body had not arrived whole");
                return Err(fail(502, message, read, budget, true));
            }
        };
        let data = match frame {
            Err(_) => {
                let message = if tokio::time::Instant::now() >= total {
                    format!(
                        "the request body did not arrive whole within {} s",
                        limits.body_total.as_secs_f64()
                    )
                } else {
                    format!(
                        "the request body sent nothing for {} s",
                        limits.body_idle.as_secs_f64()
                    )
                };
                return Err(fail(408, message, read, budget, false));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                let message = format!("the request body broke off (the program left?): {e}");
                return Err(fail(400, message, read, budget, false));
            }
            Ok(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
        };
        if read.len() + data.len() > MAX_REQUEST_BYTES {
            return Err(BodyFailure {
                rest: Some(body),
                ..fail(413, too_long(), read, budget, false)
            });
        }
        if declared.is_none() {
            let more = u32::try_from(data.len()).ok().and_then(|n| {
                Arc::clone(&shared.request_bytes)
                    .try_acquire_many_owned(n)
                    .ok()
            });
            let Some(more) = more else {
                return Err(BodyFailure {
                    rest: Some(body),
                    ..fail(503, over_budget(), read, budget, false)
                });
            };
            match &mut budget {
                Some(b) => b.merge(more),
                None => budget = Some(more),
            }
        }
        read.extend_from_slice(&data);
    }
    Ok((read.freeze(), budget))
}

/// Reads the rest of a refused body and throws it away (holding none of it), within the
/// body's idle and total times, so that the program's connection ends with the answer it
/// was given rather than a reset.
async fn throw_away(mut body: Incoming, shared: Arc<Shared>) {
    let limits = shared.limits;
    let total = tokio::time::Instant::now() + limits.body_total;
    loop {
        let deadline = total.min(tokio::time::Instant::now() + limits.body_idle);
        let frame = tokio::select! {
            frame = tokio::time::timeout_at(deadline, body.frame()) => frame,
            () = shared.in_flight.cut() => return,
        };
        if !matches!(frame, Ok(Some(Ok(_)))) {
            return;
        }
    }
}

/// One exchange, start to end: its request read, refused or sent upstream, its answer
/// given back through `reply` and recorded.
async fn exchange(
    req: Request<Incoming>,
    api: Api,
    path: String,
    shared: Arc<Shared>,
    reply: tokio::sync::oneshot::Sender<Response<ProxyBody>>,
) {
    let guard = shared.in_flight.enter();
    let started = Instant::now();
    let method = req.method().clone();
    let route = classify(api, method.as_str(), &path);
    let base = match api {
        Api::OpenAi => &shared.config.upstreams.openai,
        Api::Anthropic => &shared.config.upstreams.anthropic,
    };
    let url = upstream_url(api, base, &path);
    let refused = refusal(base, &path, &url);
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
            "removed_headers": removed,
        }),
        started,
        held: Held {
            _guard: guard,
            _budget: None,
        },
    };
    if let Some(why) = refused {
        let message = format!("provrun wrap: {why}");
        let _ = reply.send(json_error(400, &message));
        record(
            &shared,
            pending.exchange(None, Bytes::new(), None, Some(message)),
            false,
        )
        .await;
        return;
    }
    match read_body(body, &shared).await {
        Ok((request, budget)) => {
            pending.request = request;
            pending.held._budget = budget;
        }
        Err(failed) => {
            pending.request = failed.read;
            pending.held._budget = failed.budget;
            let mut answer = json_error(failed.status, &failed.message);
            if failed.status == 503 {
                answer.headers_mut().insert(
                    hyper::header::RETRY_AFTER,
                    hyper::header::HeaderValue::from_static("1"),
                );
            }
            let _ = reply.send(answer);
            if let Some(rest) = failed.rest {
                tokio::spawn(throw_away(rest, Arc::clone(&shared)));
            }
            record(
                &shared,
                pending.exchange(None, Bytes::new(), None, Some(failed.message)),
                failed.cut,
            )
            .await;
            return;
        }
    }
    let upstream_headers = headers::upstream_request(&parts.headers, api, &shared.config.secrets);
    let upstream = Upstream {
        method,
        url,
        headers: upstream_headers,
    };
    forward(upstream, pending, reply, shared).await;
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
    let send = shared
        .client_for(&upstream.url)
        .request(upstream.method, &upstream.url)
        .headers(upstream.headers)
        .body(pending.request.clone())
        .send();
    let sent = tokio::select! {
        sent = send => sent,
        () = shared.in_flight.cut() => {
            let message = cut_message("the upstream had not begun its response");
            let _ = reply.send(json_error(502, &message));
            record(&shared, pending.exchange(None, Bytes::new(), None, Some(message)), true).await;
            return;
        }
    };
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
                false,
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
            false,
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
    let mut cut = false;
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            () = shared.in_flight.cut() => {
                cut = true;
                break;
            }
        };
        let Some(chunk) = next else { break };
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
        {
            let sent = tokio::select! {
                sent = to_program.send_data(b) => sent.is_ok(),
                () = shared.in_flight.cut() => false,
            };
            program_gone = !sent;
        }
    }
    if cut {
        error = Some(cut_message(&format!(
            "{} bytes of the response had arrived",
            kept.len()
        )));
    } else if program_gone {
        error.get_or_insert_with(|| {
            "the program closed the connection before the response ended".into()
        });
    }
    if let Some(b) = pass(redactor.finish(), &mut kept, &mut too_long)
        && !program_gone
        && !cut
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
        cut,
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
