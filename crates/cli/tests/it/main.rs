//! The CLI's integration tests as one test binary (one link of tokio, reqwest and rustls
//! instead of one per file): one module per concern, each driving the built `provrun`
//! (`CARGO_BIN_EXE_provrun`) over the repository's examples and tests/fixtures, and the
//! helpers they share under `support`. The tests run as threads of this one process, so
//! none may change process-wide state (environment, working directory, signal handlers,
//! its own confinement): each child gets its environment with `Command::env`. What must
//! own its process stays a binary of its own (tests/no_landlock.rs).

mod batch;
mod call_ids;
mod call_order;
mod command_user;
mod commands;
mod confinement;
mod conventions;
mod diff;
mod dsse_interop;
mod hostile_outputs;
mod identities;
mod import_pydantic_ai;
mod inspect_interop;
mod json_output;
mod kubernetes;
mod ledger;
mod ledger_bucket;
mod ledger_trust;
mod locked_folders;
mod logging;
mod mcp_published;
mod model_signing;
mod object_store;
mod otel;
mod otel_live;
mod process_trail;
mod redact;
mod roots;
mod seeds;
mod serve;
mod settings;
mod setup_failure;
mod signals;
mod sources;
mod steer_file;
mod terminal;
mod tools_json;
mod view;
mod wrap;
mod wrap_cli;
mod wrap_hostile;
mod wrap_programs;

/// Helpers more than one module uses.
mod support {
    pub(crate) mod cli;
    pub(crate) mod moto;
    pub(crate) mod upstream;
    pub(crate) mod venv;
    pub(crate) mod wrap;
}
