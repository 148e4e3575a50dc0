//! The attributes of a `chat` span, per model API: the provider, the server, the request
//! settings, and what the response says (its model, id, usage with cache and reasoning
//! tokens, and with content capture the messages), read from the recorded bodies with
//! the model crate's wire parsers.

use bytes::Bytes;
use opentelemetry::{KeyValue, StringValue, Value as OtelValue};
use provrun_evidence::{BlobRef, ModelCalled};
use provrun_model::{ModelResponse, RawExchange, Usage, WireApi};
use serde_json::Value;

use crate::messages::{input_messages, output_messages};

/// Where a blob's bytes come from: the bundle, or (live) what the recorder just stored.
pub(crate) type Blobs<'a> = &'a dyn Fn(&BlobRef) -> Option<Vec<u8>>;

/// What the run's `run_started` says that every `chat` span repeats.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunFacts {
    /// `server.address` and `server.port`, from the recorded base URL.
    pub server: Option<(String, u16)>,
    /// The `[settings]` the run's requests carry, by their spec names.
    pub settings: Value,
    /// `gen_ai.conversation.id`: the thread the run is a turn of.
    pub thread: Option<String>,
}

/// The provider name the conventions use for a model id: `openai` (Chat Completions and
/// Responses, at any base URL), `anthropic`, or `provrun.<kind>` for provrun's offline
/// models; a model id without a known prefix by the API its response body speaks.
pub(crate) fn provider_name(model: &str, body: Option<&[u8]>) -> String {
    match model.split_once(':').map(|(p, _)| p) {
        Some("openai" | "openai-responses") => "openai".into(),
        Some("anthropic") => "anthropic".into(),
        Some(p @ ("script" | "replay" | "function")) => format!("provrun.{p}"),
        _ if model == "test" => "provrun.test".into(),
        _ => match body.map(WireApi::of_response_body) {
            Some(WireApi::AnthropicMessages) => "anthropic".into(),
            Some(_) => "openai".into(),
            None => "unknown".into(),
        },
    }
}

/// `server.address` and `server.port` of a base URL (the scheme's port when it names none).
pub(crate) fn server_of(base_url: &str) -> Option<(String, u16)> {
    let url = url::Url::parse(base_url).ok()?;
    let host = url.host_str()?.trim_matches(['[', ']']).to_string();
    Some((host, url.port_or_known_default()?))
}

/// The model name a model id asks for (`anthropic:claude-x` → `claude-x`).
pub(crate) fn model_name(model: &str) -> &str {
    match model.split_once(':') {
        Some((
            "openai" | "openai-responses" | "anthropic" | "script" | "replay" | "function",
            rest,
        )) => rest,
        _ => model,
    }
}

fn api_of(model: &str, response: Option<&[u8]>) -> WireApi {
    match model.split_once(':').map(|(p, _)| p) {
        Some("anthropic" | "openai-responses") | Some("openai") => WireApi::of_model(model),
        _ => response.map_or(WireApi::ChatCompletions, WireApi::of_response_body),
    }
}

fn add<T: Into<OtelValue>>(attrs: &mut Vec<KeyValue>, key: &'static str, value: Option<T>) {
    if let Some(v) = value {
        attrs.push(KeyValue::new(key, v));
    }
}

fn strings(values: impl IntoIterator<Item = String>) -> OtelValue {
    OtelValue::Array(
        values
            .into_iter()
            .map(StringValue::from)
            .collect::<Vec<_>>()
            .into(),
    )
}

