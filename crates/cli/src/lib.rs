//! The `provrun` command-line interface, as a library so tests can drive it in-process.
//!
//! Subcommands: `run`, `verify`, `replay`, `show`, `view`, `diff`, `tools`, `resume`, `batch`,
//! `serve`, `keygen`, `sign`, `ledger`, `redact`, `completions`, `schema`, `cat`, `export`, `import`, `doctor`, `wrap`. Their flags, exit codes and output formats are a contract
//! (docs/contract.md §3): they only ever grow.
//!
//! Exit codes, all subcommands:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | `run`/`resume`: finished · `verify`: every check passes · `replay`: everything matches · `view`: page written or served · `diff`: the same behaviour · `batch`: every run finished · `serve`: stopped by SIGINT, SIGTERM or SIGHUP, every run's bundle finished |
//! | 1 | `run`/`resume`: the run failed (the bundle verifies, status `failed`) · `batch`: some run did not finish · `verify`: a check failed · `replay`: a difference, or a source that does not verify · `cat`: no such blob, or its stored bytes are corrupt · `view`: the page cannot be written or served · `diff`: the runs differ · `serve`: it cannot listen or its store cannot be written |
//! | 2 | a usage or spec error (for `batch`, a bad line of the runs file), or (`run`/`resume`) a bundle another writer holds, or (`import`) a trace that is not valid or a bundle that exists; nothing was written |
//! | 3 | `verify`: the chain is valid but the run never finished |
//! | 4 | `run`/`resume`: the run paused, waiting for decisions |
//! | 130, 143, 129 | `run`/`resume`: cancelled by SIGINT (Ctrl-C), SIGTERM or SIGHUP: 128 + the signal (the bundle is finished as `cancelled`) · `batch`: stopped by that signal (no more lines taken; the running runs finished `cancelled`; a restart redoes them) · `wrap`: that signal was passed on to the program (the bundle is finished as `cancelled`) |
//!
//! `wrap` otherwise exits with the wrapped program's own code (the bundle's status says how
//! it ended), 2 for a usage or set-up error (nothing written), 1 when the bundle could not
//! be written.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use provrun_tools::ToolRegistry;
use serde::Serialize;

/// `println!` that ignores a closed stdout: `provrun show BUNDLE | head` is not an error.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod batch;
mod cat;
mod diff;
mod doctor;
mod drive;
mod ending;
mod import;
pub mod inert;
mod inspect;
mod ledger;
mod listing;
pub mod logging;
mod open;
mod otel;
mod progress;
mod redact;
mod replay;
mod run;
mod serve;
mod settings;
mod show;
mod sign;
pub mod signals;
mod steer_file;
mod style;
mod verify;
mod view;
mod witness;
mod wrap;

/// Exit code: the run finished, every check passed, the replay matched.
pub const EXIT_OK: u8 = 0;
/// Exit code: the run failed, a check failed, or the replay differs.
pub const EXIT_FAILED: u8 = 1;
/// Exit code for a usage or spec error (nothing was written).
pub const EXIT_USAGE: u8 = 2;
/// Exit code of `verify` for a valid chain whose run never finished.
pub const EXIT_INCOMPLETE: u8 = 3;
/// Exit code of `run` and `resume` for a run that paused, waiting for decisions.
pub const EXIT_PAUSED: u8 = 4;
/// Exit code of `run` and `resume` for a run cancelled by Ctrl-C (128 + SIGINT); SIGTERM
/// and SIGHUP give 143 and 129 ([`signals::StopSignal::exit_code`]).
pub const EXIT_CANCELLED: u8 = 130;

/// The prompt `provrun run` sends when `--prompt` is absent.
pub const DEFAULT_PROMPT: &str = "Do the task your instructions describe.";

