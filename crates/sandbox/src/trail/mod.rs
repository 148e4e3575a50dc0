//! The process trail: every process a confined program starts, as the kernel reports it.
//!
//! A small tracer outside the sandbox — the helper's own executable started as
//! `provrun-confine --trail` (`tracer.rs`) — attaches with `ptrace` (`PTRACE_SEIZE`, event
//! options only: fork, vfork, clone and exec stops, never a stop at each system call) to
//! the command before it execs bubblewrap, and from then on is told of every process and
//! thread the sandbox makes. The command waits for it: it is started through a stub
//! (`provrun-confine --trail-stub`, `stub.rs`) that stops itself until the tracer holds it.
//!
//! At each exec stop the new image is loaded and not one of its instructions has run:
//! the tracer reads its argument vector (`/proc/PID/cmdline`), opens the executable itself
//! (`/proc/PID/exe`: the file the kernel mapped, a memfd or a deleted file included) and
//! hashes its bytes, and reads its working folder and user. What it records is therefore
//! what ran, not what a caller asked to run. The sandbox's own processes (bubblewrap, the
//! helper, the port forwarder) are left out: the trail starts at the first exec of an
//! image that is not one of them, and holds that process and everything it starts.
//!
//! The tracer writes its records (`wire.rs`) on a pipe; the runtime side (`watch.rs`)
//! reads them as they come, masks the secrets it was given, caps them and hands over
//! [`ObservedProcess`]es, and, at the end, a [`TrailSummary`]. docs/sandbox.md says what
//! the trail sees and what it cannot.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

#[cfg(feature = "confine")]
pub(crate) mod stub;
#[cfg(feature = "confine")]
pub(crate) mod tracer;
pub(crate) mod watch;
pub(crate) mod wire;

mod text;

pub use text::mask_secrets;
pub use watch::TrailFeed;

/// The helper's first argument that makes it the tracer.
pub(crate) const TRACER_FLAG: &str = "--trail";
/// The helper's first argument that makes it the stub the tracer attaches to.
pub(crate) const STUB_FLAG: &str = "--trail-stub";

/// The most processes one trail records; beyond it they are only counted
/// ([`TrailSummary::not_recorded`]).
pub const MAX_TRAIL_PROCESSES: u64 = 10_000;
/// The most arguments of one process recorded.
pub const MAX_RECORDED_ARGS: usize = 256;
/// The most bytes of one argument recorded (cut at a character boundary).
pub const MAX_RECORDED_ARG_BYTES: usize = 4096;
/// The most bytes of one process's arguments recorded in all.
pub const MAX_RECORDED_ARGV_BYTES: usize = 16 * 1024;

/// One program image that ran in the sandbox: a process from the exec that loaded it (or
/// from its fork, for the first image of a forked process) until it exited or execed
/// another image. A process that never execed is recorded once, with `exec` false and
/// its parent's image.
///
/// Strings that are not UTF-8 (arguments, paths) are written losslessly: valid UTF-8
/// stays, a backslash is `\\`, each other byte is `\xHH`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedProcess {
    /// Its number in the trail, from 1, in the order images began.
    pub id: u64,
    /// The image that started it: the one whose process forked it, or the one it
    /// replaced by exec in the same process. `None` for the trail's first image.
    pub parent: Option<u64>,
    /// The process id as the host sees it (unique while it runs).
    pub pid: u32,
    /// Whether this image was loaded by an exec (false: a forked process that exited
    /// without one; its `argv` and `exe` are its parent's).
    pub exec: bool,
    /// The argument vector the kernel gave the image, capped ([`MAX_RECORDED_ARGS`],
    /// [`MAX_RECORDED_ARG_BYTES`], [`MAX_RECORDED_ARGV_BYTES`]), known secrets masked.
    pub argv: Vec<String>,
    /// When `argv` was cut: how many arguments and bytes there were in all.
    pub argv_cut: Option<ArgvCut>,
    /// The executable as the sandbox names it (`/usr/bin/true`; `/memfd:NAME (deleted)`
    /// for a memfd; `… (deleted)` for a file removed since).
    pub exe: String,
    /// SHA-256 hex of the executable's bytes, read from the file the kernel mapped.
    pub exe_sha256: Option<String>,
    /// Its size in bytes.
    pub exe_size: Option<u64>,
    /// Why the executable could not be hashed, when it could not.
    pub exe_error: Option<String>,
    /// The working folder at the exec, as the sandbox names it.
    pub cwd: Option<String>,
    /// The user it ran as, as the host numbers users.
    pub uid: Option<u32>,
    /// When it began, in microseconds since the Unix epoch.
    pub started_us: u64,
    /// When it ended (exit, death or exec of another image); `None` when the trail ended
    /// first.
    pub ended_us: Option<u64>,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// Whether it ended by exec of another image (the next image has it as `parent`).
    pub replaced: bool,
}

/// How much of an argument vector there was, when it was cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgvCut {
    /// Arguments in all.
    pub args: u64,
    /// Bytes in all (without the NUL after each).
    pub bytes: u64,
}

/// How a trail ended: what was counted beside what was recorded, and whether the tracer
/// saw the whole tree to its end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrailSummary {
    /// How the processes were observed: `ptrace`.
    pub mechanism: String,
    /// Images recorded.
    pub processes: u64,
    /// Images that began after [`MAX_TRAIL_PROCESSES`] were recorded: counted only.
    pub not_recorded: u64,
    /// Execs in the trail, recorded or not.
    pub execs: u64,
    /// Processes forked in the trail, recorded or not (threads are not counted).
    pub forks: u64,
    /// Whether the tracer followed the tree until its last process ended.
    pub complete: bool,
    /// What went wrong, when the tracer could not attach or stopped early.
    pub error: Option<String>,
    /// The CPU time the tracer itself used (user and system, milliseconds), when it said.
    pub tracer_cpu_ms: Option<u64>,
}

/// A finished trail: its images, in the order they began, and its summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trail {
    /// Every image recorded.
    pub processes: Vec<ObservedProcess>,
    /// How it ended.
    pub summary: TrailSummary,
}

/// Where the trails of the commands a [`crate::Sandbox`] runs go
/// ([`crate::Sandbox::with_trail_sink`]): each finished `run_command` or `run_program`
/// adds its trail, and the caller takes them with [`TrailSink::take`] (a runtime gives
/// each tool call a sink of its own, and records what it holds with the call).
#[derive(Debug, Clone, Default)]
pub struct TrailSink(Arc<Mutex<Vec<Trail>>>);

impl TrailSink {
    /// An empty sink.
    pub fn new() -> Self {
        TrailSink::default()
    }

    /// Adds a trail.
    pub fn push(&self, trail: Trail) {
        if let Ok(mut trails) = self.0.lock() {
            trails.push(trail);
        }
    }

    /// The trails added so far, in the order their commands ended; the sink is left empty.
    pub fn take(&self) -> Vec<Trail> {
        self.0
            .lock()
            .map(|mut trails| std::mem::take(&mut *trails))
            .unwrap_or_default()
    }
}

/// Whether a sandbox records the trail of what it runs, and what it masks in it.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrailConfig {
    /// Record no trail (the benchmark's comparison; a caller that asks not to).
    pub off: bool,
    /// Strings masked wherever they appear in a record (each byte becomes `*`).
    pub secrets: Arc<Vec<String>>,
    /// Where commands' trails go.
    pub sink: Option<TrailSink>,
    /// The most images one trail records (default [`MAX_TRAIL_PROCESSES`]).
    pub max: Option<u64>,
}
