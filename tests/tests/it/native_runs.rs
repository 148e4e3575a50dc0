//! Whole recorded runs of the native backends (Anthropic Messages, OpenAI Responses),
//! served turn by turn from a loopback HTTP server through a real agent run: every bundle
//! verifies, each later request carries the earlier calls' results by id (thinking and
//! reasoning sent back unchanged), the recorded usage holds the cache and reasoning
//! counts, a replay reproduces the run, and a stream cut at any event boundary fails the
//! run cleanly with a bundle that still verifies.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use provrun::agent::{AgentSpec, Backend, RunControl, RunSpec, RunStatus, replay};
use provrun::evidence::{EventType, read_events, verify};
use provrun::model::{
    AnthropicConfig, AnthropicModel, ApiKey, Model, OpenAiResponsesConfig, OpenAiResponsesModel,
    RetryPolicy,
};
use provrun::tools::{Tool, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const KEY: &str = "sk-native-runs-never-recorded";

fn fixtures(folder: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/model/tests/fixtures")
        .join(folder)
}

/// A recorded response: (status, content type, body).
fn response(folder: &str, prefix: &str) -> (u16, String, Vec<u8>) {
    let dir = fixtures(folder);
    let meta_path = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&format!("{prefix}_")) && n.ends_with(".meta.json")
        })
        .unwrap();
    let meta: Value = serde_json::from_slice(&std::fs::read(meta_path).unwrap()).unwrap();
    let body = std::fs::read(dir.join(meta["response_body"]["file"].as_str().unwrap())).unwrap();
    (
        meta["status"].as_u64().unwrap() as u16,
        meta["response_content_type"].as_str().unwrap().to_string(),
        body,
    )
}

/// A loopback HTTP/1.1 server answering each request with the next canned response and
/// keeping each request's head and body.
struct Loopback {
    base: String,
    received: Received,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn loopback(canned: Vec<(u16, String, Vec<u8>)>) -> Loopback {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(canned)));
    let received = Arc::new(Mutex::new(Vec::new()));
    let rec = received.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (queue, rec) = (queue.clone(), rec.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 8192];
                let head_end = loop {
                    let n = sock.read(&mut tmp).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let n = sock.read(&mut tmp).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                }
                rec.lock().unwrap().push((head, buf[head_end..].to_vec()));
                let (status, content_type, body) = queue.lock().unwrap().pop_front().unwrap_or((
                    500,
                    "text/plain".into(),
                    b"no canned response".to_vec(),
                ));
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Loopback {
        base,
        received,
        task,
    }
}

impl Loopback {
    fn bodies(&self) -> Vec<Value> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| serde_json::from_slice(b).unwrap())
            .collect()
    }
}

fn no_retry() -> RetryPolicy {
    RetryPolicy::none()
}

fn anthropic(base: &str) -> Arc<dyn Model> {
    let mut c = AnthropicConfig::new("claude-haiku-4-5", base, Some(ApiKey::new(KEY)));
    c.retry = no_retry();
    Arc::new(AnthropicModel::new(c).unwrap())
}

fn responses(base: &str) -> Arc<dyn Model> {
    let mut c = OpenAiResponsesConfig::new("gpt-5.5", format!("{base}/v1"), Some(ApiKey::new(KEY)));
    c.retry = no_retry();
    Arc::new(OpenAiResponsesModel::new(c).unwrap())
}

/// A registry of tools that answer what the recording's tools answered.
/// What a recorded tool answered, from its arguments.
type Answer = fn(&serde_json::Map<String, Value>) -> String;

/// Requests as received: head and body.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

