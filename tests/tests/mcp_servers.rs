//! The MCP client (`provrun-mcp`) against a real MCP server built on rmcp's server side
//! (`src/bin/mcp-test-server.rs`): over stdio (started confined) and over Streamable HTTP
//! on loopback, well-behaved and misbehaving.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use provrun_mcp::{ConnectOptions, McpError, McpServers};
use provrun_tools::McpServerSpec;

const SERVER: &str = env!("CARGO_BIN_EXE_mcp-test-server");
const CALL_LIMIT: Duration = Duration::from_secs(20);

fn options() -> ConnectOptions {
    ConnectOptions {
        allow_degraded_sandbox: true,
        ..ConnectOptions::default()
    }
}

fn stdio(name: &str, args: &[&str]) -> McpServerSpec {
    McpServerSpec {
        name: name.to_string(),
        command: Some(SERVER.to_string()),
        args: args.iter().map(|a| a.to_string()).collect(),
        timeout_s: Some(20),
        ..McpServerSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_lists_named_tools_and_answers_calls_with_claims() {
    let mut spec = stdio("test", &[]);
    spec.env.insert("MCP_TEST_GREETING".into(), "hello".into());
    let servers = McpServers::connect(&[spec], &options()).await.unwrap();
    let names: Vec<&str> = servers.tools().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "test_add",
            "test_delete_note",
            "test_echo",
            "test_env",
            "test_fail"
        ]
    );
    let destructive: Vec<&str> = servers
        .tools()
        .filter(|t| t.destructive)
        .map(|t| t.remote_name.as_str())
        .collect();
    assert_eq!(
        destructive,
        ["delete_note"],
        "destructiveHint maps, readOnlyHint clears"
    );

    let echo = servers
        .call("test_echo", r#"{"text":"hi"}"#, CALL_LIMIT)
        .await
        .unwrap();
    assert!(echo.output.ok);
    assert_eq!(echo.output.content, "echo: hi");
    assert_eq!(echo.evidence["tool"], "echo");
    assert_eq!(echo.evidence["server"]["transport"], "stdio");
    let real = std::fs::canonicalize(SERVER).unwrap();
    assert_eq!(
        echo.evidence["server"]["command"][0],
        real.display().to_string()
    );
    assert_eq!(echo.evidence["claims"]["confidence"], "parsed");
    assert_eq!(
        echo.evidence["claims"]["implementation"]["name"],
        "provrun-test-server"
    );
    assert_eq!(echo.evidence["claims"]["annotations"]["readOnlyHint"], true);

    let add = servers
        .call("test_add", r#"{"a":2,"b":1.5}"#, CALL_LIMIT)
        .await
        .unwrap();
    assert_eq!(add.output.content, "3.5");
    assert_eq!(add.evidence["claims"]["structured_content"]["sum"], 3.5);

    let fail = servers.call("test_fail", "", CALL_LIMIT).await.unwrap();
    assert!(!fail.output.ok, "isError is a failed result");
    assert_eq!(fail.output.content, "it failed, on purpose");
    assert_eq!(fail.evidence["claims"]["is_error"], true);

    // Only what the declaration names reaches the server's environment.
    let env = servers.call("test_env", "{}", CALL_LIMIT).await.unwrap();
    assert!(
        env.output.content.contains("MCP_TEST_GREETING=hello"),
        "{}",
        env.output.content
    );
    assert!(
        !env.output.content.contains("CARGO="),
        "{}",
        env.output.content
    );

    let bad = servers.call("test_echo", "[1]", CALL_LIMIT).await.unwrap();
    assert!(!bad.output.ok && bad.output.content.contains("JSON object"));
    assert!(servers.call("nope", "{}", CALL_LIMIT).await.is_none());

    let described = servers.describe(|_| "digest".to_string());
    assert_eq!(described[0]["implementation"]["version"], "1.2.3");
    assert_eq!(described[0]["tools"][0]["schema_sha256"], "digest");
    servers.shutdown().await;
    let after = servers
        .call("test_echo", r#"{"text":"x"}"#, CALL_LIMIT)
        .await
        .unwrap();
    assert!(
        !after.output.ok,
        "a call after shutdown fails: {}",
        after.output.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixes_and_tool_filters_shape_the_list() {
    let mut spec = stdio("test", &[]);
    spec.prefix = Some(String::new());
    spec.tools = Some(vec!["echo".into()]);
    let servers = McpServers::connect(&[spec.clone()], &options())
        .await
        .unwrap();
    let names: Vec<&str> = servers.tools().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo"]);
    servers.shutdown().await;

    spec.tools = Some(vec!["echo".into(), "missing_one".into()]);
    let err = McpServers::connect(&[spec], &options())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("missing_one") && err.contains("does not list"),
        "{err}"
    );
}

/// The HTTP server as a child process; killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(token: Option<&str>) -> HttpServer {
        let mut cmd = Command::new(SERVER);
        cmd.args(["--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(t) = token {
            cmd.env("MCP_TEST_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        HttpServer {
            child,
            url: line.trim().to_string(),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http(name: &str, url: &str) -> McpServerSpec {
    McpServerSpec {
        name: name.to_string(),
        url: Some(url.to_string()),
        timeout_s: Some(20),
        ..McpServerSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_on_loopback_is_reached_with_a_bearer_token_from_the_environment() {
    // PATH is set in every test process: its value serves as the token.
    let token = std::env::var("PATH").unwrap();
    let server = HttpServer::start(Some(&token));
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );

    let mut spec = http("web", &server.url);
    spec.bearer_token_env = Some("PATH".into());
    let servers = McpServers::connect(&[spec], &options()).await.unwrap();
    let call = servers
        .call("web_add", r#"{"a":1,"b":2}"#, CALL_LIMIT)
        .await
        .unwrap();
    assert!(call.output.ok, "{}", call.output.content);
    assert_eq!(call.output.content, "3");
    assert_eq!(call.evidence["server"]["transport"], "streamable_http");
    assert_eq!(call.evidence["server"]["url"], server.url);
    assert!(
        !call.evidence.to_string().contains(&token),
        "the token never reaches evidence"
    );
    servers.shutdown().await;

    // Without the token, or with a variable that is not set: clear start-up errors.
    let err = McpServers::connect(&[http("web", &server.url)], &options())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("MCP server `web`: initialize failed"),
        "{err}"
    );
    let mut unset = http("web", &server.url);
    unset.bearer_token_env = Some("PROVRUN_TEST_SURELY_UNSET_VARIABLE".into());
    let err = McpServers::connect(&[unset], &options())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("PROVRUN_TEST_SURELY_UNSET_VARIABLE") && err.contains("not set"),
        "{err}"
    );

    // A server that is gone: a start-up error, not a hang.
    let url = server.url.clone();
    drop(server);
    let mut gone = http("web", &url);
    gone.timeout_s = Some(5);
    let err = McpServers::connect(&[gone], &options())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("MCP server `web`: "), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_mid_call_gives_a_failed_result_naming_its_exit() {
    let servers = McpServers::connect(&[stdio("bad", &["--mode", "crash"])], &options())
        .await
        .unwrap();
    let call = servers
        .call("bad_echo", r#"{"text":"x"}"#, CALL_LIMIT)
        .await
        .unwrap();
    assert!(!call.output.ok);
    let text = &call.output.content;
    assert!(
        text.starts_with("MCP server `bad` failed the call"),
        "{text}"
    );
    assert!(text.contains("crashing in the middle of a call"), "{text}");
    assert!(
        text.contains("the server process ended (exit code 3)"),
        "{text}"
    );
    assert!(call.evidence["error"].is_string());
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_hangs_or_sends_garbage_times_out_with_a_clear_message() {
    for mode in ["hang", "garbage"] {
        let servers = McpServers::connect(&[stdio("bad", &["--mode", mode])], &options())
            .await
            .unwrap();
        let call = servers
            .call("bad_echo", r#"{"text":"x"}"#, Duration::from_millis(1500))
            .await
            .unwrap();
        assert!(!call.output.ok, "{mode}");
        assert!(
            call.output.content.contains("gave no answer within 1.5 s"),
            "{mode}: {}",
            call.output.content
        );
        assert_eq!(
            call.output
                .content
                .contains("it sent a line that is not JSON-RPC: `this is not JSON-RPC {{{`"),
            mode == "garbage",
            "{mode}: {}",
            call.output.content
        );
        servers.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_failures_are_clear_errors() {
    let err = McpServers::connect(&[stdio("bad", &["--mode", "bad-schema"])], &options())
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::InvalidSchema { .. }), "{err:?}");
    let err = err.to_string();
    assert!(
        err.contains("`broken`") && err.contains("#/properties/x/type"),
        "{err}"
    );

    let mut silent = stdio("mute", &["--mode", "silent"]);
    silent.timeout_s = Some(3);
    let err = McpServers::connect(&[silent], &options())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("did not initialise and list its tools within 3 s"),
        "{err}"
    );
    assert!(
        err.contains("silent, never answering"),
        "its stderr is shown: {err}"
    );

    let mut missing = stdio("gone", &[]);
    missing.command = Some("/nonexistent/mcp-server".into());
    let err = McpServers::connect(&[missing], &options())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("MCP server `gone`"), "{err}");

    // A later server's failure stops the ones already started (the call below fails).
    let err = McpServers::connect(&[stdio("ok", &[]), stdio("ok", &[])], &options())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("declared twice"), "{err}");
    assert!(Path::new(SERVER).is_file());
}
