//! `Sandbox::start_program`: a program that is not a tool call — an agent CLI run by
//! `provrun wrap` — confined like a command, for as long as it runs.
//!
//! The layers are `run_command`'s (namespaces, Landlock, seccomp, rlimits, the process
//! limit), in a layout of its own: the output root is the program's working folder at
//! [`WORKSPACE_INSIDE`], the scratch root its private `HOME` at [`HOME_INSIDE`], `/input`
//! read-only as ever, and the host paths it is granted read-only at their own paths. Its
//! network namespace has only loopback; [`PortForwards`] make a few ports there reach Unix
//! sockets of the host (through the forwarder of [`crate::forward`]). It inherits the
//! runtime's stdin; stdout and stderr are pipes for the caller to read. There is no
//! timeout and no quota watch while it runs: the caller ends it.

use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdout, Stdio};
use std::time::Duration;

use crate::error::{Result, SandboxError};
use crate::forward::Forward;
use crate::sandbox::Sandbox;

use super::bwrap::Layout;
use super::cgroup::Cgroup;
use super::child::{exit_parts, kill_tree, kill_tree_and_wait};
use super::launch::Launch;
use super::outcome::{CommandConfinement, LayerName};
use super::run::{refuse_nul, spawn_or_clean_up};
use super::traced::{Traced, hold};

/// The program's working folder inside the sandbox: the output root.
pub const WORKSPACE_INSIDE: &str = "/workspace";
/// The program's `HOME` inside the sandbox: the scratch root.
pub const HOME_INSIDE: &str = "/home/provrun";
/// Where the folder of forwarded sockets is bound inside the sandbox (read-only).
pub const FORWARD_DIR_INSIDE: &str = super::launch::FORWARD_DIR_INSIDE;

/// The layout of a program: the workspace is the working folder, the scratch root `HOME`.
const PROGRAM_LAYOUT: Layout = Layout {
    output: WORKSPACE_INSIDE,
    scratch: HOME_INSIDE,
    cwd: WORKSPACE_INSIDE,
    home: HOME_INSIDE,
};

/// Loopback ports inside the sandbox that reach Unix sockets of the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortForwards {
    /// The host folder holding the sockets; bound read-only at [`FORWARD_DIR_INSIDE`].
    /// When the program runs as another user (the runtime is root), the folder and its
    /// sockets are handed to that user.
    pub dir: PathBuf,
    /// Each port on `127.0.0.1` inside, and the file name of its socket in `dir`.
    pub ports: Vec<(u16, String)>,
}

/// What [`Sandbox::start_program`] runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramSpec {
    /// The program (a path, or a name looked up on the `PATH` of `env`) and its arguments.
    pub argv: Vec<String>,
    /// Its environment beyond `LANG`; `HOME` and `TMPDIR` are the sandbox's
    /// ([`HOME_INSIDE`], `/tmp`) whatever this says, and `PATH` is the sandbox's unless
    /// given.
    pub env: Vec<(String, String)>,
    /// Host paths it may read (and execute), at the same paths.
    pub read_only: Vec<PathBuf>,
    /// Ports it may reach on `127.0.0.1`, forwarded to sockets of the host.
    pub forwards: Option<PortForwards>,
}

/// How a program ended, as bubblewrap passes it on: a program killed by signal N shows
/// as exit code 128 + N when it ran under bubblewrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramExit {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did (only seen without bubblewrap).
    pub signal: Option<i32>,
}

/// A signal [`ProgramChild::signal`] can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramSignal {
    /// `SIGINT` (Ctrl-C).
    Interrupt,
    /// `SIGTERM`.
    Terminate,
    /// `SIGHUP` (the terminal went away).
    Hangup,
}

impl ProgramSignal {
    /// Its name as the evidence records it: `SIGINT`, `SIGTERM` or `SIGHUP`.
    pub fn name(self) -> &'static str {
        match self {
            ProgramSignal::Interrupt => "SIGINT",
            ProgramSignal::Terminate => "SIGTERM",
            ProgramSignal::Hangup => "SIGHUP",
        }
    }

    fn raw(self) -> rustix::process::Signal {
        match self {
            ProgramSignal::Interrupt => rustix::process::Signal::INT,
            ProgramSignal::Terminate => rustix::process::Signal::TERM,
            ProgramSignal::Hangup => rustix::process::Signal::HUP,
        }
    }
}

