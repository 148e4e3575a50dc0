//! Size, count and shape limits of a sandbox: the agent spec's `[limits]` table.

use serde::{Deserialize, Serialize};

use crate::error::{Result, SandboxError};

/// The sandbox's limits. Every field has a safe default, so an empty `[limits]` table (or
/// none) gives a usable sandbox; unknown keys are an error.
///
/// | field | default | what it bounds |
/// |---|---|---|
/// | `max_read_bytes` | 1 MiB | characters one `read_file` returns, counted as the JSON text the model receives (it pages beyond that) |
/// | `max_write_bytes` | 8 MiB | bytes one write, replace or copy may produce |
/// | `max_total_bytes` | 256 MiB | bytes of regular files in /output and /scratch together (sparse files count by their size) |
/// | `max_files` | 10 000 | files, directories and other entries in /output and /scratch together |
/// | `max_list_entries` | 1 000 | entries one `list_dir` returns |
/// | `max_depth` | 32 | names below a root in one path |
/// | `max_path_bytes` | 1 024 | bytes in one path as given |
/// | `max_name_bytes` | 255 | bytes in one name (path component) |
/// | `command_timeout_s` | 30 | seconds a command runs when the call gives no timeout |
/// | `max_command_timeout_s` | 600 | the most seconds a call may ask for |
/// | `command_output_bytes` | 64 KiB | bytes of stdout, and of stderr, returned per command |
/// | `command_cpu_s` | 120 | CPU seconds per process of a command (`RLIMIT_CPU`) |
/// | `command_memory_bytes` | 4 GiB | address space per process of a command (`RLIMIT_AS`) |
/// | `command_processes` | 256 | processes a command may have at once |
/// | `command_tmp_bytes` | 64 MiB | size of the command's private `/tmp` |
/// | `max_input_bytes` | 1 GiB | bytes of all staged inputs together, by apparent size (over it, the run does not start) |
/// | `command_uid` | 65 536 | host user id commands run as when the runtime is root (0: stay root, recorded) |
/// | `command_gid` | 65 536 | host group id commands run as when the runtime is root |
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Most characters one `read_file` call returns, counted as the JSON text the model
    /// receives; longer files are paged with `offset`.
    pub max_read_bytes: u64,
    /// Most bytes one `write_file`, `str_replace` result or copy may hold.
    pub max_write_bytes: u64,
    /// Quota: most bytes of regular files in /output and /scratch together.
    pub max_total_bytes: u64,
    /// Quota: most entries (files, directories, links, …) in /output and /scratch together.
    pub max_files: u64,
    /// Most entries one `list_dir` returns (sorted by name; the rest are counted).
    pub max_list_entries: usize,
    /// Most names below a root in one path (also bounds staged and scanned trees).
    pub max_depth: usize,
    /// Most bytes in one path as given by the model.
    pub max_path_bytes: usize,
    /// Most bytes in one name (a path component).
    pub max_name_bytes: usize,
    /// Seconds a command may run when the call names no timeout.
    pub command_timeout_s: u64,
    /// The most seconds a call may ask a command to run.
    pub max_command_timeout_s: u64,
    /// Bytes of standard output, and of standard error, a command returns (the rest is cut).
    pub command_output_bytes: u64,
    /// CPU seconds each process of a command may use.
    pub command_cpu_s: u64,
    /// Bytes of address space each process of a command may map.
    pub command_memory_bytes: u64,
    /// Processes a command may have at once (a fork bomb stops there).
    pub command_processes: u64,
    /// Size of the command's private `/tmp` in bytes.
    pub command_tmp_bytes: u64,
    /// Most bytes of all staged inputs together, by apparent size (a sparse file counts
    /// by its length); over it, staging is refused before anything is copied.
    pub max_input_bytes: u64,
    /// The host user id a command (and an MCP stdio server) runs as when the runtime runs
    /// as root, so that nothing it writes is owned by root on the host. 0 opts out: commands
    /// then run as root (the sandbox's user maps back to uid 0), and the run records it.
    /// Ignored when the runtime is not root (it cannot change user; commands run as its
    /// own uid). See [`CommandUser`](crate::CommandUser).
    pub command_uid: u32,
    /// The host group id a command runs as when the runtime runs as root (no
    /// supplementary groups). May be 0 only when `command_uid` is 0.
    pub command_gid: u32,
}

