//! Whole recorded runs of real provider traffic (the model crate's fixtures: Anthropic
//! Messages streamed with thinking, OpenAI Responses with reasoning and function calls,
//! Chat Completions with tool calls) written into bundles as the runtime records them,
//! and their `chat` spans checked attribute by attribute, with and without content.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use opentelemetry::Value as OtelValue;
use provrun_evidence::{
    Durability, ModelCalled, Recorder, RunEnd, RunStarted, RunStatus, read_events,
};
use provrun_model::{RawExchange, WireApi};
use provrun_otel::{SpanData, spans_from_events};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

fn fixture(name: &str) -> (Vec<u8>, Vec<u8>, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../model/tests/fixtures");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.meta.json"))).unwrap())
            .unwrap();
    let folder = Path::new(name).parent().unwrap();
    let read = |key: &str| {
        let file = meta[key]["file"].as_str().unwrap();
        std::fs::read(dir.join(folder).join(file)).unwrap()
    };
    let media = meta["response_content_type"].as_str().unwrap().to_string();
    (read("request_body"), read("response_body"), media)
}

/// A bundle of one run of `model` whose requests were the fixtures `turns`, recorded as
/// the runtime records a model exchange (bodies as blobs, usage and finish reason as
/// the wire parser read them).
fn record(dir: &Path, model: &str, details: Value, turns: &[&str]) -> PathBuf {
    let bundle = dir.join(model.replace([':', '.'], "-"));
    let started = RunStarted {
        builder: "test".into(),
        agent_spec_digest: String::new(),
        agent: "fixture".into(),
        model: model.into(),
        tools: Vec::new(),
        limits: json!({}),
        details,
    };
    let rec = Recorder::create(&bundle, "run-fixture", Durability::Flush, &started).unwrap();
    for turn in turns {
        let (request, response, media) = fixture(turn);
        let parsed = WireApi::of_model(model)
            .parse_response(RawExchange {
                request_body: request.clone().into(),
                response_body: response.clone().into(),
                response_media_type: Some(media.clone()),
                ..RawExchange::default()
            })
            .unwrap();
        let payload = ModelCalled {
            model: model.into(),
            stream: media.contains("event-stream"),
            request: Some(rec.put_blob(&request, "application/json").unwrap()),
            response: Some(rec.put_blob(&response, &media).unwrap()),
            usage: serde_json::to_value(parsed.usage).unwrap(),
            finish_reason: parsed.finish_reason.map(|r| r.as_str().to_string()),
            duration_ms: 1500,
            error: None,
            attempts: Vec::new(),
            response_rendered: false,
            http: None,
            tool_calls: Vec::new(),
        };
        rec.record(&payload).unwrap();
    }
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    bundle
}

fn json_of(v: &OtelValue) -> Value {
    match v {
        OtelValue::Bool(b) => json!(b),
        OtelValue::I64(i) => json!(i),
        OtelValue::F64(f) => json!(f),
        OtelValue::String(s) => json!(s.as_str()),
        OtelValue::Array(opentelemetry::Array::String(a)) => {
            json!(a.iter().map(|s| s.as_str()).collect::<Vec<_>>())
        }
        OtelValue::Array(opentelemetry::Array::I64(a)) => json!(a),
        other => json!(other.to_string()),
    }
}

fn attrs(span: &SpanData) -> BTreeMap<String, Value> {
    span.attributes
        .iter()
        .map(|kv| (kv.key.as_str().to_string(), json_of(&kv.value)))
        .collect()
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The chat spans of `bundle`, with and without content.
fn chats(bundle: &Path, capture: bool) -> Vec<BTreeMap<String, Value>> {
    let events = read_events(bundle).unwrap();
    spans_from_events(bundle, &events, capture)
        .unwrap()
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .map(attrs)
        .collect()
}

/// `expected` plus what every chat span of the run carries, checked key by key.
fn check(got: &BTreeMap<String, Value>, turn: &str, seq: i64, expected: Value) {
    let (request, response, _) = fixture(turn);
    let mut want: BTreeMap<String, Value> = serde_json::from_value(expected).unwrap();
    want.insert("gen_ai.operation.name".into(), json!("chat"));
    want.insert(
        "gen_ai.request.stream".into(),
        got["provrun.stream"].clone(),
    );
    want.insert("provrun.request.sha256".into(), json!(sha(&request)));
    want.insert("provrun.response.sha256".into(), json!(sha(&response)));
    want.insert("provrun.run_id".into(), json!("run-fixture"));
    want.insert("provrun.seq".into(), json!(seq));
    for (key, value) in &want {
        assert_eq!(got.get(key), Some(value), "{turn}: {key}");
    }
    let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(extra.is_empty(), "{turn}: unexpected attributes {extra:?}");
}

fn messages(got: &BTreeMap<String, Value>, key: &str) -> Value {
    serde_json::from_str(got[key].as_str().unwrap()).unwrap()
}

/// Each message's role and its parts' types, e.g. `assistant:reasoning+tool_call`.
fn shape(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let parts: Vec<&str> = m["parts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["type"].as_str().unwrap())
                .collect();
            format!("{}:{}", m["role"].as_str().unwrap(), parts.join("+"))
        })
        .collect()
}

