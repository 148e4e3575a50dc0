//! OpenTelemetry export end to end: an OTLP/HTTP receiver on loopback (decoding with the
//! official `opentelemetry-proto` types) gets the spans of the scripted example's run,
//! live from `provrun run` and after the fact from `provrun export otlp`; a collector
//! that refuses, hangs or is not there changes neither the run's exit code nor its bundle.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::cli::{command, events, text};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, status::StatusCode};
use prost::Message as _;
use serde_json::Value;

pub(crate) fn example(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(rel)
        .display()
        .to_string()
}

/// Runs a command to its end (its output, however it exited).
pub(crate) fn output(cmd: &mut Command) -> Output {
    cmd.output().expect("the provrun binary runs")
}

/// How the loopback collector answers.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    Accept,
    Refuse,
    Hang,
}

/// The request bodies a collector got, each with its path.
type Kept = Mutex<Vec<(String, Vec<u8>)>>;

/// An OTLP/HTTP collector on loopback that keeps every request body it gets.
pub(crate) struct Receiver {
    pub(crate) url: String,
    bodies: Arc<Kept>,
}

impl Receiver {
    pub(crate) fn start(mode: Mode) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || serve(stream, mode, &kept));
            }
        });
        Receiver { url, bodies }
    }

    /// The decoded export requests sent to `/v1/traces`.
    pub(crate) fn requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .map(|(path, body)| {
                assert_eq!(path, "/v1/traces", "spans go to the traces path");
                ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP trace request")
            })
            .collect()
    }

    pub(crate) fn spans(&self) -> Vec<Span> {
        self.requests()
            .into_iter()
            .flat_map(|r| r.resource_spans)
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .collect()
    }
}

/// Answer HTTP/1.1 requests on one connection as `mode` says.
fn serve(stream: TcpStream, mode: Mode, kept: &Kept) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        kept.lock().unwrap().push((path, body));
        let reply: &[u8] = match mode {
            Mode::Accept => {
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
            }
            Mode::Refuse => {
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            }
            Mode::Hang => {
                std::thread::sleep(Duration::from_secs(120));
                return;
            }
        };
        if writer.write_all(reply).is_err() || mode == Mode::Refuse {
            return;
        }
    }
}

pub(crate) fn attrs(attributes: &[KeyValue]) -> BTreeMap<String, Value> {
    fn value(v: &Option<AnyValue>) -> Value {
        match v.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => Value::from(s.clone()),
            Some(any_value::Value::IntValue(i)) => Value::from(*i),
            Some(any_value::Value::BoolValue(b)) => Value::from(*b),
            Some(any_value::Value::DoubleValue(d)) => Value::from(*d),
            Some(any_value::Value::ArrayValue(a)) => {
                Value::Array(a.values.iter().map(|v| value(&Some(v.clone()))).collect())
            }
            _ => Value::Null,
        }
    }
    attributes
        .iter()
        .map(|kv| (kv.key.clone(), value(&kv.value)))
        .collect()
}

/// `provrun run` of the scripted example into `bundle`, with `env` set.
pub(crate) fn run_scripted(bundle: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = command(&[
        "run",
        &example("scripted/agent.toml"),
        "--input",
        &example("scripted/input"),
        "--out",
        &bundle.display().to_string(),
    ]);
    cmd.envs(env.iter().copied());
    output(&mut cmd)
}

