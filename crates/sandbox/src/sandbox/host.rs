//! The host folder a sandbox may be granted: listing it, and copying files between it
//! and the sandbox.

use super::{CopyOutcome, Sandbox, refuse_trailing_slash, show_virtual};
use crate::error::{Result, SandboxError};
use crate::fsops::{self, DirListing};
use crate::path::parse_host_path;

impl Sandbox {
    /// Lists a directory of the granted host folder (`path` relative to it; `.` is the folder
    /// itself), like [`Sandbox::list_dir`]. Refused without a host grant.
    ///
    /// # Errors
    ///
    /// [`SandboxError::HostAccessNotGranted`] without a host grant; a path error (such as
    /// [`SandboxError::OutsideHostDir`]) for a bad `path`; the errors of [`Sandbox::list_dir`]
    /// for what is there.
    pub fn list_host_files(&self, path: &str) -> Result<DirListing> {
        let host = self.host()?;
        let names = parse_host_path(path, &host.path, &self.inner.limits)?;
        fsops::list(
            &host.dir,
            &names,
            &show_host,
            self.inner.limits.max_list_entries,
        )
    }

    /// Copies a regular file from the granted host folder into /output or /scratch, with the
    /// same rules and quota as `write_file`. Refused without a host grant.
    ///
    /// # Errors
    ///
    /// [`SandboxError::HostAccessNotGranted`] without a host grant; a path error for either
    /// path; the refusals of reading a whole file on the host side and of
    /// [`Sandbox::write_file`] on the sandbox side (read-only `/input`, size, quota, links).
    pub fn copy_from_host(&self, host_path: &str, path: &str) -> Result<CopyOutcome> {
        let host = self.host()?;
        let names = parse_host_path(host_path, &host.path, &self.inner.limits)?;
        refuse_trailing_slash(host_path)?;
        let vp = self.writable(path)?;
        let bytes = fsops::read_whole(
            &host.dir,
            &names,
            &show_host,
            self.inner.limits.max_write_bytes,
        )?;
        let w = self.write_vp(&vp, &bytes)?;
        tracing::info!(from = %show_host(&names), to = %vp, bytes = w.bytes, "copied from host");
        Ok(CopyOutcome {
            from: show_host(&names),
            to: w.path,
            bytes: w.bytes,
        })
    }

    /// Copies a regular file from the sandbox (any root) into the granted host folder,
    /// creating parent directories there and replacing an existing file atomically. The same
    /// rules as `write_file` apply on the host side (no links, no special files, no hard-linked
    /// targets, `Limits::max_write_bytes`); the sandbox quota does not. A target inside one of
    /// the sandbox's own folders (when the host folder contains the bundle) is refused, so the
    /// staged inputs cannot be rewritten from the host side. Refused without a host grant.
    ///
    /// # Errors
    ///
    /// [`SandboxError::HostAccessNotGranted`] without a host grant; a path error for either
    /// path; [`SandboxError::HostPathInSandbox`] for a target in one of the sandbox's folders;
    /// the read refusals on the sandbox side and the write refusals on the host side.
    pub fn copy_to_host(&self, path: &str, host_path: &str) -> Result<CopyOutcome> {
        let host = self.host()?;
        let vp = self.file_path(path)?;
        let names = parse_host_path(host_path, &host.path, &self.inner.limits)?;
        refuse_trailing_slash(host_path)?;
        let target = names.iter().fold(host.path.clone(), |p, n| p.join(n));
        if let Some((_, inside)) = host
            .roots_inside
            .iter()
            .find(|(dir, _)| target.starts_with(dir))
        {
            return Err(SandboxError::HostPathInSandbox {
                path: crate::path::shown(host_path),
                root: inside.as_str(),
            });
        }
        let root = vp.root();
        let show = |n: &[String]| show_virtual(root, n);
        let max = self.inner.limits.max_write_bytes;
        let bytes = fsops::read_whole(&*self.dir(root)?, vp.names(), &show, max)?;
        fsops::atomic_write(&host.dir, &names, &bytes, &show_host, None)?;
        tracing::info!(from = %vp, to = %show_host(&names), bytes = bytes.len(), "copied to host");
        Ok(CopyOutcome {
            from: vp.to_string(),
            to: show_host(&names),
            bytes: bytes.len() as u64,
        })
    }
}

/// A path in the host folder as shown: `host:` and its names (`.` for the folder).
fn show_host(names: &[String]) -> String {
    format!(
        "host:{}",
        if names.is_empty() {
            ".".to_owned()
        } else {
            names.join("/")
        }
    )
}