const RUN_EXITS: &str = "Exit codes: 0 finished · 1 failed (the bundle verifies, status failed) · \
                         2 usage or spec error, or the bundle is held by another writer, nothing \
                         written · 4 paused (stderr names the waiting \
                         calls and the resume command) · 130, 143, 129 cancelled by SIGINT \
                         (Ctrl-C), SIGTERM or SIGHUP (the bundle is finished as cancelled; a \
                         second signal stops at once)";

const WRAP_EXITS: &str = "Exit codes: the program's own (the bundle records it and finishes \
                          finished for 0, failed otherwise) · 130, 143, 129 SIGINT (Ctrl-C), \
                          SIGTERM or SIGHUP was passed on to the program (the bundle is \
                          finished as cancelled; a second signal kills the program's tree) · \
                          2 usage or set-up error (a missing program, overlapping folders, a \
                          missing confinement layer): nothing written · 1 the bundle could \
                          not be written";

const BATCH_EXITS: &str = "Exit codes: 0 every run finished · 1 some run did not finish (failed, \
                           cancelled, paused, could not start, or its bundle does not verify; \
                           the others' bundles are written) · 2 bad input (a bad line, named \
                           by its number, or a bad flag): nothing ran · 130, 143, 129 stopped \
                           by SIGINT, SIGTERM or SIGHUP: no more lines taken, the running runs \
                           finished as cancelled; the same command again runs what did not end";

const SERVE_EXITS: &str = "Exit codes: 0 stopped by SIGINT, SIGTERM or SIGHUP (runs in flight got \
                           the grace period, then were cancelled; every bundle finished) · 1 it \
                           cannot listen, or its store cannot be written · 2 bad flags, no \
                           agents folder, or no token on an address that is not loopback · \
                           130, 143, 129 a second signal stopped it at once";

