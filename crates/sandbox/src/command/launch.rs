//! Building the confined command for a [`Launch`]: bubblewrap's and the helper's command
//! lines, the binds (through the portal when root is dropped), the environment, the pids
//! cgroup and the user the program runs as.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Result, SandboxError};
use crate::forward::Forward;
use crate::limits::Limits;
use crate::sandbox::{RootPaths, Sandbox};
use crate::trail::watch::TrailPlan;
use crate::user::{CommandUser, Portal};

use super::bwrap::{
    COMMAND_LAYOUT, HelperExtras, Layout, bwrap_args_in, helper_args_in, os, sandbox_env,
};
use super::cgroup::Cgroup;
use super::child::join_cgroup_at_exec;
use super::outcome::{Confinement, LayerName};
use super::{HELPER_NAME, NETWORK_ETC, SANDBOX_OWN_PROCESSES, SANDBOX_PATH};

/// Where the folder of forwarded sockets is bound inside the sandbox.
pub(super) const FORWARD_DIR_INSIDE: &str = "/run/provrun-forward";

/// What one confined program needs besides the sandbox's roots.
pub(super) struct Launch<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// Variables beyond `PATH`, `HOME`, `TMPDIR` and `LANG` (set after them).
    pub env: &'a [(String, String)],
    /// Host paths visible read-only at the same paths.
    pub read_only: &'a [PathBuf],
    /// Share the host's network namespace.
    pub network: bool,
    /// Where the roots appear, the working folder and `HOME`.
    pub layout: &'a Layout,
    /// The host folder holding the Unix sockets to forward to (bound at
    /// [`FORWARD_DIR_INSIDE`]), and the forwards as the sandbox sees them.
    pub forwards: Option<(&'a Path, &'a [Forward])>,
    /// Bytes of the quota already used (the largest file is what is left); `None`: the
    /// largest file is the whole quota.
    pub used_bytes: Option<u64>,
}

impl<'a> Launch<'a> {
    /// A command's launch: `argv` with `env` and `read_only` paths, in the command layout,
    /// with the quota's `used_bytes` already used.
    pub(super) fn command(
        argv: &'a [String],
        env: &'a [(String, String)],
        read_only: &'a [PathBuf],
        used_bytes: u64,
        network: bool,
    ) -> Self {
        Launch {
            argv,
            env,
            read_only,
            network,
            layout: &COMMAND_LAYOUT,
            forwards: None,
            used_bytes: Some(used_bytes),
        }
    }
}

impl Sandbox {
    /// The command that runs `launch.argv` under every layer this machine has, with
    /// `launch.env` as its only environment and the read-only host paths visible
    /// (read-only, at the same paths); stdout and stderr piped. The pids cgroup, when
    /// there is one, is joined at exec. When the trail is recorded the command starts as
    /// the trail's stub, and the plan for its tracer comes back with it.
    pub(super) fn confined_command(
        &self,
        conf: &Confinement,
        launch: &Launch<'_>,
    ) -> Result<(Command, PathBuf, Option<Cgroup>, Option<TrailPlan>)> {
        let limits = self.limits().clone();
        let roots = self.root_paths().clone();
        let namespaces = conf.has(LayerName::Namespaces);
        let helper = conf.helper.as_deref().filter(|_| {
            conf.has(LayerName::Landlock)
                || conf.has(LayerName::Seccomp)
                || conf.has(LayerName::Rlimits)
        });
        let rl = helper_rlimits(&limits, conf.use_nproc, launch.used_bytes);
        let require: Vec<&str> = [LayerName::Landlock, LayerName::Seccomp, LayerName::Rlimits]
            .into_iter()
            .filter(|l| conf.has(*l))
            .map(LayerName::as_str)
            .collect();
        let forwards = launch.forwards.map_or(&[][..], |(_, f)| f);
        let extras = |inside: bool| HelperExtras {
            require: &require,
            limits: &rl,
            probe: false,
            extra_read_only: launch.read_only,
            layout: if inside {
                launch.layout
            } else {
                &COMMAND_LAYOUT
            },
            forwards: if inside { forwards } else { &[] },
        };

        let (user, mut portal) = self.run_as(conf, &limits)?;
        let mut args: Vec<OsString> = Vec::new();
        // Where the command's user reaches the helper (the trail's stub is the helper).
        let mut stub: Option<PathBuf> = None;
        let program: PathBuf = match (namespaces, &conf.bwrap, helper) {
            (true, Some(bwrap), h) => {
                let sources = BindSources::new(
                    &roots,
                    h,
                    launch.read_only,
                    launch.forwards.map(|(dir, _)| dir),
                    portal.as_mut(),
                )?;
                stub.clone_from(&sources.helper);
                args = bwrap_args_in(
                    &sources.roots,
                    sources.helper.as_deref(),
                    limits.command_tmp_bytes,
                    launch.layout,
                );
                // Before the trailing `--chdir DIR --`: extra binds and variables.
                let tail = args.split_off(args.len() - 3);
                args.extend(extra_bwrap_args(launch, &sources));
                args.extend(tail);
                if h.is_some() {
                    args.extend(helper_args_in(&roots, true, &extras(true)));
                }
                bwrap.clone()
            }
            (_, _, Some(h)) => {
                args.extend(helper_args_in(&roots, false, &extras(false)));
                stub = Some(h.to_path_buf());
                h.to_path_buf()
            }
            _ => PathBuf::from(&launch.argv[0]),
        };
        let direct = args.is_empty();
        args.extend(launch.argv.iter().skip(usize::from(direct)).map(os));

        // The helper started directly: named so that `arg0_dispatch` knows it.
        let arg0 = (!namespaces && helper.is_some()).then_some(HELPER_NAME);
        let (program, args, arg0, trail) =
            super::traced::traced(self, conf, stub.as_deref(), program, args, arg0);
        let mut cmd = Command::new(&program);
        if let Some(name) = arg0 {
            std::os::unix::process::CommandExt::arg0(&mut cmd, name);
        }
        cmd.args(&args)
            .env_clear()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        if namespaces {
            // bubblewrap passes its environment on: the variables never sit on a command
            // line (where every local user could read them in /proc).
            cmd.envs(sandbox_env(launch.layout))
                .envs(launch.env.iter().map(|(k, v)| (k, v)));
        } else {
            set_host_environment(&mut cmd, &roots, launch.env);
        }
        let cgroup = match &conf.pids_cgroup {
            Some(parent) => Some(join_pids_cgroup(&mut cmd, parent, &limits)?),
            None => None,
        };
        if user.drops_root() {
            if let Some((dir, _)) = launch.forwards {
                hand_over_sockets(dir, &user)?;
            }
            // After joining the cgroup, which needs root.
            crate::user::drop_root_at_exec(&mut cmd, portal, user.uid, user.gid);
        }
        Ok((cmd, program, cgroup, trail))
    }