fn registry(tools: &[(&'static str, Value, Answer)]) -> ToolRegistry {
    let mut reg = ToolRegistry::empty();
    for (name, schema, answer) in tools {
        let answer = *answer;
        reg.add(
            Tool::builder(*name, format!("The recording's {name}."))
                .schema(schema.clone())
                .sync_handler(false, move |_, args| ToolOutput::succeed(answer(&args)))
                .build()
                .unwrap(),
        );
    }
    reg
}

fn agent(model: &str, tools: &[&str], stream: bool) -> AgentSpec {
    let mut a = AgentSpec::new("native", model);
    a.instructions = "Answer with the tools.".into();
    a.tools = tools.iter().map(|t| t.to_string()).collect();
    a.stream = stream;
    a.prompt_caching = true;
    a
}

fn assert_verifies(bundle: &Path) {
    let report = verify(bundle);
    assert!(
        report.ok && report.complete,
        "{:?}",
        report.failures().collect::<Vec<_>>()
    );
}

fn model_calls(bundle: &Path) -> Vec<Value> {
    read_events(bundle)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::ModelCalled)
        .map(|e| e.payload)
        .collect()
}

fn no_key_anywhere(bundle: &Path) {
    for entry in walk(bundle) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "the key is in {}",
            entry.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

async fn run_and_replay(
    model: Arc<dyn Model>,
    reg: ToolRegistry,
    agent: &AgentSpec,
    dir: &Path,
) -> (PathBuf, provrun::agent::RunResult) {
    let bundle = dir.join("bundle");
    let backend = Backend::new().with_model(model).with_registry(reg.clone());
    let result = backend
        .execute(&RunControl::new(), agent, &RunSpec::new("Go.", &bundle))
        .await
        .unwrap();
    assert_verifies(&bundle);
    no_key_anywhere(&bundle);
    // The replay reads the recording in the API it was made with and matches it.
    let out = dir.join("replay");
    let report = replay(
        &Backend::new().with_registry(reg),
        &RunControl::new(),
        &bundle,
        &out,
    )
    .await
    .unwrap();
    assert!(report.matches(), "{:?}", report.difference);
    assert_verifies(&out);
    let (a, b) = (model_calls(&bundle), model_calls(&out));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            x["response"]["digest"], y["response"]["digest"],
            "the replay read the same bytes"
        );
        assert_eq!(x["usage"], y["usage"]);
    }
    (bundle, result)
}