#[derive(Debug, Parser)]
#[command(
    name = "provrun",
    version = env!("PROVRUN_LONG_VERSION"),
    about = "Run LLM agents with provenance",
    after_help = "Exit codes: 0 ok · 1 run failed / check failed / replay differs · 2 usage or spec error \
                  (nothing written) · 3 verify: run never finished · 4 run paused · 130/143/129 cancelled by \
                  SIGINT/SIGTERM/SIGHUP"
)]
struct Cli {
    /// When to colour output for a person (show, verify, replay, the run's progress
    /// line): auto (on a terminal, unless NO_COLOR is set), always, or never.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value = "auto"
    )]
    color: style::ColorChoice,
    #[command(flatten)]
    log: logging::LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an agent and write its bundle; prints the agent's answer on stdout.
    #[command(after_help = RUN_EXITS)]
    Run(run::RunArgs),
    /// Check a bundle offline: exit 0 all checks pass, 1 a check fails, 3 never finished.
    Verify(verify::VerifyArgs),
    /// Re-execute a bundle's run from the bundle alone and compare it with the recording.
    Replay(replay::ReplayArgs),
    /// Print a bundle's run as a readable timeline.
    Show(show::ShowArgs),
    /// Show a bundle as one self-contained web page: written to a file with --out, else
    /// served on a loopback port until Ctrl-C.
    #[command(
        after_help = "Exit codes: 0 page written (or served until Ctrl-C), even for a bundle that does not verify: the page says so · 1 the page cannot be written or served · 2 usage (no bundle folder, --out a folder or inside the bundle)"
    )]
    View(view::ViewArgs),
    /// Compare two runs step by step: model text, tool calls, arguments and results,
    /// outputs (a line diff), status, tokens and time.
    #[command(
        after_help = "Exit codes: 0 the same behaviour (the same calls, results and outputs) · 1 the runs differ (each difference named) · 2 usage (either is no bundle)"
    )]
    Diff(diff::DiffArgs),
    /// List the registered tools with their schemas.
    Tools {
        /// Print one JSON list of `{name, description, schema, mode}`.
        #[arg(long)]
        json: bool,
        /// A tools folder of manifests to load as well (repeatable).
        #[arg(long = "tools-dir", value_name = "DIR")]
        tools_dirs: Vec<PathBuf>,
    },
    /// Run many agents from a JSONL file, one bundle each under --out, a bounded number at
    /// once; run again after a kill to finish what is missing.
    #[command(after_help = BATCH_EXITS)]
    Batch(batch::BatchArgs),
    /// Continue a paused run with decisions for the calls it waits on.
    #[command(after_help = RUN_EXITS)]
    Resume(run::ResumeArgs),
    /// Serve the agents of a folder to AG-UI clients (POST /agents/NAME streams a run as
    /// AG-UI events over SSE), every run's bundle into --out; prints its URL, stops on
    /// SIGTERM or SIGINT.
    #[command(after_help = SERVE_EXITS)]
    Serve(serve::ServeArgs),
    /// List the skills an agent spec's runs would be offered: the spec's `skills` folders,
    /// then ./.provrun/skills and $XDG_CONFIG_HOME/provrun/skills (unless the spec sets
    /// `default_skills = false`); without a spec, the default folders' skills.
    #[command(
        after_help = "Exit codes: 0 listed · 2 the spec cannot be read, or a skill folder or SKILL.md is bad"
    )]
    Skills {
        /// The agent spec (agent.toml).
        #[arg(value_name = "SPEC")]
        spec: Option<PathBuf>,
        /// Print one JSON list of `{name, description, path, sha256}`.
        #[arg(long)]
        json: bool,
    },
    /// Print one blob's exact bytes (a model request or response, a large tool value) by
    /// its SHA-256, from either blob layout, checked against the digest.
    #[command(
        after_help = "Exit codes: 0 printed · 1 no such blob in the bundle, or its stored bytes are corrupt · 2 usage (not a digest, not a folder)"
    )]
    Cat(cat::CatArgs),
    /// Check what this machine gives the sandbox: bubblewrap, user namespaces, Landlock,
    /// seccomp, the process limit, the command user and the open-files limit, each ok or
    /// missing with the fix.
    #[command(
        after_help = "Exit codes: 0 commands run fully confined (every layer the evidence records is here) · 1 something a command needs is missing (commands are refused, or run degraded where allowed) · 2 usage"
    )]
    Doctor(doctor::DoctorArgs),
    /// Write a new key pair for signing bundles (Ed25519, or ECDSA P-256 with --algorithm):
    /// FILE (private, PKCS#8 PEM) and FILE.pub (public, SPKI PEM); prints the key id.
    Keygen(sign::KeygenArgs),
    /// Sign a finished bundle's statement with a private key (writes statement.dsse.json),
    /// and with --model-signing every file of it in the OpenSSF model-signing format;
    /// exit 1 if the bundle does not verify.
    Sign(sign::SignArgs),
    /// Write a copy of a finished bundle without chosen content (a string of the log, a
    /// blob, an input or output file) that still verifies, with the original signature;
    /// redactions.jsonl records what was removed, where, why and by whom.
    #[command(
        after_help = "Exit codes: 0 the redacted copy is written (and verifies) · 1 the bundle does not verify, or the copy cannot be written · 2 usage: a bad flag, a selector that names nothing, a pattern that matches what must stay, NEW not empty (nothing written)"
    )]
    Redact(redact::RedactArgs),
    /// The transparency log of runs: `ledger init DIR`, `ledger add DIR BUNDLE…`,
    /// `ledger proof`, `ledger consistency`, `ledger verify` (docs/ledger.md).
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
    /// Send a bundle's run elsewhere: `export otlp BUNDLE` sends its spans to an
    /// OpenTelemetry collector.
    #[command(subcommand)]
    Export(otel::ExportTarget),
    /// Keep a run made elsewhere as a bundle: `import pydantic-ai MESSAGES.json --out
    /// BUNDLE`, or `import inspect LOG.eval --out DIR` (a bundle per sample; every model
    /// and tool event `parsed`; `verify` accepts it).
    #[command(subcommand)]
    Import(import::ImportSource),
    /// Run a program provrun did not write (the Codex CLI, Claude Code, any program that
    /// calls a model API) confined, behind a recording proxy, and write its bundle.
    #[command(after_help = WRAP_EXITS)]
    Wrap(wrap::WrapArgs),
    /// Print a shell completion script: `provrun completions bash > ~/.local/share/bash-completion/completions/provrun`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print a JSON Schema, so editors can complete and check files: `agent` is agent.toml.
    Schema {
        /// Which file format: `agent` (the agent spec).
        #[arg(value_enum, value_name = "WHAT")]
        what: SchemaKind,
    },
    /// Write the man pages (provrun.1 and one per command) into a folder; `cargo xtask
    /// man` runs this.
    #[command(hide = true)]
    Man {
        /// The folder to write the pages into (made if missing).
        #[arg(long = "out-dir", value_name = "DIR")]
        out_dir: PathBuf,
    },
}

