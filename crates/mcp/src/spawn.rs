//! Starting a stdio server as a confined child: its program resolved to a real host path,
//! what it is granted (`read_only`) checked, a sandbox with the run's staged inputs at
//! `/input` (read-only), an empty `/output` of its own and its own limits, its stdout read through the [`tap`]; and what
//! is recorded of it (its endpoint) or said when it does not start (what an installed
//! server cannot see).

use std::path::{Path, PathBuf};

use provrun_sandbox::{ConfinedChild, Limits, Sandbox};
use provrun_tools::McpServerSpec;
use serde_json::{Value, json};
use tokio::process::{ChildStdin, ChildStdout};

use crate::error::server_err;
use crate::session::ConnectOptions;
use crate::{McpError, installed, tap};

/// A started stdio server, its pipes not yet handed to the client.
pub(crate) struct Spawned {
    /// The server's process.
    pub(crate) child: ConfinedChild,
    /// Its sandbox (its scratch) and the folder of its own output (and its empty input
    /// when no inputs were given).
    pub(crate) home: (Sandbox, tempfile::TempDir),
    /// Its stdout, through the tap.
    pub(crate) stdout: tap::Tap<ChildStdout>,
    /// Its stdin.
    pub(crate) stdin: ChildStdin,
    /// What the tap sees.
    pub(crate) seen: tap::Shared,
    /// The host paths it may read (`read_only`), as real paths.
    pub(crate) grants: Vec<PathBuf>,
}

/// The program of a stdio declaration as a host path: a relative path with a `/`
/// resolves against `base`, and a path that exists becomes its real path; a bare name is
/// looked up on the sandbox's `PATH` as is.
pub(crate) fn resolve_program(command: &str, base: Option<&Path>) -> String {
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

/// Start the stdio server `spec` declares, confined, in a sandbox of its own. What an
/// installed server could not do without (an interpreter it cannot see, a launcher that
/// needs the network) is refused here, before it starts.
pub(crate) fn spawn(spec: &McpServerSpec, options: &ConnectOptions) -> Result<Spawned, McpError> {
    let command = spec.command.as_deref().unwrap_or_default();
    if let Some(problem) = installed::fetcher_problem(command, spec.network) {
        return Err(server_err(spec, problem));
    }
    let grants = installed::resolve_grants(
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
    let (own_input, output) = (dir.path().join("input"), dir.path().join("output"));
    for d in [&own_input, &output] {
        std::fs::create_dir_all(d)
            .map_err(|e| server_err(spec, format!("making its private folders: {e}")))?;
    }
    // The run's staged inputs when given (read-only, as for commands), else its own empty
    // folder.
    let input = options.input.clone().unwrap_or(own_input);
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
    let (stdout, stdin) = spawned
        .take_stdin()
        .zip(spawned.take_stdout())
        .ok_or_else(|| server_err(spec, "its pipes were not opened"))
        .and_then(|(stdin, stdout)| {
            let stdin = ChildStdin::from_std(stdin);
            let stdout = ChildStdout::from_std(stdout);
            stdin
                .and_then(|i| stdout.map(|o| (o, i)))
                .map_err(|e| server_err(spec, format!("its pipes: {e}")))
        })?;
    let (stdout, seen) = tap::Tap::new(stdout);
    Ok(Spawned {
        child: spawned,
        home: (sandbox, dir),
        stdout,
        stdin,
        seen,
        grants,
    })
}

/// What of an installed server the sandbox does not show, for a start-up failure: `; `
/// and the hints, or nothing.
pub(crate) fn start_hints(
    spec: &McpServerSpec,
    options: &ConnectOptions,
    grants: &[PathBuf],
) -> String {
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
        grants,
    );
    if hints.is_empty() {
        String::new()
    } else {
        format!("; {}", hints.join("; "))
    }
}

/// What was started, as `run_started.details.mcp` records it (observed): the command
/// line, the names of the environment variables it got, the confinement layers it ran
/// without, its grants, network and limits.
pub(crate) fn endpoint(
    spec: &McpServerSpec,
    options: &ConnectOptions,
    child: Option<&ConfinedChild>,
    grants: &[PathBuf],
) -> Value {
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
        "degraded": child.map(|c| c.degraded().to_vec()).unwrap_or_default(),
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
