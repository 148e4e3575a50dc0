//! What `run_command` reports: the machine's confinement layers, a command's outcome and
//! the confinement record kept with it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::fsops::Usage;
use crate::user::CommandUser;

/// One confinement layer and whether this machine has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layer {
    /// Whether the layer can be applied.
    pub available: bool,
    /// How it is applied, or why it cannot be.
    pub detail: String,
}

/// The name of one confinement layer, the key of [`Confinement::layers`] and the word the
/// evidence records for it (`degraded`, `missing`). A misspelt layer is a compile error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum LayerName {
    /// User, PID, mount, IPC, UTS, cgroup and network namespaces (bubblewrap).
    Namespaces,
    /// Landlock file-system rules.
    Landlock,
    /// The seccomp filter.
    Seccomp,
    /// Resource limits (CPU time, address space, file size, open files).
    Rlimits,
    /// A limit on the number of processes (pids cgroup or `RLIMIT_NPROC`).
    ProcessLimit,
}

impl LayerName {
    /// Every layer, in the order the probe sets them.
    #[cfg(test)]
    pub(crate) const ALL: [LayerName; 5] = [
        LayerName::Namespaces,
        LayerName::Landlock,
        LayerName::Seccomp,
        LayerName::Rlimits,
        LayerName::ProcessLimit,
    ];

    /// The layer's recorded name (`landlock`, `process_limit`, ...): part of the evidence
    /// format, so never renamed.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            LayerName::Namespaces => "namespaces",
            LayerName::Landlock => "landlock",
            LayerName::Seccomp => "seccomp",
            LayerName::Rlimits => "rlimits",
            LayerName::ProcessLimit => "process_limit",
        }
    }
}

/// What this machine offers `run_command`: one entry per layer (`namespaces`, `landlock`,
/// `seccomp`, `rlimits`, `process_limit`), and the names of the missing ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Confinement {
    /// Every layer by name.
    pub layers: BTreeMap<String, Layer>,
    /// Names of the layers that are not available (empty when fully confined).
    pub degraded: Vec<String>,
    /// The kernel's Landlock ABI as the helper found it (0: no Landlock; `None`: the
    /// helper could not run to ask).
    pub landlock_abi: Option<u32>,
    /// The Landlock ABI the sandbox's rules are written for.
    pub landlock_abi_wanted: u32,
    /// The file-system rights the kernel's ABI leaves unenforced (see
    /// [`crate::confine::unenforced_rights`]); every right when Landlock is missing.
    pub landlock_unenforced: Vec<String>,
    /// SHA-256 of the seccomp filter the helper installs (`None` if it cannot be built).
    pub seccomp_filter_sha256: Option<String>,
    /// `bwrap --version`, when bubblewrap is installed.
    pub bubblewrap_version: Option<String>,
    #[serde(skip)]
    pub(super) bwrap: Option<PathBuf>,
    #[serde(skip)]
    pub(super) helper: Option<PathBuf>,
    #[serde(skip)]
    pub(super) pids_cgroup: Option<PathBuf>,
    #[serde(skip)]
    pub(super) use_nproc: bool,
}

impl Confinement {
    /// Whether every layer is available.
    pub fn is_complete(&self) -> bool {
        self.degraded.is_empty()
    }