/// The formats `provrun schema` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SchemaKind {
    /// The agent spec (agent.toml).
    Agent,
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

/// Raise the soft open-files limit to the hard one, for the commands that keep many
/// connections or runs open at once (`serve`, `batch`): a soft limit of 1,024 is a
/// default from the days of `select`, not a choice. A failure is logged and changes
/// nothing.
pub(crate) fn raise_open_files_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some() && limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => tracing::debug!(
                from = limit.current,
                to = limit.maximum,
                "the open-files limit is raised to the hard limit"
            ),
            Err(e) => tracing::warn!(
                limit = limit.current,
                "the open-files limit cannot be raised: {e}"
            ),
        }
    }
}

/// Run the CLI with these arguments (the first is the program name) and return its exit code.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e)
            if e.use_stderr()
                && e.kind() != clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            let line = one_line_usage_error(&e.render().to_string());
            eprintln!("provrun: {}", inert::inert(&line));
            return ExitCode::from(EXIT_USAGE);
        }
        Err(e) => {
            // --help and --version (exit 0), or no subcommand at all (the help, exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    style::set_choice(cli.color);
    let mut log = cli.log.settings();
    // A server's log is its record of requests: `serve` says what it answers (info) unless
    // told to be quiet.
    if matches!(cli.command, Command::Serve(_)) && !log.quiet && log.verbose == 0 {
        log.verbose = 1;
    }
    logging::init_logging(&log);
    let code = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Verify(args) => verify::verify(&args),
        Command::Replay(args) => replay::replay(args),
        Command::Show(args) => show::show(&args),
        Command::View(args) => view::view(&args),
        Command::Diff(args) => diff::diff(&args),
        Command::Tools { json, tools_dirs } => listing::tools(json, &tools_dirs),
        Command::Resume(args) => run::resume(args),
        Command::Batch(args) => batch::batch(args),
        Command::Serve(args) => serve::serve(&args),
        Command::Skills { spec, json } => listing::skills(spec.as_deref(), json),
        Command::Cat(args) => cat::cat(&args),
        Command::Doctor(args) => doctor::doctor(&args),
        Command::Keygen(args) => sign::keygen(&args),
        Command::Sign(args) => sign::sign(&args),
        Command::Ledger(command) => ledger::ledger(command),
        Command::Redact(args) => redact::redact(&args),
        Command::Export(target) => otel::export(target),
        Command::Import(source) => import::import(source),
        Command::Wrap(args) => wrap::wrap(args),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "provrun", &mut std::io::stdout());
            EXIT_OK
        }
        Command::Schema {
            what: SchemaKind::Agent,
        } => match serde_json::to_string_pretty(&provrun_agent::AgentSpec::json_schema()) {
            Ok(text) => {
                out!("{text}");
                EXIT_OK
            }
            Err(e) => fail(EXIT_FAILED, format!("cannot print the schema: {e}")),
        },
        Command::Man { out_dir } => man_pages(&out_dir),
    };
    ExitCode::from(code)
}