#[test]
fn anthropic_messages_streamed_with_thinking_and_tool_use() {
    let dir = tempfile::tempdir().unwrap();
    let model = "anthropic:claude-haiku-4-5-20251001";
    let turns = [
        "anthropic/11_stream_thinking_signature_tool_use_bytes",
        "anthropic/12_stream_final_text_after_thinking_bytes",
    ];
    let details = json!({
        "model_base_url": "https://api.anthropic.com",
        "model_settings": {"temperature": 1.0, "thinking": 1024},
        "thread": "thread-7",
    });
    let bundle = record(dir.path(), model, details, &turns);
    let common = json!({
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-haiku-4-5-20251001",
        "gen_ai.response.model": "claude-haiku-4-5-20251001",
        "provrun.model": model,
        "server.address": "api.anthropic.com",
        "server.port": 443,
        "gen_ai.conversation.id": "thread-7",
        "gen_ai.request.temperature": 1.0,
        // Not in the settings: the request body's (the backend's default).
        "gen_ai.request.max_tokens": 64000,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "provrun.stream": true,
    });
    let with = |extra: Value| {
        let mut v = common.clone();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let plain = chats(&bundle, false);
    assert_eq!(plain.len(), 2);
    check(
        &plain[0],
        turns[0],
        1,
        with(json!({
            "gen_ai.response.id": "msg_01JdU4xqNHXL9QCFWkwCDKGr",
            // As recorded: the parser's reading of `tool_use`.
            "gen_ai.response.finish_reasons": ["tool_calls"],
            "gen_ai.usage.input_tokens": 598,
            "gen_ai.usage.output_tokens": 92,
            // `output_tokens_details.thinking_tokens`.
            "gen_ai.usage.reasoning.output_tokens": 53,
        })),
    );
    check(
        &plain[1],
        turns[1],
        2,
        with(json!({
            "gen_ai.response.id": "msg_01Qb3MMmP6RUjBckfsEVddrQ",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.usage.input_tokens": 707,
            "gen_ai.usage.output_tokens": 89,
            "gen_ai.usage.reasoning.output_tokens": 0,
        })),
    );

    let full = chats(&bundle, true);
    let input = messages(&full[1], "gen_ai.input.messages");
    assert_eq!(
        shape(&input),
        [
            "user:text",
            "assistant:reasoning+tool_call",
            "tool:tool_call_response"
        ]
    );
    let call = &input[1]["parts"][1];
    assert_eq!(
        call["id"], input[2]["parts"][0]["id"],
        "the result answers the call"
    );
    assert!(call["arguments"].is_object(), "{call}");
    assert!(!input[1]["parts"][0]["content"].as_str().unwrap().is_empty());
    let output = messages(&full[0], "gen_ai.output.messages");
    assert_eq!(shape(&output), ["assistant:reasoning+tool_call"]);
    assert_eq!(output[0]["finish_reason"], "tool_call");
    let output = messages(&full[1], "gen_ai.output.messages");
    assert_eq!(shape(&output), ["assistant:text"]);
    assert_eq!(output[0]["finish_reason"], "stop");
}

#[test]
fn openai_responses_with_reasoning_and_function_calls() {
    let dir = tempfile::tempdir().unwrap();
    let model = "openai-responses:gpt-5.5";
    let turns = [
        "openai-responses/05_run_turn1_reasoning_function_call_bytes",
        "openai-responses/06_run_turn2_function_call_bytes",
        "openai-responses/07_run_turn3_final_text_bytes",
    ];
    // A compatible server at another base URL is still `openai`, at its own address.
    let details = json!({
        "model_base_url": "http://127.0.0.1:8089/v1",
        "model_settings": {"reasoning_effort": "high"},
    });
    let bundle = record(dir.path(), model, details, &turns);
    let plain = chats(&bundle, false);
    let expected = [
        (
            "resp_0f4809b27460351d0169fab217db348196b980331b574f45c6",
            94,
            85,
            63,
        ),
        (
            "resp_0f4809b27460351d0169fab21af6208196b41d87dd9e9de5f9",
            192,
            21,
            0,
        ),
        (
            "resp_0f4809b27460351d0169fab21c2dd4819695b82af2bec1b7f0",
            227,
            24,
            0,
        ),
    ];
    for (i, (id, input, output, reasoning)) in expected.into_iter().enumerate() {
        let finish = plain[i]["gen_ai.response.finish_reasons"].clone();
        check(
            &plain[i],
            turns[i],
            i as i64 + 1,
            json!({
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-5.5",
                "gen_ai.response.model": "gpt-5.5-2026-04-23",
                "gen_ai.response.id": id,
                "gen_ai.response.finish_reasons": finish,
                "provrun.model": model,
                "server.address": "127.0.0.1",
                "server.port": 8089,
                "gen_ai.usage.input_tokens": input,
                "gen_ai.usage.output_tokens": output,
                "gen_ai.usage.cache_read.input_tokens": 0,
                "gen_ai.usage.reasoning.output_tokens": reasoning,
                "provrun.stream": false,
            }),
        );
    }
    let full = chats(&bundle, true);
    let input = messages(&full[2], "gen_ai.input.messages");
    assert_eq!(
        shape(&input),
        [
            "user:text",
            "assistant:reasoning+tool_call",
            "tool:tool_call_response",
            "assistant:tool_call",
            "tool:tool_call_response"
        ]
    );
    assert_eq!(input[1]["parts"][1]["id"], input[2]["parts"][0]["id"]);
    assert_eq!(
        shape(&messages(&full[0], "gen_ai.output.messages")),
        ["assistant:tool_call"],
        "a reasoning item without a summary has no text to show"
    );
    let last = messages(&full[2], "gen_ai.output.messages");
    assert_eq!(shape(&last), ["assistant:text"]);
    assert_eq!(last[0]["finish_reason"], "stop");
}

#[test]
fn chat_completions_with_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let model = "openai:gpt-4o-mini";
    let turns = [
        "openai/13_seq_tool_call_1_bytes",
        "openai/14_seq_tool_call_2_bytes",
        "openai/15_seq_final_text_bytes",
    ];
    let details = json!({
        "model_base_url": "https://api.openai.com/v1",
        "model_settings": {"temperature": 0.2, "seed": 7, "stop": ["END"], "max_tokens": 300},
    });
    let bundle = record(dir.path(), model, details, &turns);
    let plain = chats(&bundle, false);
    let expected = [
        (
            "chatcmpl-BWpGNGdPONTwxHkZVxbqctQSBDmTn",
            "tool_calls",
            92,
            17,
        ),
        (
            "chatcmpl-BWpGQWkuvc0FZdZZjPz8eL1CdtBcF",
            "tool_calls",
            118,
            18,
        ),
        ("chatcmpl-BWpGTZY785VsZipCO0bAvF7Z7tjdA", "stop", 146, 3),
    ];
    for (i, (id, finish, input, output)) in expected.into_iter().enumerate() {
        check(
            &plain[i],
            turns[i],
            i as i64 + 1,
            json!({
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.response.id": id,
                "gen_ai.response.finish_reasons": [finish],
                "provrun.model": model,
                "server.address": "api.openai.com",
                "server.port": 443,
                "gen_ai.request.temperature": 0.2,
                "gen_ai.request.seed": 7,
                "gen_ai.request.stop_sequences": ["END"],
                "gen_ai.request.max_tokens": 300,
                "gen_ai.usage.input_tokens": input,
                "gen_ai.usage.output_tokens": output,
                "gen_ai.usage.cache_read.input_tokens": 0,
                "gen_ai.usage.reasoning.output_tokens": 0,
                "provrun.stream": false,
            }),
        );
    }
    let full = chats(&bundle, true);
    let input = messages(&full[2], "gen_ai.input.messages");
    assert_eq!(
        shape(&input),
        [
            "user:text",
            "assistant:tool_call",
            "tool:tool_call_response",
            "assistant:tool_call",
            "tool:tool_call_response"
        ]
    );
    assert_eq!(input[1]["parts"][0]["name"], "lookup_population");
    let output = messages(&full[1], "gen_ai.output.messages");
    assert_eq!(shape(&output), ["assistant:tool_call"]);
    assert_eq!(output[0]["parts"][0]["name"], "can_have_dragons");
    assert_eq!(output[0]["finish_reason"], "tool_call");
    for span in &plain {
        assert!(
            !span.contains_key("gen_ai.input.messages"),
            "no contents unless asked"
        );
    }
}
