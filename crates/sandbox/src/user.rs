//! Which host user a confined command runs as.
//!
//! bubblewrap maps the sandbox's user (uid 1000 inside) to the uid that started it. When
//! the runtime runs as root that is host uid 0, so everything a command wrote would be
//! owned by root on the host. Instead, when the runtime is root, commands (and MCP stdio
//! servers) run as a dedicated unprivileged uid and gid ([`Limits::command_uid`] and
//! [`Limits::command_gid`], 65 536 by default):
//!
//! 1. Before each command, `/output` and `/scratch` (the root folders and what is in them,
//!    walked without following a link) are handed to that user with `chown`, so the
//!    command can change what the file tools wrote. `/input` stays root's and read-only.
//! 2. The child that becomes bubblewrap enters a mount namespace of its own, opens the
//!    roots (and the helper, and a server's program) by their host paths, mounts a small
//!    tmpfs over `/tmp` *in that namespace only* and binds each of them there — so that
//!    bubblewrap, no longer root, finds its sources at paths it may reach even when the
//!    host folders sit under a folder only root may enter (a `0700` temporary folder).
//! 3. It then drops every supplementary group and sets its gid and uid, and execs
//!    bubblewrap, which now needs unprivileged user namespaces. Whether bubblewrap can
//!    build its sandbox as that user is checked once per process and user; when it
//!    cannot, commands are refused ([`SandboxError::CommandUserUnavailable`]) — never run
//!    as root instead, unless `command_uid = 0` opted out (and the run records that).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::Serialize;

use crate::error::{Result, SandboxError};
use crate::limits::Limits;
use crate::path::Root;
use crate::sandbox::{RootPaths, Sandbox};

/// Where the bind sources are mounted in the child's own mount namespace.
pub(crate) const PORTAL: &str = "/tmp";

/// How a command's host user was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandUserMode {
    /// The runtime is root: commands run as the dedicated `uid`/`gid` of the limits.
    Dedicated,
    /// The runtime is root and `command_uid = 0` opted out: commands run as root (their
    /// files are owned by root on the host).
    Root,
    /// The runtime is not root: commands run as its own uid and gid (nothing changed).
    Runtime,
}

/// The host user and group a command runs as, as `run_started.details.sandbox.command_user`
/// records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandUser {
    /// How the user was chosen.
    pub mode: CommandUserMode,
    /// The host uid commands run as (inside the user namespace they are uid 1000).
    pub uid: u32,
    /// The host gid commands run as.
    pub gid: u32,
    /// The runtime's own effective uid.
    pub runtime_uid: u32,
}

impl CommandUser {
    /// The user commands run as under `limits` in this process.
    pub fn for_limits(limits: &Limits) -> CommandUser {
        let euid = rustix::process::geteuid().as_raw();
        let egid = rustix::process::getegid().as_raw();
        let (mode, uid, gid) = if euid != 0 {
            (CommandUserMode::Runtime, euid, egid)
        } else if limits.command_uid == 0 {
            (CommandUserMode::Root, 0, egid)
        } else {
            (
                CommandUserMode::Dedicated,
                limits.command_uid,
                limits.command_gid,
            )
        };
        CommandUser {
            mode,
            uid,
            gid,
            runtime_uid: euid,
        }
    }

    /// Whether the child gives up root for `uid`/`gid` before it execs.
    pub fn drops_root(&self) -> bool {
        self.mode == CommandUserMode::Dedicated
    }
}

impl Sandbox {
    /// The host user this sandbox's commands run as (see [`CommandUser`]).
    pub fn command_user(&self) -> CommandUser {
        CommandUser::for_limits(self.limits())
    }