/// Write `provrun.1` and `provrun-COMMAND.1` for each visible command into `dir`.
fn man_pages(dir: &Path) -> u8 {
    let cmd = <Cli as clap::CommandFactory>::command();
    let write = |name: &str, page: clap::Command| -> std::io::Result<()> {
        let mut roff = Vec::new();
        clap_mangen::Man::new(page).render(&mut roff)?;
        std::fs::write(dir.join(format!("{name}.1")), roff)
    };
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| write("provrun", cmd.clone()))
        .and_then(|()| {
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .try_for_each(|s| {
                    let name = format!("provrun-{}", s.get_name());
                    write(
                        &name,
                        s.clone()
                            .display_name(name.clone())
                            .bin_name(format!("provrun {}", s.get_name())),
                    )
                })
        });
    match written {
        Ok(()) => {
            out!("man pages written to {}", dir.display());
            EXIT_OK
        }
        Err(e) => fail(
            EXIT_FAILED,
            format!("cannot write man pages to `{}`: {e}", dir.display()),
        ),
    }
}

/// clap's usage error (several lines: the problem, tips, usage) as one line: the problem
/// and its tips, then a pointer to `--help`.
fn one_line_usage_error(rendered: &str) -> String {
    let mut line = String::new();
    let mut in_list = false;
    for part in rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
    {
        let part = part.strip_prefix("error: ").unwrap_or(part);
        if line.ends_with(':') {
            line.push(' ');
            in_list = true;
        } else if !line.is_empty() {
            line.push_str(if in_list { ", " } else { "; " });
        }
        line.push_str(part);
    }
    line.push_str(" (see --help)");
    line
}

/// Print one error line `provrun: …` and return `code`.
/// The message may quote untrusted text (a path, a tool's error): it is made inert.
pub(crate) fn fail(code: u8, message: impl std::fmt::Display) -> u8 {
    eprintln!("provrun: {}", inert::inert(&message.to_string()));
    code
}

/// The registry of linked tools plus these manifest folders.
pub(crate) fn registry(dirs: &[PathBuf]) -> Result<ToolRegistry, u8> {
    ToolRegistry::new(dirs).map_err(|e| fail(EXIT_USAGE, e))
}

/// Refuse a `--out` that exists and is not an empty folder.
pub(crate) fn check_new_bundle(out: &Path) -> Result<(), u8> {
    match std::fs::symlink_metadata(out) {
        Err(_) => Ok(()),
        Ok(meta) if meta.is_dir() => {
            let empty = std::fs::read_dir(out)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if empty {
                Ok(())
            } else {
                Err(fail(
                    EXIT_USAGE,
                    format!(
                        "--out `{}` exists and is not empty; give a new or empty folder",
                        out.display()
                    ),
                ))
            }
        }
        Ok(_) => Err(fail(
            EXIT_USAGE,
            format!(
                "--out `{}` exists and is not a folder; give a new or empty folder",
                out.display()
            ),
        )),
    }
}

/// `path` as a shell word: unquoted when it is plain, else single-quoted.
pub(crate) fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::Cli;

    /// Every subcommand and every flag says what it does, in words a user knows.
    #[test]
    fn every_flag_has_help_that_says_what_it_does() {
        let cli = Cli::command();
        let mut seen = 0;
        for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty(), "`{}` has no help", sub.get_name());
            for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(
                    help.split_whitespace().count() >= 3,
                    "`{} {id}` has no real help: {help:?}",
                    sub.get_name()
                );
                assert!(
                    !help.to_lowercase().starts_with("extension"),
                    "`{} {id}` help starts with jargon: {help:?}",
                    sub.get_name()
                );
                seen += 1;
            }
        }
        assert!(seen > 20, "only {seen} flags seen");
    }
}
