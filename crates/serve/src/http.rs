//! The HTTP plumbing every route uses: bodies whole or streamed, JSON answers and
//! refusals, reading a request's body within its limit, query parameters, a tar stream.
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use crate::error::ApiError;

/// A response body: whole, or a stream of frames (an error ends the response early, so
/// the client sees a broken transfer rather than a short one).
pub(crate) type Body = UnsyncBoxBody<Bytes, std::io::Error>;

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

/// How long a request's body may take to arrive, whole.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Read the body, at most `limit` bytes, within [`BODY_TIMEOUT`]: 413 past the limit (by
/// `Content-Length` before reading, or while reading), 408 when it does not arrive in
/// time, 400 when it cannot be read. The bytes are gathered into one buffer as they come
/// (sized by `Content-Length` when it is given), so a body is held once.
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
    let capacity = declared.map_or(0, |n| usize::try_from(n).unwrap_or(limit));
    let mut body = req.into_body();
    let gather = async {
        let mut out = BytesMut::with_capacity(capacity);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                ApiError::bad_request("bad_body", format!("the body cannot be read: {e}"))
            })?;
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > limit {
                    return Err(too_large());
                }
                out.extend_from_slice(&data);
            }
        }
        Ok(out.freeze())
    };
    tokio::time::timeout(BODY_TIMEOUT, gather)
        .await
        .unwrap_or_else(|_| {
            Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the body did not arrive within {} s",
                    BODY_TIMEOUT.as_secs()
                ),
            ))
        })
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
