//! The agent spec's `[settings]` and `--set` through the `provrun` binary: for each live
//! API, streamed and not, a run against a loopback server answering with a recorded
//! response sends exactly the settings asked for, in that API's names and shapes; the
//! effective settings are in `run_started`, and `replay` sends them again (it matches);
//! a setting the API does not take is refused before anything is written; `batch --set`
//! checks every line's model; the schema lists every key.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use crate::support::cli::{assert_exit, command, events, s, text};
use serde_json::{Map, Value, json};

fn provrun(args: &[&str]) -> Output {
    command(args)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the provrun binary runs")
}

/// A recorded response of the model crate's fixtures, with its content type.
fn recorded(name: &str) -> (String, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../model/tests/fixtures")
        .join(name);
    let kind = if name.ends_with(".sse") {
        "text/event-stream"
    } else {
        "application/json"
    };
    (kind.to_string(), std::fs::read(&path).unwrap())
}

/// A loopback server answering every request with `answer`; returns its base URL and
/// the request bodies it received.
fn serve(answer: (String, Vec<u8>)) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            if let Ok(v) = serde_json::from_slice(&body) {
                kept.lock().unwrap().push(v);
            }
            let (kind, bytes) = &answer;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                bytes.len()
            );
            let _ = stream.write_all(bytes);
        }
    });
    (base, bodies)
}

/// The fields of a request body that are settings (not the history, tools, stream switch
/// or the backend's own `store`/`include`/`stream_options`).
fn settings_part(body: &Value) -> Value {
    const NOT: &[&str] = &[
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
    Value::Object(
        body.as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| !NOT.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Map<_, _>>(),
    )
}

/// A spec of `model` at `base`, with a tool (tool settings go only with tools) and the
/// `[settings]` every API takes.
fn spec(dir: &Path, model: &str, base: &str, stream: bool) -> PathBuf {
    let path = dir.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"settings\"\nmodel = \"{model}\"\nbase_url = \"{}\"\napi_key_env = \"SETTINGS_TEST_KEY\"\n\
             tools = [\"list_dir\"]\nstream = {stream}\n\n[settings]\ntemperature = 0.5\ntop_p = 0.9\n\
             max_tokens = 2048\nparallel_tool_calls = false\ntool_choice = \"auto\"\n\
             extra = {{ metadata = {{ run = \"r\" }} }}\n",
            if model.starts_with("anthropic:") {
                base.trim_end_matches("/v1")
            } else {
                base
            }
        ),
    )
    .unwrap();
    path
}

struct Case {
    model: &'static str,
    answers: [&'static str; 2],
    set: &'static [&'static str],
    sent: Value,
    recorded: Value,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            model: "openai:gpt-4o-mini",
            answers: [
                "openai/15_seq_final_text_bytes.response.json",
                "openai/17_stream_final_text_bytes.response.sse",
            ],
            set: &[
                "seed=7",
                "stop=[\"END\"]",
                "presence_penalty=0.1",
                "frequency_penalty=0.2",
                "reasoning_effort=low",
            ],
            sent: json!({
                "temperature": 0.5, "top_p": 0.9, "max_tokens": 2048, "seed": 7,
                "stop": ["END"], "presence_penalty": 0.1, "frequency_penalty": 0.2,
                "reasoning_effort": "low", "tool_choice": "auto", "parallel_tool_calls": false,
                "metadata": {"run": "r"},
            }),
            recorded: json!({
                "temperature": 0.5, "top_p": 0.9, "max_tokens": 2048, "seed": 7,
                "stop": ["END"], "presence_penalty": 0.1, "frequency_penalty": 0.2,
                "reasoning_effort": "low", "tool_choice": "auto", "parallel_tool_calls": false,
                "extra": {"metadata": {"run": "r"}},
            }),
        },
        Case {
            model: "openai-responses:gpt-5-mini",
            answers: [
                "openai-responses/02_final_text_after_function_call_output_bytes.response.json",
                "openai-responses/04_stream_final_text_with_usage_bytes.response.sse",
            ],
            set: &[
                "reasoning_effort=\"medium\"",
                "extra.reasoning.summary=auto",
            ],
            sent: json!({
                "temperature": 0.5, "top_p": 0.9, "max_output_tokens": 2048,
                "reasoning": {"effort": "medium", "summary": "auto"},
                "tool_choice": "auto", "parallel_tool_calls": false, "metadata": {"run": "r"},
            }),
            recorded: json!({
                "temperature": 0.5, "top_p": 0.9, "max_tokens": 2048,
                "reasoning_effort": "medium", "tool_choice": "auto", "parallel_tool_calls": false,
                "extra": {"metadata": {"run": "r"}, "reasoning": {"summary": "auto"}},
            }),
        },
        Case {
            model: "anthropic:claude-sonnet-4-5",
            answers: [
                "anthropic/04_final_text_after_parallel_bytes.response.json",
                "anthropic/06_stream_final_text_with_usage_bytes.response.sse",
            ],
            set: &["thinking=1024", "stop=[\"END\"]", "temperature=1"],
            sent: json!({
                "temperature": 1.0, "top_p": 0.9, "max_tokens": 2048, "stop_sequences": ["END"],
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
                "metadata": {"run": "r"},
            }),
            recorded: json!({
                // The log is canonical JSON (RFC 8785): 1.0 is written 1.
                "temperature": 1, "top_p": 0.9, "max_tokens": 2048, "stop": ["END"],
                "thinking": 1024, "tool_choice": "auto", "parallel_tool_calls": false,
                "extra": {"metadata": {"run": "r"}},
            }),
        },
    ]
}