    /// The user a command runs as. As root, the dedicated user: /output and /scratch are
    /// handed over to it, and bubblewrap (when used) finds its sources through the
    /// returned portal (see `crate::user`).
    fn run_as(&self, conf: &Confinement, limits: &Limits) -> Result<(CommandUser, Option<Portal>)> {
        let user = CommandUser::for_limits(limits);
        let mut portal = None;
        if user.drops_root() {
            // A root inside a user namespace that does not map the user can neither hand
            // it the folders nor become it: say so, with the opt-out, before trying.
            if let Some(reason) = crate::user::uid_unmapped(&user) {
                return Err(SandboxError::CommandUserUnavailable {
                    uid: user.uid,
                    gid: user.gid,
                    reason,
                });
            }
            self.hand_over(&user)?;
            if let (true, Some(bwrap)) = (conf.has(LayerName::Namespaces), &conf.bwrap) {
                crate::user::check_user(bwrap, &user)?;
                portal = Some(Portal::default());
            }
        }
        Ok((user, portal))
    }
}

/// Gives the folder of forwarded sockets, and the sockets in it, to the user the program
/// runs as (so that it may enter the folder and connect), without following a link.
fn hand_over_sockets(dir: &Path, user: &CommandUser) -> Result<()> {
    let owner = (
        Some(rustix::fs::Uid::from_raw(user.uid)),
        Some(rustix::fs::Gid::from_raw(user.gid)),
    );
    let fail = |e: std::io::Error| SandboxError::CommandStart {
        message: format!("handing the forwarded sockets to the program's user: {e}"),
    };
    rustix::fs::chownat(
        rustix::fs::CWD,
        dir,
        owner.0,
        owner.1,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(|e| fail(e.into()))?;
    for entry in std::fs::read_dir(dir).map_err(fail)? {
        let entry = entry.map_err(fail)?;
        if entry.file_type().is_ok_and(|t| {
            use std::os::unix::fs::FileTypeExt as _;
            t.is_socket()
        }) {
            rustix::fs::chownat(
                rustix::fs::CWD,
                entry.path(),
                owner.0,
                owner.1,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| fail(e.into()))?;
        }
    }
    Ok(())
}

/// The paths bubblewrap binds for a command: the host paths, or, when root is dropped,
/// their paths in the portal (see `crate::user`).
struct BindSources {
    /// Bound at /input, /output and /scratch.
    roots: RootPaths,
    /// The helper, bound read-only.
    helper: Option<PathBuf>,
    /// The extra read-only paths, in their order.
    read_only: Vec<PathBuf>,
    /// The folder of forwarded sockets.
    forward_dir: Option<PathBuf>,
}

impl BindSources {
    /// The sources for `roots`, the `helper`, the `read_only` host paths and the folder
    /// of forwarded sockets, through the `portal` when there is one.
    fn new(
        roots: &RootPaths,
        helper: Option<&Path>,
        read_only: &[PathBuf],
        forward_dir: Option<&Path>,
        portal: Option<&mut Portal>,
    ) -> Result<Self> {
        let Some(portal) = portal else {
            return Ok(Self {
                roots: roots.clone(),
                helper: helper.map(Path::to_path_buf),
                read_only: read_only.to_vec(),
                forward_dir: forward_dir.map(Path::to_path_buf),
            });
        };
        let roots = RootPaths {
            input: portal.add(&roots.input, "input")?,
            output: portal.add(&roots.output, "output")?,
            scratch: portal.add(&roots.scratch, "scratch")?,
        };
        let helper = match helper {
            Some(h) => Some(portal.add(h, "helper")?),
            None => None,
        };
        let read_only = read_only
            .iter()
            .enumerate()
            .map(|(i, p)| portal.add(p, &format!("ro{i}")))
            .collect::<Result<_>>()?;
        let forward_dir = match forward_dir {
            Some(d) => Some(portal.add(d, "forward")?),
            None => None,
        };
        Ok(Self {
            roots,
            helper,
            read_only,
            forward_dir,
        })
    }
}

/// bubblewrap's arguments for what a launch adds to the sandbox: the host's network and
/// its few /etc files when `network`, each read-only path bound from its source, and the
/// folder of forwarded sockets (the variables are bubblewrap's environment, not
/// arguments).
fn extra_bwrap_args(launch: &Launch<'_>, sources: &BindSources) -> Vec<OsString> {
    let mut args = Vec::new();
    if launch.network {
        args.push(os("--share-net"));
        for f in NETWORK_ETC {
            let p = Path::new("/etc").join(f);
            if p.exists() {
                args.extend([os("--ro-bind"), p.clone().into(), p.into()]);
            }
        }
    }
    for (p, src) in launch.read_only.iter().zip(&sources.read_only) {
        args.extend([os("--ro-bind"), src.clone().into(), p.clone().into()]);
    }
    if let Some(dir) = &sources.forward_dir {
        args.extend([os("--ro-bind"), dir.clone().into(), os(FORWARD_DIR_INSIDE)]);
    }
    args
}

/// The rlimits the helper sets on a command; `fsize` is what is left of the quota after
/// `used_bytes` (the whole quota without), and `nproc` is set only when `use_nproc` (not
/// as root).
fn helper_rlimits(
    limits: &Limits,
    use_nproc: bool,
    used_bytes: Option<u64>,
) -> BTreeMap<String, u64> {
    let mut rl: BTreeMap<String, u64> = BTreeMap::new();
    rl.insert("cpu".into(), limits.command_cpu_s);
    rl.insert("as".into(), limits.command_memory_bytes);
    rl.insert(
        "fsize".into(),
        limits
            .max_total_bytes
            .saturating_sub(used_bytes.unwrap_or(0)),
    );
    rl.insert("nofile".into(), 1024);
    rl.insert("core".into(), 0);
    if use_nproc {
        rl.insert("nproc".into(), limits.command_processes);
    }
    rl
}

/// Without bubblewrap the environment is set on `cmd` itself (`PATH`, `HOME`, `TMPDIR`,
/// `LANG`, then `env`), and it starts in /scratch at its host path.
fn set_host_environment(cmd: &mut Command, roots: &RootPaths, env: &[(String, String)]) {
    cmd.env("PATH", SANDBOX_PATH)
        .env("HOME", &roots.scratch)
        .env("TMPDIR", &roots.scratch)
        .env("LANG", "C.UTF-8")
        .current_dir(&roots.scratch);
    for (k, v) in env {
        cmd.env(k, v);
    }
}

/// Creates a pids cgroup for one command under `parent` and has `cmd` join it at exec.
fn join_pids_cgroup(cmd: &mut Command, parent: &Path, limits: &Limits) -> Result<Cgroup> {
    let cg =
        Cgroup::create(parent, limits.command_processes + SANDBOX_OWN_PROCESSES).map_err(|e| {
            SandboxError::CommandStart {
                message: format!("creating the pids cgroup: {e}"),
            }
        })?;
    match cg.procs() {
        Ok(procs) => join_cgroup_at_exec(cmd, procs),
        Err(e) => {
            cg.remove();
            return Err(SandboxError::CommandStart {
                message: format!("opening the pids cgroup: {e}"),
            });
        }
    }
    Ok(cg)
}
