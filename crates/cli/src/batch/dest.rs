//! Where the bundles go ([`Dest`]: a folder, or a bucket through a local work folder),
//! and what a restart finds there: a run that ended and verifies, a bundle to move aside
//! and redo, or one another process holds.

use std::path::{Path, PathBuf};

use provrun_evidence::{BundleLock, EvidenceError};
use provrun_store::Store;

/// The folder under DEST where incomplete bundles found by a restart are moved.
pub(crate) const ASIDE_DIR: &str = ".provrun-aside";
/// What an existing bundle at DEST/<id> says: finished (and verifying), or to be redone.
pub(super) enum Existing {
    None,
    Done {
        status: &'static str,
        run_id: String,
    },
    Redo,
    Held(String),
}

/// The status and run id of a bundle that verifies and whose run ended, else `None`. A
/// run that ended `cancelled` did not end for a batch: only a stop signal cancels a
/// batch's runs, so a restart runs it again (`None`).
fn ended(bundle: &Path) -> Option<(&'static str, String)> {
    let report = provrun_evidence::verify(bundle);
    if !report.ok || !report.complete {
        return None;
    }
    let events = provrun_evidence::read_events(bundle).ok()?;
    let last = events.last()?;
    let provrun_evidence::EventPayload::RunFinished(finished) = last.typed().ok()? else {
        return None;
    };
    if finished.status == provrun_evidence::RunStatus::Cancelled {
        return None;
    }
    Some((finished.status.as_str(), last.run_id.clone()))
}

pub(super) fn existing(bundle: &Path) -> Existing {
    match std::fs::symlink_metadata(bundle) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Existing::None,
        Err(e) => return Existing::Held(format!("cannot look at `{}`: {e}", bundle.display())),
        Ok(_) => {}
    }
    // A bundle another process is writing is left alone.
    match BundleLock::acquire(bundle) {
        Err(e @ EvidenceError::BundleLocked { .. }) => return Existing::Held(e.to_string()),
        Ok(lock) => drop(lock),
        Err(_) => {}
    }
    match ended(bundle) {
        Some((status, run_id)) => Existing::Done { status, run_id },
        None => Existing::Redo,
    }
}

/// Move an incomplete or broken bundle out of the way, under DEST/.provrun-aside/, with a
/// name no earlier move used.
pub(super) fn move_aside(dest: &Path, id: &str, bundle: &Path) -> Result<PathBuf, String> {
    let aside = dest.join(ASIDE_DIR);
    std::fs::create_dir_all(&aside)
        .map_err(|e| format!("cannot make `{}`: {e}", aside.display()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let to = aside.join(format!("{id}.{stamp}"));
    std::fs::rename(bundle, &to).map_err(|e| {
        format!(
            "cannot move the incomplete bundle `{}` aside: {e}",
            bundle.display()
        )
    })?;
    Ok(to)
}

/// Where a batch's bundles go: a local folder, or a bucket store (the bundles are then
/// built in a local work folder, uploaded once they verify, and removed).
pub(crate) struct Dest {
    /// DEST itself, or the work folder for a bucket.
    pub(super) local: PathBuf,
    /// The bucket, unpacking what it reads into the work folder.
    pub(super) bucket: Option<Store>,
    /// The run index (`.provrun-index.jsonl` in DEST), a line per ended run, in the
    /// format `serve` writes; none for a bucket.
    pub(super) index: Option<provrun_view::RunIndex>,
    /// `--ledger`: each run that ends is added to it (before its upload).
    pub(super) ledger: Option<std::sync::Arc<crate::ledger::RunLedger>>,
}

impl Dest {
    /// Where the bundle of `id` ends up, as the user would name it.
    pub(super) fn bundle_name(&self, id: &str) -> String {
        match &self.bucket {
            Some(b) => b.bundle_name(id),
            None => self.local.join(id).display().to_string(),
        }
    }

    pub(super) fn name(&self) -> String {
        match &self.bucket {
            Some(b) => b.name(),
            None => self.local.display().to_string(),
        }
    }
}

/// What the bucket holds for `id`: `Existing::None`, or the ended run of a tar that
/// verifies, else `Existing::Redo` (it is replaced by the new upload).
pub(super) async fn existing_in_bucket(bucket: &Store, id: &str) -> Result<Existing, String> {
    let opened = match bucket.open_bundle(id).await {
        Ok(Some(opened)) => opened,
        Ok(None) => return Ok(Existing::None),
        // A tar that cannot be unpacked is no result: run the line again.
        Err(provrun_store::StoreError::Tar { .. }) => return Ok(Existing::Redo),
        Err(e) => return Err(e.to_string()),
    };
    let found = tokio::task::spawn_blocking(move || ended(opened.dir()))
        .await
        .map_err(|e| format!("cannot check the bundle in the bucket: {e}"))?;
    Ok(match found {
        Some((status, run_id)) => Existing::Done { status, run_id },
        None => Existing::Redo,
    })
}
