//! Running: capturing output, killing the tree, and the long-lived [`ConfinedChild`].

use std::io::Read;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::Duration;

use super::cgroup::Cgroup;
use super::traced::Traced;

/// Reads a stream to its end, keeping the first `cap` bytes and counting the rest.
pub(super) fn capture(
    mut r: impl Read + Send + 'static,
    cap: usize,
) -> mpsc::Receiver<(Vec<u8>, u64)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut total = 0u64;
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    total += n as u64;
                    let room = cap.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send((kept, total));
    });
    rx
}

pub(super) use super::tree::kill_tree;

/// How long a killed command's processes get to be gone before the caller goes on anyway
/// (each was sent SIGKILL; only a process stuck in the kernel takes longer).
pub(super) const TREE_GONE_WAIT: Duration = Duration::from_secs(5);

/// The processes below a command's child (its children, theirs, …) as they were when it
/// was about to be killed, each held by a pidfd: the kernel kills them asynchronously
/// (the PID namespace's end, the process group, the cgroup), and reaping the child does
/// not wait for them, so the caller waits on these before it says the command is over.
/// A pidfd names one process, never another that later takes its pid.
#[derive(Debug, Default)]
pub(super) struct Descendants(Vec<rustix::fd::OwnedFd>);

impl Descendants {
    /// The processes below `root` now (found through `/proc`; none when it cannot be read).
    pub(super) fn of(root: u32) -> Self {
        let mut parent_of = std::collections::HashMap::new();
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return Self::default();
        };
        for entry in procs.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent_pid(pid) {
                parent_of.insert(pid, ppid);
            }
        }
        let mut found = Vec::new();
        let mut frontier = vec![root];
        while let Some(parent) = frontier.pop() {
            for (&pid, &ppid) in &parent_of {
                if ppid != parent {
                    continue;
                }
                frontier.push(pid);
                let opened = rustix::process::Pid::from_raw(pid as i32).and_then(|p| {
                    rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
                });
                // Still the process that was found (its parent unchanged), not a new one
                // that took a freed pid.
                if let Some(fd) = opened
                    && parent_pid(pid) == Some(parent)
                {
                    found.push(fd);
                }
            }
        }
        Self(found)
    }

    /// Wait until every one has exited, at most `limit`.
    pub(super) fn wait_gone(self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        for fd in self.0 {
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    tracing::warn!("a killed command's process is still there after {limit:?}");
                    return;
                }
                let mut fds = [rustix::event::PollFd::new(
                    &fd,
                    rustix::event::PollFlags::IN,
                )];
                let wait = rustix::event::Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: i64::from(left.subsec_nanos()),
                };
                match rustix::event::poll(&mut fds, Some(&wait)) {
                    Ok(n) if n > 0 => break,
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => break,
                }
            }
        }
    }
}

/// The parent of process `pid`, from `/proc/PID/stat` (after the name, which may hold
/// anything, in parentheses).
fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Kill a command's child and its whole tree, reap the child, and wait until every
/// process that was below it is gone too (at most [`TREE_GONE_WAIT`]).
pub(super) fn kill_tree_and_wait(
    child: &mut Child,
    cgroup: Option<&Cgroup>,
) -> std::io::Result<ExitStatus> {
    let below = Descendants::of(child.id());
    kill_tree(child, cgroup);
    let status = child.wait();
    below.wait_gone(TREE_GONE_WAIT);
    status
}

pub(super) fn exit_parts(status: ExitStatus) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt as _;
    (status.code(), status.signal())
}

/// Moves the child into `procs`' cgroup between fork and exec, so that every process the
/// command starts is counted from its first fork.
pub(super) fn join_cgroup_at_exec(cmd: &mut Command, procs: std::fs::File) {
    use std::os::unix::process::CommandExt as _;
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec. It only calls write(2) on
    // a file descriptor opened before the fork (no allocation, no locks), which is
    // async-signal-safe; `procs` stays alive inside the closure, which the Command owns.
    unsafe {
        cmd.pre_exec(move || {
            // "0" means the writing process itself.
            rustix::io::write(&procs, b"0")?;
            Ok(())
        });
    }
}

/// How much of a long-lived child's stderr is kept (the first bytes).
pub(super) const CHILD_STDERR_CAP: usize = 64 * 1024;

/// A long-lived confined child started by
/// [`Sandbox::spawn_program`](crate::Sandbox::spawn_program). Its whole tree is killed by
/// [`ConfinedChild::kill`] or when it is dropped.
#[derive(Debug)]
pub struct ConfinedChild {
    pub(super) child: Child,
    pub(super) cgroup: Option<Cgroup>,
    pub(super) stderr: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    pub(super) stderr_closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(super) degraded: Vec<String>,
    /// Its process trail, when recorded.
    pub(super) trail: Option<Traced>,
}

impl ConfinedChild {
    /// The child's stdin, once (`None` after the first take).
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }

    /// The child's stdout, once (`None` after the first take).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// The process id of the child (bubblewrap or the helper, when they wrap it).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The first 64 KiB the child wrote to stderr so far, as text.
    pub fn stderr_text(&self) -> String {
        self.stderr
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Whether its stderr has been read to the end (the child and all it started have
    /// closed it): [`ConfinedChild::stderr_text`] then has everything it will ever have.
    pub fn stderr_closed(&self) -> bool {
        self.stderr_closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The layers that were missing when it started (empty when fully confined).
    pub fn degraded(&self) -> &[String] {
        &self.degraded
    }

    /// Whether it has exited, and how (`None` while running).
    pub fn exit_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(match exit_parts(status) {
                (Some(code), _) => format!("exit code {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                _ => "ended".to_owned(),
            }),
            _ => None,
        }
    }

    /// The processes of its trail that have ended since the last call, in the order
    /// they began (none when no trail is recorded).
    pub fn take_trail_processes(&self) -> Vec<crate::trail::ObservedProcess> {
        self.trail
            .as_ref()
            .map(Traced::take_finished)
            .unwrap_or_default()
    }

    /// A handle on its running trail (see [`crate::TrailFeed`]); `None` when no trail is
    /// recorded.
    pub fn trail_feed(&self) -> Option<crate::trail::TrailFeed> {
        self.trail.as_ref().and_then(Traced::feed)
    }

    /// Kills the whole tree and gives the rest of its trail: the processes not taken yet
    /// (those still running when it was killed have no end) and the summary. `None` when
    /// no trail is recorded, or it was finished already.
    pub fn finish_trail(&mut self) -> Option<crate::trail::Trail> {
        self.kill();
        self.trail.take().map(Traced::finish)
    }

    /// Kill the whole tree, reap the child, and wait until the processes it started are
    /// gone too.
    pub fn kill(&mut self) {
        let _ = kill_tree_and_wait(&mut self.child, self.cgroup.as_ref());
        if let Some(cg) = self.cgroup.take() {
            cg.remove();
        }
    }
}

impl Drop for ConfinedChild {
    fn drop(&mut self) {
        self.kill();
    }
}
