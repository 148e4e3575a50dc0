//! Size, count and shape limits of a sandbox: the agent spec's `[limits]` table.

use serde::{Deserialize, Serialize};

/// The sandbox's limits. Every field has a safe default, so an empty `[limits]` table (or
/// none) gives a usable sandbox; unknown keys are an error.
///
/// | field | default | what it bounds |
/// |---|---|---|
/// | `max_read_bytes` | 1 MiB | bytes one `read_file` returns (it pages beyond that) |
/// | `max_write_bytes` | 8 MiB | bytes one write, replace or copy may produce |
/// | `max_total_bytes` | 256 MiB | bytes of regular files in /output and /scratch together (sparse files count by their size) |
/// | `max_files` | 10 000 | files, directories and other entries in /output and /scratch together |
/// | `max_list_entries` | 1 000 | entries one `list_dir` returns |
/// | `max_depth` | 32 | names below a root in one path |
/// | `max_path_bytes` | 1 024 | bytes in one path as given |
/// | `max_name_bytes` | 255 | bytes in one name (path component) |
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Most bytes one `read_file` call returns; longer files are paged with `offset`.
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
}

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
        }
    }
}
