//! Tools that run in MCP servers: the client side of the Model Context Protocol for
//! provrun, on the official Rust SDK (`rmcp`).
//!
//! [`McpServers::connect`] starts or reaches each declared server ([`McpServerSpec`]): a
//! stdio server is started for the run as a confined child (the `run_command` layers of
//! `provrun-sandbox`, in its own private, empty `/input`, `/output` and `/scratch`: it sees
//! none of the run's files and gets no environment but what its declaration names); a
//! Streamable HTTP server is reached at its URL, with an optional bearer token read from an
//! environment variable. A stdio server sees only the host paths its declaration grants
//! (`read_only`), has the network only with `network = true`, and runs under its own
//! limits (`McpServerSpec::limits`); what an installed server is missing (the interpreter
//! of a script's `#!` line, its `node_modules`, the network for `npx`) is named in the
//! start-up error. Each server's tools are listed, checked ([`check_input_schema`])
//! and named `PREFIX_tool` ([`exposed_name`]), ready to be offered to a model next to
//! built-in tools. [`McpServers::call`] runs one call with a time limit and gives back what
//! the model sees plus the evidence to record: who answered (observed) and what the server
//! claimed (structured content, `isError`, annotations — confidence `parsed`).
//!
//! Nothing a server sends can panic the caller: a server that crashes, hangs, sends lines
//! that are not JSON-RPC or lists a tool with a broken schema gives a start-up
//! [`McpError`] or a failed [`ToolOutput`](provrun_tools::ToolOutput) that says what
//! happened.

mod call;
mod error;
mod installed;
mod schema;
mod server;
mod tap;
mod tools;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use provrun_sandbox::roots::HostRoot;
use provrun_sandbox::{ConfinedChild, Limits, Sandbox};
use provrun_tools::{McpServerSpec, McpTransportKind};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::transport::IntoTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

pub use call::McpCall;
pub use error::McpError;
pub use schema::check_input_schema;
pub use tools::{McpTool, NAME_SEPARATOR, exposed_name};

use error::server_err;
use server::{Server, describe_child, settle};

/// How long the client waits for a server to close politely before it is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Settings for starting stdio servers.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Where a relative `command` path resolves (the agent spec's folder).
    pub base_dir: Option<PathBuf>,
    /// The quotas and limits of each server's private sandbox; its command limits
    /// (address space, CPU, processes, `/tmp`) are replaced by the server's own
    /// (`McpServerSpec::limits`).
    pub limits: Limits,
    /// Start stdio servers even where a confinement layer is missing.
    pub allow_degraded_sandbox: bool,
    /// The run's own folders (its bundle and `/output`, the folder `/scratch` is made in,
    /// the host folder): a server's `read_only` path may not be, hold or lie inside any
    /// of them.
    pub forbidden: Vec<HostRoot>,
}

/// The MCP servers of one run, connected, with their tools listed.
pub struct McpServers {
    servers: Vec<Server>,
    tools: BTreeMap<String, (usize, McpTool)>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|s| &s.spec.name)
                    .collect::<Vec<_>>(),
            )
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The program of a stdio declaration as a host path: a relative path with a `/`
/// resolves against `base`, and a path that exists becomes its real path; a bare name is
/// looked up on the sandbox's `PATH` as is.
fn resolve_program(command: &str, base: Option<&Path>) -> String {
    let path = Path::new(command);
    let joined = if command.contains('/') && path.is_relative() {
        base.unwrap_or(Path::new(".")).join(path)
    } else if path.is_absolute() {
        path.to_path_buf()
    } else {
        return command.to_string();
    };
    // The real file (no `..`, no links): that is what the sandbox binds and runs.
    std::fs::canonicalize(&joined)
        .or_else(|_| std::path::absolute(&joined))
        .unwrap_or(joined)
        .display()
        .to_string()
}

impl McpServers {
    /// No servers (a run without `[[mcp]]`).
    pub fn none() -> Self {
        Self {
            servers: Vec::new(),
            tools: BTreeMap::new(),
        }
    }

