//! `provrun tools` and `provrun skills`: what a run would be offered, one a line for a
//! person or as JSON for a script (names and descriptions made inert either way).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, ToolListing, fail, inert, registry, shell_word};

/// One line on an MCP server a tools folder declares: how it is reached, and what its
/// tools are called.
fn mcp_server_summary(server: &provrun_tools::McpServerSpec) -> String {
    let reached = match (&server.command, &server.url) {
        (Some(command), _) => {
            let mut words = vec![shell_word(command)];
            words.extend(server.args.iter().map(|a| shell_word(a)));
            format!("stdio: {}", words.join(" "))
        }
        (None, Some(url)) => format!("http: {url}"),
        (None, None) => "declared elsewhere".to_string(),
    };
    let prefix = server.tool_prefix();
    let named = if prefix.is_empty() {
        "its tools keep their names".to_string()
    } else {
        format!("its tools are named {prefix}_TOOL")
    };
    format!("MCP server ({reached}); {named}, listed when a run connects")
}

/// An MCP server as `provrun tools --json` lists it: an entry beside the tools with the
/// same four keys (`schema` is `null`: the server lists its tools when a run connects,
/// and `mode` is `remote_mcp`) and an `mcp_server` object with the declaration.
/// Environment values are not printed, only their names.
fn mcp_server_listing(server: &provrun_tools::McpServerSpec) -> serde_json::Value {
    let transport = match server.transport() {
        provrun_tools::McpTransportKind::Stdio => "stdio",
        provrun_tools::McpTransportKind::Http => "http",
        provrun_tools::McpTransportKind::Reference => "reference",
    };
    serde_json::json!({
        "name": server.name,
        "description": mcp_server_summary(server),
        "schema": null,
        "mode": provrun_tools::ToolMode::RemoteMcp,
        "mcp_server": {
            "transport": transport,
            "command": server.command,
            "args": server.args,
            "env": server.env.keys().collect::<Vec<_>>(),
            "url": server.url,
            "bearer_token_env": server.bearer_token_env,
            "prefix": server.tool_prefix(),
            "tools": server.tools,
            "timeout_s": server.startup_timeout_s(),
            "destructive": server.destructive,
        },
    })
}

/// `provrun skills`: the skills a spec (or, without one, the default folders) offers.
pub(crate) fn skills(spec: Option<&Path>, json: bool) -> u8 {
    let spec = match spec {
        Some(path) => match provrun_agent::AgentSpec::load(path) {
            Ok(spec) => spec,
            Err(e) => return fail(EXIT_USAGE, e.to_string()),
        },
        None => provrun_agent::AgentSpec::new("skills", "test"),
    };
    let found = match spec.visible_skills() {
        Ok(found) => found,
        Err(e) => return fail(EXIT_USAGE, e.to_string()),
    };
    let mut stdout = std::io::stdout().lock();
    let written = if json {
        let listing: Vec<serde_json::Value> = found
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "description": s.description,
                    "path": s.path.display().to_string(),
                    "sha256": s.sha256,
                })
            })
            .collect();
        serde_json::to_string_pretty(&listing)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(stdout, "{}", inert::inert_json(&text)))
    } else {
        found.iter().try_for_each(|s| {
            writeln!(
                stdout,
                "{:<20} {}  ({})",
                inert::inert(&s.name),
                inert::inert(&s.description),
                inert::inert(&s.path.display().to_string())
            )
        })
    };
    match written {
        Ok(()) => EXIT_OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(e) => fail(EXIT_FAILED, format!("cannot write the listing: {e}")),
    }
}

/// `provrun tools`: the registered tools and the MCP servers the tools folders declare.
pub(crate) fn tools(json: bool, dirs: &[PathBuf]) -> u8 {
    let registry = match registry(dirs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut stdout = std::io::stdout().lock();
    let written = if json {
        let mut listing: Vec<serde_json::Value> = Vec::new();
        for t in registry.iter() {
            let tool = ToolListing {
                name: t.name(),
                description: t.description(),
                schema: t.schema(),
                mode: t.mode(),
            };
            listing.push(serde_json::to_value(tool).unwrap_or_default());
        }
        listing.extend(registry.mcp_servers().map(mcp_server_listing));
        serde_json::to_string_pretty(&listing)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(stdout, "{}", inert::inert_json(&text)))
    } else {
        registry
            .iter()
            .try_for_each(|t| {
                let flag = if t.is_destructive() {
                    " (destructive)"
                } else {
                    ""
                };
                writeln!(
                    stdout,
                    "{:<16} {}{flag}",
                    inert::inert(t.name()),
                    inert::inert(t.description())
                )
            })
            .and_then(|()| {
                registry.mcp_servers().try_for_each(|server| {
                    let flag = if server.destructive {
                        " (destructive)"
                    } else {
                        ""
                    };
                    writeln!(
                        stdout,
                        "{:<16} {}{flag}",
                        inert::inert(&server.name),
                        inert::inert(&mcp_server_summary(server))
                    )
                })
            })
    };
    match written {
        Ok(()) => EXIT_OK,
        // A closed pipe (`provrun tools | head`) is not an error worth a message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(e) => fail(EXIT_FAILED, format!("cannot write the tool list: {e}")),
    }
}
