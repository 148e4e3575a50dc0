//! [`EvidenceHttpClient`]: a rig HTTP client that keeps the bytes of every exchange.

use std::future::Future;
use std::time::Instant;

use bytes::Bytes;
use rig_core::http_client::{
    self, HttpClientExt, LazyBody, MultipartForm, Request, Response, StreamingResponse,
};

use crate::evidence::{RigEvidence, WireExchange, media_type};

/// A rig HTTP client (anything implementing rig's `HttpClientExt`, e.g. `reqwest::Client`)
/// that hands the exact request and response bodies of every `send` to its
/// [`RigEvidence`], for the next `model_called` event to carry as `observed` bytes.
///
/// Only bodies are kept: headers (where the API key travels) are not recorded. The
/// response body is read whole before rig parses it, from the same bytes. Multipart and
/// streamed sends pass through unrecorded (the model wrapper refuses streamed
/// completions, so an agent's model calls never take that path).
///
/// `Default` (which rig's providers require of their HTTP client) is a client attached to
/// no evidence: it keeps nothing, so the model wrapper records those exchanges `parsed`.
#[derive(Debug, Clone, Default)]
pub struct EvidenceHttpClient<H> {
    inner: H,
    evidence: Option<RigEvidence>,
}

impl<H> EvidenceHttpClient<H> {
    /// Wrap `inner`, handing its exchanges to `evidence` (see [`RigEvidence::http_client`]).
    pub fn new(inner: H, evidence: RigEvidence) -> Self {
        EvidenceHttpClient {
            inner,
            evidence: Some(evidence),
        }
    }
}

fn content_type(headers: &http_client::HeaderMap) -> Option<&str> {
    headers.get("content-type").and_then(|v| v.to_str().ok())
}

impl<H> HttpClientExt for EvidenceHttpClient<H>
where
    H: HttpClientExt + 'static,
{
    fn send<T, U>(
        &self,
        req: Request<T>,
    ) -> impl Future<Output = http_client::Result<Response<LazyBody<U>>>> + Send + 'static
    where
        T: Into<Bytes> + Send,
        U: From<Bytes> + Send + 'static,
    {
        let Some(evidence) = self.evidence.clone() else {
            return futures_util::future::Either::Left(self.inner.send(req));
        };
        let (parts, body) = req.into_parts();
        let body: Bytes = body.into();
        let request_type = media_type(content_type(&parts.headers));
        let sent = self
            .inner
            .send::<Bytes, Bytes>(Request::from_parts(parts, body.clone()));
        futures_util::future::Either::Right(async move {
            let started = Instant::now();
            let mut wire = WireExchange {
                request: body,
                request_type,
                response: None,
                response_type: String::new(),
                duration: std::time::Duration::ZERO,
                error: None,
            };
            let response = match sent.await {
                Ok(response) => response,
                Err(e) => {
                    wire.duration = started.elapsed();
                    wire.error = Some(e.to_string());
                    evidence.push_wire(wire);
                    return Err(e);
                }
            };
            let (parts, lazy) = response.into_parts();
            wire.response_type = media_type(content_type(&parts.headers));
            let bytes = match lazy.await {
                Ok(bytes) => bytes,
                Err(e) => {
                    wire.duration = started.elapsed();
                    wire.error = Some(format!("reading the response body: {e}"));
                    evidence.push_wire(wire);
                    return Err(e);
                }
            };
            wire.duration = started.elapsed();
            if !parts.status.is_success() {
                wire.error = Some(format!("HTTP status {}", parts.status.as_u16()));
            }
            wire.response = Some(bytes.clone());
            evidence.push_wire(wire);
            let body: LazyBody<U> = Box::pin(async move { Ok(U::from(bytes)) });
            Ok(Response::from_parts(parts, body))
        })
    }

    fn send_multipart<U>(
        &self,
        req: Request<MultipartForm>,
    ) -> impl Future<Output = http_client::Result<Response<LazyBody<U>>>> + Send + 'static
    where
        U: From<Bytes> + Send + 'static,
    {
        self.inner.send_multipart(req)
    }

    fn send_streaming<T>(
        &self,
        req: Request<T>,
    ) -> impl Future<Output = http_client::Result<StreamingResponse>> + Send
    where
        T: Into<Bytes> + Send,
    {
        self.inner.send_streaming(req)
    }
}

/// The evidence's door to this wrapper.
impl RigEvidence {
    /// Wrap a rig HTTP client (e.g. `reqwest::Client`, re-exported as
    /// `rig_core::http_client::ReqwestClient`): give it to a provider's client builder
    /// (`.http_client(..)`) and the request and response bodies of every non-streamed call
    /// are kept, byte for byte, for the model wrapper to record as `observed`.
    pub fn http_client<H>(&self, client: H) -> EvidenceHttpClient<H> {
        EvidenceHttpClient::new(client, self.clone())
    }
}
