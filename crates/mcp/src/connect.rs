//! Starting or reaching one declared server: a stdio server spawned ([`crate::spawn`]) or
//! a Streamable HTTP server reached ([`crate::http`]), then initialised and its tools
//! listed within its time limit; a failure says what the server did (its exit status, its
//! stderr, what an installed server cannot see).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use provrun_sandbox::ConfinedChild;
use provrun_tools::{McpServerSpec, McpTransportKind};
use serde_json::{Value, json};

use crate::error::server_err;
use crate::server::{Server, describe_child, settle};
use crate::session::{ConnectOptions, initialise};
use crate::{McpError, http, spawn, tap};

/// Marks the server ready (from here on, a line on its stdout that is not JSON is no
/// banner) and returns the lines it printed before, with a count of those left out.
fn take_banner(seen: Option<&tap::Shared>) -> Vec<String> {
    match seen {
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
    }
}

/// Start or reach the server `spec` declares, initialise it and list its tools within its
/// `timeout_s`.
pub(crate) async fn connect_one(
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
            let spawned = spawn::spawn(spec, options)?;
            child = Some(spawned.child);
            home = Some(spawned.home);
            seen = Some(spawned.seen);
            grants = spawned.grants;
            tokio::time::timeout(limit, initialise((spawned.stdout, spawned.stdin))).await
        }
        McpTransportKind::Http => http::start(spec, limit).await?,
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
        if spec.transport() == McpTransportKind::Stdio {
            spawn::start_hints(spec, options, &grants)
        } else {
            String::new()
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
        McpTransportKind::Stdio => spawn::endpoint(spec, options, child.as_ref(), &grants),
        _ => http::endpoint(spec),
    };
    let banner = take_banner(seen.as_ref());
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
