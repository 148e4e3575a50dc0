//! What this machine gives the sandbox, item by item with the fix for what is missing
//! ([`Sandbox::check_machine`], which `provrun doctor` prints): bubblewrap, each layer the
//! probe records (the same probe [`Sandbox::command_support`] runs), the kernel settings
//! behind unprivileged user namespaces, the pids cgroup, and whether the host user
//! commands run as can run them.

use serde::Serialize;

use super::cgroup::describe_cgroups;
use super::outcome::{Confinement, LayerName};
use super::probe::probe;
use crate::limits::Limits;
use crate::sandbox::Sandbox;
use crate::user::{CommandUser, CommandUserMode, uid_unmapped};

/// The oldest bubblewrap with every flag the sandbox uses (`--disable-userns`, `--size`).
const BWRAP_OLDEST: (u32, u32, u32) = (0, 8, 0);

/// One item of [`MachineReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MachineCheck {
    /// What is checked: `bubblewrap`, a layer's recorded name (`namespaces`, `landlock`,
    /// `seccomp`, `rlimits`, `process_limit`) or `command_user`.
    pub name: String,
    /// Whether it is there and usable.
    pub ok: bool,
    /// What was found.
    pub detail: String,
    /// What to do when it is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What this machine gives the sandbox.
#[derive(Debug, Clone, Serialize)]
pub struct MachineReport {
    /// Every item, bubblewrap first, then the layers, then the command user.
    pub checks: Vec<MachineCheck>,
    /// Whether commands would run with every layer the evidence records (and, as root, the
    /// command user can run them): no command would be refused or degraded.
    pub fully_confined: bool,
}

fn check(name: &str, ok: bool, detail: impl Into<String>, fix: impl Into<String>) -> MachineCheck {
    MachineCheck {
        name: name.to_string(),
        ok,
        detail: detail.into(),
        fix: (!ok).then(|| fix.into()),
    }
}

/// `bubblewrap 0.8.0` as (0, 8, 0).
fn version_of(text: &str) -> Option<(u32, u32, u32)> {
    let word = text
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    let mut parts = word.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
        parts.next().flatten().unwrap_or(0),
    ))
}

impl Sandbox {
    /// Checks what this machine gives commands run under `limits` (its `command_uid`
    /// matters as root): runs the same probe as [`Sandbox::command_support`] and, as root,
    /// tries bubblewrap as the command user. Blocks for as long as those take.
    pub fn check_machine(limits: &Limits) -> MachineReport {
        let conf = probe();
        let drops_root = CommandUser::for_limits(limits).drops_root();
        let mut checks = vec![bubblewrap_check(conf), namespaces_check(conf, drops_root)];
        for (layer, fix) in [
            (
                LayerName::Landlock,
                "Linux 5.13 or later with Landlock enabled: add `landlock` to the kernel's \
                 `lsm=` boot parameter (/sys/kernel/security/lsm lists the active ones)",
            ),
            (
                LayerName::Seccomp,
                "a kernel with CONFIG_SECCOMP_FILTER on x86-64, aarch64 or riscv64",
            ),
            (
                LayerName::Rlimits,
                "run provrun itself (it is its own helper), or name the `provrun-confine` \
                 helper in PROVRUN_CONFINE",
            ),
        ] {
            checks.push(layer_check(conf, layer, fix));
        }
        checks.push(process_limit_check(conf));
        let user = command_user_check(conf, limits);
        let fully_confined = conf.is_complete() && user.ok;
        checks.push(user);
        MachineReport {
            checks,
            fully_confined,
        }
    }
}

fn bubblewrap_check(conf: &Confinement) -> MachineCheck {
    let install = "install bubblewrap 0.8.0 or later (Debian and Ubuntu: `apt-get install \
                   bubblewrap`; Fedora: `dnf install bubblewrap`)";
    match (&conf.bwrap, &conf.bubblewrap_version) {
        (None, _) => check("bubblewrap", false, "`bwrap` is not on PATH", install),
        (Some(path), version) => {
            let shown = version
                .clone()
                .unwrap_or_else(|| "of unknown version".into());
            let old = version
                .as_deref()
                .and_then(version_of)
                .is_none_or(|v| v < BWRAP_OLDEST);
            let detail = format!("{shown} at {}", path.display());
            if old {
                check(
                    "bubblewrap",
                    false,
                    format!("{detail}: older than 0.8.0 (it lacks --disable-userns or --size)"),
                    install,
                )
            } else {
                check("bubblewrap", true, detail, "")
            }
        }
    }
}

