//! A run segment's end, wherever it ended (its own replica's drive, or a replica taking
//! over a lost run): the bundle verified, added to the ledger (unless paused), put in the
//! store and written to the index.

use std::sync::Arc;
use std::time::SystemTime;

use crate::index::Entry;
use crate::metrics::StoreOp;
use crate::state::State;

/// Where an ended run's bundle is appended: the config's ledger writer, else its ledger
/// folder.
enum LedgerTarget {
    Folder(std::path::PathBuf),
    Writer(String, Arc<provrun_ledger::LedgerWriter>),
}

impl LedgerTarget {
    fn of(config: &crate::config::ServeConfig) -> Option<LedgerTarget> {
        match (&config.ledger_writer, &config.ledger) {
            (Some((at, w)), _) => Some(LedgerTarget::Writer(at.clone(), Arc::clone(w))),
            (None, Some(dir)) => Some(LedgerTarget::Folder(dir.clone())),
            (None, None) => None,
        }
    }
}

/// Append an ended run's bundle to the ledger (before a bucket gets it), and log where it
/// went, or why it could not go (the run is stored and indexed either way).
fn add_to_ledger(ledger: &LedgerTarget, folder: &std::path::Path, id: &str) {
    let (added, at) = match ledger {
        LedgerTarget::Folder(dir) => (
            provrun_ledger::append_bundle(dir, folder),
            dir.display().to_string(),
        ),
        LedgerTarget::Writer(at, writer) => (writer.add_bundles(&[folder]), at.clone()),
    };
    match added {
        Ok(outcome) => {
            let index = outcome.added.first().map(|a| a.index).unwrap_or_default();
            tracing::info!(
                bundle = %id,
                ledger = %at,
                ledger_index = index,
                tree_size = outcome.checkpoint.size,
                "run added to the ledger"
            );
        }
        Err(e) => tracing::error!(
            bundle = %id,
            ledger = %at,
            "the bundle could not be added to the ledger: {e}"
        ),
    }
}

/// A segment ended (of the bundle `id` in `folder`, with `status`): verify the bundle,
/// add it to the ledger (unless paused), put it in the store (a bucket gets its tar, its
/// checkpoints are removed; a finished bundle's work folder is then removed), append the
/// index entry.
pub(crate) async fn end_segment(
    state: &State,
    agent_name: &str,
    thread: &str,
    id: &str,
    bundle: &std::path::Path,
    status: provrun_agent::RunStatus,
) -> Option<Entry> {
    let id = id.to_string();
    let folder = bundle.to_path_buf();
    let ended = SystemTime::now();
    let (agent, thread_name, bundle_id) = (agent_name.to_owned(), thread.to_owned(), id.clone());
    let ended_text = humantime::format_rfc3339_millis(ended).to_string();
    let ledger = LedgerTarget::of(&state.config);
    let paused = status == provrun_agent::RunStatus::Paused;
    let measured = tokio::task::spawn_blocking(move || {
        if let Some(ledger) = ledger.filter(|_| !paused) {
            add_to_ledger(&ledger, &folder, &bundle_id);
        }
        Entry::for_bundle(&folder, &bundle_id, &agent, &thread_name, Some(ended_text))
    })
    .await;
    let Ok(mut entry) = measured else {
        tracing::error!(bundle = %id, "the bundle's end could not be checked");
        return None;
    };
    if state.config.store.is_bucket() {
        if let Err(e) = state.config.store.put(&id, bundle).await {
            tracing::error!(bundle = %id, "the bundle could not be put in the store: {e}");
            state.metrics.store_error(StoreOp::Put);
        } else {
            if let Some(shared) = &state.shared
                && let Err(e) = shared.clear_checkpoints(&id).await
            {
                tracing::warn!(bundle = %id, "the run's checkpoints could not be removed: {e}");
            }
            if !paused {
                let _ = std::fs::remove_dir_all(bundle);
            }
        }
    }
    // The status as the run ended it (a log cut short still ended for the server).
    entry.status = status.as_str().to_string();
    let (verified, duration_ms) = (entry.verified, entry.duration_ms);
    if let Err(e) = state.index.append(&entry) {
        tracing::error!(bundle = %id, "the run could not be written to the index: {e}");
    }
    state.add_known(&id);
    if let Some(shared) = &state.shared
        && let Err(e) = shared.add_entry(&entry).await
    {
        tracing::error!(bundle = %id, "the run could not be written to the store's index: {e}");
        state.metrics.store_error(StoreOp::Put);
    }
    tracing::info!(
        bundle = %id,
        status = %entry.status,
        verified,
        duration_ms,
        "run ended"
    );
    Some(entry)
}
