//! The routes (docs/serve.md has the table): `POST /agents/NAME` runs an agent;
//! `GET /runs`, `GET /runs/ID`, `GET /runs/ID/bundle` and `GET /runs/ID/verify` read the
//! store; `POST /runs/ID/cancel` and `POST /runs/ID/steer` reach a run in flight;
//! `GET /metrics` shows the server's metrics (`GET /healthz` is answered before any check,
//! by the front door).

use std::sync::Arc;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::config::RETRY_AFTER_S;
use crate::error::ApiError;
use crate::http::{Body, full, json, query_param, read_body, respond, streamed, tar_body};
use crate::index::PAGE;
use crate::metrics::StoreOp;
use crate::state::State;

/// Frames a run's stream may hold unsent before the run waits for its client.
const STREAM_BUFFER: usize = 256;
/// The largest steering message body.
const STEER_LIMIT: usize = 64 * 1024;

/// Route one authorised request.
pub(crate) async fn route(
    state: &Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let method = req.method().clone();
    let allow = |methods: &'static str| {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("this path takes {methods}"),
        )
    };
    match (parts.as_slice(), &method) {
        (["agents", name], &Method::POST) => run(state, name, req).await,
        (["agents", _], _) => Err(allow("POST")),
        (["runs"], &Method::GET) => list(state, req.uri().query()).await,
        (["runs", id], &Method::GET) => page(state, id).await,
        (["runs", id, "bundle"], &Method::GET) => bundle(state, id).await,
        (["runs", id, "verify"], &Method::GET) => verify(state, id).await,
        (["runs", id, "cancel"], &Method::POST) => cancel(state, id),
        (["runs", id, "steer"], &Method::POST) => steer(state, id, req).await,
        (["runs"] | ["runs", _] | ["runs", _, "bundle" | "verify"], _) => Err(allow("GET")),
        (["runs", _, "cancel" | "steer"], _) => Err(allow("POST")),
        (["metrics"], &Method::GET) => Ok(metrics(state)),
        (["metrics"] | ["healthz"], _) => Err(allow("GET")),
        _ => Err(ApiError::not_found("not_found", "no such path")),
    }
}

/// `POST /agents/NAME`: the run's events as `text/event-stream`.
async fn run(
    state: &Arc<State>,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let received = Instant::now();
    // The agent is looked up before the body is read: a name that is no agent is a 404
    // whatever the body.
    crate::runs::agent_file(&state.config.agents, name)?;
    // The slot is taken before the body is read: at most `concurrency` bodies are read
    // (and held) at once, and past it a request is answered without reading its body.
    let Ok(slot) = Arc::clone(&state.slots).try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "busy",
            format!(
                "{} runs are in flight, as many as this server takes; try again later",
                state.config.concurrency
            ),
        )
        .retry_after(RETRY_AFTER_S));
    };
    let body = read_body(req, state.config.body_limit).await?;
    let planned = crate::runs::plan(state, name, &body).await?;
    drop(body);
    let (tx, rx) = tokio::sync::mpsc::channel(STREAM_BUFFER);
    let (first_out, written) = tokio::sync::oneshot::channel();
    crate::drive::spawn(Arc::clone(state), planned, slot, (tx, written), received);
    let mut r = respond(StatusCode::OK, "text/event-stream", streamed(rx, first_out));
    r.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(r)
}

fn checked_id(id: &str) -> Result<(), ApiError> {
    provrun_store::check_id(id).map_err(|_| {
        ApiError::bad_request(
            "bad_id",
            "a run id is 1 to 128 of A-Z a-z 0-9 . _ - (not starting with . or -)",
        )
    })
}

/// A store that could not be read: counted, and a 500.
fn store_error(state: &State, e: &provrun_store::StoreError) -> ApiError {
    state.metrics.store_error(StoreOp::Read);
    ApiError::internal(e.to_string())
}

/// `GET /metrics`: the metrics, in the OpenMetrics text format.
fn metrics(state: &State) -> Response<Body> {
    respond(
        StatusCode::OK,
        crate::metrics::CONTENT_TYPE,
        full(state.metrics.encode()),
    )
}

fn no_run() -> ApiError {
    ApiError::not_found("unknown_run", "the store has no run of that id")
}

