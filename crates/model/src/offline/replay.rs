//! [`ReplayModel`]: answers each request with a recorded response, in order.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::Value;

use super::request_only;
use crate::Model;
use crate::error::ModelError;
use crate::native::WireApi;
use crate::types::{Attempt, ModelRequest, ModelResponse, RawExchange, StreamDelta};
use crate::wire::{JSON_MEDIA_TYPE, RequestRenderer};

/// One recorded model exchange, as a bundle's `model_called` event keeps it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedResponse {
    /// The response body bytes (JSON, or SSE verbatim).
    pub response_body: Bytes,
    /// The response media type, when recorded; the body is sniffed otherwise.
    pub response_media_type: Option<String>,
    /// The HTTP status, when recorded; a non-2xx status replays as the same typed error.
    pub status: Option<u16>,
    /// The request body that was sent, when recorded; each new request is then checked
    /// against it.
    pub request_body: Option<Bytes>,
}

/// An offline model that replays a recording: the n-th request gets the n-th recorded
/// response, parsed by the same lenient parser as live responses.
///
/// A request past the end of the recording, or (when recorded requests are given) one
/// whose body differs from the recorded request, fails with
/// [`ModelError::ReplayDiverged`] naming the first difference. The `model`, `stream` and
/// `stream_options` fields are not compared, so a recording made with any model name or
/// either (streamed or not) call replays. A recording of a native backend (Anthropic
/// Messages, OpenAI Responses) replays with [`ReplayModel::with_api`].
#[derive(Debug)]
pub struct ReplayModel {
    name: String,
    api: WireApi,
    recorded: Vec<RecordedResponse>,
    next: AtomicUsize,
    /// Keeps the last request bodies, so each request appends to the one before.
    renderer: RequestRenderer,
}

impl ReplayModel {
    /// A replay of `recorded`, named `replay`.
    pub fn new(recorded: Vec<RecordedResponse>) -> Self {
        ReplayModel {
            name: "replay".into(),
            api: WireApi::ChatCompletions,
            recorded,
            next: AtomicUsize::new(0),
            renderer: RequestRenderer::default(),
        }
    }

    /// Renames the model (for example `replay:BUNDLE`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Builds and reads bodies in `api`'s wire format (the API the recording was made
    /// with; Chat Completions by default).
    pub fn with_api(mut self, api: WireApi) -> Self {
        self.api = api;
        self
    }

    fn answer(
        &self,
        request: &ModelRequest,
        on_delta: Option<&(dyn Fn(StreamDelta) + Send + Sync)>,
    ) -> Result<ModelResponse, ModelError> {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let body = match self.api {
            WireApi::ChatCompletions => {
                self.renderer
                    .render(&self.name, request, on_delta.is_some())
            }
            api => api.request_body(&self.name, request, on_delta.is_some()),
        };
        let Some(rec) = self.recorded.get(n) else {
            return Err(ModelError::ReplayDiverged {
                request: n + 1,
                difference: format!(
                    "this run made more model requests than the {} recorded",
                    self.recorded.len()
                ),
                exchange: Box::new(request_only(body)),
            });
        };
        let raw = RawExchange {
            request_body: body.clone(),
            request_media_type: JSON_MEDIA_TYPE.into(),
            response_body: rec.response_body.clone(),
            response_media_type: rec.response_media_type.clone(),
            status: rec.status,
            attempts: vec![Attempt {
                status: rec.status,
                response_body: rec.response_body.clone(),
                response_media_type: rec.response_media_type.clone(),
                ..Attempt::default()
            }],
        };
        if let Some(recorded_request) = &rec.request_body
            && let Some(difference) = request_difference(recorded_request, &body)
        {
            return Err(ModelError::ReplayDiverged {
                request: n + 1,
                difference,
                exchange: Box::new(raw),
            });
        }
        self.api.parse_response_streamed(raw, &mut |d| {
            if let Some(f) = on_delta {
                f(d)
            }
        })
    }
}

const IGNORED: &[&str] = &["model", "stream", "stream_options"];

/// The first difference between a recorded request body and a new one, if any.
pub(crate) fn request_difference(recorded: &[u8], now: &[u8]) -> Option<String> {
    let (Ok(mut r), Ok(mut n)) = (
        serde_json::from_slice::<Value>(recorded),
        serde_json::from_slice::<Value>(now),
    ) else {
        return (recorded != now).then(|| "the request bytes differ (not both JSON)".into());
    };
    for v in [&mut r, &mut n] {
        if let Some(o) = v.as_object_mut() {
            for k in IGNORED {
                o.remove(*k);
            }
        }
    }
    first_difference("", &r, &n)
}

fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

fn first_difference(path: &str, r: &Value, n: &Value) -> Option<String> {
    match (r, n) {
        (Value::Object(ro), Value::Object(no)) => {
            let mut keys: Vec<&String> = ro.keys().chain(no.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let p = format!("{path}/{k}");
                match (ro.get(k), no.get(k)) {
                    (Some(a), Some(b)) => first_difference(&p, a, b),
                    (Some(a), None) => Some(format!("{p}: recorded {}, absent now", show(a))),
                    (None, Some(b)) => {
                        Some(format!("{p}: absent in the recording, now {}", show(b)))
                    }
                    (None, None) => None,
                }
            })
        }
        (Value::Array(ra), Value::Array(na)) => ra
            .iter()
            .zip(na)
            .enumerate()
            .find_map(|(i, (a, b))| first_difference(&format!("{path}/{i}"), a, b))
            .or_else(|| {
                (ra.len() != na.len()).then(|| {
                    format!(
                        "{}: recorded {} items, now {}",
                        if path.is_empty() { "/" } else { path },
                        ra.len(),
                        na.len()
                    )
                })
            }),
        (a, b) if a != b => Some(format!(
            "{}: recorded {}, now {}",
            if path.is_empty() { "/" } else { path },
            show(a),
            show(b)
        )),
        _ => None,
    }
}

#[async_trait]
impl Model for ReplayModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn request(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.answer(request, None)
    }

    async fn request_stream(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        self.answer(request, Some(on_delta))
    }
}
