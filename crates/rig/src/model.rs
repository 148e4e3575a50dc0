//! [`EvidenceModel`]: any rig `CompletionModel`, recorded.

use std::time::Instant;

use provrun_capture::{Body, ModelExchange};
use rig_core::completion::{
    CompletionError, CompletionModel, CompletionRequest, CompletionResponse,
};
use rig_core::streaming::StreamingCompletionResponse;
use serde_json::{Value, json};

use crate::evidence::{RigEvidence, millis};

/// A rig completion model whose every `completion` call is recorded as `model_called`.
///
/// When the model's provider client sends through an
/// [`EvidenceHttpClient`](crate::EvidenceHttpClient) of the same [`RigEvidence`], the
/// events carry the bytes that went over the wire and are `observed`; otherwise they carry
/// rig's own request and its parsed response (choice, usage, the provider's response as
/// rig deserialised it) and are `parsed`. Calls through one evidence handle are made one at
/// a time, so each call's wire bytes are its own.
///
/// Streamed completions (`stream`) are refused with a `ProviderError`: this version
/// records whole exchanges only, and a stream it could not record is not let through.
/// `Agent::prompt` uses `completion`.
#[derive(Debug, Clone)]
pub struct EvidenceModel<M> {
    inner: M,
    evidence: RigEvidence,
}

/// A provider client paired with the evidence its models record into; what
/// [`EvidenceModel`]'s `CompletionModel::make` builds from.
#[derive(Debug, Clone)]
pub struct EvidenceClient<C> {
    /// The provider's client.
    pub client: C,
    /// Where the models made from it record.
    pub evidence: RigEvidence,
}

impl<M> EvidenceModel<M> {
    /// Wrap `inner`, recording into `evidence` (see [`RigEvidence::model`]).
    pub fn new(inner: M, evidence: RigEvidence) -> Self {
        EvidenceModel { inner, evidence }
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

fn evidence_error(e: impl std::fmt::Display) -> CompletionError {
    CompletionError::ProviderError(format!("provrun-rig: evidence could not be recorded: {e}"))
}

fn json_or_note(value: Result<Value, serde_json::Error>) -> Value {
    value.unwrap_or_else(|e| json!({"unrepresentable": e.to_string()}))
}

impl<M> CompletionModel for EvidenceModel<M>
where
    M: CompletionModel + 'static,
{
    type Response = M::Response;
    type StreamingResponse = M::StreamingResponse;
    type Client = EvidenceClient<M::Client>;

    fn make(client: &Self::Client, model: impl Into<String>) -> Self {
        EvidenceModel::new(M::make(&client.client, model), client.evidence.clone())
    }

    async fn completion(
        &self,
        request: CompletionRequest,
    ) -> Result<CompletionResponse<Self::Response>, CompletionError> {
        let _turn = self.evidence.lock_turn().await;
        self.evidence
            .record_stray_wire()
            .await
            .map_err(evidence_error)?;
        let model = request.model.clone().unwrap_or_default();
        let parsed_request = json_or_note(serde_json::to_value(&request));
        let started = Instant::now();
        let result = self.inner.completion(request).await;
        let duration_ms = millis(started.elapsed());
        let wire = self.evidence.take_wire();

        let (usage, error, parsed_response) = match &result {
            Ok(response) => {
                self.evidence.note_asked(response.choice.iter());
                self.evidence
                    .count_tokens(response.usage.input_tokens, response.usage.output_tokens);
                let parsed = json!({
                    "choice": json_or_note(serde_json::to_value(&response.choice)),
                    "usage": json_or_note(serde_json::to_value(response.usage)),
                    "raw_response": json_or_note(serde_json::to_value(&response.raw_response)),
                    "message_id": response.message_id,
                });
                let usage = json_or_note(serde_json::to_value(response.usage));
                (usage, None, Some(parsed))
            }
            Err(e) => (Value::Null, Some(e.to_string()), None),
        };

        if wire.is_empty() {
            // No bytes seen: rig's own values, and the event says so.
            let exchange = ModelExchange {
                model,
                request: Some(Body::parsed(parsed_request)),
                response: parsed_response.map(Body::parsed),
                usage,
                duration_ms,
                error,
                ..ModelExchange::default()
            };
            self.evidence
                .record_exchange(exchange)
                .await
                .map_err(evidence_error)?;
        } else {
            // One event per HTTP exchange (a provider may retry); the last carries the
            // outcome rig made of it.
            let last = wire.len() - 1;
            for (i, w) in wire.iter().enumerate() {
                let mut exchange = w.to_exchange();
                exchange.model = model.clone();
                if i == last {
                    exchange.usage = usage.clone();
                    if exchange.error.is_none() {
                        exchange.error = error.clone();
                    }
                }
                self.evidence
                    .record_exchange(exchange)
                    .await
                    .map_err(evidence_error)?;
            }
        }
        result
    }

    async fn stream(
        &self,
        _request: CompletionRequest,
    ) -> Result<StreamingCompletionResponse<Self::StreamingResponse>, CompletionError> {
        Err(CompletionError::ProviderError(
            "provrun-rig does not record streamed completions yet; use completion (prompt)"
                .to_string(),
        ))
    }

    fn composes_native_output_with_tools(&self) -> bool {
        self.inner.composes_native_output_with_tools()
    }
}

/// The evidence's door to this wrapper.
impl RigEvidence {
    /// Wrap a rig completion model: every `completion` call through it is recorded as one
    /// `model_called` event (raw bytes when its HTTP client is an [`EvidenceHttpClient`](crate::EvidenceHttpClient) of
    /// this evidence, else rig's parsed request and response, recorded `parsed`).
    pub fn model<M>(&self, model: M) -> EvidenceModel<M> {
        EvidenceModel::new(model, self.clone())
    }
}
