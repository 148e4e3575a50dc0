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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banner_before_initialisation_is_recorded_not_swallowed() {
    let spec = stdio("b", &["--banner", "Starting demo server v1 (stdio)"]);
    let servers = McpServers::connect(&[spec], &options()).await.unwrap();
    assert_eq!(
        servers.tools().count(),
        5,
        "the banner does not stop the server"
    );
    let described = servers.describe(|_| String::new());
    assert_eq!(
        described[0]["stdout_before_ready"],
        serde_json::json!(["Starting demo server v1 (stdio)"])
    );
    let quiet = McpServers::connect(&[stdio("q", &[])], &options())
        .await
        .unwrap();
    assert!(
        quiet.describe(|_| String::new())[0]
            .get("stdout_before_ready")
            .is_none()
    );
    servers.shutdown().await;
    quiet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_that_require_tasks_are_left_out_with_a_reason_and_execution_is_recorded() {
    let spec = stdio("t", &["--mode", "tasks"]);
    let servers = McpServers::connect(&[spec], &options()).await.unwrap();
    let names: Vec<&str> = servers.tools().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["t_sync"], "long_job needs tasks: not offered");
    let sync = servers.tools().next().unwrap();
    assert_eq!(
        sync.execution,
        Some(serde_json::json!({"taskSupport": "optional"}))
    );
    let described = servers.describe(|_| String::new());
    assert_eq!(
        described[0]["tools"][0]["execution"]["taskSupport"],
        "optional"
    );
    let left_out = &described[0]["left_out"][0];
    assert_eq!(left_out["tool"], "long_job");
    assert_eq!(left_out["execution"]["taskSupport"], "required");
    assert!(
        left_out["reason"].as_str().unwrap().contains("taskSupport"),
        "{left_out}"
    );
    // What is offered works; the recording rebuilds the same tool, execution included.
    let done = servers.call("t_sync", "{}", CALL_LIMIT).await.unwrap();
    assert!(done.output.ok, "{}", done.output.content);
    assert_eq!(done.output.content, "synced");
    let rebuilt = provrun_mcp::McpTool::recorded(&described);
    assert_eq!(rebuilt, servers.tools().cloned().collect::<Vec<_>>());
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_read_only_and_limits_are_recorded_with_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut spec = stdio("n", &[]);
    spec.network = true;
    spec.read_only = vec![data.display().to_string()];
    spec.limits = Some(provrun_tools::McpLimits {
        memory_bytes: Some(8 << 30),
        ..Default::default()
    });
    let servers = McpServers::connect(&[spec, stdio("plain", &[])], &options())
        .await
        .unwrap();
    let described = servers.describe(|_| String::new());
    let endpoint = &described[0]["endpoint"];
    assert_eq!(endpoint["network"], true);
    assert_eq!(
        endpoint["read_only"],
        serde_json::json!([std::fs::canonicalize(&data).unwrap()])
    );
    assert_eq!(endpoint["limits"]["memory_bytes"], 8u64 << 30);
    assert_eq!(
        endpoint["limits"]["cpu_s"],
        provrun_tools::DEFAULT_MCP_CPU_S
    );
    let plain = &described[1]["endpoint"];
    assert_eq!(plain["network"], false);
    assert_eq!(
        plain["limits"]["memory_bytes"],
        provrun_tools::DEFAULT_MCP_MEMORY_BYTES
    );
    servers.shutdown().await;
}

