//! Opening a sandbox (its roots, quota and optional host folder), its settings and
//! accessors, and the handles and path checks the file operations share.

use std::path::Path;
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::handle::RootHandle;
use super::{HostGrant, Inner, RootPaths, Sandbox, refuse_trailing_slash};
use crate::error::{Result, SandboxError};
use crate::fsops::{self, Quota, Usage};
use crate::limits::Limits;
use crate::path::{Root, VirtualPath};

impl Sandbox {
    /// Opens a sandbox over existing `input` and over `output` and `scratch` (created if
    /// missing), with `limits`. Files already in `output` and `scratch` count against the
    /// quota.
    ///
    /// # Errors
    ///
    /// [`SandboxError::InvalidLimit`] when `limits` fail [`Limits::check`]; a
    /// [`SandboxError::Io`] (or another refusal) when a root cannot be opened or created, or
    /// `output` and `scratch` cannot be measured for the quota.
    pub fn new(
        input: impl AsRef<Path>,
        output: impl AsRef<Path>,
        scratch: impl AsRef<Path>,
        limits: Limits,
    ) -> Result<Sandbox> {
        Self::build(
            input.as_ref(),
            output.as_ref(),
            scratch.as_ref(),
            limits,
            None,
        )
    }

    /// Like [`Sandbox::new`], with `/scratch` on a fresh temporary directory that is removed
    /// when the last clone of the sandbox is dropped.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::new`]; also [`SandboxError::Io`] when the temporary folder cannot be made.
    pub fn with_temp_scratch(
        input: impl AsRef<Path>,
        output: impl AsRef<Path>,
        limits: Limits,
    ) -> Result<Sandbox> {
        let temp = tempfile::Builder::new()
            .prefix("provrun-scratch-")
            .tempdir()
            .map_err(|e| {
                SandboxError::io("creating scratch directory", "a temporary directory", e)
            })?;
        let scratch = temp.path().to_owned();
        Self::build(
            input.as_ref(),
            output.as_ref(),
            &scratch,
            limits,
            Some(temp),
        )
    }

    fn build(
        input: &Path,
        output: &Path,
        scratch: &Path,
        limits: Limits,
        temp: Option<tempfile::TempDir>,
    ) -> Result<Sandbox> {
        limits.check()?;
        let input_dir = RootHandle::open(Root::Input, input, false)?;
        let output_dir = RootHandle::open(Root::Output, output, true)?;
        let scratch_dir = RootHandle::open(Root::Scratch, scratch, true)?;
        let quota = Quota {
            max_bytes: limits.max_total_bytes,
            max_files: limits.max_files,
            used: Mutex::new(Usage::default()),
        };
        let inner = Inner {
            input: input_dir,
            output: output_dir,
            scratch: scratch_dir,
            paths: RootPaths {
                input: input.to_owned(),
                output: output.to_owned(),
                scratch: scratch.to_owned(),
            },
            limits,
            quota,
            _temp_scratch: temp,
        };
        let sandbox = Sandbox {
            inner: Arc::new(inner),
            host: None,
            allow_degraded: false,
            stop: None,
            trail: crate::trail::TrailConfig::default(),
        };
        sandbox.recount()?;
        tracing::debug!(
            input = %input.display(),
            output = %output.display(),
            scratch = %scratch.display(),
            "sandbox opened"
        );
        Ok(sandbox)
    }

    /// Grants the host tools access to `dir` (which must exist) and nothing outside it.
    /// Without a grant, `list_host_files`, `copy_from_host` and `copy_to_host` are refused.
    ///
    /// # Errors
    ///
    /// [`SandboxError::Io`] when `dir` cannot be resolved or opened as a folder.
    pub fn with_host_dir(mut self, dir: impl AsRef<Path>) -> Result<Sandbox> {
        let dir = dir.as_ref();
        let shown = dir.display().to_string();
        let path = std::fs::canonicalize(dir)
            .map_err(|e| SandboxError::io("opening host folder", shown.clone(), e))?;
        let handle = Dir::open_ambient_dir(&path, ambient_authority())
            .map_err(|e| SandboxError::io("opening host folder", shown, e))?;
        let roots_inside = Root::ALL
            .into_iter()
            .filter_map(|root| {
                let canonical = std::fs::canonicalize(self.inner.paths.get(root)).ok()?;
                canonical.starts_with(&path).then_some((canonical, root))
            })
            .collect();
        self.host = Some(Arc::new(HostGrant {
            dir: handle,
            path,
            roots_inside,
        }));
        Ok(self)
    }