pub(crate) fn assert_verifies(bundle: &Path) {
    let out = output(&mut command(&["verify", &bundle.display().to_string()]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

/// The scripted run's spans: names, attributes, one trace, every child under the run.
fn check_scripted_spans(spans: &[Span], bundle: &Path) {
    let log = events(bundle);
    let run_id = log[0]["run_id"].as_str().unwrap();
    let trace_id = spans[0].trace_id.clone();
    assert_eq!(trace_id.len(), 16);
    assert!(spans.iter().all(|s| s.trace_id == trace_id), "one trace");

    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "one run span");
    let root = roots[0];
    assert_eq!(root.name, "invoke_agent scripted");
    let ra = attrs(&root.attributes);
    assert_eq!(ra["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(ra["gen_ai.agent.name"], "scripted");
    assert_eq!(ra["provrun.run_id"], run_id);
    assert_eq!(ra["provrun.seq"], 0);
    assert_eq!(ra["provrun.status"], "finished");

    let names: Vec<&str> = spans
        .iter()
        .filter(|s| !s.parent_span_id.is_empty())
        .map(|s| s.name.as_str())
        .collect();
    // The script model names itself `script:PATH` in its requests.
    let model = format!("script:{}", example("scripted/script.json"));
    let chat = format!("chat {model}");
    assert_eq!(
        names,
        [
            chat.as_str(),
            "execute_tool list_dir",
            "execute_tool read_file",
            chat.as_str(),
            "execute_tool write_file",
            chat.as_str()
        ]
    );
    for span in spans.iter().filter(|s| !s.parent_span_id.is_empty()) {
        assert_eq!(
            span.parent_span_id, root.span_id,
            "{} is under the run",
            span.name
        );
        let a = attrs(&span.attributes);
        assert_eq!(a["provrun.run_id"], run_id);
        let seq = a["provrun.seq"].as_u64().unwrap() as usize;
        let event = &log[seq];
        // The span's end is the time the evidence recorded for its event.
        let ts = humantime::parse_rfc3339_weak(event["ts"].as_str().unwrap()).unwrap();
        let end = ts.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        assert_eq!(span.end_time_unix_nano, end, "{}", span.name);
        assert!(span.start_time_unix_nano <= span.end_time_unix_nano);
        let p = &event["payload"];
        if span.name.starts_with("chat ") {
            assert_eq!(event["type"], "model_called");
            assert_eq!(a["gen_ai.operation.name"], "chat");
            assert_eq!(a["gen_ai.request.model"], model);
            assert_eq!(a["gen_ai.provider.name"], "provrun.script");
            assert_eq!(a["gen_ai.usage.input_tokens"], p["usage"]["input_tokens"]);
            assert_eq!(a["gen_ai.usage.output_tokens"], p["usage"]["output_tokens"]);
            assert_eq!(
                a["gen_ai.response.finish_reasons"],
                Value::Array(vec![p["finish_reason"].clone()])
            );
            assert!(a.contains_key("gen_ai.response.model"), "{a:?}");
            assert_eq!(
                a["provrun.request.sha256"],
                p["request"]["digest"]["sha256"]
            );
            assert_eq!(
                a["provrun.response.sha256"],
                p["response"]["digest"]["sha256"]
            );
            assert!(
                !a.contains_key("gen_ai.input.messages"),
                "no contents unless asked"
            );
        } else {
            assert_eq!(event["type"], "tool_called");
            assert_eq!(a["gen_ai.operation.name"], "execute_tool");
            assert_eq!(a["gen_ai.tool.name"], p["name"]);
            assert_eq!(a["gen_ai.tool.call.id"], p["call_id"]);
            assert_eq!(a["gen_ai.tool.type"], "function");
            assert!(!a.contains_key("gen_ai.tool.call.arguments"));
            assert_ne!(
                span.status.as_ref().map(|s| s.code),
                Some(StatusCode::Error as i32)
            );
        }
    }
}

fn service_name(request: &ExportTraceServiceRequest) -> Value {
    let resource = request.resource_spans[0].resource.as_ref().unwrap();
    attrs(&resource.attributes)["service.name"].clone()
}

#[test]
fn a_live_run_sends_its_spans_and_records_the_trace_id() {
    let receiver = Receiver::start(Mode::Accept);
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let out = run_scripted(&bundle, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).is_empty() || !text(&out.stderr).contains("OTLP"));
    assert_verifies(&bundle);

    let spans = receiver.spans();
    assert_eq!(
        spans.len(),
        7,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    check_scripted_spans(&spans, &bundle);
    let recorded = events(&bundle)[0]["payload"]["details"]["otel"]["trace_id"]
        .as_str()
        .expect("run_started records the trace id")
        .to_string();
    let sent: String = spans[0]
        .trace_id
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(sent, recorded);
    assert_eq!(service_name(&receiver.requests()[0]), "provrun");
}

#[test]
fn export_sends_a_finished_bundles_spans_with_contents_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let out = run_scripted(&bundle, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        events(&bundle)[0]["payload"]["details"]
            .get("otel")
            .is_none(),
        "nothing is set up without the variables"
    );
    let before = std::fs::read(bundle.join("events.jsonl")).unwrap();

    let receiver = Receiver::start(Mode::Accept);
    let b = bundle.display().to_string();
    let mut cmd = command(&["export", "otlp", &b, "--endpoint", &receiver.url]);
    cmd.env("OTEL_SERVICE_NAME", "nightly-agents");
    let out = output(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("sent 7 spans in trace "),
        "{}",
        text(&out.stdout)
    );
    let spans = receiver.spans();
    check_scripted_spans(&spans, &bundle);
    assert_eq!(service_name(&receiver.requests()[0]), "nightly-agents");
    assert_eq!(std::fs::read(bundle.join("events.jsonl")).unwrap(), before);

    // The same bundle again, with contents: the same trace and span ids (derived from
    // the run id and seq), now carrying the messages and tool arguments.
    let second = Receiver::start(Mode::Accept);
    let mut cmd = command(&["export", "otlp", &b]);
    cmd.env(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        format!("{}/v1/traces", second.url),
    )
    .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
    let out = output(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let again = second.spans();
    let ids = |s: &[Span]| {
        s.iter()
            .map(|s| (s.trace_id.clone(), s.span_id.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&again), ids(&spans));
    let chat = attrs(&again[1].attributes);
    // The instructions apart, the conversation in the conventions' `{role, parts}` shape.
    assert!(
        chat["gen_ai.system_instructions"]
            .as_str()
            .unwrap()
            .contains("/input/report.txt")
    );
    let input: Value = serde_json::from_str(chat["gen_ai.input.messages"].as_str().unwrap())
        .expect("input messages are JSON");
    assert_eq!(input[0]["role"], "user", "{input}");
    assert_eq!(input[0]["parts"][0]["type"], "text", "{input}");
    assert!(
        chat["gen_ai.output.messages"]
            .as_str()
            .unwrap()
            .contains("list_dir")
    );
    let tool = attrs(&again[2].attributes);
    assert!(
        tool["gen_ai.tool.call.arguments"]
            .as_str()
            .unwrap()
            .contains("/input")
    );
    assert!(
        tool["gen_ai.tool.call.result"]
            .as_str()
            .unwrap()
            .contains("report.txt")
    );
}

#[test]
fn export_reads_a_bundle_tar_and_its_file_url_as_it_reads_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let out = run_scripted(&bundle, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tar = dir.path().join("bundle.tar");
    std::fs::write(&tar, provrun_store::tar_folder(&bundle).unwrap()).unwrap();
    let url = format!("file://{}", tar.display());
    for source in [tar.display().to_string(), url] {
        let receiver = Receiver::start(Mode::Accept);
        let out = output(&mut command(&[
            "export",
            "otlp",
            &source,
            "--endpoint",
            &receiver.url,
        ]));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("sent 7 spans in trace "));
        check_scripted_spans(&receiver.spans(), &bundle);
    }
}

#[test]
fn a_failed_tool_call_is_an_error_span() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agent.toml"),
        "name = \"reader\"\nmodel = \"script:script.json\"\ninstructions = \"Read.\"\ntools = [\"read_file\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"[{"tool_calls": [{"id": "gone", "name": "read_file", "arguments": {"path": "/input/missing.txt"}}]}, {"text": "It is not there."}]"#,
    )
    .unwrap();
    let bundle = dir.path().join("bundle");
    let out = output(&mut command(&[
        "run",
        &dir.path().join("agent.toml").display().to_string(),
        "--out",
        &bundle.display().to_string(),
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let receiver = Receiver::start(Mode::Accept);
    let out = output(&mut command(&[
        "export",
        "otlp",
        &bundle.display().to_string(),
        "--endpoint",
        &receiver.url,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let spans = receiver.spans();
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool read_file")
        .expect("the tool span");
    assert_eq!(tool.status.as_ref().unwrap().code, StatusCode::Error as i32);
    let a = attrs(&tool.attributes);
    assert_eq!(a["gen_ai.tool.call.id"], "gone");
    assert_eq!(a["error.type"], "tool_error");
}

/// A port nothing listens on.
fn dead_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

#[test]
fn a_refusing_hanging_or_absent_collector_changes_nothing_but_one_stderr_line() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference");
    let plain = run_scripted(&reference, &[]);
    assert_eq!(plain.status.code(), Some(0));

    let refusing = Receiver::start(Mode::Refuse);
    let hanging = Receiver::start(Mode::Hang);
    for (name, url) in [
        ("refusing", refusing.url.clone()),
        ("hanging", hanging.url.clone()),
        ("absent", dead_url()),
    ] {
        let bundle = dir.path().join(name);
        let started = Instant::now();
        let out = run_scripted(
            &bundle,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
            ],
        );
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        assert_eq!(out.stdout, plain.stdout, "{name}: the same answer");
        let stderr = text(&out.stderr);
        assert_eq!(
            stderr
                .matches("the run and its bundle are unaffected")
                .count(),
            1,
            "{name}: reported once: {stderr}"
        );
        // The collector that never answers holds its connection for two minutes; the
        // flush gives up at its bound (1 s here) instead.
        assert!(took < Duration::from_secs(60), "{name}: took {took:?}");
        assert_verifies(&bundle);
        let log = events(&bundle);
        assert_eq!(
            log.last().unwrap()["payload"]["status"],
            "finished",
            "{name}"
        );
    }
    assert!(
        !refusing.requests().is_empty(),
        "the refusing collector was asked"
    );

    // After the fact, a refusing collector is exit 1 with the reason.
    let out = output(&mut command(&[
        "export",
        "otlp",
        &reference.display().to_string(),
        "--endpoint",
        &refusing.url,
        "--timeout-ms",
        "1000",
    ]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("collector"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn export_without_a_collector_or_bundle_is_a_usage_error() {
    let out = output(&mut command(&["export", "otlp", &example("scripted")]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--endpoint"));
    let missing: PathBuf = std::env::temp_dir().join("provrun-no-such-bundle-22");
    let out = output(&mut command(&[
        "export",
        "otlp",
        &missing.display().to_string(),
        "--endpoint",
        "http://127.0.0.1:9",
    ]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // A bad OTLP setting is named once and the run goes on, unexported.
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let out = run_scripted(
        &bundle,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).matches("http/json").count(),
        1,
        "an unsupported protocol is named once: {}",
        text(&out.stderr)
    );
    assert!(
        events(&bundle)[0]["payload"]["details"]
            .get("otel")
            .is_none()
    );
}