/// The message of a start-up that must fail.
async fn refused(spec: McpServerSpec, options: &ConnectOptions) -> String {
    match McpServers::connect(&[spec], options).await {
        Ok(_) => panic!("the server should not start"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_path_may_not_be_the_runs_own_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let host = tmp.path().join("host");
    std::fs::create_dir_all(bundle.join("output")).unwrap();
    std::fs::create_dir_all(&host).unwrap();
    let scratch_parent = tmp.path().join("tmp");
    std::fs::create_dir_all(&scratch_parent).unwrap();
    let options = ConnectOptions {
        forbidden: provrun_sandbox::roots::run_roots(&bundle, &scratch_parent, &[], Some(&host)),
        ..options()
    };
    for (path, want) in [
        (bundle.join("output"), "/output (in the bundle)"),
        (host.clone(), "the host folder (--host-dir)"),
        (scratch_parent.clone(), "/scratch (made in TMPDIR)"),
        (tmp.path().to_path_buf(), "overlaps"),
    ] {
        let mut spec = stdio("r", &[]);
        spec.read_only = vec![path.display().to_string()];
        let message = refused(spec, &options).await;
        assert!(message.contains(want), "{}: {message}", path.display());
        assert!(message.starts_with("MCP server `r`"), "{message}");
    }
    let mut spec = stdio("r", &[]);
    spec.read_only = vec!["/".into()];
    assert!(refused(spec, &options).await.contains("holds `/input`"));
    let mut spec = stdio("r", &[]);
    spec.read_only = vec![tmp.path().join("nothing").display().to_string()];
    assert!(refused(spec, &options).await.contains("cannot be granted"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_servers_that_cannot_work_say_what_is_missing() {
    // npx downloads the server: without the network it cannot, and the message says so
    // (and what to do) instead of timing out.
    let mut npx = stdio("x", &[]);
    npx.command = Some("npx".into());
    npx.args = vec!["-y".into(), "@modelcontextprotocol/server-memory".into()];
    let message = refused(npx, &options()).await;
    assert!(message.contains("`npx` downloads the server"), "{message}");
    assert!(message.contains("network = true"), "{message}");
    assert!(message.contains("npm install --prefix"), "{message}");

    // A console script of a virtualenv: its first line names the venv's python.
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::os::unix::fs::symlink("/bin/sh", venv.join("bin/python3")).unwrap();
    let script = venv.join("bin/mcp-server-x");
    std::fs::write(
        &script,
        format!("#!{}\necho hi\n", venv.join("bin/python3").display()),
    )
    .unwrap();
    let mut s = stdio("v", &[]);
    s.command = Some(script.display().to_string());
    let message = refused(s, &options()).await;
    let venv_real = std::fs::canonicalize(&venv).unwrap();
    assert!(
        message.contains(&format!("add `{}` to `read_only`", venv_real.display())),
        "{message}"
    );

    // A Node-style server whose package folder is not visible: the start fails and the
    // message names the node_modules folder to grant.
    let pkg = tmp.path().join("srv/node_modules/demo/bin");
    std::fs::create_dir_all(&pkg).unwrap();
    let entry = pkg.join("server");
    std::fs::write(
        &entry,
        "#!/bin/sh\necho 'Cannot find package demo-dep' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&entry, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut n = stdio("node", &[]);
    n.command = Some(entry.display().to_string());
    let message = refused(n, &options()).await;
    let modules = std::fs::canonicalize(tmp.path().join("srv/node_modules")).unwrap();
    assert!(
        message.contains("Cannot find package demo-dep"),
        "{message}"
    );
    assert!(
        message.contains(&format!("add `{}` to `read_only`", modules.display())),
        "{message}"
    );
    // Granted, the hint goes away (the server still fails: it is only a script).
    let mut n = stdio("node", &[]);
    n.command = Some(entry.display().to_string());
    n.read_only = vec![modules.display().to_string()];
    let message = refused(n, &options()).await;
    assert!(!message.contains("add `"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_runs_under_its_own_limits_not_the_command_limits() {
    // A shell prints the address-space limit it runs under (a banner line), then becomes
    // the test server, which it is granted to read.
    let server = std::fs::canonicalize(SERVER).unwrap().display().to_string();
    let wrapped = |limits: Option<provrun_tools::McpLimits>| McpServerSpec {
        name: "l".into(),
        command: Some("/bin/sh".into()),
        args: vec![
            "-c".into(),
            "echo \"address space: $(ulimit -v)\"; exec \"$0\"".into(),
            server.clone(),
        ],
        read_only: vec![server.clone()],
        limits,
        timeout_s: Some(20),
        ..McpServerSpec::default()
    };
    let banner = |servers: &McpServers| {
        servers.describe(|_| String::new())[0]["stdout_before_ready"][0]
            .as_str()
            .unwrap()
            .to_string()
    };
    let support = provrun_sandbox::Sandbox::command_support();
    let rlimits = !support.degraded.iter().any(|l| l == "rlimits");
    let defaults = McpServers::connect(&[wrapped(None)], &options())
        .await
        .unwrap();
    let small = McpServers::connect(
        &[wrapped(Some(provrun_tools::McpLimits {
            memory_bytes: Some(12 << 30),
            ..Default::default()
        }))],
        &options(),
    )
    .await
    .unwrap();
    if rlimits {
        // `ulimit -v` counts KiB: 64 GiB by default (the commands' 4 GiB would kill a
        // Node server that uses WebAssembly), 12 GiB as declared.
        assert_eq!(banner(&defaults), format!("address space: {}", 64u64 << 20));
        assert_eq!(banner(&small), format!("address space: {}", 12u64 << 20));
    } else {
        eprintln!(
            "SKIP the limit figures: no rlimits layer here ({})",
            support.missing_summary()
        );
    }
    defaults.shutdown().await;
    small.shutdown().await;
}
