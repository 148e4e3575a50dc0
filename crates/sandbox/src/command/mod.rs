//! `run_command`: a shell command (or a manifest tool's program) run under OS confinement.
//!
//! Layers, outermost first:
//!
//! 1. **namespaces** — bubblewrap (`bwrap`) gives the command new user, PID, mount, IPC,
//!    UTS, cgroup and network namespaces (no network at all, loopback included), drops every
//!    capability, clears the environment, and builds a file tree holding only the system
//!    directories (read-only), a few files of `/etc`, a private size-capped `/tmp`, `/input`
//!    (read-only) and `/output` and `/scratch` (writable) at those same paths.
//! 2. **landlock**, **seccomp** and **rlimits** — applied inside that tree by the
//!    `provrun-confine` helper (see [`crate::confine`]) just before it execs the command.
//! 3. **process_limit** — `RLIMIT_NPROC` inside the user namespace; when the runtime runs as
//!    root that limit does not bind (the kernel exempts uid 0), so a `pids` cgroup holds the
//!    whole tree instead.
//! 4. The runtime's own watch: a wall-clock timeout and the disk quota, checked while the
//!    command runs; either kills the whole tree (process group, PID namespace, cgroup).
//!
//! What the machine offers is probed once per process
//! ([`Sandbox::command_support`](crate::Sandbox::command_support)).
//!
//! The parts: [`outcome`] (what a command reports), [`probe`] (finding the tools, probing
//! the machine), [`doctor`] (the probe and the kernel's settings as a report with fixes,
//! for `provrun doctor`), [`cgroup`] (the pids cgroup), [`bwrap`] (the command lines of
//! bubblewrap and the helper), [`launch`] (the confined command for one program: binds,
//! environment, user), [`child`] (capturing output, killing the tree, [`ConfinedChild`]),
//! [`run`] (`run_command`, `run_program`, `spawn_program`) and [`program`]
//! (`start_program`: a program with a workspace, a private home and forwarded ports, for
//! `provrun wrap`); [`traced`] puts a command behind the process trail's stub.

use std::time::Duration;

/// Environment variable naming the `provrun-confine` helper binary (overrides the search).
pub const HELPER_ENV: &str = "PROVRUN_CONFINE";
/// File name of the helper binary.
pub const HELPER_NAME: &str = "provrun-confine";
/// Where the helper is mounted inside the sandbox.
const HELPER_INSIDE: &str = "/run/provrun-confine";
/// `PATH` inside the sandbox.
const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/// System directories bound read-only (or recreated as the same symlinks).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
/// The few files of `/etc` programs need; the rest of `/etc` stays out of sight.
const ETC_FILES: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "nsswitch.conf",
    "passwd",
    "group",
];
/// What of `/etc` a server granted the network also sees: name resolution and the
/// system's CA certificates.
const NETWORK_ETC: &[&str] = &["resolv.conf", "hosts", "ssl", "ca-certificates", "pki"];

/// The host folders every confined program sees read-only at their own paths (`/usr`,
/// `/bin`, `/sbin`, `/lib*`); nothing else of the host's file tree but `/etc`'s few files
/// and what a caller grants.
pub fn system_dirs() -> &'static [&'static str] {
    SYSTEM_DIRS
}

/// Device nodes the command may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];
/// How often the quota is measured while a command runs.
const QUOTA_EVERY: Duration = Duration::from_millis(250);
/// Processes the sandbox needs for itself beyond the command's own (bwrap's monitor and init).
const SANDBOX_OWN_PROCESSES: u64 = 3;

mod bwrap;
mod cgroup;
mod child;
mod doctor;
mod launch;
mod outcome;
mod probe;
mod program;
mod run;
mod traced;
mod tree;

pub(crate) use bwrap::bwrap_args;
pub use child::ConfinedChild;
pub use doctor::{MachineCheck, MachineReport, open_files_limit};
pub use outcome::{
    CommandConfinement, CommandLimits, CommandOutcome, Confinement, LandlockRecord, Layer,
    SeccompRecord,
};
pub use program::{
    FORWARD_DIR_INSIDE, HOME_INSIDE, PortForwards, ProgramChild, ProgramExit, ProgramSignal,
    ProgramSpec, WORKSPACE_INSIDE,
};