#[test]
fn each_api_gets_the_settings_in_its_own_names_and_a_replay_sends_them_again() {
    for case in cases() {
        for (stream, answer) in [(false, case.answers[0]), (true, case.answers[1])] {
            let name = format!("{} stream={stream}", case.model);
            let dir = tempfile::tempdir().unwrap();
            let (base, bodies) = serve(recorded(answer));
            let agent = spec(dir.path(), case.model, &base, stream);
            let bundle = dir.path().join("bundle");
            let mut args = vec!["run".to_string(), s(&agent), "--out".into(), s(&bundle)];
            for set in case.set {
                args.extend(["--set".to_string(), set.to_string()]);
            }
            let out = Command::new(env!("CARGO_BIN_EXE_provrun"))
                .args(&args)
                .env("SETTINGS_TEST_KEY", "sk-settings-test")
                .env_remove("RUST_LOG")
                .output()
                .unwrap();
            assert_exit(&out, 0);
            let sent = bodies.lock().unwrap().clone();
            assert_eq!(sent.len(), 1, "{name}");
            assert_eq!(sent[0]["stream"] == true, stream, "{name}");
            assert_eq!(
                settings_part(&sent[0]),
                case.sent,
                "{name}: the settings sent"
            );
            // The effective settings (file and --set together) are on record.
            let started = &events(&bundle)[0];
            assert_eq!(
                started["payload"]["details"]["model_settings"], case.recorded,
                "{name}"
            );
            // A replay sends the same requests (it compares each with the recording).
            let again = dir.path().join("again");
            let out = provrun(&["replay", &s(&bundle), "--out", &s(&again)]);
            assert_exit(&out, 0);
            assert!(text(&out.stdout).starts_with("replay matches"), "{name}");
            assert_eq!(
                events(&again)[0]["payload"]["details"]["model_settings"],
                case.recorded,
                "{name}: the replay ran with the recorded settings"
            );
            assert_exit(&provrun(&["verify", &s(&bundle)]), 0);
        }
    }
}