    /// Start or reach every server, initialise it and list its tools, each within its
    /// `timeout_s`. On any error the servers already started are stopped and the error
    /// says which server failed and why.
    pub async fn connect(
        specs: &[McpServerSpec],
        options: &ConnectOptions,
    ) -> Result<Self, McpError> {
        let mut out = Self::none();
        let mut names = BTreeSet::new();
        for spec in specs {
            if !names.insert(spec.name.clone()) {
                out.shutdown().await;
                return Err(server_err(spec, "is declared twice"));
            }
            match connect_one(spec, options).await {
                Ok((server, listed)) => {
                    let index = out.servers.len();
                    out.servers.push(server);
                    if let Err(e) = out.add_tools(index, listed) {
                        out.shutdown().await;
                        return Err(e);
                    }
                }
                Err(e) => {
                    out.shutdown().await;
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Every tool of every server, by exposed name.
    pub fn tools(&self) -> impl Iterator<Item = &McpTool> {
        self.tools.values().map(|(_, t)| t)
    }

    /// Whether no server is connected.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The servers and their tools as `run_started.details.mcp` records them: per server
    /// its name, transport, command or URL (with, for stdio, its `read_only` paths,
    /// `network` and `limits`), what it said it is (`implementation`, parsed), its tools
    /// with their full schemas and the SHA-256 of each schema's canonical JSON
    /// (`schema_sha256`, as in `run_started.tools`), the lines that were not JSON it
    /// printed before it was ready (`stdout_before_ready`), and the tools it listed that
    /// are not offered, with why (`left_out`).
    pub fn describe(&self, digest: impl Fn(&Value) -> String) -> Value {
        let servers: Vec<Value> = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let tools: Vec<Value> = self
                    .tools
                    .values()
                    .filter(|(idx, _)| *idx == i)
                    .map(|(_, t)| {
                        let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
                        v["schema_sha256"] = Value::String(digest(&t.schema));
                        v
                    })
                    .collect();
                let mut server = json!({
                    "name": s.spec.name,
                    "endpoint": s.endpoint,
                    "implementation": s.implementation,
                    "tools": tools,
                });
                if !s.banner.is_empty() {
                    server["stdout_before_ready"] = json!(s.banner);
                }
                if !s.left_out.is_empty() {
                    server["left_out"] = Value::Array(s.left_out.clone());
                }
                server
            })
            .collect();
        Value::Array(servers)
    }

    /// Close every connection and kill every stdio server's process tree. Idempotent;
    /// dropping the value kills the children too.
    pub async fn shutdown(&self) {
        for server in &self.servers {
            if let Some(service) = server.service.lock().await.take() {
                let _ = tokio::time::timeout(SHUTDOWN_GRACE, service.cancel()).await;
            }
            if let Some(child) = &server.child
                && let Ok(mut child) = child.lock()
            {
                child.kill();
            }
        }
    }
}

async fn initialise<T, E, A>(
    transport: T,
) -> Result<
    (
        RunningService<RoleClient, ClientConfig>,
        Vec<rmcp::model::Tool>,
    ),
    String,
>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("provrun", env!("CARGO_PKG_VERSION")),
    );
    let service = info
        .serve(transport)
        .await
        .map_err(|e| format!("initialize failed: {e}"))?;
    let tools = service
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    Ok((service, tools))
}

