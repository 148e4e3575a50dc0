//! One root's directory handle ([`RootHandle`]): open from construction, given back on
//! request, and reopened on next use only if it is still the same directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::error::{Result, SandboxError};
use crate::path::Root;

fn open_root(path: &Path, create: bool) -> Result<Dir> {
    let result = if create {
        Dir::create_ambient_dir_all(path, ambient_authority())
            .and_then(|()| Dir::open_ambient_dir(path, ambient_authority()))
    } else {
        Dir::open_ambient_dir(path, ambient_authority())
    };
    result.map_err(|e| SandboxError::io("opening sandbox root", path.display().to_string(), e))
}

/// Device and inode of an open directory: what "the same folder" means on reopening.
fn identity(dir: &Dir, path: &Path) -> Result<(u64, u64)> {
    let st = rustix::fs::fstat(dir).map_err(|e| {
        SandboxError::io("opening sandbox root", path.display().to_string(), e.into())
    })?;
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// One root's directory handle. Open from construction until [`RootHandle::release`];
/// opened again on next use, and only if it is still the directory first opened.
pub(super) struct RootHandle {
    root: Root,
    path: PathBuf,
    identity: (u64, u64),
    dir: Mutex<Option<Arc<Dir>>>,
}

impl RootHandle {
    pub(super) fn open(root: Root, path: &Path, create: bool) -> Result<RootHandle> {
        let dir = open_root(path, create)?;
        Ok(RootHandle {
            root,
            path: path.to_owned(),
            identity: identity(&dir, path)?,
            dir: Mutex::new(Some(Arc::new(dir))),
        })
    }

    /// The handle, reopened by path (and checked) if it was released.
    pub(super) fn get(&self) -> Result<Arc<Dir>> {
        let mut slot = self.dir.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dir) = slot.as_ref() {
            return Ok(Arc::clone(dir));
        }
        let dir = open_root(&self.path, false)?;
        if identity(&dir, &self.path)? != self.identity {
            return Err(SandboxError::RootReplaced {
                root: self.root.as_str(),
                path: self.path.display().to_string(),
            });
        }
        let dir = Arc::new(dir);
        *slot = Some(Arc::clone(&dir));
        tracing::trace!(root = self.root.as_str(), "sandbox root reopened");
        Ok(dir)
    }

    /// Closes the handle (once no operation in flight still uses it).
    pub(super) fn release(&self) {
        self.dir.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Whether the handle is open now.
    pub(super) fn is_open(&self) -> bool {
        self.dir.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }
}