#[test]
fn a_setting_the_api_does_not_take_is_refused_before_anything_is_written() {
    for (model, set, names) in [
        (
            "openai:gpt-4o",
            "thinking=2048",
            ["thinking", "Chat Completions"],
        ),
        (
            "openai-responses:gpt-5",
            "seed=1",
            ["seed", "OpenAI Responses"],
        ),
        (
            "anthropic:claude",
            "reasoning_effort=high",
            ["reasoning_effort", "Anthropic Messages"],
        ),
        (
            "anthropic:claude",
            "frequency_penalty=0.5",
            ["frequency_penalty", "Anthropic Messages"],
        ),
        (
            "openai:gpt-4o",
            "extra.model=x",
            ["extra.model", "may only add"],
        ),
        (
            "openai:gpt-4o",
            "temperature=3",
            ["temperature", "between 0 and 2"],
        ),
        (
            "openai:gpt-4o",
            "tempreature=1",
            ["unknown field `tempreature`", "--set"],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent.toml");
        std::fs::write(
            &agent,
            format!("name = \"x\"\nmodel = \"{model}\"\nbase_url = \"http://127.0.0.1:9\"\n"),
        )
        .unwrap();
        let bundle = dir.path().join("bundle");
        let out = provrun(&["run", &s(&agent), "--out", &s(&bundle), "--set", set]);
        assert_exit(&out, 2);
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        for n in names {
            assert!(err.contains(n), "{set}: {err}");
        }
        assert!(!bundle.exists(), "{set}: something was written");
        // The same in the spec's own table is refused when the spec is read.
        if let Some((key, value)) = set.split_once('=')
            && !key.contains('.')
            && key != "tempreature"
        {
            std::fs::write(
                &agent,
                format!(
                    "name = \"x\"\nmodel = \"{model}\"\nbase_url = \"http://127.0.0.1:9\"\n[settings]\n{key} = {}\n",
                    if value.parse::<f64>().is_ok() { value.to_string() } else { format!("\"{value}\"") }
                ),
            )
            .unwrap();
            let out = provrun(&["run", &s(&agent), "--out", &s(&bundle)]);
            assert_exit(&out, 2);
            assert!(
                text(&out.stderr).contains(names[0]),
                "{}",
                text(&out.stderr)
            );
            assert!(!bundle.exists());
        }
    }
}

#[test]
fn a_tool_choice_must_name_a_tool_the_agent_has_and_suit_an_output_schema() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.toml");
    for (spec, set, says) in [
        (
            "tools = [\"list_dir\"]\n",
            "tool_choice={ tool = \"write_file\" }",
            "`tool_choice` names `write_file`, which is not one of the agent's tools",
        ),
        (
            "output_schema = { type = \"object\" }\n",
            "tool_choice=\"auto\"",
            "can only be \"required\"",
        ),
    ] {
        std::fs::write(&agent, format!("name = \"t\"\nmodel = \"test\"\n{spec}")).unwrap();
        let bundle = dir.path().join("bundle");
        let out = provrun(&["run", &s(&agent), "--out", &s(&bundle), "--set", set]);
        assert_exit(&out, 2);
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
        assert!(!bundle.exists());
    }
    // Naming one of its tools is fine, and it goes out.
    std::fs::write(
        &agent,
        "name = \"t\"\nmodel = \"test\"\ntools = [\"list_dir\"]\n",
    )
    .unwrap();
    let bundle = dir.path().join("named");
    let out = provrun(&[
        "run",
        &s(&agent),
        "--out",
        &s(&bundle),
        "--set",
        "tool_choice={ tool = \"list_dir\" }",
    ]);
    assert_exit(&out, 0);
    assert_eq!(
        events(&bundle)[0]["payload"]["details"]["model_settings"]["tool_choice"],
        json!({"tool": "list_dir"})
    );
}

#[test]
fn offline_models_take_and_record_every_setting_and_batch_set_checks_each_lines_model() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("agent.toml"),
        "name = \"b\"\nmodel = \"test\"\n[settings]\nthinking = 2048\n",
    )
    .unwrap();
    // The offline test model takes a setting no live API takes together with `seed`.
    std::fs::write(
        p.join("runs.jsonl"),
        "{\"id\": \"a\", \"agent\": \"agent.toml\"}\n",
    )
    .unwrap();
    let dest = p.join("out");
    let out = provrun(&[
        "batch",
        &s(&p.join("runs.jsonl")),
        "--out",
        &s(&dest),
        "--set",
        "seed=3",
        "--json",
    ]);
    assert_exit(&out, 0);
    assert_eq!(
        events(&dest.join("a"))[0]["payload"]["details"]["model_settings"],
        json!({"thinking": 2048, "seed": 3})
    );
    // A line whose own model's API does not take a setting: exit 2, the line named,
    // nothing run.
    std::fs::write(
        p.join("runs.jsonl"),
        "{\"id\": \"c\", \"agent\": \"agent.toml\"}\n\
         {\"id\": \"d\", \"agent\": \"agent.toml\", \"model\": \"openai-responses:gpt-5\"}\n",
    )
    .unwrap();
    let dest = p.join("out2");
    let out = provrun(&[
        "batch",
        &s(&p.join("runs.jsonl")),
        "--out",
        &s(&dest),
        "--set",
        "seed=3",
    ]);
    assert_exit(&out, 2);
    let err = text(&out.stderr);
    assert!(err.contains("line 2") && err.contains("`seed`"), "{err}");
    assert!(!dest.join("c").exists());
}

#[test]
fn the_agent_schema_lists_every_setting() {
    let out = provrun(&["schema", "agent"]);
    assert_exit(&out, 0);
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    let settings = &schema["properties"]["settings"];
    let reference = settings["$ref"]
        .as_str()
        .or_else(|| settings["allOf"][0]["$ref"].as_str())
        .expect("settings refers to its definition");
    let name = reference.rsplit('/').next().unwrap();
    let keys: Vec<&str> = schema["$defs"][name]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = vec![
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "thinking",
        "extra",
    ];
    want.sort_unstable();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(keys, want);
    assert_eq!(schema["$defs"][name]["additionalProperties"], false);
}
