//! A rig agent on rig's own OpenAI client, pointed at a loopback server that answers with
//! a recorded OpenAI run: the bundle's model events are `observed` and hold exactly the
//! bytes that crossed the socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use provrun_evidence::{Confidence, RunStatus, read_blob_by_digest, read_events, verify};
use provrun_rig::{DeclareRigTools, RigEvidence};
use rig_core::client::CompletionClient;
use rig_core::completion::Prompt;
use rig_core::providers::openai;
use rig_core::tool::Tool;
use serde::Deserialize;
use serde_json::{Value, json};

const FIXTURES: [&[u8]; 3] = [
    include_bytes!("../fixtures/13_seq_tool_call_1_bytes.response.json"),
    include_bytes!("../fixtures/14_seq_tool_call_2_bytes.response.json"),
    include_bytes!("../fixtures/15_seq_final_text_bytes.response.json"),
];

/// Read one HTTP/1.1 request; its body, or `None` at end of stream.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut length = 0usize;
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if first {
            assert!(line.starts_with("POST /v1/chat/completions "), "{line}");
            first = false;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

const ERROR_400: &[u8] = include_bytes!("../fixtures/08_error_400_unsupported_value.response.json");

/// Serve `answers` (status line, body) in order, over as many connections as the client
/// opens; hand back the request bodies received.
fn serve(
    listener: TcpListener,
    answers: Vec<(&'static str, &'static [u8])>,
) -> thread::JoinHandle<Vec<Vec<u8>>> {
    thread::spawn(move || {
        let mut received = Vec::new();
        while received.len() < answers.len() {
            let (stream, _) = listener.accept().unwrap();
            let mut writer = stream.try_clone().unwrap();
            let mut reader = BufReader::new(stream);
            while received.len() < answers.len() {
                let Some(body) = read_request(&mut reader) else {
                    break;
                };
                let (status, answer) = answers[received.len()];
                received.push(body);
                write!(
                    writer,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    answer.len()
                )
                .unwrap();
                writer.write_all(answer).unwrap();
                writer.flush().unwrap();
            }
        }
        received
    })
}

#[derive(Deserialize)]
struct Country {
    country: String,
}

struct LookupPopulation;

impl Tool for LookupPopulation {
    const NAME: &'static str = "lookup_population";
    type Error = std::io::Error;
    type Args = Country;
    type Output = u64;

    fn description(&self) -> String {
        "Returns the current population of the specified fictional country".into()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]})
    }

    async fn call(&self, args: Country) -> Result<u64, std::io::Error> {
        assert_eq!(args.country, "Crumpet");
        Ok(123124)
    }
}

#[derive(Deserialize)]
struct Population {
    population: u64,
}

struct CanHaveDragons;

impl Tool for CanHaveDragons {
    const NAME: &'static str = "can_have_dragons";
    type Error = std::io::Error;
    type Args = Population;
    type Output = bool;

    fn description(&self) -> String {
        "Returns True if the specified population can have dragons".into()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"population": {"type": "integer"}}, "required": ["population"]})
    }

    async fn call(&self, args: Population) -> Result<bool, std::io::Error> {
        Ok(args.population > 10000)
    }
}

