//! [`UidLease`]: a host uid and gid of its own for one run's sandbox, so that one run's
//! program cannot reach another's files.
//!
//! When the runtime is root, confined programs run as a dedicated unprivileged user
//! ([`Limits::command_uid`], see `crate::user`). Every sandbox sharing that one uid means a
//! program can reach whatever another run's program left owned by it — and a program that
//! leaves a set-uid file on the host hands that uid to any local user while the run lasts.
//! A lease gives a run (a `provrun wrap`, say) the first of `command_uid + 1` …
//! `command_uid + SLOTS` that no other sandbox holds and no process runs as, for as long
//! as the lease lives; its [`limits`](UidLease::limits) name it, and everything that reads
//! the limits (the bind hand-over, the user change, the evidence's `command_user`) uses it.
//!
//! A lease is held by binding the abstract Unix socket `provrun-sandbox-uid-UID`: the
//! kernel lets one socket at a time have the name (across every process of the network
//! namespace) and drops it when the process ends, however it ends. When the runtime is not
//! root, or `command_uid` is 0, there is nothing to lease: the limits are kept as they are.

use std::os::unix::net::UnixListener;

use crate::error::{Result, SandboxError};
use crate::limits::Limits;
use crate::user::{CommandUser, uid_unmapped};

/// How many uids above `command_uid` leases are taken from.
pub const LEASE_SLOTS: u32 = 1024;

/// A uid and gid held for one run's sandbox (see the module docs). Dropping it gives them
/// back.
#[derive(Debug)]
pub struct UidLease {
    ids: Option<(u32, u32)>,
    _hold: Option<UnixListener>,
}

impl UidLease {
    /// Leases the first free uid (and the gid at the same offset) above `limits`'
    /// `command_uid`, when the runtime is root and commands drop root; otherwise a lease
    /// of nothing, whose [`limits`](UidLease::limits) are `limits` unchanged.
    ///
    /// # Errors
    ///
    /// [`SandboxError::CommandUserUnavailable`] when every slot is held, or in use by a
    /// process, or not mapped in provrun's user namespace.
    pub fn acquire(limits: &Limits) -> Result<UidLease> {
        let base = CommandUser::for_limits(limits);
        if !base.drops_root() {
            return Ok(UidLease {
                ids: None,
                _hold: None,
            });
        }
        let mut last_reason = String::from("every slot is held by another sandbox");
        for k in 1..=LEASE_SLOTS {
            let (Some(uid), Some(gid)) = (base.uid.checked_add(k), base.gid.checked_add(k)) else {
                break;
            };
            let candidate = CommandUser {
                uid,
                gid,
                ..base.clone()
            };
            if let Some(reason) = uid_unmapped(&candidate) {
                last_reason = reason;
                break;
            }
            let Some(hold) = hold(uid) else { continue };
            if in_use(uid, gid) {
                last_reason = format!("uid {uid} is in use by a process");
                continue;
            }
            tracing::debug!(uid, gid, "leased a uid for the sandbox");
            return Ok(UidLease {
                ids: Some((uid, gid)),
                _hold: Some(hold),
            });
        }
        Err(SandboxError::CommandUserUnavailable {
            uid: base.uid,
            gid: base.gid,
            reason: format!(
                "no uid of its own is free for the sandbox among {} … {}: {last_reason}",
                base.uid.saturating_add(1),
                base.uid.saturating_add(LEASE_SLOTS)
            ),
        })
    }

    /// The uid and gid leased, when there are.
    pub fn ids(&self) -> Option<(u32, u32)> {
        self.ids
    }

    /// `limits` with the leased uid and gid as `command_uid` and `command_gid`.
    pub fn limits(&self, limits: &Limits) -> Limits {
        let mut out = limits.clone();
        if let Some((uid, gid)) = self.ids {
            out.command_uid = uid;
            out.command_gid = gid;
        }
        out
    }
}

/// Takes the name of `uid`'s lease, when no one holds it.
fn hold(uid: u32) -> Option<UnixListener> {
    use std::os::linux::net::SocketAddrExt as _;
    let name = format!("provrun-sandbox-uid-{uid}");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).ok()?;
    UnixListener::bind_addr(&addr).ok()
}

/// Whether a process runs with `uid` or `gid` (real, effective, saved or file-system),
/// by the host's `/proc`.
fn in_use(uid: u32, gid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .any(|status| {
            status.lines().any(|line| {
                let ids = |prefix: &str, id: u32| {
                    line.strip_prefix(prefix).is_some_and(|rest| {
                        rest.split_whitespace()
                            .any(|w| w.parse::<u32>().is_ok_and(|v| v == id))
                    })
                };
                ids("Uid:", uid) || ids("Gid:", gid)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_distinct_while_held_and_given_back_when_dropped() {
        let limits = Limits::default();
        let a = UidLease::acquire(&limits).unwrap();
        let b = UidLease::acquire(&limits).unwrap();
        if rustix::process::geteuid().is_root() {
            let (ua, ub) = (a.ids().unwrap(), b.ids().unwrap());
            assert_ne!(ua, ub);
            assert!(ua.0 > limits.command_uid && ua.0 <= limits.command_uid + LEASE_SLOTS);
            assert_eq!(a.limits(&limits).command_uid, ua.0);
            assert_eq!(a.limits(&limits).command_gid, ua.1);
            drop(a);
            let c = UidLease::acquire(&limits).unwrap();
            assert!(c.ids().is_some() && c.ids() != Some(ub));
        } else {
            assert_eq!(a.ids(), None);
            assert_eq!(a.limits(&limits), limits);
        }
        // Opting out of the dedicated user leases nothing.
        let root = Limits {
            command_uid: 0,
            command_gid: 0,
            ..Limits::default()
        };
        assert_eq!(UidLease::acquire(&root).unwrap().ids(), None);
    }
}
