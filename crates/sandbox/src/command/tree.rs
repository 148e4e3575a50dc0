//! Killing a confined command's whole tree: its process group, its child, its cgroup.

use std::process::Child;

use super::cgroup::Cgroup;

/// Kills `child`'s process group, `child` itself and every process of `cgroup`.
pub(super) fn kill_tree(child: &mut Child, cgroup: Option<&Cgroup>) {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    if let Some(cg) = cgroup {
        cg.kill_all();
    }
}