    /// Hands `/output` and `/scratch` (the roots and everything in them down to
    /// `max_depth`) to `user`: directories and regular files not yet theirs are
    /// `chown`ed, without following a link. A regular file with more than one link that
    /// is not already the user's is left alone (it may be linked from elsewhere).
    pub(crate) fn hand_over(&self, user: &CommandUser) -> Result<()> {
        let max_depth = self.limits().max_depth;
        for root in [Root::Output, Root::Scratch] {
            let dir = self.root_dir(root)?;
            // The handle may be a path-only descriptor: open the folder itself to read it.
            rustix::fs::openat(
                dir.as_fd(),
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(std::io::Error::from)
            .and_then(|fd| chown_tree(fd.as_fd(), None, user.uid, user.gid, max_depth))
            .map_err(|e| SandboxError::io("handing to the command's user", root.as_str(), e))?;
        }
        Ok(())
    }
}

/// `chown`s `dir` itself (when `name` is `None`) and what is under it.
fn chown_tree(
    dir: BorrowedFd<'_>,
    name: Option<&std::ffi::CStr>,
    uid: u32,
    gid: u32,
    depth_left: usize,
) -> std::io::Result<()> {
    let owner = (
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    );
    if name.is_none() {
        let st = rustix::fs::fstat(dir)?;
        if st.st_uid != uid || st.st_gid != gid {
            rustix::fs::fchown(dir, owner.0, owner.1)?;
        }
    }
    let mut entries = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Removed meanwhile (a command of a parallel call): nothing to hand over.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let theirs = st.st_uid == uid && st.st_gid == gid;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                if !theirs {
                    chown_at(dir, name, owner)?;
                }
                if depth_left > 0 {
                    match rustix::fs::openat(
                        dir,
                        name,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) {
                        Ok(sub) => chown_tree(sub.as_fd(), Some(name), uid, gid, depth_left - 1)?,
                        // Replaced by a link or removed meanwhile: not followed.
                        Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP) => {}
                        Err(rustix::io::Errno::NOTDIR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            FileType::RegularFile if !theirs && (st.st_nlink == 1 || st.st_uid == uid) => {
                chown_at(dir, name, owner)?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn chown_at(
    dir: BorrowedFd<'_>,
    name: &std::ffi::CStr,
    (uid, gid): (Option<rustix::fs::Uid>, Option<rustix::fs::Gid>),
) -> std::io::Result<()> {
    match rustix::fs::chownat(dir, name, uid, gid, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Host paths to bind under [`PORTAL`] in the child's own mount namespace, so that
/// bubblewrap, once it runs as the command's user, finds them there.
#[derive(Debug, Default)]
pub(crate) struct Portal {
    entries: Vec<PortalEntry>,
}

#[derive(Debug)]
struct PortalEntry {
    /// The host path, opened (`O_PATH`) in the child.
    host: CString,
    /// Where it is bound under the portal.
    target: CString,
    /// Its device and inode when the command was built: the child refuses anything else.
    identity: (u64, u64),
    dir: bool,
}

impl Portal {
    /// Adds `host` (which must exist) as `PORTAL/name`; returns that path.
    pub(crate) fn add(&mut self, host: &Path, name: &str) -> Result<PathBuf> {
        let host_abs = std::path::absolute(host).map_err(|e| SandboxError::CommandStart {
            message: format!("resolving a folder of the sandbox: {e}"),
        })?;
        let st = rustix::fs::stat(&host_abs).map_err(|e| SandboxError::CommandStart {
            message: format!("a folder or program of the sandbox cannot be opened: {e}"),
        })?;
        let target = Path::new(PORTAL).join(name);
        let cstr = |p: &Path| {
            CString::new(p.as_os_str().as_bytes()).map_err(|_| SandboxError::NulInCommand {
                what: "command line",
            })
        };
        self.entries.push(PortalEntry {
            host: cstr(&host_abs)?,
            target: cstr(&target)?,
            identity: (st.st_dev as u64, st.st_ino as u64),
            dir: FileType::from_raw_mode(st.st_mode) == FileType::Directory,
        });
        Ok(target)
    }
}

/// Makes the child, between fork and exec, set up `portal` (when given) and then give up
/// root for `uid`/`gid` (no supplementary groups). Registered after any other `pre_exec`
/// step that needs root (joining the pids cgroup).
pub(crate) fn drop_root_at_exec(cmd: &mut Command, portal: Option<Portal>, uid: u32, gid: u32) {
    use std::os::unix::process::CommandExt as _;
    let entries = portal.map(|p| p.entries);
    let mut fds: Vec<libc::c_int> = vec![-1; entries.as_ref().map_or(0, Vec::len)];
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed. It calls only system calls through libc
    // (unshare, mount, open, fstat, mkdir, close, setgroups, setgid, setuid) on strings
    // built before the fork and on a buffer on its stack; it allocates nothing and takes
    // no lock (`fds` was sized before the fork and is only indexed).
    unsafe {
        cmd.pre_exec(move || {
            let check = |rc: libc::c_int| {
                if rc == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            };
            if let Some(entries) = &entries {
                check(libc::unshare(libc::CLONE_NEWNS))?;
                // Nothing mounted here reaches the host's namespace.
                check(libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ))?;
                // Open every source before the tmpfs hides whatever of them is under /tmp.
                for (i, e) in entries.iter().enumerate() {
                    let fd = libc::open(e.host.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let mut st: libc::stat = std::mem::zeroed();
                    check(libc::fstat(fd, &mut st))?;
                    if (st.st_dev as u64, st.st_ino as u64) != e.identity {
                        // Replaced since the command was built: never bound.
                        return Err(std::io::Error::from_raw_os_error(libc::ESTALE));
                    }
                    fds[i] = fd;
                }
                check(libc::mount(
                    c"provrun".as_ptr(),
                    c"/tmp".as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    c"mode=0755,size=65536".as_ptr().cast(),
                ))?;
                for (e, &fd) in entries.iter().zip(fds.iter()) {
                    if e.dir {
                        check(libc::mkdir(e.target.as_ptr(), 0o755))?;
                    } else {
                        let f = libc::open(
                            e.target.as_ptr(),
                            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                            0o644,
                        );
                        if f < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        libc::close(f);
                    }
                    let mut buf = [0u8; 32];
                    let source = proc_fd_path(fd, &mut buf);
                    check(libc::mount(
                        source,
                        e.target.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    ))?;
                }
            }
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setgid(gid))?;
            check(libc::setuid(uid))?;
            Ok(())
        });
    }
}

/// `/proc/self/fd/FD` as a NUL-terminated string in `buf` (no allocation).
fn proc_fd_path(fd: libc::c_int, buf: &mut [u8; 32]) -> *const libc::c_char {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let mut n = fd.max(0) as u32;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[PREFIX.len() + i] = digits[len - 1 - i];
    }
    buf[PREFIX.len() + len] = 0;
    buf.as_ptr().cast()
}

/// Why `user`'s uid or gid cannot be used in this process's user namespace, when it
/// cannot: a root that is itself inside a user namespace (a rootless container) can only
/// hand files to, and become, the ids its namespace maps. `None` when both are mapped (or
/// the maps cannot be read).
pub(crate) fn uid_unmapped(user: &CommandUser) -> Option<String> {
    let unmapped = |file: &str, id: u32| -> Option<String> {
        let map = std::fs::read_to_string(format!("/proc/self/{file}")).ok()?;
        let mapped = map.lines().any(|line| {
            let n: Vec<u64> = line
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            n.len() == 3 && (n[0]..n[0] + n[2]).contains(&u64::from(id))
        });
        (!mapped).then(|| {
            format!(
                "{} {id} is not mapped in provrun's user namespace (/proc/self/{file}: {})",
                if file == "uid_map" { "uid" } else { "gid" },
                map.split_whitespace().collect::<Vec<_>>().join(" ")
            )
        })
    };
    unmapped("uid_map", user.uid).or_else(|| unmapped("gid_map", user.gid))
}

/// Whether bubblewrap (`bwrap`) can build the sandbox when started as `uid`/`gid` from a
/// root runtime: tried once per process and user, with a command that does nothing.
pub(crate) fn check_user(bwrap: &Path, user: &CommandUser) -> Result<()> {
    /// Each (uid, gid) tried, with bubblewrap's answer.
    type Tried = BTreeMap<(u32, u32), std::result::Result<(), String>>;
    static TRIED: OnceLock<Mutex<Tried>> = OnceLock::new();
    let tried = TRIED.get_or_init(Default::default);
    let mut tried = tried.lock().unwrap_or_else(|p| p.into_inner());
    let answer = tried
        .entry((user.uid, user.gid))
        .or_insert_with(|| try_user(bwrap, user))
        .clone();
    answer.map_err(|reason| SandboxError::CommandUserUnavailable {
        uid: user.uid,
        gid: user.gid,
        reason,
    })
}

fn try_user(bwrap: &Path, user: &CommandUser) -> std::result::Result<(), String> {
    let tmp = tempfile::Builder::new()
        .prefix("provrun-user-probe-")
        .tempdir()
        .map_err(|e| format!("no temporary folder to try in: {e}"))?;
    let roots = RootPaths {
        input: tmp.path().join("input"),
        output: tmp.path().join("output"),
        scratch: tmp.path().join("scratch"),
    };
    let mut portal = Portal::default();
    let mut seen = Vec::new();
    for (dir, name) in [
        (&roots.input, "input"),
        (&roots.output, "output"),
        (&roots.scratch, "scratch"),
    ] {
        std::fs::create_dir(dir).map_err(|e| format!("making a folder to try in: {e}"))?;
        if name != "input" {
            rustix::fs::chown(
                dir.as_path(),
                Some(rustix::fs::Uid::from_raw(user.uid)),
                Some(rustix::fs::Gid::from_raw(user.gid)),
            )
            .map_err(|e| format!("handing a folder to uid {}: {e}", user.uid))?;
        }
        seen.push(portal.add(dir, name).map_err(|e| e.to_string())?);
    }
    let inside = RootPaths {
        input: seen[0].clone(),
        output: seen[1].clone(),
        scratch: seen[2].clone(),
    };
    let mut args = crate::command::bwrap_args(&inside, None, 64 << 10);
    args.push("/bin/true".into());
    let mut cmd = Command::new(bwrap);
    cmd.args(&args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    drop_root_at_exec(&mut cmd, Some(portal), user.uid, user.gid);
    let out = cmd
        .output()
        .map_err(|e| format!("starting bubblewrap as uid {}: {e}", user.uid))?;
    if out.status.success() {
        tracing::info!(
            uid = user.uid,
            gid = user.gid,
            "bubblewrap works as the command user"
        );
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "bubblewrap cannot build the sandbox as that user ({}: {})",
            out.status,
            err.trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fd_paths_are_written_without_allocating() {
        for fd in [0, 7, 10, 255, 1_048_575] {
            let mut buf = [0u8; 32];
            let p = proc_fd_path(fd, &mut buf);
            #[allow(unsafe_code)]
            // SAFETY: `proc_fd_path` NUL-terminates what it wrote into `buf`.
            let s = unsafe { std::ffi::CStr::from_ptr(p) };
            assert_eq!(s.to_str().unwrap(), format!("/proc/self/fd/{fd}"));
        }
    }

    #[test]
    fn the_user_follows_the_runtime_and_the_limits() {
        let euid = rustix::process::geteuid().as_raw();
        let u = CommandUser::for_limits(&Limits::default());
        assert_eq!(u.runtime_uid, euid);
        if euid == 0 {
            assert_eq!(u.mode, CommandUserMode::Dedicated);
            assert_eq!((u.uid, u.gid), (65_536, 65_536));
            let opt_out = CommandUser::for_limits(&Limits {
                command_uid: 0,
                command_gid: 0,
                ..Limits::default()
            });
            assert_eq!(opt_out.mode, CommandUserMode::Root);
            assert_eq!(opt_out.uid, 0);
            assert!(!opt_out.drops_root());
        } else {
            assert_eq!(u.mode, CommandUserMode::Runtime);
            assert_eq!(u.uid, euid);
            assert!(!u.drops_root());
        }
    }
}