/// A kernel setting under /proc/sys, when the kernel has it.
fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{path}"))
        .ok()
        .map(|v| v.trim().to_string())
}

/// The kernel settings that stop an unprivileged user from making a user namespace, each
/// with its fix.
fn userns_blockers() -> Vec<(String, &'static str)> {
    let mut found = Vec::new();
    if sysctl("user/max_user_namespaces").as_deref() == Some("0") {
        found.push((
            "user.max_user_namespaces = 0".to_string(),
            "`sysctl -w user.max_user_namespaces=15000` (and in /etc/sysctl.d/ to keep it)",
        ));
    }
    if sysctl("kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        found.push((
            "kernel.unprivileged_userns_clone = 0".to_string(),
            "`sysctl -w kernel.unprivileged_userns_clone=1` (and in /etc/sysctl.d/ to keep it)",
        ));
    }
    if sysctl("kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        found.push((
            "kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10 and later)".to_string(),
            "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (and in /etc/sysctl.d/), \
             or an AppArmor profile for /usr/bin/bwrap with `userns,` (Ubuntu ships one in \
             the apparmor package: /etc/apparmor.d/bwrap-userns-restrict)",
        ));
    }
    found
}

/// The namespaces layer; `drops_root`: provrun is root and commands run as the dedicated
/// user, who needs unprivileged user namespaces.
fn namespaces_check(conf: &Confinement, drops_root: bool) -> MachineCheck {
    let layer = conf.layer(LayerName::Namespaces);
    let available = layer.is_some_and(|l| l.available);
    let probed = layer.map(|l| l.detail.clone()).unwrap_or_default();
    let blockers = userns_blockers();
    // As root, bubblewrap itself may make namespaces; the command user needs them
    // unprivileged, so the kernel settings count too.
    let ok = available && (!drops_root || blockers.is_empty());
    let mut detail = probed;
    for (what, _) in &blockers {
        detail.push_str(&format!("; {what}"));
    }
    let fix = if blockers.is_empty() {
        "allow unprivileged user namespaces: in a container, its runtime's seccomp profile \
         or a missing capability may forbid them (Docker: a seccomp profile that allows \
         `clone`/`unshare` with CLONE_NEWUSER, e.g. `--security-opt seccomp=unconfined`)"
            .to_string()
    } else {
        blockers
            .iter()
            .map(|(_, fix)| *fix)
            .collect::<Vec<_>>()
            .join("; ")
    };
    check(LayerName::Namespaces.as_str(), ok, detail, fix)
}

fn layer_check(conf: &Confinement, layer: LayerName, fix: &str) -> MachineCheck {
    let entry = conf.layer(layer);
    let ok = entry.is_some_and(|l| l.available);
    let mut detail = entry.map(|l| l.detail.clone()).unwrap_or_default();
    if layer == LayerName::Landlock
        && let Some(abi) = conf.landlock_abi
    {
        detail.push_str(&format!(
            " (kernel ABI {abi}, rules written for {}{})",
            conf.landlock_abi_wanted,
            if conf.landlock_unenforced.is_empty() || abi == 0 {
                String::new()
            } else {
                format!("; not enforced: {}", conf.landlock_unenforced.join(", "))
            }
        ));
    }
    check(layer.as_str(), ok, detail, fix)
}

