//! A small MCP server for provrun's tests and the `examples/mcp` demo, built on rmcp's
//! server side: stdio by default, Streamable HTTP on loopback with `--http ADDR`.
//!
//! Tools: `echo(text)` (read-only), `add(a, b)` (read-only, structured content),
//! `delete_note(name)` (destructive), `fail()` (answers `isError`), `env()` (which of a
//! few environment variables it can see).
//!
//! `--mode` makes it misbehave: `crash` exits in the middle of any call, `hang` never
//! answers a call, `garbage` answers a call with a line that is not JSON-RPC and then
//! nothing, `bad-schema` lists a tool whose input schema is broken, `silent` never
//! answers `initialize`, `tasks` answers by hand (not through rmcp, whose tool type has no
//! `execution` field) and lists `sync` (`execution.taskSupport: "optional"`) and
//! `long_job` (`"required"`).
//!
//! `--banner TEXT` prints TEXT on stdout (a line that is not JSON) before serving.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Normal,
    Crash,
    Hang,
    Garbage,
    BadSchema,
    Silent,
    Tasks,
}

#[derive(Clone)]
struct TestServer {
    mode: Mode,
}

fn tool(v: Value) -> Tool {
    serde_json::from_value(v).expect("a valid tool")
}

fn tools(mode: Mode) -> Vec<Tool> {
    let mut t = vec![
        tool(json!({
            "name": "echo",
            "description": "Say the text back.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "annotations": {"readOnlyHint": true}
        })),
        tool(json!({
            "name": "add",
            "description": "Add two numbers.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
            "annotations": {"readOnlyHint": true, "title": "Adder"}
        })),
        tool(json!({
            "name": "delete_note",
            "description": "Delete a note (nothing is really deleted).",
            "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            "annotations": {"destructiveHint": true}
        })),
        tool(json!({
            "name": "fail",
            "description": "Always fails.",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}
        })),
        tool(json!({
            "name": "env",
            "description": "Which of HOME, PATH, MCP_TEST_GREETING and CARGO it can see.",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}
        })),
    ];
    if mode == Mode::BadSchema {
        t.push(tool(json!({
            "name": "broken",
            "description": "Its schema names a type that does not exist.",
            "inputSchema": {"type": "object", "properties": {"x": {"type": "strnig"}}}
        })));
    }
    t
}

fn result(v: Value) -> CallToolResponse {
    let r: CallToolResult = serde_json::from_value(v).expect("a valid result");
    CallToolResponse::Complete(r)
}

fn text(t: impl Into<String>) -> Value {
    json!({"type": "text", "text": t.into()})
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("provrun-test-server", "1.2.3");
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(serde_json::from_value(json!({"tools": tools(self.mode)})).expect("a tool list"))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.mode {
            Mode::Crash => {
                eprintln!("mcp-test-server: crashing in the middle of a call, on purpose");
                std::process::exit(3);
            }
            Mode::Hang => std::future::pending::<()>().await,
            Mode::Garbage => {
                use std::io::Write as _;
                let mut out = std::io::stdout();
                let _ = out.write_all(b"this is not JSON-RPC {{{\n");
                let _ = out.flush();
                std::future::pending::<()>().await;
            }
            _ => {}
        }
        let args = request.arguments.unwrap_or_default();
        let str_arg = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Ok(match request.name.as_ref() {
            "echo" => result(json!({"content": [text(format!("echo: {}", str_arg("text")))]})),
            "add" => {
                let n = |k: &str| args.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                let sum = n("a") + n("b");
                result(json!({
                    "content": [text(format!("{sum}"))],
                    "structuredContent": {"sum": sum}
                }))
            }
            "delete_note" => {
                result(json!({"content": [text(format!("deleted {}", str_arg("name")))]}))
            }
            "fail" => result(json!({"content": [text("it failed, on purpose")], "isError": true})),
            "env" => {
                let seen: Vec<String> = ["HOME", "PATH", "MCP_TEST_GREETING", "CARGO"]
                    .iter()
                    .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
                    .collect();
                result(json!({"content": [text(seen.join("\n"))]}))
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool `{other}`"),
                    None,
                ));
            }
        })
    }
}

