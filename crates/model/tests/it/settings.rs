//! Request settings on the wire, against recorded traffic: for every recorded request of
//! the three APIs, the settings it carried are read back with the documented mapping
//! (the inverse is written out here, apart from the crate's builders), sent through the
//! live backend to a loopback server that answers with the recorded response, and the
//! body the server received carries exactly the recorded settings fields — names, shapes
//! and values — streamed or not, as recorded. Settings no recording uses (seed, stop,
//! penalties, top_p, efforts the recordings lack) are checked against each API's
//! documented shape, streamed and not.

use crate::support;

use provrun_model::{
    AnthropicConfig, AnthropicModel, ApiKey, Message, Model, ModelRequest, ModelSettings,
    OpenAiResponsesConfig, OpenAiResponsesModel, ToolChoice, ToolDefinition, WireApi,
};
use serde_json::{Map, Value, json};
use support::{SECRET_KEY, quick_retry, serve};

/// Fields that are not request settings: the history, the tools, the stream switch and
/// what each backend's configuration sets (`store`, `include`, `stream_options`).
const NOT_SETTINGS: &[&str] = &[
    "model",
    "messages",
    "input",
    "system",
    "tools",
    "stream",
    "stream_options",
    "store",
    "include",
];

/// The settings part of a request body: every field but [`NOT_SETTINGS`].
fn settings_part(body: &Value) -> Map<String, Value> {
    body.as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !NOT_SETTINGS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn choice_from(value: &Value, api: WireApi) -> ToolChoice {
    let named = |n: &Value| ToolChoice::Tool {
        name: n.as_str().unwrap().into(),
    };
    match (api, value) {
        (WireApi::AnthropicMessages, v) => match v["type"].as_str().unwrap() {
            "auto" => ToolChoice::Auto,
            "any" => ToolChoice::Required,
            "none" => ToolChoice::None,
            _ => named(&v["name"]),
        },
        (_, Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            _ => ToolChoice::None,
        },
        (WireApi::ChatCompletions, v) => named(&v["function"]["name"]),
        (_, v) => named(&v["name"]),
    }
}

/// The settings a recorded body carried, read with the mapping docs/models.md states;
/// anything that is no setting of the API goes to `extra`, as a user would write it.
fn settings_from(api: WireApi, recorded: &Value) -> ModelSettings {
    let mut s = ModelSettings::default();
    for (key, value) in settings_part(recorded) {
        match (api, key.as_str()) {
            (_, "temperature") => s.temperature = value.as_f64(),
            (_, "top_p") => s.top_p = value.as_f64(),
            (WireApi::OpenAiResponses, "max_output_tokens")
            | (WireApi::ChatCompletions | WireApi::AnthropicMessages, "max_tokens") => {
                s.max_tokens = value.as_u64().map(|n| n as u32);
            }
            (WireApi::ChatCompletions, "seed") => s.seed = value.as_i64(),
            (WireApi::ChatCompletions, "stop") | (WireApi::AnthropicMessages, "stop_sequences") => {
                s.stop = match value {
                    Value::String(one) => vec![one],
                    v => serde_json::from_value(v).unwrap(),
                };
            }
            (WireApi::ChatCompletions, "presence_penalty") => s.presence_penalty = value.as_f64(),
            (WireApi::ChatCompletions, "frequency_penalty") => s.frequency_penalty = value.as_f64(),
            (WireApi::ChatCompletions, "reasoning_effort") => {
                s.reasoning_effort = value.as_str().map(String::from);
            }
            (WireApi::OpenAiResponses, "reasoning") => {
                let mut rest = value.as_object().unwrap().clone();
                s.reasoning_effort = rest
                    .remove("effort")
                    .and_then(|e| e.as_str().map(String::from));
                if !rest.is_empty() {
                    s.extra.insert("reasoning".into(), Value::Object(rest));
                }
            }
            (WireApi::AnthropicMessages, "thinking") if value["type"] == "enabled" => {
                let mut rest = value.as_object().unwrap().clone();
                rest.remove("type");
                s.thinking_budget = rest
                    .remove("budget_tokens")
                    .and_then(|b| b.as_u64())
                    .map(|b| b as u32);
                if !rest.is_empty() {
                    s.extra.insert("thinking".into(), Value::Object(rest));
                }
            }
            (_, "tool_choice") => {
                s.tool_choice = Some(choice_from(&value, api));
                if value["disable_parallel_tool_use"] == true {
                    s.parallel_tool_calls = Some(false);
                }
            }
            (WireApi::ChatCompletions | WireApi::OpenAiResponses, "parallel_tool_calls") => {
                s.parallel_tool_calls = value.as_bool();
            }
            _ => {
                s.extra.insert(key, value);
            }
        }
    }
    s
}

/// `value` with every number as a float: `-1` and `-1.0` are one temperature.
fn numbers_as_floats(value: Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.into_iter().map(numbers_as_floats).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A live backend of `api` at `base`.
fn model(api: WireApi, base: &str) -> Box<dyn Model> {
    match api {
        WireApi::ChatCompletions => Box::new(support::model_for(base, "m")),
        WireApi::AnthropicMessages => {
            let mut c = AnthropicConfig::new(
                "m",
                base.trim_end_matches("/v1"),
                Some(ApiKey::new(SECRET_KEY)),
            );
            c.retry = quick_retry();
            Box::new(AnthropicModel::new(c).unwrap())
        }
        _ => {
            let mut c = OpenAiResponsesConfig::new("m", base, Some(ApiKey::new(SECRET_KEY)));
            c.retry = quick_retry();
            Box::new(OpenAiResponsesModel::new(c).unwrap())
        }
    }
}

/// A small request with these settings (and a tool when `tools`, as tool settings are
/// sent only with tools).
fn request(settings: ModelSettings, tools: bool) -> ModelRequest {
    ModelRequest {
        messages: vec![Message::system("Be brief."), Message::user("Hello")],
        tools: if tools {
            vec![ToolDefinition {
                name: "get_weather".into(),
                description: "The weather in a city".into(),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            }]
        } else {
            Vec::new()
        },
        settings,
    }
}

/// Sends `request` through the live backend (streamed or not) to a server answering with
/// `answer`, and returns the body it received.
async fn sent_body(
    api: WireApi,
    request: &ModelRequest,
    stream: bool,
    answer: support::Canned,
) -> Value {
    let server = serve(vec![answer]).await;
    let model = model(api, &server.base_url);
    let _ = if stream {
        model.request_stream(request, &|_| {}).await
    } else {
        model.request(request).await
    };
    // A recorded 429 or 5xx is retried: the first attempt is the recorded one.
    let received = server.received();
    assert!(!received.is_empty(), "nothing was sent");
    serde_json::from_slice(&received[0].body).unwrap()
}

const RECORDED: [(WireApi, &str); 3] = [
    (WireApi::ChatCompletions, "openai"),
    (WireApi::AnthropicMessages, "anthropic"),
    (WireApi::OpenAiResponses, "openai-responses"),
];

#[tokio::test]
async fn every_recorded_requests_settings_go_out_with_the_same_names_and_shapes() {
    let mut compared = 0;
    let mut keys_seen = std::collections::BTreeSet::new();
    for (api, folder) in RECORDED {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(folder);
        let mut prefixes: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".request.json"))
            .map(|n| n[..2].to_string())
            .collect();
        prefixes.sort();
        for prefix in prefixes {
            let fx = support::recorded(folder, &prefix);
            let recorded = fx.request.clone().unwrap();
            let settings = settings_from(api, &recorded);
            let stream = recorded["stream"] == true;
            let tools = recorded["tools"].as_array().is_some_and(|t| !t.is_empty());
            let name = format!("{folder}/{prefix}");
            if fx.status() == 200 {
                // What real clients sent is what the API takes: the checks agree.
                api.check_settings(&settings)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            let sent = sent_body(api, &request(settings.clone(), tools), stream, fx.canned()).await;
            let (mut want, got) = (settings_part(&recorded), settings_part(&sent));
            if api == WireApi::AnthropicMessages && !want.contains_key("max_tokens") {
                want.insert("max_tokens".into(), json!(8192));
            }
            assert_eq!(
                numbers_as_floats(Value::Object(got)),
                numbers_as_floats(Value::Object(want.clone())),
                "{name}: the settings sent differ from the recording's"
            );
            assert_eq!(sent["stream"] == true, stream, "{name}");
            keys_seen.extend(want.keys().cloned());
            compared += 1;
        }
    }
    assert!(compared >= 45, "only {compared} recordings compared");
    // The recordings exercise these mappings (the rest are checked below).
    for key in [
        "max_tokens",
        "temperature",
        "thinking",
        "reasoning",
        "tool_choice",
    ] {
        assert!(keys_seen.contains(key), "no recording carries `{key}`");
    }
}

/// Every setting the API takes at once, and the settings part of the body that must go
/// out for it: the shapes of each API's reference.
fn all_settings(api: WireApi) -> (ModelSettings, Value) {
    let mut s = ModelSettings {
        temperature: Some(0.5),
        top_p: Some(0.9),
        max_tokens: Some(4096),
        tool_choice: Some(ToolChoice::Tool {
            name: "get_weather".into(),
        }),
        parallel_tool_calls: Some(false),
        ..ModelSettings::default()
    };
    let expected = match api {
        WireApi::ChatCompletions => {
            s.seed = Some(7);
            s.stop = vec!["END".into(), "\n\n".into()];
            s.presence_penalty = Some(0.25);
            s.frequency_penalty = Some(-0.5);
            s.reasoning_effort = Some("low".into());
            json!({
                "temperature": 0.5, "top_p": 0.9, "max_tokens": 4096, "seed": 7,
                "stop": ["END", "\n\n"], "presence_penalty": 0.25, "frequency_penalty": -0.5,
                "reasoning_effort": "low",
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                "parallel_tool_calls": false,
            })
        }
        WireApi::OpenAiResponses => {
            s.reasoning_effort = Some("medium".into());
            json!({
                "temperature": 0.5, "top_p": 0.9, "max_output_tokens": 4096,
                "reasoning": {"effort": "medium"},
                "tool_choice": {"type": "function", "name": "get_weather"},
                "parallel_tool_calls": false,
            })
        }
        _ => {
            s.stop = vec!["END".into()];
            s.thinking_budget = Some(2048);
            s.temperature = Some(1.0);
            json!({
                "temperature": 1.0, "top_p": 0.9, "max_tokens": 4096,
                "stop_sequences": ["END"],
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
            })
        }
    };
    (s, expected)
}

/// A recorded 200 answer of `api` in the stream mode asked for.
fn answer(api: WireApi, stream: bool) -> support::Canned {
    let (folder, prefix) = match (api, stream) {
        (WireApi::ChatCompletions, false) => ("openai", "15"),
        (WireApi::ChatCompletions, true) => ("openai", "17"),
        (WireApi::AnthropicMessages, false) => ("anthropic", "04"),
        (WireApi::AnthropicMessages, true) => ("anthropic", "06"),
        (_, false) => ("openai-responses", "02"),
        (_, true) => ("openai-responses", "04"),
    };
    support::recorded(folder, prefix).canned()
}

#[tokio::test]
async fn every_setting_an_api_takes_goes_out_in_that_apis_shape_streamed_or_not() {
    for (api, _) in RECORDED {
        let (settings, expected) = all_settings(api);
        api.check_settings(&settings)
            .unwrap_or_else(|e| panic!("{api:?}: {e}"));
        for stream in [false, true] {
            let sent = sent_body(
                api,
                &request(settings.clone(), true),
                stream,
                answer(api, stream),
            )
            .await;
            assert_eq!(
                Value::Object(settings_part(&sent)),
                expected,
                "{api:?}, stream {stream}"
            );
            // `extra` adds fields and keys of the builder's objects, never replaces one.
            let max = if api == WireApi::OpenAiResponses {
                "max_output_tokens"
            } else {
                "max_tokens"
            };
            let mut more = settings.clone();
            more.extra = json!({"metadata": {"run": "r1"}, max: 1})
                .as_object()
                .unwrap()
                .clone();
            if api == WireApi::OpenAiResponses {
                more.extra
                    .insert("reasoning".into(), json!({"summary": "auto"}));
            }
            let sent = sent_body(api, &request(more, true), stream, answer(api, stream)).await;
            assert_eq!(sent["metadata"], json!({"run": "r1"}), "{api:?}");
            assert_eq!(sent[max], json!(4096), "{api:?}: extra replaced a field");
            if api == WireApi::OpenAiResponses {
                assert_eq!(
                    sent["reasoning"],
                    json!({"effort": "medium", "summary": "auto"})
                );
            }
        }
    }
}
