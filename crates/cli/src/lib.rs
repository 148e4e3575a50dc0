//! The `provrun` command-line interface, as a library so tests can drive it in-process.
//!
//! Only `provrun tools` exists so far; `run`, `verify`, `replay`, `show` and `resume` land
//! with the CLI issue. Flags, exit codes and output formats are a contract (design.md §7):
//! they only ever grow.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use provrun_tools::ToolRegistry;
use serde::Serialize;

/// Exit code for a usage or spec error (nothing was written).
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, Parser)]
#[command(name = "provrun", version, about = "Run LLM agents with provenance")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the registered tools with their schemas.
    Tools {
        /// Print one JSON list of `{name, description, schema, mode}`.
        #[arg(long)]
        json: bool,
        /// A tools folder of manifests to load as well (repeatable).
        #[arg(long = "tools-dir", value_name = "DIR")]
        tools_dirs: Vec<std::path::PathBuf>,
    },
}

/// One tool as `provrun tools --json` prints it.
#[derive(Debug, Serialize)]
pub struct ToolListing<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// Its argument schema, `x-*` keys included.
    pub schema: &'a serde_json::Value,
    /// Where it runs.
    pub mode: provrun_tools::ToolMode,
}

/// Run the CLI with these arguments (the first is the program name) and return its exit code.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Tools { json, tools_dirs } => tools(json, &tools_dirs),
    }
}

fn tools(json: bool, dirs: &[std::path::PathBuf]) -> ExitCode {
    let registry = match ToolRegistry::new(dirs) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("provrun: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = if json {
        let listing: Vec<ToolListing<'_>> = registry
            .iter()
            .map(|t| ToolListing {
                name: t.name(),
                description: t.description(),
                schema: t.schema(),
                mode: t.mode(),
            })
            .collect();
        serde_json::to_writer_pretty(&mut stdout, &listing)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(stdout))
    } else {
        registry.iter().try_for_each(|t| {
            let flag = if t.is_destructive() {
                " (destructive)"
            } else {
                ""
            };
            writeln!(stdout, "{:<16} {}{flag}", t.name(), t.description())
        })
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`provrun tools | head`) is not an error worth a message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("provrun: cannot write the tool list: {e}");
            ExitCode::FAILURE
        }
    }
}
