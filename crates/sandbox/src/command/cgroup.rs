//! The pids cgroup (used when running as root).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The folder of this process's cgroup in the `pids` hierarchy (v1 or v2), if writable.
pub(super) fn pids_cgroup_parent() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut candidates = Vec::new();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let v1 = controllers.split(',').any(|c| c == "pids");
        let v2 = controllers.is_empty();
        if !v1 && !v2 {
            continue;
        }
        for m in mountinfo.lines() {
            let Some((left, right)) = m.split_once(" - ") else {
                continue;
            };
            let fields: Vec<&str> = left.split(' ').collect();
            let rfields: Vec<&str> = right.split(' ').collect();
            if fields.len() < 5 || rfields.len() < 3 {
                continue;
            }
            let (root, mount_point) = (fields[3], fields[4]);
            let fits = if v1 {
                rfields[0] == "cgroup" && rfields[2].split(',').any(|o| o == "pids")
            } else {
                rfields[0] == "cgroup2"
            };
            if !fits {
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .unwrap_or(path)
                .trim_start_matches('/');
            let dir = Path::new(mount_point).join(rel);
            if !v1 {
                let controllers =
                    std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
                if !controllers.split_whitespace().any(|c| c == "pids") {
                    continue;
                }
            }
            candidates.push(dir);
        }
    }
    candidates.into_iter().find(|dir| {
        // Usable only if we can make, limit and remove a child.
        Cgroup::create(dir, 8).is_ok_and(|cg| {
            cg.remove();
            true
        })
    })
}

/// This process's cgroups as `provrun doctor` describes them: the v2 cgroup (its folder
/// and the controllers it hands to its children) and any v1 `pids` hierarchy; empty when
/// `/proc/self/cgroup` cannot be read.
pub(super) fn describe_cgroups() -> String {
    let Ok(cgroups) = std::fs::read_to_string("/proc/self/cgroup") else {
        return String::new();
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mount_of = |kind: &str, option: Option<&str>| {
        mountinfo.lines().find_map(|m| {
            let (left, right) = m.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let rfields: Vec<&str> = right.split(' ').collect();
            let fits = rfields.first() == Some(&kind)
                && option
                    .is_none_or(|o| rfields.get(2).is_some_and(|f| f.split(',').any(|x| x == o)));
            (fits && fields.len() > 4).then(|| fields[4].to_string())
        })
    };
    let mut parts = Vec::new();
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next(), fields.next(), fields.next());
        match (controllers, path) {
            (Some(""), Some(path)) => {
                if let Some(mount) = mount_of("cgroup2", None) {
                    let dir = Path::new(&mount).join(path.trim_start_matches('/'));
                    let subtree = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                        .unwrap_or_else(|_| "unreadable".into());
                    parts.push(format!(
                        "cgroup v2 at {} (its subtree_control: {})",
                        dir.display(),
                        if subtree.is_empty() { "none" } else { &subtree }
                    ));
                }
            }
            (Some(c), Some(path)) if c.split(',').any(|c| c == "pids") => {
                if let Some(mount) = mount_of("cgroup", Some("pids")) {
                    parts.push(format!(
                        "cgroup v1 pids hierarchy at {}{}",
                        mount,
                        if path == "/" { "" } else { path }
                    ));
                }
            }
            _ => {}
        }
    }
    parts.join("; ")
}

#[derive(Debug)]
pub(super) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    pub(super) fn create(parent: &Path, max: u64) -> std::io::Result<Cgroup> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(format!("provrun-cmd-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let cg = Cgroup { dir };
        if let Err(e) = std::fs::write(cg.dir.join("pids.max"), max.to_string()) {
            cg.remove();
            return Err(e);
        }
        Ok(cg)
    }

    pub(super) fn procs(&self) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))
    }

    pub(super) fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Kills whatever is left in the cgroup.
    pub(super) fn kill_all(&self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        for pid in self.pids() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }

    /// Kills what is left and removes the cgroup (retrying while processes die).
    pub(super) fn remove(&self) {
        for _ in 0..200 {
            self.kill_all();
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        tracing::warn!(cgroup = %self.dir.display(), "could not remove a command cgroup");
    }
}
