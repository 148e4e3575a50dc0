//! The agent's only window on files.
//!
//! `provrun-sandbox` gives an agent three virtual roots, `/input` (read-only), `/output`
//! and `/scratch` (writable), each backed by a cap-std directory capability, and treats
//! every path a model sends as hostile input.
//!
//! - [`Sandbox`] opens the three host directories once and serves the built-in file tools:
//!   [`Sandbox::read_file`], [`Sandbox::write_file`], [`Sandbox::str_replace`],
//!   [`Sandbox::list_dir`], and, only under a folder granted with
//!   [`Sandbox::with_host_dir`], [`Sandbox::list_host_files`], [`Sandbox::copy_from_host`]
//!   and [`Sandbox::copy_to_host`]. Each method carries the tool's whole behaviour (limits,
//!   paging, messages); a tool only translates arguments and results.
//! - [`VirtualPath`] parses a model's path and refuses, with an error naming the rule,
//!   anything that is not a plain path under a root.
//! - [`Limits`] is the agent spec's `[limits]` table: read and write sizes, the quota over
//!   /output and /scratch, listing, depth and path-length caps.
//! - [`Sandbox::run_command`] and [`Sandbox::run_program`] run a command under OS
//!   confinement (bubblewrap namespaces, Landlock, seccomp, rlimits, a process limit, a
//!   timeout and the quota); [`Sandbox::command_support`] says which layers this machine
//!   has, and [`Sandbox::check_machine`] says what is missing and how to fix it (`provrun
//!   doctor`). The in-sandbox half lives in [`confine`]; a program carries it itself by calling
//!   [`arg0_dispatch`] first thing in `main` (else the `provrun-confine` binary serves).
//! - [`UidLease`] gives one run's sandbox a host uid of its own when the runtime is root.
//! - [`stage_inputs`] copies the user's inputs into the input root and makes them read-only.
//!
//! Rules every operation keeps: no symbolic link is ever followed (paths are walked one name
//! at a time with no-follow opens); FIFOs, devices and sockets are never opened; writes go to
//! a temporary file renamed over the target and refuse hard-linked targets; nothing is ever
//! written under `/input`. All calls block: run them off an async executor.
//!
//! ```no_run
//! use provrun_sandbox::{Limits, Sandbox};
//! # fn main() -> Result<(), provrun_sandbox::SandboxError> {
//! let sandbox = Sandbox::with_temp_scratch("bundle/input", "bundle/output", Limits::default())?;
//! sandbox.write_file("/output/summary.md", "# Summary\n")?;
//! let page = sandbox.read_file("/output/summary.md", None, None)?;
//! assert_eq!(page.content, "# Summary\n");
//! assert!(sandbox.write_file("/input/a.txt", "x").is_err()); // /input is read-only
//! # Ok(())
//! # }
//! ```

mod access;
mod command;
pub mod confine;
mod dispatch;
mod error;
pub mod forward;
mod fsops;
mod lease;
mod limits;
mod path;
pub mod roots;
mod sandbox;
mod stage;
pub mod trail;
mod user;

pub use command::{
    CommandConfinement, CommandLimits, CommandOutcome, ConfinedChild, Confinement,
    FORWARD_DIR_INSIDE, HELPER_ENV, HELPER_NAME, HOME_INSIDE, LandlockRecord, Layer, MachineCheck,
    MachineReport, PortForwards, ProgramChild, ProgramExit, ProgramSignal, ProgramSpec,
    SeccompRecord, WORKSPACE_INSIDE, open_files_limit, system_dirs,
};
pub use dispatch::arg0_dispatch;
pub use error::{Result, SandboxError};
pub use fsops::{DirEntryInfo, DirListing, EntryKind, Usage};
pub use lease::{LEASE_SLOTS, UidLease};
pub use limits::{DEFAULT_COMMAND_ID, Limits};
pub use path::{Root, VirtualPath};
pub use sandbox::{
    CopyOutcome, ReadAs, ReadOutcome, ReplaceOutcome, RootPaths, Sandbox, WriteOutcome,
};
pub use stage::stage_inputs;
pub use trail::{ArgvCut, ObservedProcess, Trail, TrailFeed, TrailSink, TrailSummary};
pub use user::{CommandUser, CommandUserMode};