    /// Lets `run_command` run when a confinement layer is missing on this machine (the agent
    /// spec's `allow_degraded_sandbox`): every available layer is still applied, and each
    /// outcome names the missing ones. Without it, such commands are refused.
    pub fn allow_degraded_commands(mut self, allow: bool) -> Sandbox {
        self.allow_degraded = allow;
        self
    }

    /// Stop commands when `flag` is set: a command that is running when it becomes `true`
    /// (or that starts after) is killed with everything it started, and its outcome says
    /// `cancelled`. A runtime sets it when its run is cancelled.
    pub fn with_stop(mut self, flag: Arc<std::sync::atomic::AtomicBool>) -> Sandbox {
        self.stop = Some(flag);
        self
    }

    /// Records the process trail of what this sandbox runs (the default) or not. A trail
    /// is every process a command, a program or a server starts, with its arguments, the
    /// SHA-256 of its executable, its working folder, user, times and exit, as the kernel
    /// reports them to a tracer outside the sandbox (see [`crate::trail`]).
    pub fn with_trail(mut self, on: bool) -> Sandbox {
        self.trail.off = !on;
        self
    }

    /// Masks each of `secrets` (each byte becomes `*`) wherever it appears in the trail's
    /// records: arguments, executable paths, working folders.
    pub fn with_trail_secrets(mut self, secrets: Vec<String>) -> Sandbox {
        self.trail.secrets = Arc::new(secrets);
        self
    }

    /// Sends the trail of each command this sandbox runs ([`Sandbox::run_command`],
    /// [`Sandbox::run_program`]) to `sink` when the command ends.
    pub fn with_trail_sink(mut self, sink: crate::trail::TrailSink) -> Sandbox {
        self.trail.sink = Some(sink);
        self
    }

    /// Records at most `max` processes of each trail (default
    /// [`crate::trail::MAX_TRAIL_PROCESSES`]); later ones are counted, not recorded.
    pub fn with_trail_limit(mut self, max: u64) -> Sandbox {
        self.trail.max = Some(max);
        self
    }

    /// Whether the process trail is recorded (see [`Sandbox::with_trail`]).
    pub fn trail_enabled(&self) -> bool {
        !self.trail.off
    }

    /// The trail settings.
    pub(crate) fn trail_config(&self) -> &crate::trail::TrailConfig {
        &self.trail
    }

