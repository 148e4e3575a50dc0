//! Creating a bundle: built in a hidden folder beside its final place, locked, given
//! its `run_started` line, and only then renamed into place.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use serde_json::json;
use sha2::{Digest as _, Sha256};

use super::commit::SyncItem;
use super::pending::PendingBundle;
use super::{
    BLOB_STORE_KEY, BlobLayout, Durability, EVENTS_FILE, Facts, PACK_FILE, Recorder, lock,
    payload_value,
};
use crate::error::{EvidenceError, Result};
use crate::event::{EventType, Payload, RunStarted};
use crate::lock::BundleLock;
use crate::pack::PackWriter;

/// Where a bundle at `root` is built before it appears: its parent folder and its name.
pub(super) fn staging_place(root: &Path) -> Result<(PathBuf, String)> {
    let name = root.file_name().ok_or_else(|| {
        EvidenceError::io(
            "create",
            root,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a bundle needs a folder name of its own (not `.`, `..` or `/`)",
            ),
        )
    })?;
    let parent = root
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok((parent, name.to_string_lossy().into_owned()))
}

/// The hidden folder beside it that the bundle called `name` is built in.
pub(super) fn staging_name(name: &str) -> String {
    format!(".{name}.provrun-creating")
}

/// Make room for building the bundle at `root` in `staging`: a folder a killed `create`
/// left there is removed; one that a live `create` holds means another writer is creating
/// this very bundle, and is refused.
pub(super) fn clear_staging(root: &Path, staging: &Path) -> Result<()> {
    match fs::symlink_metadata(staging) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(EvidenceError::io("stat", staging, e)),
        Ok(meta) if !meta.is_dir() => return Err(EvidenceError::BundleNotEmpty(root.into())),
        Ok(_) => {}
    }
    // A live `create` locks its log first thing; no log, or a log nobody holds, is what a
    // killed one left.
    let held = match BundleLock::acquire(staging) {
        Err(EvidenceError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        other => other.map(Some),
    };
    match held {
        Ok(held) => {
            tracing::debug!(path = %staging.display(), "removing a bundle a killed process began");
            fs::remove_dir_all(staging).map_err(|e| EvidenceError::io("remove", staging, e))?;
            drop(held);
            Ok(())
        }
        Err(EvidenceError::BundleLocked { holder, .. }) => Err(EvidenceError::BundleLocked {
            path: root.into(),
            holder,
        }),
        Err(e) => Err(e),
    }
}

/// How [`Recorder::create_with`] makes a bundle. Build it with [`CreateOptions::default`]
/// and its setters; fields are added with defaults that keep today's behaviour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CreateOptions {
    /// How blobs are stored (default: the pack).
    pub layout: BlobLayout,
    /// Stamp events with this time instead of the system clock, from `run_started` on,
    /// until [`Recorder::set_clock`] changes it (default: the clock).
    pub clock: Option<std::time::SystemTime>,
}

impl CreateOptions {
    /// The blob layout.
    pub fn layout(mut self, layout: BlobLayout) -> Self {
        self.layout = layout;
        self
    }

    /// The time `run_started` (and what follows, until [`Recorder::set_clock`]) is
    /// stamped with: for an importer of a run that happened earlier.
    pub fn clock(mut self, at: std::time::SystemTime) -> Self {
        self.clock = Some(at);
        self
    }
}

impl Recorder {
    /// Create a new bundle at `dir` (refusing an existing non-empty directory) with
    /// `input/`, `output/`, `blobs/sha256/` and `events.jsonl`, and record `started` as
    /// the `run_started` event (seq 0). The recorder holds the bundle's [`BundleLock`]
    /// for its life.
    ///
    /// The bundle appears whole or not at all: it is built in a hidden folder next to
    /// `dir` (`.NAME.provrun-creating`), locked there, given its `run_started` line, and
    /// only then renamed to `dir` (replacing an empty folder of that name). A process
    /// killed before the rename leaves no bundle, only that hidden folder, which the
    /// next `create` of the same bundle removes; one killed after leaves a bundle that
    /// verifies as incomplete. Another `create` of the same bundle at the same moment is
    /// refused ([`EvidenceError::BundleLocked`] or [`EvidenceError::BundleNotEmpty`]).
    ///
    /// Blobs go to a pack ([`BlobLayout::Pack`]); [`Recorder::create_with_layout`]
    /// chooses. [`Recorder::begin`] splits creation in two, to stage inputs before
    /// `run_started` is written.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::BundleNotEmpty`] when `dir` exists and is not an empty folder;
    /// [`EvidenceError::BundleLocked`] when another `create` holds it;
    /// [`EvidenceError::Io`] when a folder or file cannot be made, written, synced or
    /// renamed; [`EvidenceError::Payload`] when `started` cannot be serialised.
    pub fn create(
        dir: impl AsRef<Path>,
        run_id: impl Into<String>,
        durability: Durability,
        started: &RunStarted,
    ) -> Result<Recorder> {
        Recorder::create_with_layout(dir, run_id, durability, started, BlobLayout::default())
    }