fn process_limit_check(conf: &Confinement) -> MachineCheck {
    let entry = conf.layer(LayerName::ProcessLimit);
    let ok = entry.is_some_and(|l| l.available);
    let mut detail = entry.map(|l| l.detail.clone()).unwrap_or_default();
    let cgroups = describe_cgroups();
    if !cgroups.is_empty() {
        detail.push_str(&format!("; {cgroups}"));
    }
    let fix = if rustix::process::geteuid().is_root() {
        "as root a pids cgroup holds each command: delegate the pids controller to provrun's \
         cgroup (cgroup v2: `echo +pids > cgroup.subtree_control` of the cgroup above it, \
         systemd: `Delegate=pids` in its unit, Docker: `--cgroupns=private`), or mount a v1 \
         pids hierarchy (`mount -t cgroup -o pids cgroup /sys/fs/cgroup/pids`); or run \
         provrun as a non-root user (RLIMIT_NPROC then applies)"
    } else {
        "needs the helper's rlimits (see rlimits)"
    };
    check(LayerName::ProcessLimit.as_str(), ok, detail, fix)
}

fn command_user_check(conf: &Confinement, limits: &Limits) -> MachineCheck {
    let user = CommandUser::for_limits(limits);
    let name = "command_user";
    match user.mode {
        CommandUserMode::Runtime => check(
            name,
            true,
            format!(
                "provrun is not root: commands run as its own uid {}",
                user.uid
            ),
            "",
        ),
        CommandUserMode::Root => check(
            name,
            true,
            "provrun is root and `command_uid = 0` opted out: commands run as root on the \
             host (recorded as mode `root`)",
            "",
        ),
        CommandUserMode::Dedicated => {
            let opt_out = "or set `command_uid = 0` (with `command_gid = 0`) in [limits] to run \
                           commands as root on the host, on record";
            if let Some(why) = uid_unmapped(&user) {
                return check(
                    name,
                    false,
                    why,
                    format!(
                        "give provrun's user namespace (its container) a uid range holding \
                         {}, or pick a `command_uid`/`command_gid` that is mapped, {opt_out}",
                        user.uid
                    ),
                );
            }
            let tried = match (&conf.bwrap, conf.has(LayerName::Namespaces)) {
                (Some(bwrap), true) => crate::user::check_user(bwrap, &user).map_err(|e| match e {
                    crate::SandboxError::CommandUserUnavailable { reason, .. } => reason,
                    other => other.to_string(),
                }),
                _ => Ok(()),
            };
            match tried {
                Ok(()) => check(
                    name,
                    true,
                    format!(
                        "provrun is root: commands run as uid {} gid {}, and bubblewrap \
                         builds the sandbox as that user",
                        user.uid, user.gid
                    ),
                    "",
                ),
                Err(reason) => check(
                    name,
                    false,
                    format!(
                        "commands run as uid {} gid {}, and bubblewrap cannot build the \
                         sandbox as that user: {reason}",
                        user.uid, user.gid
                    ),
                    format!("allow unprivileged user namespaces (see namespaces), {opt_out}"),
                ),
            }
        }
    }
}

/// This process's open-files limit: (soft, hard); `None` for unlimited.
pub fn open_files_limit() -> (Option<u64>, Option<u64>) {
    let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (l.current, l.maximum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bubblewrap_versions_are_read_from_its_answer() {
        assert_eq!(version_of("bubblewrap 0.8.0"), Some((0, 8, 0)));
        assert_eq!(version_of("bubblewrap 0.11.1"), Some((0, 11, 1)));
        assert_eq!(version_of("bubblewrap 0.7"), Some((0, 7, 0)));
        assert!(version_of("bubblewrap 0.7.9").unwrap() < BWRAP_OLDEST);
        assert!(version_of("bubblewrap 0.10.0").unwrap() >= BWRAP_OLDEST);
        assert_eq!(version_of("bubblewrap"), None);
    }

    #[test]
    fn the_report_has_every_recorded_layer_and_agrees_with_the_probe() {
        let report = Sandbox::check_machine(&Limits::default());
        let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bubblewrap",
                "namespaces",
                "landlock",
                "seccomp",
                "rlimits",
                "process_limit",
                "command_user"
            ]
        );
        let conf = Sandbox::command_support();
        for layer in LayerName::ALL {
            let c = report
                .checks
                .iter()
                .find(|c| c.name == layer.as_str())
                .unwrap();
            if !conf.has(layer) {
                assert!(!c.ok && c.fix.is_some(), "{c:?}");
            }
        }
        assert!(report.fully_confined <= conf.is_complete());
        assert!(report.checks.iter().all(|c| c.ok == c.fix.is_none()));
    }
}
