//! A loopback upstream for `provrun wrap`'s tests: a plain HTTP/1.1 server on 127.0.0.1
//! that answers each request as the test's script says, in the provider's wire format
//! (Chat Completions, Responses and Anthropic Messages, streamed as SSE or whole), and
//! keeps its own log of every exchange: the request exactly as it arrived and the
//! response body exactly as it was written, to be compared with the bundle.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// `POST`, `GET`, …
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body's bytes.
    pub body: Vec<u8>,
}

impl Request {
    /// The body as JSON (`null` when it is not).
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The value of header `name`, if any.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the upstream answers: a status, a media type and the body, written in these
/// chunks one after another (one per SSE event), each flushed at once.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// `content-type`.
    pub content_type: String,
    /// The body, chunk by chunk.
    pub chunks: Vec<Vec<u8>>,
    /// Other headers, written after `content-type`.
    pub headers: Vec<(String, String)>,
    /// How long the upstream waits before it writes the head.
    pub delay: std::time::Duration,
}

impl Reply {
    /// A whole JSON body.
    pub(crate) fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json".into(),
            chunks: vec![serde_json::to_vec(body).unwrap()],
            headers: Vec::new(),
            delay: std::time::Duration::ZERO,
        }
    }

    /// An SSE stream, one chunk per `(event name or none, data)` event.
    pub(crate) fn sse(events: &[(Option<&str>, Value)]) -> Reply {
        Reply {
            status: 200,
            content_type: "text/event-stream".into(),
            chunks: events
                .iter()
                .map(|(name, data)| {
                    let mut e = String::new();
                    if let Some(n) = name {
                        e.push_str(&format!("event: {n}\n"));
                    }
                    e.push_str(&format!("data: {data}\n\n"));
                    e.into_bytes()
                })
                .collect(),
            headers: Vec::new(),
            delay: std::time::Duration::ZERO,
        }
    }

    /// The whole body.
    pub(crate) fn body(&self) -> Vec<u8> {
        self.chunks.concat()
    }
}

/// One exchange in the upstream's own log.
#[derive(Debug, Clone)]
pub(crate) struct Logged {
    /// The request.
    pub request: Request,
    /// The status it answered.
    pub status: u16,
    /// The response body it wrote.
    pub response: Vec<u8>,
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

/// A running upstream.
pub(crate) struct Upstream {
    /// `http://127.0.0.1:PORT`.
    pub origin: String,
    log: Arc<Mutex<Vec<Logged>>>,
}

impl Upstream {
    /// Starts an upstream answering with `script`.
    pub(crate) fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let shared = Arc::clone(&log);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (log, script) = (Arc::clone(&shared), Arc::clone(&script));
                std::thread::spawn(move || serve(stream, &*script, &log));
            }
        });
        Upstream { origin, log }
    }

    /// Every exchange so far, in the order they ended.
    pub(crate) fn log(&self) -> Vec<Logged> {
        self.log.lock().unwrap().clone()
    }
}

/// Serves the requests of one connection (kept alive) until the client closes it.
fn serve(stream: TcpStream, script: &Script, log: &Mutex<Vec<Logged>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader) {
        let reply = script(&request);
        std::thread::sleep(reply.delay);
        let extra: String = reply
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect();
        let head = format!(
            "HTTP/1.1 {} Scripted\r\ncontent-type: {}\r\n{extra}content-length: {}\r\n\r\n",
            reply.status,
            reply.content_type,
            reply.chunks.iter().map(Vec::len).sum::<usize>()
        );
        if writer.write_all(head.as_bytes()).is_err() {
            return;
        }
        for chunk in &reply.chunks {
            if writer
                .write_all(chunk)
                .and_then(|()| writer.flush())
                .is_err()
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        log.lock().unwrap().push(Logged {
            request,
            status: reply.status,
            response: reply.body(),
        });
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

// --- answers in each provider's wire format --------------------------------------------

/// A Responses stream whose one output item is `item`.
pub(crate) fn responses_stream(model: &str, id: &str, item: Value) -> Reply {
    let usage = json!({"input_tokens": 42, "output_tokens": 7, "total_tokens": 49});
    let done = json!({"id": id, "object": "response", "created_at": 1, "status": "completed",
                      "model": model, "output": [item], "usage": usage});
    let mut started = done.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    started["usage"] = Value::Null;
    Reply::sse(&[
        (
            Some("response.created"),
            json!({"type": "response.created", "response": started, "sequence_number": 0}),
        ),
        (
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "output_index": 0, "item": item, "sequence_number": 1}),
        ),
        (
            Some("response.output_item.done"),
            json!({"type": "response.output_item.done", "output_index": 0, "item": item, "sequence_number": 2}),
        ),
        (
            Some("response.completed"),
            json!({"type": "response.completed", "response": done, "sequence_number": 3}),
        ),
    ])
}

/// A Responses output message with `text`.
pub(crate) fn responses_message(text: &str) -> Value {
    json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A Responses function call.
pub(crate) fn responses_call(call_id: &str, name: &str, arguments: &Value) -> Value {
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
           "name": name, "arguments": arguments.to_string(), "status": "completed"})
}

/// A Messages stream with these content `blocks` (text or tool_use) and `stop_reason`.
pub(crate) fn messages_stream(model: &str, id: &str, blocks: &[Value], stop_reason: &str) -> Reply {
    let mut events = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
               "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
               "usage": {"input_tokens": 42, "output_tokens": 1}}}),
    )];
    for (i, b) in blocks.iter().enumerate() {
        if b["type"] == "text" {
            events.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": i,
                "content_block": {"type": "text", "text": ""}}),
            ));
            events.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": i,
                "delta": {"type": "text_delta", "text": b["text"]}}),
            ));
        } else {
            events.push((Some("content_block_start"), json!({"type": "content_block_start", "index": i,
                "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})));
            events.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": i,
                "delta": {"type": "input_json_delta", "partial_json": b["input"].to_string()}}),
            ));
        }
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": i}),
        ));
    }
    events.push((
        Some("message_delta"),
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": 7}}),
    ));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    Reply::sse(&events)
}

/// A Chat Completions response (not streamed) asking for one tool call.
pub(crate) fn chat_tool_call(model: &str, call_id: &str, name: &str, arguments: &Value) -> Reply {
    Reply::json(
        200,
        &json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": null,
                    "tool_calls": [{"id": call_id, "type": "function",
                                    "function": {"name": name, "arguments": arguments.to_string()}}]}}],
                "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}}),
    )
}

/// A streamed Chat Completions answer with `text`, in two deltas.
pub(crate) fn chat_stream(model: &str, text: &str) -> Reply {
    let (a, b) = text.split_at(text.len() / 2);
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut r = Reply::sse(&[
        (
            None,
            chunk(json!({"role": "assistant", "content": a}), Value::Null),
        ),
        (None, chunk(json!({"content": b}), Value::Null)),
        (None, chunk(json!({}), json!("stop"))),
        (
            None,
            json!({"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1, "model": model,
                   "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53}}),
        ),
    ]);
    r.chunks.push(b"data: [DONE]\n\n".to_vec());
    r
}