/// `gen_ai.request.*` from the run's settings, and where a setting is left to the
/// backend (Anthropic's `max_tokens`), from the request body that was sent.
fn request_settings(attrs: &mut Vec<KeyValue>, settings: &Value, request: Option<&Value>) {
    let setting = |key: &str| settings.get(key).filter(|v| !v.is_null());
    let body = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| request.and_then(|r| r.get(*k)).filter(|v| !v.is_null()))
    };
    let max_tokens = setting("max_tokens")
        .or_else(|| body(&["max_tokens", "max_output_tokens", "max_completion_tokens"]));
    add(
        attrs,
        "gen_ai.request.max_tokens",
        max_tokens.and_then(Value::as_i64),
    );
    for (key, name) in [
        ("temperature", "gen_ai.request.temperature"),
        ("top_p", "gen_ai.request.top_p"),
        ("presence_penalty", "gen_ai.request.presence_penalty"),
        ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ] {
        add(attrs, name, setting(key).and_then(Value::as_f64));
    }
    add(
        attrs,
        "gen_ai.request.top_k",
        settings.pointer("/extra/top_k").and_then(Value::as_f64),
    );
    add(
        attrs,
        "gen_ai.request.seed",
        setting("seed").and_then(Value::as_i64),
    );
    let stop: Vec<String> = setting("stop")
        .and_then(Value::as_array)
        .map(|s| {
            s.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if !stop.is_empty() {
        attrs.push(KeyValue::new(
            "gen_ai.request.stop_sequences",
            strings(stop),
        ));
    }
}

/// Token counts: input (cache reads and writes included, as the conventions ask),
/// output, and the cache and reasoning counts the API gave.
fn usage_attributes(attrs: &mut Vec<KeyValue>, usage: &Usage) {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    attrs.push(KeyValue::new(
        "gen_ai.usage.input_tokens",
        n(usage.input_tokens),
    ));
    attrs.push(KeyValue::new(
        "gen_ai.usage.output_tokens",
        n(usage.output_tokens),
    ));
    add(
        attrs,
        "gen_ai.usage.cache_read.input_tokens",
        usage.cached_input_tokens.map(n),
    );
    add(
        attrs,
        "gen_ai.usage.cache_creation.input_tokens",
        usage.cache_creation_input_tokens.map(n),
    );
    add(
        attrs,
        "gen_ai.usage.reasoning.output_tokens",
        usage.reasoning_tokens.map(n),
    );
}

/// The recorded usage (the model crate's [`Usage`], or an older log's names).
fn recorded_usage(usage: &Value) -> Option<Usage> {
    if let Ok(u) = serde_json::from_value::<Usage>(usage.clone()) {
        return Some(u);
    }
    let get = |keys: &[&str]| keys.iter().find_map(|k| usage.get(*k)?.as_u64());
    Some(Usage {
        input_tokens: get(&["input_tokens", "prompt_tokens"])?,
        output_tokens: get(&["output_tokens", "completion_tokens"]).unwrap_or(0),
        ..Usage::default()
    })
}

/// A recorded response read back by its API's parser.
fn parse(
    api: WireApi,
    request: Option<&[u8]>,
    response: &[u8],
    media: &str,
) -> Option<ModelResponse> {
    let raw = RawExchange {
        request_body: Bytes::from(request.unwrap_or_default().to_vec()),
        response_body: Bytes::from(response.to_vec()),
        response_media_type: Some(media.to_string()),
        ..RawExchange::default()
    };
    api.parse_response(raw).ok()
}

/// The name (`chat {model}`) and attributes of the `chat` span of `p`.
pub(crate) fn chat_attributes(
    run: &RunFacts,
    p: &ModelCalled,
    blobs: Blobs<'_>,
    capture: bool,
) -> (String, Vec<KeyValue>) {
    let request = p.request.as_ref().and_then(blobs);
    let response = p.response.as_ref().and_then(blobs);
    let api = api_of(&p.model, response.as_deref());
    let request_json = request
        .as_deref()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok());
    let parsed = match (&response, &p.response) {
        (Some(bytes), Some(blob)) if p.error.is_none() => {
            parse(api, request.as_deref(), bytes, &blob.media_type)
        }
        _ => None,
    };
    let request_model = request_json
        .as_ref()
        .and_then(|r| r.get("model")?.as_str())
        .unwrap_or_else(|| model_name(&p.model))
        .to_string();
    let mut attrs = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new(
            "gen_ai.provider.name",
            provider_name(&p.model, response.as_deref()),
        ),
        KeyValue::new("gen_ai.request.model", request_model.clone()),
        KeyValue::new("provrun.model", p.model.clone()),
    ];
    if let Some((host, port)) = &run.server {
        attrs.push(KeyValue::new("server.address", host.clone()));
        attrs.push(KeyValue::new("server.port", i64::from(*port)));
    }
    add(&mut attrs, "gen_ai.conversation.id", run.thread.clone());
    request_settings(&mut attrs, &run.settings, request_json.as_ref());
    if let Some(r) = &parsed {
        add(&mut attrs, "gen_ai.response.model", r.model.clone());
        add(&mut attrs, "gen_ai.response.id", r.id.clone());
    }
    let reason = p.finish_reason.clone().or_else(|| {
        parsed
            .as_ref()?
            .finish_reason
            .as_ref()
            .map(|r| r.as_str().to_string())
    });
    if let Some(reason) = reason {
        attrs.push(KeyValue::new(
            "gen_ai.response.finish_reasons",
            strings([reason]),
        ));
    }
    let usage = parsed
        .as_ref()
        .filter(|r| r.usage_reported)
        .map(|r| r.usage)
        .or_else(|| recorded_usage(&p.usage));
    if let Some(u) = usage {
        usage_attributes(&mut attrs, &u);
    }
    if capture {
        if let Some(body) = &request_json {
            let (system, messages) = input_messages(api, body);
            if let Some(system) = system {
                attrs.push(KeyValue::new(
                    "gen_ai.system_instructions",
                    system.to_string(),
                ));
            }
            if !messages.is_empty() {
                let messages = Value::Array(messages).to_string();
                attrs.push(KeyValue::new("gen_ai.input.messages", messages));
            }
        }
        let output = parsed.as_ref().map(output_messages).unwrap_or_default();
        if !output.is_empty() {
            let output = Value::Array(output).to_string();
            attrs.push(KeyValue::new("gen_ai.output.messages", output));
        }
    }
    (format!("chat {request_model}"), attrs)
}