/// `GET /runs[?after=CURSOR&limit=N]`: the index, newest first.
async fn list(state: &Arc<State>, query: Option<&str>) -> Result<Response<Body>, ApiError> {
    let after = query_param(query, "after").filter(|a| !a.is_empty());
    if let Some(a) = after {
        checked_id(a)?;
    }
    let limit = match query_param(query, "limit") {
        None => PAGE,
        Some(n) => n
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=PAGE).contains(n))
            .ok_or_else(|| ApiError::bad_request("bad_limit", format!("limit is 1 to {PAGE}")))?,
    };
    let entries = state
        .entries()
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let (page, next) = crate::index::page(entries, after, limit)
        .map_err(|m| ApiError::bad_request("bad_cursor", m))?;
    let runs: Vec<Value> = page
        .iter()
        .map(|e| {
            json!({
                "id": e.id, "agent": e.agent, "thread": e.thread, "status": e.status,
                "started": e.started, "duration_ms": e.duration_ms, "verified": e.verified,
            })
        })
        .collect();
    Ok(json(StatusCode::OK, &json!({"runs": runs, "next": next})))
}

/// `GET /runs/ID`: the bundle's page, with its Content-Security-Policy.
async fn page(state: &Arc<State>, id: &str) -> Result<Response<Body>, ApiError> {
    checked_id(id)?;
    let opened = state
        .config
        .store
        .open_bundle(id)
        .await
        .map_err(|e| store_error(state, &e))?
        .ok_or_else(no_run)?;
    let label = id.to_string();
    let page = tokio::task::spawn_blocking(move || {
        let source = provrun_view::BundleSource::folder(opened.dir()).with_label(label);
        provrun_view::render_page(&source)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?
    .map_err(|e| ApiError::internal(format!("the page cannot be made: {e}")))?;
    let mut r = respond(StatusCode::OK, "text/html; charset=utf-8", full(page));
    let csp = HeaderValue::from_str(&provrun_view::content_security_policy())
        .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"));
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, csp);
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    Ok(r)
}

/// `GET /runs/ID/bundle`: the bundle as a tar `provrun verify` accepts.
async fn bundle(state: &Arc<State>, id: &str) -> Result<Response<Body>, ApiError> {
    checked_id(id)?;
    let tar = state
        .config
        .store
        .tar(id)
        .await
        .map_err(|e| store_error(state, &e))?
        .ok_or_else(no_run)?;
    let mut r = respond(
        StatusCode::OK,
        "application/x-tar",
        tar_body(tar.chunks, id.to_string()),
    );
    let h = r.headers_mut();
    if let Some(size) = tar.size {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{id}.tar\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(r)
}

/// `GET /runs/ID/verify`: the JSON report `provrun verify --json` prints.
async fn verify(state: &Arc<State>, id: &str) -> Result<Response<Body>, ApiError> {
    checked_id(id)?;
    let opened = state
        .config
        .store
        .open_bundle(id)
        .await
        .map_err(|e| store_error(state, &e))?
        .ok_or_else(no_run)?;
    let report = tokio::task::spawn_blocking(move || provrun_evidence::verify(opened.dir()))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let value = serde_json::to_value(&report).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(json(StatusCode::OK, &value))
}

fn not_running(id: &str) -> ApiError {
    ApiError::not_found(
        "not_running",
        format!("no run `{id}` is in flight (a bundle id, or the runId of its request)"),
    )
}

/// `POST /runs/ID/cancel`: cancel a run in flight (202); it ends `cancelled`.
fn cancel(state: &Arc<State>, id: &str) -> Result<Response<Body>, ApiError> {
    checked_id(id)?;
    let (bundle, active) = state.find_active(id).ok_or_else(|| not_running(id))?;
    active.control.cancel();
    Ok(json(
        StatusCode::ACCEPTED,
        &json!({"bundle": bundle, "cancelled": true}),
    ))
}

/// `POST /runs/ID/steer` with `{"message": TEXT}`: send a run in flight a user message,
/// added before its next model request (202).
async fn steer(
    state: &Arc<State>,
    id: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    checked_id(id)?;
    let body = read_body(req, STEER_LIMIT).await?;
    let message = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(
                "bad_steer",
                "the body must be {\"message\": \"TEXT\"} with some text",
            )
        })?;
    let (bundle, active) = state.find_active(id).ok_or_else(|| not_running(id))?;
    active.control.steer(message);
    Ok(json(
        StatusCode::ACCEPTED,
        &json!({"bundle": bundle, "steered": true}),
    ))
}
