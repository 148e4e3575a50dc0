//! A bundle begun but not started ([`PendingBundle`], from [`Recorder::begin`]): locked
//! and built in its hidden folder, its inputs staged before `run_started` is written, so
//! that what must see them before the run starts (the run's MCP servers, bound to
//! [`PendingBundle::input_dir`]) does. Renaming the folder into place keeps the `input/`
//! folder itself, so what was bound to it goes on seeing it.

use std::fs;
use std::path::{Path, PathBuf};

use super::Recorder;
use crate::error::{EvidenceError, Result};
use crate::event::RunStarted;

/// A bundle begun with [`Recorder::begin`]: locked, with empty `input/` and `output/`
/// folders and no event. [`PendingBundle::start`] writes `run_started` and makes the
/// bundle appear at its path; dropped without starting, it is removed as if never begun.
#[derive(Debug)]
pub struct PendingBundle {
    /// The recorder at sequence 0 (it holds the lock); `None` once started.
    rec: Option<Recorder>,
    /// Where the bundle is being built: its hidden folder, or the bundle itself in place.
    staging: PathBuf,
    /// Where it appears.
    root: PathBuf,
    /// Built in place, in an empty folder that could not be replaced: nothing to rename,
    /// and only its contents to remove when abandoned.
    in_place: bool,
}

impl PendingBundle {
    pub(super) fn new(rec: Recorder, staging: PathBuf, root: PathBuf, in_place: bool) -> Self {
        PendingBundle {
            rec: Some(rec),
            staging,
            root,
            in_place,
        }
    }

    /// Where inputs are staged now: the bundle's `input/` folder, under its hidden name
    /// until [`PendingBundle::start`]. A bind mount or an open handle of this folder sees
    /// the bundle's inputs after the rename as well.
    pub fn input_dir(&self) -> PathBuf {
        self.staging.join("input")
    }

    /// Where the bundle appears once started.
    pub fn bundle_dir(&self) -> &Path {
        &self.root
    }

    /// Records `started` as the log's first event (seq 0) and renames the bundle into
    /// place (replacing an empty folder of its name; refused over a non-empty one:
    /// another writer got there first). Then [`Recorder::record_inputs`] records what was
    /// staged.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::BundleNotEmpty`] when a non-empty folder took the bundle's place;
    /// [`EvidenceError::Io`] when `run_started` cannot be written or synced, the bundle
    /// cannot be renamed, or it was already started; [`EvidenceError::Payload`] when
    /// `started` cannot be serialised.
    pub fn start(mut self, started: &RunStarted) -> Result<Recorder> {
        let Some(rec) = self.rec.take() else {
            return Err(EvidenceError::io(
                "start",
                &self.root,
                std::io::Error::other("the bundle was already started"),
            ));
        };
        if let Err(e) = rec.write_started(started) {
            self.rec = Some(rec);
            return Err(e);
        }
        if !self.in_place
            && let Err(e) = fs::rename(&self.staging, &self.root)
        {
            self.rec = Some(rec);
            return Err(match e.raw_os_error() {
                Some(libc::ENOTEMPTY | libc::EEXIST | libc::ENOTDIR) => {
                    EvidenceError::BundleNotEmpty(self.root.clone())
                }
                _ => EvidenceError::io("rename", &self.root, e),
            });
        }
        // Started: `self.rec` is empty, so dropping `self` removes nothing.
        rec.sync_new_bundle()?;
        tracing::debug!(root = %self.root.display(), run_id = %rec.run_id(), "evidence bundle created");
        Ok(rec)
    }
}

impl Drop for PendingBundle {
    /// Not started: the bundle is removed (its lock released first), as if never begun.
    fn drop(&mut self) {
        let Some(rec) = self.rec.take() else {
            return;
        };
        drop(rec);
        if !self.in_place {
            remove_tree(&self.staging);
        } else if let Ok(entries) = fs::read_dir(&self.staging) {
            // In place: the folder was empty when begun; empty it again.
            for entry in entries.flatten() {
                remove_tree(&entry.path());
            }
        }
    }
}

/// Removes `path` and what is under it, links not followed; staged inputs are read-only,
/// so their folders are made writable first.
fn remove_tree(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    fn open_up(path: &Path) {
        if let Ok(meta) = fs::symlink_metadata(path)
            && meta.is_dir()
        {
            let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o755));
            for entry in fs::read_dir(path).into_iter().flatten().flatten() {
                open_up(&entry.path());
            }
        }
    }
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            open_up(path);
            let _ = fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = fs::remove_file(path);
        }
        Err(_) => {}
    }
}