#[tokio::test(flavor = "current_thread")]
async fn openai_agent_bundle_holds_the_wire_bytes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = serve(listener, FIXTURES.iter().map(|f| ("200 OK", *f)).collect());

    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let capture = RigEvidence::builder(&bundle)
        .agent("dragons")
        .model("openai:gpt-4o-mini")
        .rig_tool(&LookupPopulation)
        .unwrap()
        .rig_tool(&CanHaveDragons)
        .unwrap()
        .open()
        .unwrap();
    let evidence = RigEvidence::new(capture);

    let client = openai::CompletionsClient::builder()
        .api_key("sk-test-not-a-secret")
        .base_url(format!("http://{addr}/v1"))
        .http_client(evidence.http_client(rig_core::http_client::ReqwestClient::new()))
        .build()
        .unwrap();
    let agent =
        rig_core::agent::AgentBuilder::new(evidence.model(client.completion_model("gpt-4o-mini")))
            .tools(evidence.tools(vec![Box::new(LookupPopulation), Box::new(CanHaveDragons)]))
            .build();
    let answer = agent
        .prompt("Can the country of Crumpet have dragons? Answer with only YES or NO")
        .max_turns(5)
        .await
        .unwrap();
    assert_eq!(answer, "YES");
    evidence
        .finish(RunStatus::Finished, Value::Null, None)
        .await
        .unwrap();
    let received = server.join().unwrap();
    assert_eq!(received.len(), 3);
    // To look at the bundle with `provrun show`: set PROVRUN_RIG_KEEP to a folder.
    if let Some(keep) = std::env::var_os("PROVRUN_RIG_KEEP") {
        let keep = std::path::PathBuf::from(keep);
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(&bundle)
            .arg(&keep)
            .status()
            .unwrap();
        assert!(status.success());
    }

    let report = verify(&bundle);
    assert!(report.ok && report.complete, "{report:?}");
    let events = read_events(&bundle).unwrap();
    assert_eq!(
        events.last().unwrap().payload["usage"],
        json!({"requests": 3, "tool_calls": 2, "input_tokens": 356, "output_tokens": 38})
    );
    let blob = |v: &Value| read_blob_by_digest(&bundle, v["digest"]["sha256"].as_str().unwrap());

    let models: Vec<_> = events
        .iter()
        .filter(|e| e.kind.as_str() == "model_called")
        .collect();
    assert_eq!(models.len(), 3);
    for (i, m) in models.iter().enumerate() {
        assert_eq!(m.confidence, Confidence::Observed, "{:?}", m.payload);
        // What the server received, and what it sent, byte for byte.
        assert_eq!(blob(&m.payload["request"]).unwrap(), received[i]);
        assert_eq!(blob(&m.payload["response"]).unwrap(), FIXTURES[i]);
        assert_eq!(m.payload["response"]["media_type"], "application/json");
    }
    // rig's request to the server carried the tool results back.
    let last: Value = serde_json::from_slice(&received[2]).unwrap();
    assert!(last.to_string().contains("123124"), "{last}");
    // The API key travelled in a header, never into the bundle.
    for m in &models {
        let request = blob(&m.payload["request"]).unwrap();
        assert!(!String::from_utf8_lossy(&request).contains("sk-test-not-a-secret"));
    }

    let tools: Vec<_> = events
        .iter()
        .filter(|e| e.kind.as_str() == "tool_called")
        .collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0].payload["name"], "lookup_population");
    assert_eq!(tools[0].payload["call_id"], "call_TTY8UFNo7rNCaOBUNtlRSvMG");
    assert_eq!(tools[0].payload["arguments"], json!({"country": "Crumpet"}));
    assert_eq!(tools[0].payload["result"], "123124");
    assert_eq!(tools[1].payload["call_id"], "call_aq9UyiSFkzX6W8Ydc33DoI9Y");
    assert_eq!(tools[1].payload["result"], "true");
    assert!(tools.iter().all(|t| t.payload["ok"] == true));
}

#[tokio::test(flavor = "current_thread")]
async fn an_http_error_is_recorded_observed_with_the_bytes_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = serve(listener, vec![("400 Bad Request", ERROR_400)]);

    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let evidence = RigEvidence::new(
        RigEvidence::builder(&bundle)
            .model("openai:o1-mini")
            .open()
            .unwrap(),
    );
    let client = openai::CompletionsClient::builder()
        .api_key("sk-test-not-a-secret")
        .base_url(format!("http://{addr}/v1"))
        .http_client(evidence.http_client(rig_core::http_client::ReqwestClient::new()))
        .build()
        .unwrap();
    let agent =
        rig_core::agent::AgentBuilder::new(evidence.model(client.completion_model("o1-mini")))
            .preamble("You are terse.")
            .build();
    let err = agent.prompt("Hello").await.unwrap_err().to_string();
    assert!(err.contains("400"), "{err}");
    evidence
        .finish(RunStatus::Failed, Value::Null, Some(err))
        .await
        .unwrap();
    let received = server.join().unwrap();

    let report = verify(&bundle);
    assert!(report.ok && report.complete, "{report:?}");
    let events = read_events(&bundle).unwrap();
    let models: Vec<_> = events
        .iter()
        .filter(|e| e.kind.as_str() == "model_called")
        .collect();
    assert_eq!(models.len(), 1);
    let m = models[0];
    // The request went over the wire and was seen; no response body is claimed.
    assert_eq!(m.confidence, Confidence::Observed);
    let request = read_blob_by_digest(
        &bundle,
        m.payload["request"]["digest"]["sha256"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(request, received[0]);
    assert!(m.payload.get("response").is_none_or(Value::is_null));
    let error = m.payload["error"].as_str().unwrap();
    assert!(
        error.contains("400") && error.contains("unsupported_value"),
        "{error}"
    );
}