/// The default [`Limits::command_uid`] and [`Limits::command_gid`]: the first id past the
/// 16-bit range. No distribution allocates it (Debian and Fedora keep 0–65533 for system
/// and login users, 65534 is `nobody`, which other daemons share), it lies below
/// `useradd`'s first subordinate id (100 000), so no rootless container's range holds
/// it, and below systemd's container ranges (524 288 and up), and it fits a ustar
/// archive's owner field (at most 2 097 151).
pub const DEFAULT_COMMAND_ID: u32 = 65_536;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_read_bytes: 1 << 20,
            max_write_bytes: 8 << 20,
            max_total_bytes: 256 << 20,
            max_files: 10_000,
            max_list_entries: 1_000,
            max_depth: 32,
            max_path_bytes: 1_024,
            max_name_bytes: 255,
            command_timeout_s: 30,
            max_command_timeout_s: 600,
            command_output_bytes: 64 << 10,
            command_cpu_s: 120,
            command_memory_bytes: 4 << 30,
            command_processes: 256,
            command_tmp_bytes: 64 << 20,
            max_input_bytes: 1 << 30,
            command_uid: DEFAULT_COMMAND_ID,
            command_gid: DEFAULT_COMMAND_ID,
        }
    }
}

impl Limits {
    /// Checks that the limits leave a usable sandbox: the per-call sizes, the listing cap, the
    /// depth, the path lengths and the command limits must be above zero (a zero quota is allowed: it makes
    /// /output and /scratch read-only in effect).
    ///
    /// # Errors
    ///
    /// [`SandboxError::InvalidLimit`] naming the first field that is zero but must not be, or
    /// `command_gid` when it is 0 while `command_uid` is not.
    pub fn check(&self) -> Result<()> {
        let zero = [
            ("max_read_bytes", self.max_read_bytes == 0),
            ("max_write_bytes", self.max_write_bytes == 0),
            ("max_list_entries", self.max_list_entries == 0),
            ("max_depth", self.max_depth == 0),
            ("max_path_bytes", self.max_path_bytes == 0),
            ("max_name_bytes", self.max_name_bytes == 0),
            ("command_timeout_s", self.command_timeout_s == 0),
            ("max_command_timeout_s", self.max_command_timeout_s == 0),
            ("command_output_bytes", self.command_output_bytes == 0),
            ("command_cpu_s", self.command_cpu_s == 0),
            ("command_memory_bytes", self.command_memory_bytes == 0),
            ("command_processes", self.command_processes == 0),
            ("command_tmp_bytes", self.command_tmp_bytes == 0),
        ];
        if self.command_uid != 0 && self.command_gid == 0 {
            return Err(SandboxError::InvalidLimit {
                field: "command_gid",
                reason: "it may be 0 (root's group) only when `command_uid` is 0 too",
            });
        }
        match zero.into_iter().find(|(_, is_zero)| *is_zero) {
            Some((field, _)) => Err(SandboxError::InvalidLimit {
                field,
                reason: "it must be at least 1",
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_zero_sizes_fail() {
        assert!(Limits::default().check().is_ok());
        let l = Limits {
            max_read_bytes: 0,
            ..Limits::default()
        };
        let e = l.check().unwrap_err().to_string();
        assert_eq!(
            e,
            "limit `max_read_bytes` is invalid: it must be at least 1"
        );
        let quota_zero = Limits {
            max_total_bytes: 0,
            max_files: 0,
            ..Limits::default()
        };
        assert!(quota_zero.check().is_ok());
        let root_group = Limits {
            command_gid: 0,
            ..Limits::default()
        };
        assert!(
            root_group
                .check()
                .unwrap_err()
                .to_string()
                .contains("command_gid")
        );
        let opt_out = Limits {
            command_uid: 0,
            command_gid: 0,
            ..Limits::default()
        };
        assert!(opt_out.check().is_ok());
    }
}