impl Sandbox {
    /// Starts `spec`'s program under every confinement layer, in its own layout (see the
    /// module docs), inheriting stdin, with stdout and stderr piped.
    ///
    /// Refused, before anything runs, when a layer is missing and the sandbox was not
    /// opened with [`Sandbox::allow_degraded_commands`], and always when ports are to be
    /// forwarded but bubblewrap's namespaces are missing (the forwarder needs a network
    /// namespace of the program's own).
    ///
    /// # Errors
    ///
    /// [`SandboxError::NulInCommand`] for a NUL byte in the command or its environment;
    /// [`SandboxError::ConfinementMissing`] when a layer is missing (see above);
    /// [`SandboxError::CommandUserUnavailable`] when the command user cannot run it;
    /// [`SandboxError::CommandStart`] for a bad forward or when the program cannot be started.
    pub fn start_program(&self, spec: &ProgramSpec) -> Result<ProgramChild> {
        refuse_nul(&spec.argv, &spec.env)?;
        let conf = self.confinement_for(&spec.argv)?;
        if spec.forwards.is_some() && !conf.has(LayerName::Namespaces) {
            return Err(SandboxError::ConfinementMissing {
                missing: format!(
                    "namespaces (forwarded ports need a network namespace of the program's \
                     own: {})",
                    conf.missing_summary()
                ),
            });
        }
        let forwards: Vec<Forward> = match &spec.forwards {
            Some(f) => f
                .ports
                .iter()
                .map(|(port, name)| forward_inside(*port, name))
                .collect::<Result<_>>()?,
            None => Vec::new(),
        };
        let env: Vec<(String, String)> = spec
            .env
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "HOME" | "TMPDIR" | "PWD"))
            .cloned()
            .collect();
        let launch = Launch {
            argv: &spec.argv,
            env: &env,
            read_only: &spec.read_only,
            network: false,
            layout: &PROGRAM_LAYOUT,
            forwards: spec
                .forwards
                .as_ref()
                .map(|f| (f.dir.as_path(), forwards.as_slice())),
            used_bytes: None,
        };
        let (mut cmd, program, cgroup, plan) = self.confined_command(conf, &launch)?;
        cmd.stdin(Stdio::inherit());
        let mut child = spawn_or_clean_up(&mut cmd, &program, cgroup.as_ref())?;
        let trail = hold(self, &mut child, cgroup.as_ref(), plan)?;
        tracing::info!(program = %spec.argv[0], pid = child.id(), "program started");
        Ok(ProgramChild {
            child,
            cgroup,
            confinement: conf.record(self.limits(), Duration::ZERO, 0),
            reaped: None,
            trail,
        })
    }
}

/// The forward of `port` to the socket `name` in the bound folder, as the sandbox sees it.
fn forward_inside(port: u16, name: &str) -> Result<Forward> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." || port == 0 {
        return Err(SandboxError::CommandStart {
            message: format!(
                "a forwarded port needs a port number and a plain file name, not {port} and {name:?}"
            ),
        });
    }
    Ok(Forward {
        port,
        socket: PathBuf::from(FORWARD_DIR_INSIDE).join(name),
    })
}

/// A program started by [`Sandbox::start_program`]. Dropping it kills whatever of its
/// tree is left.
#[derive(Debug)]
pub struct ProgramChild {
    child: Child,
    cgroup: Option<Cgroup>,
    confinement: CommandConfinement,
    reaped: Option<ProgramExit>,
    trail: Option<Traced>,
}

impl ProgramChild {
    /// The process id of the child (bubblewrap, or the helper, when they wrap it).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The program's stdout, once.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The program's stderr, once.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// The confinement it runs under, as the evidence records it (its `timeout_ms` is 0:
    /// there is none).
    pub fn confinement(&self) -> &CommandConfinement {
        &self.confinement
    }

    /// Sends `signal` to the program's process group inside the sandbox (the program and
    /// what it started in its group; not bubblewrap, and not the port forwarder, which has
    /// a group of its own). Returns whether a process was found to signal.
    pub fn signal(&self, signal: ProgramSignal) -> bool {
        let Some(leader) = session_leader(self.child.id()) else {
            return false;
        };
        rustix::process::Pid::from_raw(leader as i32)
            .is_some_and(|pid| rustix::process::kill_process_group(pid, signal.raw()).is_ok())
    }