    /// One line naming each missing layer and why, e.g. for a refusal.
    pub fn missing_summary(&self) -> String {
        self.degraded
            .iter()
            .map(|name| match self.layers.get(name) {
                Some(l) => format!("{name} ({})", l.detail),
                None => name.clone(),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The entry for `layer`, when the probe set one.
    pub(super) fn layer(&self, layer: LayerName) -> Option<&Layer> {
        self.layers.get(layer.as_str())
    }

    /// Whether `layer` is there and available.
    pub(super) fn has(&self, layer: LayerName) -> bool {
        self.layer(layer).is_some_and(|l| l.available)
    }

    /// Records whether `layer` is available and how it is applied (or why not).
    pub(super) fn set(&mut self, layer: LayerName, available: bool, detail: impl Into<String>) {
        self.layers.insert(
            layer.as_str().to_owned(),
            Layer {
                available,
                detail: detail.into(),
            },
        );
    }
}

/// What a confined command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandOutcome {
    /// The exit code, when the command exited (bubblewrap passes the command's code on).
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Standard output, cut at `Limits::command_output_bytes`, decoded as UTF-8 with each
    /// invalid byte sequence replaced by U+FFFD (counted in `stdout_invalid_utf8`).
    pub stdout: String,
    /// Standard error, cut and decoded the same way.
    pub stderr: String,
    /// How many byte sequences in the kept standard output were not UTF-8 (each shown as
    /// U+FFFD in `stdout`). Zero when the output was valid UTF-8.
    pub stdout_invalid_utf8: u64,
    /// The same for standard error.
    pub stderr_invalid_utf8: u64,
    /// Bytes the command wrote to standard output in all.
    pub stdout_bytes: u64,
    /// Bytes it wrote to standard error in all.
    pub stderr_bytes: u64,
    /// Whether standard output was cut.
    pub stdout_truncated: bool,
    /// Whether standard error was cut.
    pub stderr_truncated: bool,
    /// Whether the wall-clock timeout killed it.
    pub timed_out: bool,
    /// Whether it was killed because the run was cancelled
    /// ([`Sandbox::with_stop`](crate::Sandbox::with_stop)).
    pub cancelled: bool,
    /// Whether it was killed for going over the /output + /scratch quota (or is over it).
    pub quota_exceeded: bool,
    /// Wall-clock time taken.
    pub duration_ms: u64,
    /// Quota usage measured after the command.
    pub usage: Usage,
    /// Layers that were missing for this run (empty when fully confined).
    pub degraded: Vec<String>,
    /// The confinement that applied to this command, as the evidence records it.
    pub confinement: CommandConfinement,
}

/// The confinement facts of one command, recorded with its `tool_called` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandConfinement {
    /// `full` (namespaces + Landlock + seccomp + rlimits + process limit) or `degraded`.
    pub mode: String,
    /// The layers that were missing (empty when `full`).
    pub missing: Vec<String>,
    /// Landlock as it applied.
    pub landlock: LandlockRecord,
    /// The seccomp filter as it applied.
    pub seccomp: SeccompRecord,
    /// bubblewrap's version (`bwrap --version`), `None` when the command ran without it.
    pub bubblewrap: Option<String>,
    /// The namespaces the command got new ones of (empty without bubblewrap).
    pub namespaces: Vec<String>,
    /// The host user id the command ran as: the dedicated `Limits::command_uid` when the
    /// runtime is root (unless `command_uid = 0` opted out), else the runtime's own
    /// effective uid; inside the user namespace it is `uid_inside`.
    pub host_uid: u32,
    /// The host group id the command ran as (see [`crate::CommandUser`]).
    pub host_gid: u32,
    /// The user id the command saw (`None` without a user namespace: the host uid).
    pub uid_inside: Option<u32>,
    /// The limits applied.
    pub limits: CommandLimits,
}

/// Landlock's part of a [`CommandConfinement`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LandlockRecord {
    /// `full`, `partial` (an older ABI: `unenforced` says what is not restricted) or
    /// `none`.
    pub status: String,
    /// The kernel's ABI (0: no Landlock; `None`: unknown, the helper did not run).
    pub abi: Option<u32>,
    /// The ABI the rules are written for.
    pub abi_wanted: u32,
    /// The file-system rights not enforced.
    pub unenforced: Vec<String>,
}

/// seccomp's part of a [`CommandConfinement`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeccompRecord {
    /// Whether the filter was installed.
    pub applied: bool,
    /// SHA-256 of the filter (see [`crate::confine::seccomp_digest`]).
    pub filter_sha256: Option<String>,
}

/// The limits of a [`CommandConfinement`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandLimits {
    /// Wall-clock timeout of this command.
    pub timeout_ms: u64,
    /// CPU seconds per process (`RLIMIT_CPU`), when rlimits applied.
    pub cpu_s: Option<u64>,
    /// Address space per process in bytes (`RLIMIT_AS`), when rlimits applied.
    pub memory_bytes: Option<u64>,
    /// Processes at once, and how: `pids_cgroup`, `rlimit_nproc` or `none`.
    pub processes: Option<u64>,
    /// How the process limit is enforced (`pids_cgroup`, `rlimit_nproc`, `none`).
    pub process_limit: String,
    /// Largest file the command may write (`RLIMIT_FSIZE`: the quota left), when
    /// rlimits applied.
    pub file_size_bytes: Option<u64>,
    /// Open files per process, when rlimits applied.
    pub open_files: Option<u64>,
    /// Bytes of stdout and of stderr kept.
    pub output_bytes: u64,
    /// The /output + /scratch quota: bytes and entries.
    pub quota_bytes: u64,
    /// The /output + /scratch quota: entries.
    pub quota_files: u64,
    /// Size of the private `/tmp` (with bubblewrap).
    pub tmp_bytes: Option<u64>,
}