    /// [`Recorder::create`] with the blob layout chosen: [`BlobLayout::Loose`] writes
    /// bundles as versions before the pack did (e.g. for tools that read only those).
    ///
    /// # Errors
    ///
    /// As [`Recorder::create`].
    pub fn create_with_layout(
        dir: impl AsRef<Path>,
        run_id: impl Into<String>,
        durability: Durability,
        started: &RunStarted,
        layout: BlobLayout,
    ) -> Result<Recorder> {
        let options = CreateOptions::default().layout(layout);
        Recorder::create_with(dir, run_id, durability, started, &options)
    }

    /// [`Recorder::create`] with its [`CreateOptions`]: the blob layout, and the time
    /// events are stamped with.
    ///
    /// # Errors
    ///
    /// As [`Recorder::create`].
    pub fn create_with(
        dir: impl AsRef<Path>,
        run_id: impl Into<String>,
        durability: Durability,
        started: &RunStarted,
        options: &CreateOptions,
    ) -> Result<Recorder> {
        Recorder::begin_with(dir, run_id, durability, options)?.start(started)
    }

    /// The first half of [`Recorder::create_with_layout`]: the bundle built in its hidden
    /// folder beside `dir` (or in place, in an empty folder that cannot be replaced),
    /// locked, with its empty `input/`, `output/` and blob store and no event yet. Stage
    /// inputs into [`PendingBundle::input_dir`], then [`PendingBundle::start`] writes
    /// `run_started` and renames the bundle into place; a [`PendingBundle`] dropped
    /// without starting is removed.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::BundleNotEmpty`] when `dir` exists and is not an empty folder;
    /// [`EvidenceError::BundleLocked`] when another writer holds the bundle being built;
    /// [`EvidenceError::Io`] when its folders or files cannot be made.
    pub fn begin(
        dir: impl AsRef<Path>,
        run_id: impl Into<String>,
        durability: Durability,
        layout: BlobLayout,
    ) -> Result<PendingBundle> {
        Recorder::begin_with(
            dir,
            run_id,
            durability,
            &CreateOptions::default().layout(layout),
        )
    }