fn main() {
    let mut mode = Mode::Normal;
    let mut http: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mode" => {
                mode = match args.next().as_deref() {
                    Some("crash") => Mode::Crash,
                    Some("hang") => Mode::Hang,
                    Some("garbage") => Mode::Garbage,
                    Some("bad-schema") => Mode::BadSchema,
                    Some("silent") => Mode::Silent,
                    Some("tasks") => Mode::Tasks,
                    Some("normal") => Mode::Normal,
                    other => {
                        eprintln!("mcp-test-server: unknown mode {other:?}");
                        std::process::exit(2);
                    }
                }
            }
            "--http" => http = args.next(),
            "--banner" => {
                use std::io::Write as _;
                let text = args.next().unwrap_or_default();
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
            other => {
                eprintln!("mcp-test-server: unknown argument `{other}`");
                std::process::exit(2);
            }
        }
    }
    if mode == Mode::Tasks {
        serve_tasks_by_hand();
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        if mode == Mode::Silent {
            eprintln!("mcp-test-server: silent, never answering");
            std::future::pending::<()>().await;
        }
        let server = TestServer { mode };
        match http {
            None => match server.serve(rmcp::transport::stdio()).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => eprintln!("mcp-test-server: {e}"),
            },
            Some(addr) => serve_http(server, &addr).await,
        }
    });
}

/// Serve over Streamable HTTP at `addr` (loopback), printing the endpoint URL on stdout.
/// With `MCP_TEST_TOKEN` set, a request without `Authorization: Bearer <that token>` is
/// refused with 401.
async fn serve_http(server: TestServer, addr: &str) {
    use http_body_util::BodyExt as _;
    use hyper_util::rt::TokioIo;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    let local = listener.local_addr().expect("local address");
    println!("http://{local}/mcp");
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let token = std::env::var("MCP_TEST_TOKEN").ok();
    while let Ok((stream, _)) = listener.accept().await {
        let service = service.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let hyper_service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let mut service = service.clone();
                    let token = token.clone();
                    async move {
                        use tower_service::Service as _;
                        if let Some(token) = token {
                            let want = format!("Bearer {token}");
                            let got = req
                                .headers()
                                .get("authorization")
                                .and_then(|v| v.to_str().ok());
                            if got != Some(want.as_str()) {
                                let mut refused = hyper::Response::new(
                                    http_body_util::Full::new(bytes::Bytes::from_static(
                                        b"no token",
                                    ))
                                    .boxed(),
                                );
                                *refused.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                                return Ok::<_, std::convert::Infallible>(refused);
                            }
                        }
                        service.call(req).await
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), hyper_service)
                .await;
        });
    }
}

/// `--mode tasks`: JSON-RPC over stdio written by hand, listing one tool that may and one
/// that must be called as an MCP task.
fn serve_tasks_by_hand() {
    use std::io::{BufRead as _, Write as _};
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = request.get("id").cloned() else {
            continue; // a notification
        };
        let result = match request["method"].as_str().unwrap_or_default() {
            "initialize" => json!({
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "provrun-test-tasks", "version": "1.0.0"}
            }),
            "tools/list" => json!({"tools": [
                {"name": "sync", "description": "Answers at once.",
                 "inputSchema": {"type": "object"},
                 "annotations": {"readOnlyHint": true},
                 "execution": {"taskSupport": "optional"}},
                {"name": "long_job", "description": "Only runs as a task.",
                 "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "required"}}
            ]}),
            "tools/call" if request["params"]["name"] == "sync" => {
                json!({"content": [{"type": "text", "text": "synced"}]})
            }
            "tools/call" => {
                let error = json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32600, "message": "requires task augmentation"}});
                let _ = writeln!(out, "{error}");
                let _ = out.flush();
                continue;
            }
            _ => json!({}),
        };
        let _ = writeln!(
            out,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        );
        let _ = out.flush();
    }
}
