//! `provrun view DIR|s3://BUCKET/PREFIX|FILE.tar…`: many bundles as a listing. The rows
//! come from the store's run index (written by `batch` and `serve`) where a
//! bundle's statement digest still matches, else from the bundle, read and verified now.
//! Served, `/` is the listing and `/runs/ID` a run's page, rendered when it is opened;
//! with `-o DIR`, a static folder (`index.html` and `runs/ID.html`) that works offline.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use provrun_store::{Location, Store, StoreError};
use provrun_view::{IndexEntry, LinkStyle, ListingRow, RunIndex};

use crate::{EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail};

/// What a listing is made of: a store (a folder or a bucket prefix), or bundles named one
/// by one.
pub(super) enum Many {
    Store(Store),
    Named(Vec<(String, Location)>),
}

impl Many {
    fn title(&self) -> String {
        match self {
            Many::Store(s) => s.name(),
            Many::Named(n) => format!("{} bundles", n.len()),
        }
    }

    /// Every bundle: its id and where it is.
    fn bundles(
        &self,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<Vec<(String, Location)>, StoreError> {
        match self {
            Many::Store(store) => Ok(runtime
                .block_on(store.list())?
                .into_iter()
                .map(|l| (l.id, l.location))
                .collect()),
            Many::Named(named) => Ok(named.clone()),
        }
    }

    /// The store's run index, by id (empty for a bucket or named bundles).
    fn index(&self) -> HashMap<String, IndexEntry> {
        let Many::Store(store) = self else {
            return HashMap::new();
        };
        let Some(folder) = store.folder_path() else {
            return HashMap::new();
        };
        // A batch's index, then a serve store's; a later line of an id wins.
        let mut by_id = HashMap::new();
        for name in [provrun_view::BATCH_INDEX_FILE, provrun_view::INDEX_FILE] {
            match RunIndex::at(folder.join(name)).read() {
                Ok(entries) => by_id.extend(entries.into_iter().map(|e| (e.id.clone(), e))),
                Err(e) => tracing::warn!(
                    "the run index {name} cannot be read ({e}); its runs are verified"
                ),
            }
        }
        by_id
    }
}

/// The row of one bundle: a folder is read in place, a tar or an object unpacked first.
fn row(id: &str, location: &Location, index: &HashMap<String, IndexEntry>) -> ListingRow {
    if let Location::Folder(dir) = location {
        return provrun_view::row_for_folder(dir, id, index);
    }
    match provrun_store::open_blocking(location) {
        Ok(opened) => provrun_view::row_for_folder(opened.dir(), id, index),
        Err(e) => {
            let mut summary = provrun_view::RunSummary {
                verdict: "fails".to_owned(),
                status: "never finished".to_owned(),
                ..Default::default()
            };
            summary.failed_checks.push(format!("open: {e}"));
            ListingRow {
                id: id.to_owned(),
                summary,
                cached: false,
            }
        }
    }
}

/// The rows of every bundle, on a few threads (a bundle not in the index is verified).
fn rows(bundles: &[(String, Location)], index: &HashMap<String, IndexEntry>) -> Vec<ListingRow> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let chunk = bundles.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = bundles
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(id, l)| row(id, l, index))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(EXIT_FAILED, format!("view: cannot start: {e}")))
}

/// `provrun view` of many bundles: a listing served, or written as a folder with `out`.
pub(super) fn listing(many: Many, out: Option<&Path>, port: u16) -> u8 {
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let bundles = match many.bundles(&runtime) {
        Ok(b) => b,
        Err(e @ (StoreError::NotFound(_) | StoreError::BadUrl { .. })) => {
            return fail(EXIT_USAGE, format!("view: {e}"));
        }
        Err(e) => return fail(EXIT_FAILED, format!("view: cannot list the bundles: {e}")),
    };
    if bundles.is_empty() {
        return fail(
            EXIT_USAGE,
            format!(
                "view: `{}` is not a bundle: it has no events.jsonl, and it holds no bundle (no folder with an events.jsonl, no .tar)",
                many.title()
            ),
        );
    }
    let index = many.index();
    let rows = rows(&bundles, &index);
    let verified = rows.iter().filter(|r| !r.cached).count();
    tracing::info!(runs = rows.len(), verified_now = verified, "listing built");
    let note = format!(
        "{verified} verified now, {} from the run index",
        rows.len() - verified
    );
    let links = if out.is_some() {
        LinkStyle::Files
    } else {
        LinkStyle::Served
    };
    let page = match provrun_view::render_listing(&many.title(), &note, &rows, links) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_FAILED, format!("view: {e}")),
    };
    let locations: HashMap<String, Location> = bundles.into_iter().collect();
    match out {
        Some(dir) => write_folder(dir, &page, &locations),
        None => super::serve::serve(
            page,
            &provrun_view::listing_security_policy(),
            port,
            Some(Arc::new(locations)),
        ),
    }
}

/// The listing as a static folder: `index.html` and each run's page as `runs/ID.html`.
fn write_folder(dir: &Path, page: &str, locations: &HashMap<String, Location>) -> u8 {
    let runs = dir.join("runs");
    if let Err(e) = std::fs::create_dir_all(&runs) {
        return fail(
            EXIT_FAILED,
            format!("view: cannot make `{}`: {e}", runs.display()),
        );
    }
    for (id, location) in locations {
        let file = runs.join(format!("{id}.html"));
        let written = super::serve::page_of(location)
            .and_then(|p| std::fs::write(&file, p).map_err(|e| e.to_string()));
        if let Err(e) = written {
            return fail(
                EXIT_FAILED,
                format!("view: cannot write `{}`: {e}", file.display()),
            );
        }
    }
    let index = dir.join("index.html");
    if let Err(e) = std::fs::write(&index, page) {
        return fail(
            EXIT_FAILED,
            format!("view: cannot write `{}`: {e}", index.display()),
        );
    }
    out!(
        "listing of {} runs written to {}",
        locations.len(),
        index.display()
    );
    EXIT_OK
}

/// The id of a bundle named on the command line: its folder's or tar's name.
pub(super) fn id_of(location: &Location) -> String {
    let name = match location {
        Location::Folder(p) | Location::TarFile(p) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        Location::Object(url) => url.rsplit('/').next().unwrap_or_default().to_owned(),
    };
    name.strip_suffix(".tar").map(str::to_owned).unwrap_or(name)
}

/// Whether `path` is a folder that holds no `events.jsonl` (a folder of bundles, maybe).
pub(super) fn is_store_folder(path: &Path) -> bool {
    path.is_dir() && !path.join(provrun_store::EVENTS_FILE).exists()
}