    /// [`Recorder::begin`] with its [`CreateOptions`]: the blob layout, and the time
    /// events are stamped with.
    ///
    /// # Errors
    ///
    /// As [`Recorder::begin`].
    pub fn begin_with(
        dir: impl AsRef<Path>,
        run_id: impl Into<String>,
        durability: Durability,
        options: &CreateOptions,
    ) -> Result<PendingBundle> {
        let root = dir.as_ref().to_path_buf();
        let run_id = run_id.into();
        let existed = match fs::symlink_metadata(&root) {
            Ok(meta) if meta.is_dir() => {
                let mut entries =
                    fs::read_dir(&root).map_err(|e| EvidenceError::io("list", &root, e))?;
                if entries.next().is_some() {
                    return Err(EvidenceError::BundleNotEmpty(root));
                }
                true
            }
            Ok(_) => return Err(EvidenceError::BundleNotEmpty(root)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(EvidenceError::io("stat", &root, e)),
        };
        match Self::begin_aside(&root, run_id.clone(), durability, options) {
            Ok(pending) => Ok(pending),
            Err(e @ (EvidenceError::BundleNotEmpty(_) | EvidenceError::BundleLocked { .. })) => {
                Err(e)
            }
            // An empty folder that cannot be replaced (a mount point, a parent folder
            // this process may not write): the bundle is built in it, in place. Only
            // there can a kill during creation leave the empty folders without a log.
            Err(e) if existed => {
                tracing::debug!(root = %root.display(), error = %e, "building the bundle in place");
                let rec = Self::build_empty(&root, root.clone(), run_id, durability, options)?;
                Ok(PendingBundle::new(rec, root.clone(), root, true))
            }
            Err(e) => Err(e),
        }
    }

    /// Make the bundle's hidden folder beside `root` and build it there, empty.
    fn begin_aside(
        root: &Path,
        run_id: String,
        durability: Durability,
        options: &CreateOptions,
    ) -> Result<PendingBundle> {
        let (parent, name) = staging_place(root)?;
        fs::create_dir_all(&parent).map_err(|e| EvidenceError::io("create", &parent, e))?;
        let staging = parent.join(staging_name(&name));
        clear_staging(root, &staging)?;
        fs::create_dir(&staging).map_err(|e| match e.kind() {
            // Another `create` of this bundle got there first.
            std::io::ErrorKind::AlreadyExists => EvidenceError::BundleLocked {
                path: root.to_path_buf(),
                holder: None,
            },
            _ => EvidenceError::io("create", &staging, e),
        })?;
        match Self::build_empty(&staging, root.to_path_buf(), run_id, durability, options) {
            Ok(rec) => Ok(PendingBundle::new(rec, staging, root.to_path_buf(), false)),
            Err(e) => {
                let _ = fs::remove_dir_all(&staging);
                Err(e)
            }
        }
    }

    /// The bundle's content in `staging`, locked, without an event yet; the recorder
    /// already knows the bundle by its final path `root`.
    fn build_empty(
        staging: &Path,
        root: PathBuf,
        run_id: String,
        durability: Durability,
        options: &CreateOptions,
    ) -> Result<Recorder> {
        let layout = options.layout;
        // The log first: locked at once, it is the lock of the bundle being built (and
        // then of the bundle) for as long as the recorder appends to it.
        let log_path = staging.join(EVENTS_FILE);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&log_path)
            .map_err(|e| EvidenceError::io("create", &log_path, e))?;
        let file = BundleLock::lock(file, staging.to_path_buf())?.into_log();
        let subs: &[&str] = match layout {
            BlobLayout::Loose => &["input", "output", "blobs", "blobs/sha256"],
            BlobLayout::Pack => &["input", "output", "blobs"],
        };
        for sub in subs {
            let p = staging.join(sub);
            fs::create_dir(&p).map_err(|e| EvidenceError::io("create", &p, e))?;
        }
        let pack = match layout {
            BlobLayout::Loose => None,
            BlobLayout::Pack => {
                let path = staging.join(PACK_FILE);
                let mut w =
                    PackWriter::create(&path).map_err(|e| EvidenceError::io("create", &path, e))?;
                // Known by its place in the bundle once renamed, as the log is.
                w.path = root.join(PACK_FILE);
                Some(w)
            }
        };
        // The run's secret, which the chain (3) salts every string's commitment from:
        // written beside the log before any line needs it.
        let secret = crate::salt::new_secret()
            .map_err(|e| EvidenceError::io("draw a secret for", staging, e))?;
        let salts_path = staging.join(crate::salt::SALTS_FILE);
        let salts_file = {
            use std::io::Write as _;
            let mut f = fs::File::create(&salts_path)
                .map_err(|e| EvidenceError::io("create", &salts_path, e))?;
            f.write_all(&crate::salt::Salts::Secret(secret).to_bytes())
                .map_err(|e| EvidenceError::io("write", &salts_path, e))?;
            f
        };
        let facts = Facts {
            secret: Some(secret),
            ..Facts::default()
        };
        let salts_final = root.join(crate::salt::SALTS_FILE);
        Recorder::with_state(
            root,
            run_id,
            durability,
            file,
            0,
            None,
            Sha256::new(),
            0,
            facts,
            layout,
            pack,
        )
        .inspect(|rec| rec.set_clock(options.clock))
        .and_then(|rec| {
            // Under `PerEvent` each line is synced as it is written, by itself: the salts
            // go first, now.
            if durability == Durability::PerEvent {
                salts_file
                    .sync_data()
                    .map_err(|e| EvidenceError::io("sync", &salts_path, e))?;
                #[cfg(feature = "sync-probe")]
                crate::fsutil::synced_file(&salts_final);
                return Ok(rec);
            }
            // The salts' data is synced with the first sync of the log, before its lines
            // (a group commit syncs files first): no line is durable without them. Their
            // name is in the bundle's folder, beside the log's.
            rec.defer_sync(vec![SyncItem::File(salts_file, salts_final)], Vec::new());
            Ok(rec)
        })
    }

    /// Writes `started` as the log's first line (seq 0), with the blob layout and the
    /// statement format it promises.
    pub(super) fn write_started(&self, started: &RunStarted) -> Result<()> {
        let layout = self.inner.layout;
        let mut payload = payload_value(started)?;
        if let Some(obj) = payload.as_object_mut() {
            if layout == BlobLayout::Pack {
                obj.insert(BLOB_STORE_KEY.into(), json!(layout.as_str()));
            }
            obj.insert(
                crate::statement::STATEMENT_FORMAT_KEY.into(),
                json!(crate::statement::STATEMENT_FORMAT),
            );
            obj.insert(crate::chain::CHAIN_KEY.into(), json!(crate::chain::CHAIN));
        }
        self.append(EventType::RunStarted, started.confidence(), payload, true)?
            .wait()
            .map(drop)
    }

    /// After the bundle appeared: its new folders' names (the rename included) synced by
    /// the committer with the next sync — the next line under `GroupCommit`, the next step
    /// or the end under `PerStep` and `AtEnd`, right now under `PerEvent`. Until then a
    /// power loss may lose the bundle whole, never leave half of one.
    pub(super) fn sync_new_bundle(&self) -> Result<()> {
        let durability = self.inner.durability;
        if !durability.syncs() {
            return Ok(());
        }
        let root = &self.inner.root;
        let mut dirs = vec![root.join("blobs"), root.clone()];
        dirs.extend(
            root.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map(Path::to_path_buf),
        );
        // The pack's header, with the folder naming it.
        let pack_item = match &self.inner.pack {
            Some(p) => {
                let mut w = lock(p);
                let file = w
                    .handle()
                    .map_err(|e| EvidenceError::io("open", &w.path, e))?;
                Some(SyncItem::Pack(file, w.path.clone()))
            }
            None => None,
        };
        self.defer_sync(pack_item.into_iter().collect(), dirs);
        if durability == Durability::PerEvent {
            self.sync_all().wait()?;
        }
        Ok(())
    }
}
