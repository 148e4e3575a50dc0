//! Finding bubblewrap and the helper, and probing what confinement this machine offers.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::sandbox::RootPaths;

use super::bwrap::{helper_args, os};
use super::bwrap_args;
use super::cgroup::pids_cgroup_parent;
use super::outcome::{Confinement, LayerName};
use super::{HELPER_ENV, HELPER_NAME};

// ---------------------------------------------------------------------------------------
// Finding the tools
// ---------------------------------------------------------------------------------------

pub(super) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .chain(["/usr/bin", "/bin", "/usr/local/bin"].map(|d| Path::new(d).join(name)))
        .find(|p| p.is_file())
}

/// Where the helper is: `$PROVRUN_CONFINE`; the running executable itself when it called
/// [`crate::arg0_dispatch`]; else a `provrun-confine` next to the running executable, one
/// folder up (cargo's test binaries live in `deps/`), or on `PATH`.
pub(super) fn find_helper() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(HELPER_ENV) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let exe = std::env::current_exe().ok()?;
    if crate::dispatch::self_is_helper() && exe.is_file() {
        return Some(exe);
    }
    let dir = exe.parent()?;
    [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(HELPER_NAME))
        .find(|p| p.is_file())
        .or_else(|| on_path(HELPER_NAME))
}

// ---------------------------------------------------------------------------------------
// Probing
// ---------------------------------------------------------------------------------------

/// Probes the machine (once per process; later calls return the first answer).
pub(crate) fn probe() -> &'static Confinement {
    static PROBED: OnceLock<Confinement> = OnceLock::new();
    PROBED.get_or_init(probe_now)
}

pub(super) fn probe_now() -> Confinement {
    let bwrap = on_path("bwrap");
    let mut c = Confinement {
        layers: BTreeMap::new(),
        degraded: Vec::new(),
        landlock_abi: None,
        landlock_abi_wanted: crate::confine::LANDLOCK_ABI_WANTED,
        landlock_unenforced: Vec::new(),
        seccomp_filter_sha256: crate::confine::seccomp_digest().ok(),
        bubblewrap_version: bwrap.as_deref().and_then(bwrap_version),
        bwrap,
        helper: find_helper(),
        pids_cgroup: None,
        use_nproc: false,
    };
    let report = probe_report(&mut c);
    let found = read_report(&mut c, report.as_deref());
    set_helper_layers(&mut c, &found);
    set_process_limit(&mut c);
    c.degraded = c
        .layers
        .iter()
        .filter(|(_, l)| !l.available)
        .map(|(k, _)| k.clone())
        .collect();
    tracing::info!(degraded = ?c.degraded, "command confinement probed");
    c
}

/// Runs the probes in a temporary folder: sets the namespaces layer and returns the
/// helper's report line, if the helper ran.
fn probe_report(c: &mut Confinement) -> Option<String> {
    let tmp = match tempfile::Builder::new().prefix("provrun-probe-").tempdir() {
        Ok(tmp) => tmp,
        Err(e) => {
            c.set(
                LayerName::Namespaces,
                false,
                format!("no temporary folder to probe in: {e}"),
            );
            return None;
        }
    };
    let roots = RootPaths {
        input: tmp.path().join("input"),
        output: tmp.path().join("output"),
        scratch: tmp.path().join("scratch"),
    };
    for d in [&roots.input, &roots.output, &roots.scratch] {
        let _ = std::fs::create_dir_all(d);
    }
    // First with bubblewrap (running the helper's probe when there is a helper, else
    // `true`); if that fails, the helper alone tells us about the other layers.
    let (ns_ok, ns_detail, mut report) = match &c.bwrap {
        Some(bwrap) => probe_namespaces(bwrap, c.helper.as_deref(), &roots),
        None => (
            false,
            "bubblewrap (`bwrap`) is not installed".to_owned(),
            None,
        ),
    };
    c.set(LayerName::Namespaces, ns_ok, ns_detail);
    if let (None, Some(helper)) = (&report, &c.helper) {
        let args = helper_args(&roots, false, &[], &BTreeMap::new(), true, &[]);
        report = probe_run(helper, &args, true, true).ok().flatten();
    }
    report
}

/// Runs bubblewrap around the helper's probe (or around `true` without a helper): whether
/// the namespaces work, how they are applied (or why not), and the helper's report line.
fn probe_namespaces(
    bwrap: &Path,
    helper: Option<&Path>,
    roots: &RootPaths,
) -> (bool, String, Option<String>) {
    let mut args = bwrap_args(roots, helper, 64 << 20);
    match helper {
        Some(_) => args.extend(helper_args(roots, true, &[], &BTreeMap::new(), true, &[])),
        None => args.push(os("/bin/true")),
    }
    match probe_run(bwrap, &args, helper.is_some(), false) {
        Ok(line) => (
            true,
            format!(
                "bubblewrap {}: user, PID, mount, IPC, UTS, cgroup and network namespaces, all capabilities dropped",
                bwrap.display()
            ),
            line,
        ),
        Err(e) => (
            false,
            format!("bubblewrap is installed but cannot create the sandbox here: {e}"),
            None,
        ),
    }
}