async fn connect_one(
    spec: &McpServerSpec,
    options: &ConnectOptions,
) -> Result<(Server, Vec<rmcp::model::Tool>), McpError> {
    spec.check(false).map_err(|m| server_err(spec, m))?;
    let limit = Duration::from_secs(spec.startup_timeout_s());
    let mut child = None;
    let mut home = None;
    let mut seen: Option<tap::Shared> = None;
    let mut grants: Vec<PathBuf> = Vec::new();
    let started = match spec.transport() {
        McpTransportKind::Stdio => {
            let command = spec.command.as_deref().unwrap_or_default();
            if let Some(problem) = installed::fetcher_problem(command, spec.network) {
                return Err(server_err(spec, problem));
            }
            grants = installed::resolve_grants(
                &spec.read_only,
                options.base_dir.as_deref(),
                &options.forbidden,
            )
            .map_err(|m| server_err(spec, m))?;
            let program = resolve_program(command, options.base_dir.as_deref());
            if Path::new(&program).is_absolute()
                && let Some(problem) = installed::interpreter_problem(Path::new(&program), &grants)
            {
                return Err(server_err(spec, problem));
            }
            let dir = tempfile::Builder::new()
                .prefix("provrun-mcp-")
                .tempdir()
                .map_err(|e| server_err(spec, format!("making its private folders: {e}")))?;
            let (input, output) = (dir.path().join("input"), dir.path().join("output"));
            for d in [&input, &output] {
                std::fs::create_dir_all(d)
                    .map_err(|e| server_err(spec, format!("making its private folders: {e}")))?;
            }
            let server_limits = spec.limits.unwrap_or_default();
            let limits = Limits {
                command_memory_bytes: server_limits.memory_bytes(),
                command_cpu_s: server_limits.cpu_s(),
                command_processes: server_limits.processes(),
                command_tmp_bytes: server_limits.tmp_bytes(),
                ..options.limits.clone()
            };
            let sandbox = Sandbox::with_temp_scratch(&input, &output, limits)
                .map_err(|source| McpError::Sandbox {
                    server: spec.name.clone(),
                    source,
                })?
                .allow_degraded_commands(options.allow_degraded_sandbox);
            let mut argv = vec![program.clone()];
            argv.extend(spec.args.iter().cloned());
            let env: Vec<(String, String)> = spec
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut read_only: Vec<PathBuf> = if Path::new(&program).is_absolute() {
                vec![PathBuf::from(&program)]
            } else {
                Vec::new()
            };
            read_only.extend(grants.iter().cloned());
            let mut spawned = sandbox
                .spawn_server(&argv, &env, &read_only, spec.network)
                .map_err(|source| McpError::Sandbox {
                    server: spec.name.clone(),
                    source,
                })?;
            let pipes = spawned
                .take_stdin()
                .zip(spawned.take_stdout())
                .ok_or_else(|| server_err(spec, "its pipes were not opened"))
                .and_then(|(stdin, stdout)| {
                    let stdin = tokio::process::ChildStdin::from_std(stdin);
                    let stdout = tokio::process::ChildStdout::from_std(stdout);
                    stdin
                        .and_then(|i| stdout.map(|o| (o, i)))
                        .map_err(|e| server_err(spec, format!("its pipes: {e}")))
                });
            let (stdout, stdin) = match pipes {
                Ok(p) => p,
                Err(e) => return Err(e),
            };
            child = Some(spawned);
            home = Some((sandbox, dir));
            let (stdout, shared) = tap::Tap::new(stdout);
            seen = Some(shared);
            tokio::time::timeout(limit, initialise((stdout, stdin))).await
        }
        McpTransportKind::Http => {
            let url = spec.url.clone().unwrap_or_default();
            let mut config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url,
                );
            if let Some(var) = &spec.bearer_token_env {
                let token = std::env::var(var).map_err(|_| {
                    server_err(
                        spec,
                        format!("`bearer_token_env` names `{var}`, which is not set"),
                    )
                })?;
                config = config.auth_header(token);
            }
            let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
            tokio::time::timeout(limit, initialise(transport)).await
        }
        McpTransportKind::Reference => {
            return Err(server_err(
                spec,
                "names neither `command` nor `url`, and no tools folder declares it",
            ));
        }
    };
    let state = |child: &mut Option<ConfinedChild>| match child {
        Some(c) => describe_child(c, seen.as_ref()),
        None => String::new(),
    };
    // What of an installed server the sandbox does not show, for a start-up failure.
    let hints = || {
        if spec.transport() != McpTransportKind::Stdio {
            return String::new();
        }
        let command = spec.command.as_deref().unwrap_or_default();
        let resolved = resolve_program(command, options.base_dir.as_deref());
        let joined = options
            .base_dir
            .as_deref()
            .unwrap_or(Path::new("."))
            .join(command);
        let hints = installed::start_hints(
            &[Path::new(&resolved), joined.as_path()],
            &spec.args,
            &grants,
        );
        if hints.is_empty() {
            String::new()
        } else {
            format!("; {}", hints.join("; "))
        }
    };
    let (service, tools) = match started {
        Ok(Ok(ok)) => ok,
        Ok(Err(message)) => {
            let child = child.map(Mutex::new);
            if let Some(c) = &child {
                settle(c).await;
            }
            let shown = child
                .and_then(|c| c.into_inner().ok())
                .map(|mut c| describe_child(&mut c, seen.as_ref()))
                .unwrap_or_default();
            return Err(server_err(spec, format!("{message}{shown}{}", hints())));
        }
        Err(_) => {
            return Err(server_err(
                spec,
                format!(
                    "did not initialise and list its tools within {} s (timeout_s){}{}",
                    limit.as_secs(),
                    state(&mut child),
                    hints()
                ),
            ));
        }
    };
    let implementation = service
        .peer_info()
        .and_then(|p| p.server_info.clone())
        .map(|i| json!({"name": i.name, "version": i.version}))
        .unwrap_or(Value::Null);
    let endpoint = match spec.transport() {
        McpTransportKind::Stdio => {
            let mut argv = vec![resolve_program(
                spec.command.as_deref().unwrap_or_default(),
                options.base_dir.as_deref(),
            )];
            argv.extend(spec.args.iter().cloned());
            json!({
                "name": spec.name,
                "transport": "stdio",
                "command": argv,
                "env": spec.env.keys().collect::<Vec<_>>(),
                "degraded": child.as_ref().map(|c| c.degraded().to_vec()).unwrap_or_default(),
                "read_only": grants,
                "network": spec.network,
                "limits": {
                    "memory_bytes": spec.limits.unwrap_or_default().memory_bytes(),
                    "cpu_s": spec.limits.unwrap_or_default().cpu_s(),
                    "processes": spec.limits.unwrap_or_default().processes(),
                    "tmp_bytes": spec.limits.unwrap_or_default().tmp_bytes(),
                },
            })
        }
        _ => json!({
            "name": spec.name,
            "transport": "streamable_http",
            "url": spec.url,
            "bearer_token_env": spec.bearer_token_env,
        }),
    };
    // From here on, a line that is not JSON is no banner.
    let banner = match &seen {
        Some(shared) => match shared.lock() {
            Ok(mut s) => {
                s.ready = true;
                let mut lines = s.banner.clone();
                if s.banner_dropped > 0 {
                    lines.push(format!("({} more lines left out)", s.banner_dropped));
                }
                lines
            }
            Err(_) => Vec::new(),
        },
        None => Vec::new(),
    };
    if !banner.is_empty() {
        tracing::warn!(server = %spec.name, lines = banner.len(), "MCP server printed lines that are not JSON before it was ready");
    }
    tracing::info!(server = %spec.name, tools = tools.len(), "MCP server ready");
    Ok((
        Server {
            spec: spec.clone(),
            endpoint,
            implementation,
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            child: child.map(Mutex::new),
            seen,
            banner,
            left_out: Vec::new(),
            _home: home,
        },
        tools,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_programs_resolve_against_the_base() {
        assert_eq!(resolve_program("cat", Some(Path::new("/x"))), "cat");
        assert_eq!(
            resolve_program("/nonexistent/cat", Some(Path::new("/x"))),
            "/nonexistent/cat"
        );
        assert_eq!(resolve_program("bin/s", Some(Path::new("/x"))), "/x/bin/s");
        // An existing file is resolved to its real path, `..` and links gone.
        assert_eq!(
            resolve_program("../bin/sh", Some(Path::new("/usr"))),
            std::fs::canonicalize("/bin/sh")
                .unwrap()
                .display()
                .to_string()
        );
    }
}