    /// Whether the stop flag given to [`Sandbox::with_stop`] is set.
    pub fn stop_requested(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Whether commands may run with missing confinement layers.
    pub fn degraded_allowed(&self) -> bool {
        self.allow_degraded
    }

    /// The limits this sandbox enforces.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The host directories behind the roots.
    pub fn root_paths(&self) -> &RootPaths {
        &self.inner.paths
    }

    /// The granted host folder (canonical), if any.
    pub fn host_dir(&self) -> Option<&Path> {
        self.host.as_deref().map(|h| h.path.as_path())
    }

    /// Bytes and entries counted against the quota in /output and /scratch.
    pub fn usage(&self) -> Usage {
        self.inner.quota.usage()
    }

    /// Recounts the quota's usage from disk (after something outside the sandbox API, such as
    /// a command, changed /output or /scratch).
    ///
    /// # Errors
    ///
    /// [`SandboxError::Io`] when /output or /scratch cannot be walked;
    /// [`SandboxError::RootReplaced`] when a released root's path now names another folder.
    pub fn recount(&self) -> Result<Usage> {
        let mut total = Usage::default();
        for root in [Root::Output, Root::Scratch] {
            let u = self.measure(root)?;
            total.bytes = total.bytes.saturating_add(u.bytes);
            total.files = total.files.saturating_add(u.files);
        }
        self.inner.quota.set(total);
        Ok(total)
    }

    /// Sets the quota's usage to just over its limit and returns that usage: what could
    /// not be measured (after a command) might hold anything.
    pub(crate) fn count_as_full(&self) -> Usage {
        let limits = &self.inner.limits;
        let full = Usage {
            bytes: limits.max_total_bytes.saturating_add(1),
            files: limits.max_files.saturating_add(1),
        };
        self.inner.quota.set(full);
        full
    }

    /// Measures /output and /scratch and says whether they are over quota (a root that
    /// cannot be measured counts as nothing here: the count after the command decides).
    pub(crate) fn over_quota(&self) -> bool {
        let limits = &self.inner.limits;
        let mut total = Usage::default();
        for root in [Root::Output, Root::Scratch] {
            if let Ok(u) = self.measure(root) {
                total.bytes = total.bytes.saturating_add(u.bytes);
                total.files = total.files.saturating_add(u.files);
            }
        }
        total.bytes > limits.max_total_bytes || total.files > limits.max_files
    }

    /// Parses `path` with this sandbox's limits.
    ///
    /// # Errors
    ///
    /// As [`VirtualPath::parse`].
    pub fn parse_path(&self, path: &str) -> Result<VirtualPath> {
        VirtualPath::parse(path, &self.inner.limits)
    }

    /// Closes the handles of the three roots until an operation needs one again; for a run
    /// about to be idle (waiting on a model), so that thousands of idle runs hold no
    /// descriptors for their sandboxes. The next operation on a root opens it again by its
    /// host path and fails with [`SandboxError::RootReplaced`] if that is no longer the
    /// directory first opened. Operations in flight keep their handle until they finish.
    /// The host folder's handle (if granted) is kept.
    pub fn release_handles(&self) {
        for root in Root::ALL {
            self.handle(root).release();
        }
    }

    /// How many of the three roots have an open handle now (0 after
    /// [`Sandbox::release_handles`], until an operation needs one).
    pub fn open_handles(&self) -> usize {
        Root::ALL
            .into_iter()
            .filter(|&root| self.handle(root).is_open())
            .count()
    }

    /// Bytes and entries under one root, from disk.
    pub(crate) fn measure(&self, root: Root) -> Result<Usage> {
        fsops::scan_usage(&*self.dir(root)?, self.inner.limits.max_depth)
            .map_err(|e| SandboxError::io("measuring", root.as_str(), e))
    }

    fn handle(&self, root: Root) -> &RootHandle {
        match root {
            Root::Input => &self.inner.input,
            Root::Output => &self.inner.output,
            Root::Scratch => &self.inner.scratch,
        }
    }

    /// The open handle of `root` (reopened and checked if it was released).
    pub(crate) fn root_dir(&self, root: Root) -> Result<Arc<Dir>> {
        self.dir(root)
    }

    pub(super) fn dir(&self, root: Root) -> Result<Arc<Dir>> {
        self.handle(root).get()
    }

    /// Parse the path of a file (not a folder): a trailing slash is refused.
    pub(super) fn file_path(&self, path: &str) -> Result<VirtualPath> {
        let vp = self.parse_path(path)?;
        refuse_trailing_slash(path)?;
        Ok(vp)
    }

    pub(super) fn writable(&self, path: &str) -> Result<VirtualPath> {
        let vp = self.file_path(path)?;
        if !vp.root().is_writable() {
            return Err(SandboxError::InputReadOnly {
                path: vp.to_string(),
            });
        }
        Ok(vp)
    }

    pub(super) fn host(&self) -> Result<&HostGrant> {
        self.host
            .as_deref()
            .ok_or(SandboxError::HostAccessNotGranted)
    }
}
