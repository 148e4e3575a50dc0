//! `provrun wrap`: verifiable evidence for agent programs provrun did not write — the
//! Codex CLI, Claude Code, any program that calls a model API — without changing them.
//!
//! [`wrap`] runs the program confined by the sandbox ([`provrun_sandbox::Sandbox::start_program`]:
//! bubblewrap, Landlock, seccomp and limits), in the workspace, with a private `HOME` and
//! placeholder API keys. Its base URLs point at loopback ports inside its network
//! namespace, which the sandbox forwards to the Unix sockets of a recording reverse proxy
//! ([`proxy`]). The proxy puts the real key on each request, sends it upstream, streams
//! the response back as it arrives and records every exchange through the capture crate
//! ([`record`]): generations as `observed` `model_called` events parsed by the wire
//! parsers, other exchanges as `http_exchanged`, CONNECT tunnels and refusals as
//! `connection_handled`. When the program exits its status and output digests are
//! recorded (`program_exited`), its own session log is imported ([`session`]: Codex
//! rollouts, Claude Code sessions) as `trace_imported` and `parsed` `tool_called` events
//! linked to the exchange that asked for each call, and its workspace's files become the
//! outputs ([`workspace`]).
//!
//! Besides its traffic, what the program did is observed too: every process its sandbox
//! started (`process_ran`, from the sandbox's tracer: `trail`), what it changed in its
//! workspace (`file_changed`, `workspace_changed` with the `git diff` of a repository:
//! `changes`), and the tool calls its model asked for with the results it sent back, as
//! the wire showed them (`tool_call_seen`: `wire_calls`).
//!
//! The modules: [`options`] (what a run is asked), [`env`](mod@env) (the program's environment),
//! [`program`] (finding the program), [`grants`] (what of the host it is shown besides:
//! the CA store, a virtualenv's base installation), [`proxy`], [`record`], [`session`], [`tee`] (its
//! stdout and stderr), [`workspace`], [`private`] (the run's folder in `TMPDIR`), and `run`
//! (the driver).
//!
//! The caller listens for the stop signals (the CLI's `StopSignals`: SIGINT, SIGTERM,
//! SIGHUP) and hands each one to [`wrap`] through a [`Signals`] channel: the first is passed
//! on to the program, a second (or a program still running [`SIGNAL_GRACE`] after the
//! first) has its tree killed, and the bundle is finished `cancelled` either way.

mod changes;
pub mod env;
mod error;
pub mod grants;
pub mod options;
pub mod private;
pub mod program;
pub mod proxy;
pub mod record;
mod run;
pub mod session;
pub mod tee;
mod trail;
mod wire_calls;
pub mod workspace;

pub use error::WrapError;
pub use options::{AllowedHost, Upstreams, WrapOptions};
pub use run::{SIGNAL_GRACE, Signals, WRAP_BUILDER, WrapOutcome, wrap};
