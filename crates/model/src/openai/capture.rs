//! The HTTP service async-openai sends through ([`CaptureService`]): each attempt's
//! request and response bytes kept in a `Capture`, the first-byte and idle timeouts
//! applied, the body bounded, and an error status read here, not by async-openai.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use bytes::Bytes;
use futures_util::StreamExt;

use super::Timeouts;
use crate::native::{Capture, kept_chunks, lock, send_kept};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The tower service async-openai sends through: it keeps the request bytes, applies the
/// first-byte timeout, and wraps the response body so every byte read is kept and a quiet
/// gap longer than the idle timeout ends the body with an error. An error status is read
/// to the end here and returned as an error, so async-openai never sees (or logs) its body.
#[derive(Clone)]
pub(super) struct CaptureService {
    pub(super) http: reqwest::Client,
    pub(super) capture: Arc<Mutex<Capture>>,
    pub(super) timeouts: Timeouts,
    pub(super) max_body: usize,
}

impl tower_service::Service<HttpRequestFactory> for CaptureService {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = BoxFuture<Result<reqwest::Response, OpenAIError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), OpenAIError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.send(factory).await })
    }
}

fn boxed(e: impl std::error::Error + Send + Sync + 'static) -> OpenAIError {
    OpenAIError::Boxed(Box::new(e))
}

impl CaptureService {
    async fn send(self, factory: HttpRequestFactory) -> Result<reqwest::Response, OpenAIError> {
        let request = factory.build().await?;
        let body = request
            .body()
            .and_then(|b| b.as_bytes())
            .map(Bytes::copy_from_slice)
            .unwrap_or_default();
        lock(&self.capture).request_body = body;
        let sending = self.http.execute(request);
        let response = match send_kept(sending, &self.capture, &self.timeouts).await {
            Ok(r) => r,
            Err(None) => {
                return Err(boxed(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no response headers within the first-byte timeout",
                )));
            }
            Err(Some(e)) => return Err(OpenAIError::Reqwest(e)),
        };
        let status = response.status();
        let version = response.version();
        let headers = response.headers().clone();
        let body = kept_chunks(
            response.bytes_stream(),
            self.capture.clone(),
            self.timeouts.idle,
            self.max_body,
        );
        if !status.is_success() {
            // Read the error body here, so async-openai neither parses nor logs it: the
            // caller maps it from the captured bytes.
            let mut body = std::pin::pin!(body);
            while body.next().await.is_some() {}
            return Err(boxed(std::io::Error::other(format!(
                "HTTP status {status}"
            ))));
        }
        let mut builder = http::Response::builder().status(status).version(version);
        if let Some(h) = builder.headers_mut() {
            *h = headers;
        }
        let response = builder
            .body(reqwest::Body::wrap_stream(body))
            .map_err(boxed)?;
        Ok(reqwest::Response::from(response))
    }
}