    /// Whether it has ended, and how (without waiting). Once it has, the rest of its tree
    /// (the forwarder, anything left behind) is killed.
    ///
    /// # Errors
    ///
    /// The I/O error of waiting on the child.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ProgramExit>> {
        if let Some(exit) = self.reaped {
            return Ok(Some(exit));
        }
        let Some(status) = self.child.try_wait()? else {
            return Ok(None);
        };
        let (code, signal) = exit_parts(status);
        let exit = ProgramExit { code, signal };
        self.reaped = Some(exit);
        self.end_tree();
        Ok(Some(exit))
    }

    /// The processes of its trail that have ended since the last call, in the order
    /// they began (none when no trail is recorded): for a caller that records them as
    /// the program runs.
    pub fn take_trail_processes(&self) -> Vec<crate::trail::ObservedProcess> {
        self.trail
            .as_ref()
            .map(Traced::take_finished)
            .unwrap_or_default()
    }

    /// A handle that takes the trail's ended processes from any task while the program
    /// runs (see [`crate::TrailFeed`]); `None` when no trail is recorded.
    pub fn trail_feed(&self) -> Option<crate::trail::TrailFeed> {
        self.trail.as_ref().and_then(Traced::feed)
    }

    /// Once it has ended (its tree killed: call after [`ProgramChild::try_wait`] answered
    /// or [`ProgramChild::kill`]), the rest of its trail: the processes not taken yet and
    /// the summary. `None` when no trail is recorded, or it was finished already.
    pub fn finish_trail(&mut self) -> Option<crate::trail::Trail> {
        if self.reaped.is_none() {
            self.kill();
        }
        self.trail.take().map(Traced::finish)
    }

    /// Kills the whole tree now and reaps it.
    pub fn kill(&mut self) -> Option<ProgramExit> {
        if self.reaped.is_none()
            && let Ok(status) = kill_tree_and_wait(&mut self.child, self.cgroup.as_ref())
        {
            let (code, signal) = exit_parts(status);
            self.reaped = Some(ProgramExit { code, signal });
        }
        self.end_tree();
        self.reaped
    }

    fn end_tree(&mut self) {
        kill_tree(&mut self.child, self.cgroup.as_ref());
        if let Some(cg) = self.cgroup.take() {
            cg.remove();
        }
    }
}

impl Drop for ProgramChild {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The process under `root` (bubblewrap, or the helper) that leads a session of its own:
/// the program bubblewrap started with `--new-session` (or the helper it execs into).
/// Read from the host's `/proc`, whose ids are the host's.
fn session_leader(root: u32) -> Option<u32> {
    let table = proc_table();
    let mut frontier = vec![root];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, sid) in &table {
            if ppid == parent && seen.insert(pid) {
                if sid == pid {
                    return Some(pid);
                }
                frontier.push(pid);
            }
        }
    }
    // Without bubblewrap the child itself is the program, in a group of its own.
    table.iter().any(|&(pid, _, _)| pid == root).then_some(root)
}

/// Every process's id, parent id and session id, from `/proc/*/stat`.
fn proc_table() -> Vec<(u32, u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse_stat(&stat).map(|(ppid, sid)| (pid, ppid, sid))
        })
        .collect()
}

/// The parent id and session id of a `/proc/PID/stat` line (`pid (comm) state ppid pgrp
/// session …`; `comm` may hold spaces and parentheses, so the fields are read after the
/// last `)`).
fn parse_stat(stat: &str) -> Option<(u32, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp = fields.next()?;
    let sid = fields.next()?.parse().ok()?;
    Some((ppid, sid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_after_the_command_name() {
        assert_eq!(
            parse_stat("42 (a) b) c) S 7 42 99 0 -1 4194560"),
            Some((7, 99))
        );
        assert_eq!(parse_stat("42 (sh) S 1 42 42 0"), Some((1, 42)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn forwarded_sockets_are_plain_names() {
        assert_eq!(
            forward_inside(4180, "openai.sock").unwrap().socket,
            PathBuf::from("/run/provrun-forward/openai.sock")
        );
        for bad in ["", "a/b", "..", "."] {
            assert!(forward_inside(4180, bad).is_err(), "{bad:?}");
        }
        assert!(forward_inside(0, "a.sock").is_err());
    }

    #[test]
    fn this_process_has_a_session_leader_above_it_or_is_one() {
        let table = proc_table();
        let me = std::process::id();
        assert!(table.iter().any(|&(pid, _, _)| pid == me), "{table:?}");
    }
}
