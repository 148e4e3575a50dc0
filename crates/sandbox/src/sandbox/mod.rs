//! The `Sandbox` type: three cap-std roots, the quota, the optional host folder, and the
//! operations behind the built-in file tools.
//!
//! The type and its state are here; the code is in `handle` (one root's directory
//! handle), `open` (construction, settings, accessors), `outcome` (what operations
//! return), `read`, `write` and `host` (the granted host folder).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::Dir;

use crate::error::{Result, SandboxError};
use crate::fsops::Quota;
use crate::limits::Limits;
use crate::path::Root;

mod handle;
mod host;
mod open;
mod outcome;
mod read;
mod write;

use handle::RootHandle;
pub use outcome::{CopyOutcome, ReadAs, ReadOutcome, ReplaceOutcome, WriteOutcome};

/// A file sandbox over three host directories, seen by the agent as `/input` (read-only),
/// `/output` and `/scratch` (writable).
///
/// Each root is a cap-std [`Dir`] opened at construction, and every access is relative to
/// one of these handles, walks one name at a time, and never follows a symbolic link.
/// `/input` has no write path at all. A run that will be idle a while (waiting on a model)
/// may give the handles back with [`Sandbox::release_handles`]; the next operation opens the
/// root again by its host path and refuses it unless it is still the same directory (device
/// and inode), so a folder swapped in meanwhile is never used.
///
/// Cloning is cheap (the state is behind an `Arc`); clones share the quota. All operations
/// block on file I/O: call them from a blocking thread (`spawn_blocking` or a pool).
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
    host: Option<Arc<HostGrant>>,
    allow_degraded: bool,
    /// When set, a running command is killed, tree and all (see [`Sandbox::with_stop`]).
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Whether what it runs is traced, what is masked, where commands' trails go.
    trail: crate::trail::TrailConfig,
}

struct Inner {
    input: RootHandle,
    output: RootHandle,
    scratch: RootHandle,
    paths: RootPaths,
    limits: Limits,
    quota: Quota,
    // Declared last so the directory handles close before a temporary scratch is removed.
    _temp_scratch: Option<tempfile::TempDir>,
}

struct HostGrant {
    dir: Dir,
    path: PathBuf,
    /// The sandbox's own folders (canonical) that lie inside the host folder: never written
    /// through the host tools.
    roots_inside: Vec<(PathBuf, Root)>,
}

/// The host directories behind the three roots (for the command runner's mounts and for
/// collecting the bundle; never shown to a model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootPaths {
    /// Host directory behind `/input`.
    pub input: PathBuf,
    /// Host directory behind `/output`.
    pub output: PathBuf,
    /// Host directory behind `/scratch`.
    pub scratch: PathBuf,
}

impl RootPaths {
    /// The host directory behind `root`.
    pub fn get(&self, root: Root) -> &Path {
        match root {
            Root::Input => &self.input,
            Root::Output => &self.output,
            Root::Scratch => &self.scratch,
        }
    }
}

/// A virtual path as shown to the model: the root, then each name.
fn show_virtual(root: Root, names: &[String]) -> String {
    let mut s = String::from(root.as_str());
    for n in names {
        s.push('/');
        s.push_str(n);
    }
    s
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("roots", &self.inner.paths)
            .field("limits", &self.inner.limits)
            .field("host_dir", &self.host_dir())
            .field("allow_degraded", &self.allow_degraded)
            .finish()
    }
}

/// A file's path may not end with `/` (or `/.`): refused once it parses.
fn refuse_trailing_slash(path: &str) -> Result<()> {
    if path.ends_with('/') || path.ends_with("/.") || path == "." {
        return Err(SandboxError::TrailingSlash {
            path: crate::path::shown(path),
        });
    }
    Ok(())
}