impl Confinement {
    /// The record of a command run now under this confinement with `limits`, `timeout`,
    /// and `used_bytes` of the quota already used.
    pub(super) fn record(
        &self,
        limits: &crate::Limits,
        timeout: Duration,
        used_bytes: u64,
    ) -> CommandConfinement {
        let user = CommandUser::for_limits(limits);
        let namespaces = self.has(LayerName::Namespaces);
        let rlimits = self.has(LayerName::Rlimits);
        let landlock = self.layer(LayerName::Landlock);
        let landlock_status = match landlock {
            Some(l) if l.available && l.detail.contains("(partial") => "partial",
            Some(l) if l.available => "full",
            _ => "none",
        };
        let process_limit = if self.pids_cgroup.is_some() {
            "pids_cgroup"
        } else if self.use_nproc && rlimits {
            "rlimit_nproc"
        } else {
            "none"
        };
        CommandConfinement {
            mode: if self.is_complete() {
                "full"
            } else {
                "degraded"
            }
            .to_owned(),
            missing: self.degraded.clone(),
            landlock: LandlockRecord {
                status: landlock_status.to_owned(),
                abi: self.landlock_abi,
                abi_wanted: self.landlock_abi_wanted,
                unenforced: if landlock_status == "none" {
                    crate::confine::unenforced_rights(0)
                        .into_iter()
                        .map(String::from)
                        .collect()
                } else {
                    self.landlock_unenforced.clone()
                },
            },
            seccomp: SeccompRecord {
                applied: self.has(LayerName::Seccomp),
                filter_sha256: self.seccomp_filter_sha256.clone(),
            },
            bubblewrap: namespaces
                .then(|| self.bubblewrap_version.clone())
                .flatten(),
            namespaces: if namespaces {
                ["user", "pid", "mount", "ipc", "uts", "cgroup", "net"]
                    .map(String::from)
                    .into()
            } else {
                Vec::new()
            },
            host_uid: user.uid,
            host_gid: user.gid,
            uid_inside: namespaces.then_some(1000),
            limits: CommandLimits {
                timeout_ms: timeout.as_millis() as u64,
                cpu_s: rlimits.then_some(limits.command_cpu_s),
                memory_bytes: rlimits.then_some(limits.command_memory_bytes),
                processes: (process_limit != "none").then_some(limits.command_processes),
                process_limit: process_limit.to_owned(),
                file_size_bytes: rlimits
                    .then_some(limits.max_total_bytes.saturating_sub(used_bytes)),
                open_files: rlimits.then_some(1024),
                output_bytes: limits.command_output_bytes,
                quota_bytes: limits.max_total_bytes,
                quota_files: limits.max_files,
                tmp_bytes: namespaces.then_some(limits.command_tmp_bytes.max(4096)),
            },
        }
    }
}