fn family(args: &serde_json::Map<String, Value>) -> String {
    match args["name"].as_str().unwrap_or_default() {
        "Alice" => "alice is bob's wife",
        "Bob" => "bob is alice's husband",
        "Charlie" => "charlie is alice's son",
        "Daisy" => "daisy is bob's daughter and charlie's younger sister",
        _ => "unknown",
    }
    .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_parallel_calls_run_end_to_end_with_results_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = loopback(vec![
        response("anthropic", "01"),
        response("anthropic", "02"),
    ])
    .await;
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false});
    let reg = registry(&[("retrieve_entity_info", schema, family)]);
    let agent = agent(
        "anthropic:claude-haiku-4-5",
        &["retrieve_entity_info"],
        false,
    );
    let (bundle, result) = run_and_replay(anthropic(&server.base), reg, &agent, dir.path()).await;
    assert_eq!(result.status(), RunStatus::Finished);
    assert!(result.output().contains("Daisy"), "{}", result.output());
    let sent = server.bodies();
    assert_eq!(sent.len(), 2);
    // The first request: system prompt and tools cached, tools as input_schema.
    assert_eq!(
        sent[0]["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(sent[0]["tools"][0]["name"], "retrieve_entity_info");
    assert!(sent[0]["tools"][0]["input_schema"].is_object());
    // The second carries the four calls and their results, by id, in one user turn.
    let calls = model_calls(&bundle);
    let (_, _, body) = response("anthropic", "01");
    let recorded: Value = serde_json::from_slice(&body).unwrap();
    let ids: Vec<&str> = recorded["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["id"].as_str())
        .collect();
    let messages = sent[1]["messages"].as_array().unwrap();
    let assistant = &messages[messages.len() - 2];
    let results = &messages[messages.len() - 1]["content"];
    let used: Vec<&str> = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["id"].as_str())
        .collect();
    let answered: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!((used.clone(), answered), (ids.clone(), ids));
    assert_eq!(
        results[3]["content"],
        "daisy is bob's daughter and charlie's younger sister"
    );
    // model_called holds the usage with its cache counts.
    assert_eq!(calls[0]["model"], "anthropic:claude-haiku-4-5");
    assert_eq!(calls[0]["usage"]["input_tokens"], 423);
    assert_eq!(calls[0]["usage"]["cache_creation_input_tokens"], 0);
    assert_eq!(calls[0]["finish_reason"], "tool_calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_streamed_thinking_goes_back_unchanged_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = loopback(vec![
        response("anthropic", "11"),
        response("anthropic", "12"),
    ])
    .await;
    let reg = registry(&[(
        "fixed_version",
        json!({"type": "object", "properties": {}}),
        |_| "0.32a0".into(),
    )]);
    let agent = agent("anthropic:claude-haiku-4-5", &["fixed_version"], true);
    let (bundle, result) = run_and_replay(anthropic(&server.base), reg, &agent, dir.path()).await;
    assert_eq!(result.status(), RunStatus::Finished);
    let sent = server.bodies();
    assert_eq!(sent[0]["stream"], true);
    let messages = sent[1]["messages"].as_array().unwrap();
    let assistant = &messages[messages.len() - 2]["content"];
    assert_eq!(assistant[0]["type"], "thinking");
    // The block the recording's client sent back, signature and all.
    let dir12 =
        fixtures("anthropic").join("12_stream_final_text_after_thinking_bytes.request.json");
    let recorded12: Value = serde_json::from_slice(&std::fs::read(dir12).unwrap()).unwrap();
    assert_eq!(assistant[0], recorded12["messages"][1]["content"][0]);
    assert_eq!(assistant[1]["type"], "tool_use");
    let result_block = &messages[messages.len() - 1]["content"][0];
    assert_eq!(
        (
            result_block["tool_use_id"].clone(),
            result_block["content"].clone()
        ),
        (assistant[1]["id"].clone(), json!("0.32a0"))
    );
    let calls = model_calls(&bundle);
    assert!(calls[0]["usage"]["reasoning_tokens"].is_u64());
    assert!(
        calls[0]["response"]["media_type"]
            .as_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_three_turn_run_carries_encrypted_reasoning_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = loopback(vec![
        response("openai-responses", "05"),
        response("openai-responses", "06"),
        response("openai-responses", "07"),
    ])
    .await;
    let reg = registry(&[
        (
            "lookup_population",
            json!({"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]}),
            |_| "123124".into(),
        ),
        (
            "can_have_dragons",
            json!({"type": "object", "properties": {"population": {"type": "integer"}}, "required": ["population"]}),
            |_| "true".into(),
        ),
    ]);
    let agent = agent(
        "openai-responses:gpt-5.5",
        &["lookup_population", "can_have_dragons"],
        false,
    );
    let (bundle, result) = run_and_replay(responses(&server.base), reg, &agent, dir.path()).await;
    assert_eq!(result.status(), RunStatus::Finished);
    assert_eq!(
        result.output(),
        "Pundora has a population of 123,124 — and yes, it can have dragons."
    );
    let sent = server.bodies();
    assert_eq!(sent.len(), 3);
    let (_, _, body5) = response("openai-responses", "05");
    let r5: Value = serde_json::from_slice(&body5).unwrap();
    let input = sent[1]["input"].as_array().unwrap();
    let reasoning = input.iter().find(|i| i["type"] == "reasoning").unwrap();
    assert_eq!(
        reasoning["encrypted_content"],
        r5["output"][0]["encrypted_content"]
    );
    assert_eq!(reasoning["id"], r5["output"][0]["id"]);
    let output = input
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert_eq!(
        (output["call_id"].clone(), output["output"].clone()),
        (r5["output"][1]["call_id"].clone(), json!("123124"))
    );
    assert_eq!(
        sent[2]["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .count(),
        2
    );
    let calls = model_calls(&bundle);
    assert_eq!(calls[0]["model"], "openai-responses:gpt-5.5");
    assert_eq!(
        (
            calls[0]["usage"]["reasoning_tokens"].clone(),
            calls[0]["usage"]["output_tokens"].clone()
        ),
        (json!(63), json!(85))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_streamed_run_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = loopback(vec![
        response("openai-responses", "03"),
        response("openai-responses", "04"),
    ])
    .await;
    let reg = registry(&[(
        "multiply",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        |args| (args["a"].as_i64().unwrap_or(0) * args["b"].as_i64().unwrap_or(0)).to_string(),
    )]);
    let agent = agent("openai-responses:gpt-5.5", &["multiply"], true);
    let (_bundle, result) = run_and_replay(responses(&server.base), reg, &agent, dir.path()).await;
    assert_eq!(result.status(), RunStatus::Finished);
    let sent = server.bodies();
    let output = sent[1]["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap()
        .clone();
    assert_eq!(output["output"], "2869461");
}

/// Every proper prefix of an SSE body that ends on an event boundary.
fn cuts(body: &[u8]) -> Vec<usize> {
    let mut out = vec![0];
    out.extend(
        body.windows(2)
            .enumerate()
            .filter(|(_, w)| w == b"\n\n")
            .map(|(i, _)| i + 2),
    );
    out.retain(|c| *c < body.len());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_at_any_event_boundary_fails_the_run_with_a_bundle_that_verifies() {
    let dir = tempfile::tempdir().unwrap();
    for (folder, prefix, model_name) in [
        ("anthropic", "05", "anthropic:claude-haiku-4-5"),
        ("openai-responses", "03", "openai-responses:gpt-5.5"),
    ] {
        let (status, content_type, body) = response(folder, prefix);
        for (n, cut) in cuts(&body).into_iter().enumerate() {
            let server = loopback(vec![(status, content_type.clone(), body[..cut].to_vec())]).await;
            let model = if folder == "anthropic" {
                anthropic(&server.base)
            } else {
                responses(&server.base)
            };
            let bundle = dir.path().join(format!("{folder}-{n}"));
            let result = Backend::new()
                .with_model(model)
                .with_registry(ToolRegistry::empty())
                .execute(
                    &RunControl::new(),
                    &agent(model_name, &[], true),
                    &RunSpec::new("Go.", &bundle),
                )
                .await
                .unwrap();
            assert_eq!(result.status(), RunStatus::Failed, "{folder} cut {cut}");
            assert_verifies(&bundle);
            let calls = model_calls(&bundle);
            let error = calls[0]["error"].as_str().unwrap();
            assert!(error.contains("incomplete stream"), "{error}");
            assert_eq!(
                calls[0]["response"]["size"].as_u64().unwrap_or(0),
                cut as u64,
                "the bytes received are kept"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_401_fails_the_run_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let server = loopback(vec![response("anthropic", "15")]).await;
    let bundle = dir.path().join("bundle");
    let result = Backend::new()
        .with_model(anthropic(&server.base))
        .with_registry(ToolRegistry::empty())
        .execute(
            &RunControl::new(),
            &agent("anthropic:x", &[], false),
            &RunSpec::new("Go.", &bundle),
        )
        .await
        .unwrap();
    assert_eq!(result.status(), RunStatus::Failed);
    assert_verifies(&bundle);
    let error = model_calls(&bundle)[0]["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        error.contains("HTTP 401")
            && error.contains("authentication_error")
            && error.contains("invalid x-api-key"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_thinking_run_resumes_from_its_trace_with_the_thinking_block() {
    // The history goes through trace_imported (provrun-messages/1) while the run waits for
    // an approval; the resumed request must still send the thinking block back unchanged.
    let dir = tempfile::tempdir().unwrap();
    let server = loopback(vec![
        response("anthropic", "11"),
        response("anthropic", "12"),
    ])
    .await;
    let reg = registry(&[(
        "fixed_version",
        json!({"type": "object", "properties": {}}),
        |_| "0.32a0".into(),
    )]);
    let mut a = agent("anthropic:claude-haiku-4-5", &["fixed_version"], true);
    a.approve = provrun::agent::ApprovePolicy::All;
    let bundle = dir.path().join("bundle");
    let backend = Backend::new()
        .with_model(anthropic(&server.base))
        .with_registry(reg.clone());
    let paused = backend
        .execute(&RunControl::new(), &a, &RunSpec::new("Go.", &bundle))
        .await
        .unwrap();
    assert_eq!(paused.status(), RunStatus::Paused);
    let trace = read_events(&bundle)
        .unwrap()
        .into_iter()
        .find(|e| e.kind == EventType::TraceImported)
        .unwrap();
    assert_eq!(trace.payload["format"], "provrun-messages/1");
    // A fresh backend resumes from the bundle alone.
    let resumed = Backend::new()
        .with_model(anthropic(&server.base))
        .with_registry(reg)
        .resume(
            &RunControl::new(),
            &bundle,
            &[provrun::agent::Decision::Approve(
                paused.deferred()[0].call_id.clone(),
            )],
        )
        .await
        .unwrap();
    assert_eq!(resumed.status(), RunStatus::Finished);
    assert_verifies(&bundle);
    let sent = server.bodies();
    let messages = sent[1]["messages"].as_array().unwrap();
    let assistant = &messages[messages.len() - 2]["content"];
    let recorded12: Value = serde_json::from_slice(
        &std::fs::read(
            fixtures("anthropic").join("12_stream_final_text_after_thinking_bytes.request.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(assistant[0], recorded12["messages"][1]["content"][0]);
}