/// Reads the helper's report line (`key=value` words): records the Landlock ABI and the
/// unenforced rights in `c`, and returns each helper layer's verdict (`_` read as spaces).
fn read_report(c: &mut Confinement, report: Option<&str>) -> BTreeMap<LayerName, String> {
    let mut found: BTreeMap<LayerName, String> = BTreeMap::new();
    let Some(line) = report else {
        return found;
    };
    for word in line.split_whitespace() {
        if let Some((k, v)) = word.split_once('=') {
            match k {
                "landlock_abi" => c.landlock_abi = v.parse().ok(),
                "landlock_unenforced" => {
                    c.landlock_unenforced = v
                        .split(',')
                        .filter(|r| !r.is_empty() && *r != "-")
                        .map(String::from)
                        .collect();
                }
                _ => {}
            }
            found.insert(
                match k {
                    "landlock" => LayerName::Landlock,
                    "seccomp" => LayerName::Seccomp,
                    "rlimits" => LayerName::Rlimits,
                    _ => continue,
                },
                v.replace('_', " "),
            );
        }
    }
    found
}

/// Sets the layers the helper applies (Landlock, seccomp, rlimits) from its verdicts in
/// `found`, or says why they are missing.
fn set_helper_layers(c: &mut Confinement, found: &BTreeMap<LayerName, String>) {
    let missing_helper = format!(
        "the `{HELPER_NAME}` helper was not found (a program calls `provrun_sandbox::arg0_dispatch()` first in `main` to be its own helper; else set {HELPER_ENV} or install the helper next to it)"
    );
    for (layer, how) in [
        (
            LayerName::Landlock,
            "Landlock: writes only under /output, /scratch and /tmp, reads only under the system directories and the roots",
        ),
        (
            LayerName::Seccomp,
            "seccomp filter: ptrace, mount, keyctl, bpf, perf_event_open, namespace creation and joins refused; clone3 answered with ENOSYS",
        ),
        (
            LayerName::Rlimits,
            "rlimits: CPU time, address space, file size and open files",
        ),
    ] {
        match found.get(&layer) {
            Some(v) if v == "full" => c.set(layer, true, how),
            Some(v) if v.starts_with("partial") => c.set(layer, true, format!("{how} ({v})")),
            Some(v) => c.set(layer, false, format!("not applied: {v}")),
            None if c.helper.is_none() => c.set(layer, false, missing_helper.clone()),
            None => c.set(layer, false, "the helper could not run"),
        }
    }
}

/// Sets the process limit: a pids cgroup when running as root (where `RLIMIT_NPROC` does
/// not bind), else `RLIMIT_NPROC` inside the user namespace when the helper sets rlimits.
fn set_process_limit(c: &mut Confinement) {
    if rustix::process::geteuid().is_root() {
        c.pids_cgroup = pids_cgroup_parent();
        match &c.pids_cgroup {
            Some(dir) => c.set(
                LayerName::ProcessLimit,
                true,
                format!("pids cgroup under {}", dir.display()),
            ),
            None => c.set(
                LayerName::ProcessLimit,
                false,
                "running as root, where RLIMIT_NPROC does not bind, and no writable pids cgroup was found",
            ),
        }
    } else if c.has(LayerName::Rlimits) {
        c.use_nproc = true;
        c.set(
            LayerName::ProcessLimit,
            true,
            "RLIMIT_NPROC inside the user namespace",
        );
    } else {
        c.set(
            LayerName::ProcessLimit,
            false,
            "needs the helper's rlimits (not available)",
        );
    }
}

/// `bwrap --version`'s answer, e.g. `bubblewrap 0.8.0`.
pub(super) fn bwrap_version(bwrap: &Path) -> Option<String> {
    let out = Command::new(bwrap)
        .arg("--version")
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Runs a probe; with `report`, returns the helper's report line from its stdout. With
/// `helper`, `program` is the helper started directly (named so [`crate::arg0_dispatch`]
/// knows it).
pub(super) fn probe_run(
    program: &Path,
    args: &[OsString],
    report: bool,
    helper: bool,
) -> std::result::Result<Option<String>, String> {
    let mut cmd = Command::new(program);
    if helper {
        std::os::unix::process::CommandExt::arg0(&mut cmd, HELPER_NAME);
    }
    let out = cmd
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rfind(|l| l.starts_with("landlock="));
    match line {
        _ if !out.status.success() => {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(format!("{}: {}", out.status, err.trim()))
        }
        Some(line) => Ok(Some(line.to_owned())),
        None if !report => Ok(None),
        None => Err("the helper printed no report".to_owned()),
    }
}
