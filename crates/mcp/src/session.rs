//! What starting any server shares, below the transports: the [`ConnectOptions`] for
//! stdio servers, and [`initialise`], which opens the MCP session over a transport and
//! lists the server's tools. `connect` picks a transport (`spawn`, `http`); both end here.

use std::path::PathBuf;

use provrun_sandbox::Limits;
use provrun_sandbox::roots::HostRoot;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::transport::IntoTransport;
use rmcp::{RoleClient, ServiceExt};

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
    /// The run's staged inputs, which a stdio server sees read-only at `/input` as
    /// `run_command` does; `None`: an empty `/input` of its own.
    pub input: Option<PathBuf>,
}

/// An initialised session and the tools the server listed.
pub(crate) type Session = (
    RunningService<RoleClient, ClientConfig>,
    Vec<rmcp::model::Tool>,
);

/// How a start-up went: the session, or what failed (`initialize`, `tools/list`), or no
/// answer within the time limit.
pub(crate) type Started = Result<Result<Session, String>, tokio::time::error::Elapsed>;

/// Initialise the session over `transport` and list the server's tools.
pub(crate) async fn initialise<T, E, A>(transport: T) -> Result<Session, String>
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