impl CommandOutcome {
    /// Whether the command exited with code 0 and was not killed.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.quota_exceeded && !self.cancelled
    }

    /// A one-line note saying that `stream`'s bytes were not all UTF-8, or `None` when
    /// they were. Appended wherever the decoded text stands for the bytes.
    pub fn invalid_utf8_note(&self, stream: &str) -> Option<String> {
        let n = match stream {
            "stdout" => self.stdout_invalid_utf8,
            "stderr" => self.stderr_invalid_utf8,
            _ => 0,
        };
        (n > 0).then(|| {
            format!(
                "[{stream}: {n} byte sequence{} that {} not UTF-8 shown as U+FFFD]",
                if n == 1 { "" } else { "s" },
                if n == 1 { "is" } else { "are" }
            )
        })
    }

    /// The outcome as text for a model: status line, notes, then the two streams.
    pub fn render(&self) -> String {
        let mut text = match (self.exit_code, self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => "ended without an exit code".to_owned(),
        };
        if self.timed_out {
            text.push_str(&format!(
                " — timed out after {:.1} s: the command and everything it started were killed",
                self.duration_ms as f64 / 1000.0
            ));
        }
        if self.cancelled {
            text.push_str(
                " — the run was cancelled: the command and everything it started were killed",
            );
        }
        if self.quota_exceeded {
            text.push_str(
                " — the /output + /scratch quota is exceeded: the command was stopped and \
                 further writes are refused until files are removed",
            );
        }
        if !self.degraded.is_empty() {
            text.push_str(&format!(
                "\n[degraded sandbox: missing {}]",
                self.degraded.join(", ")
            ));
        }
        for (name, body, total, cut) in [
            (
                "stdout",
                &self.stdout,
                self.stdout_bytes,
                self.stdout_truncated,
            ),
            (
                "stderr",
                &self.stderr,
                self.stderr_bytes,
                self.stderr_truncated,
            ),
        ] {
            if body.is_empty() && total == 0 {
                continue;
            }
            text.push_str(&format!("\n--- {name} ---\n{body}"));
            let mut notes = Vec::new();
            if cut {
                notes.push(format!(
                    "[{name} cut: showing the first {} of {total} bytes]",
                    body.len()
                ));
            }
            notes.extend(self.invalid_utf8_note(name));
            for note in notes {
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&note);
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_names_are_the_recorded_words() {
        // These words are keys of `layers` and entries of `degraded`/`missing` in recorded
        // evidence: renaming one would change the file format.
        let names: Vec<&str> = LayerName::ALL.into_iter().map(LayerName::as_str).collect();
        assert_eq!(
            names,
            [
                "namespaces",
                "landlock",
                "seccomp",
                "rlimits",
                "process_limit"
            ]
        );
        let mut c = crate::command::probe::probe_now();
        c.layers.clear();
        c.set(LayerName::ProcessLimit, true, "pids cgroup");
        c.set(LayerName::Landlock, false, "missing");
        assert!(c.has(LayerName::ProcessLimit));
        assert!(!c.has(LayerName::Landlock) && !c.has(LayerName::Seccomp));
        assert_eq!(
            c.layers.keys().map(String::as_str).collect::<Vec<_>>(),
            ["landlock", "process_limit"]
        );
    }

    #[test]
    fn the_outcome_renders_cuts_and_timeouts() {
        let o = CommandOutcome {
            exit_code: None,
            signal: Some(9),
            stdout: "abc".into(),
            stderr: String::new(),
            stdout_invalid_utf8: 0,
            stderr_invalid_utf8: 0,
            stdout_bytes: 10,
            stderr_bytes: 0,
            stdout_truncated: true,
            stderr_truncated: false,
            timed_out: true,
            cancelled: false,
            quota_exceeded: false,
            duration_ms: 1500,
            usage: Usage::default(),
            degraded: vec![],
            confinement: Confinement {
                layers: BTreeMap::new(),
                degraded: vec!["namespaces".into()],
                landlock_abi: Some(3),
                landlock_abi_wanted: 6,
                landlock_unenforced: vec!["ioctl_dev".into()],
                seccomp_filter_sha256: None,
                bubblewrap_version: None,
                bwrap: None,
                helper: None,
                pids_cgroup: None,
                use_nproc: false,
            }
            .record(&crate::Limits::default(), Duration::from_secs(2), 10),
        };
        let c = &o.confinement;
        assert_eq!(c.mode, "degraded");
        assert_eq!(c.limits.timeout_ms, 2000);
        assert!(c.namespaces.is_empty() && c.bubblewrap.is_none());
        // No landlock layer on record: every right is unenforced.
        assert_eq!(c.landlock.status, "none");
        assert_eq!(c.landlock.unenforced.len(), 16);
        let text = o.render();
        assert!(
            text.starts_with("killed by signal 9 — timed out after 1.5 s"),
            "{text}"
        );
        assert!(
            text.contains("[stdout cut: showing the first 3 of 10 bytes]"),
            "{text}"
        );
        assert!(!text.contains("stderr"), "{text}");
        assert!(!o.success());
    }
}
