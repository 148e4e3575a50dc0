//! Adds from many threads of one process share a commit: the first writer to find the
//! ledger free adds every leaf queued so far in one add (one checkpoint, one round of
//! syncs) and hands each waiting caller its own result; the ones that queue meanwhile go
//! in the next add. Across processes the writer's lock (`flock`) still orders adds one at
//! a time.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use crate::error::{LedgerError, Result};
use crate::index::LeafIndex;
use crate::outcome::AddOutcome;

/// The queue of one ledger folder, and the index of its leaves its writers keep.
#[derive(Default)]
struct Group {
    state: Mutex<State>,
    done: Condvar,
    index: Mutex<Option<LeafIndex>>,
}

#[derive(Default)]
struct State {
    next_ticket: u64,
    /// Queued adds: their ticket and leaves.
    pending: Vec<(u64, Vec<Vec<u8>>)>,
    /// Results not yet taken by their caller.
    results: HashMap<u64, Result<AddOutcome>>,
    /// Whether a writer is adding now.
    leading: bool,
}

fn group_for(key: String) -> Arc<Group> {
    static GROUPS: OnceLock<Mutex<HashMap<String, Arc<Group>>>> = OnceLock::new();
    let mut groups = GROUPS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    Arc::clone(groups.entry(key).or_default())
}

/// One add of many callers' leaves, with the writer's index of the ledger's leaves.
pub(crate) type AddFn<'a> = dyn Fn(&[Vec<u8>], &mut Option<LeafIndex>) -> Result<AddOutcome> + 'a;

/// Queue `leaves` for the ledger known as `target` and wait until `add` (run by this
/// thread, or by another for everything queued with it) has added them.
pub(crate) fn submit_to(
    target: String,
    leaves: Vec<Vec<u8>>,
    add: &AddFn<'_>,
) -> Result<AddOutcome> {
    let group = group_for(target);
    let mut st = group.state.lock().unwrap_or_else(|e| e.into_inner());
    let ticket = st.next_ticket;
    st.next_ticket += 1;
    st.pending.push((ticket, leaves));
    loop {
        if let Some(result) = st.results.remove(&ticket) {
            return result;
        }
        if st.leading {
            st = group.done.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        }
        st.leading = true;
        let batch = std::mem::take(&mut st.pending);
        drop(st);
        // A writer that panicked would leave the others waiting: its batch fails instead.
        let outcomes = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut index = group.index.lock().unwrap_or_else(|e| e.into_inner());
            add_batch(&batch, add, &mut index)
        }))
        .unwrap_or_else(|_| {
            batch
                .iter()
                .map(|_| Err(LedgerError::BadTile("the add failed unexpectedly".into())))
                .collect()
        });
        st = group.state.lock().unwrap_or_else(|e| e.into_inner());
        for ((t, _), r) in batch.iter().zip(outcomes) {
            st.results.insert(*t, r);
        }
        st.leading = false;
        group.done.notify_all();
    }
}

/// One add of every queued caller's leaves, its outcome split back per caller.
fn add_batch(
    batch: &[(u64, Vec<Vec<u8>>)],
    add: &AddFn<'_>,
    index: &mut Option<LeafIndex>,
) -> Vec<Result<AddOutcome>> {
    let all: Vec<Vec<u8>> = batch.iter().flat_map(|(_, l)| l.iter().cloned()).collect();
    match add(&all, index) {
        Ok(outcome) => {
            let mut added = outcome.added.into_iter();
            batch
                .iter()
                .enumerate()
                .map(|(i, (_, leaves))| {
                    Ok(AddOutcome {
                        added: added.by_ref().take(leaves.len()).collect(),
                        checkpoint: outcome.checkpoint.clone(),
                        repaired: if i == 0 {
                            outcome.repaired.clone()
                        } else {
                            Vec::new()
                        },
                    })
                })
                .collect()
        }
        Err(e) => batch.iter().map(|_| Err(duplicate(&e))).collect(),
    }
}

/// The same error again, for each caller of a failed shared add.
fn duplicate(e: &LedgerError) -> LedgerError {
    match e {
        LedgerError::Io {
            action,
            path,
            source,
        } => LedgerError::Io {
            action,
            path: path.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        LedgerError::NotALedger(p) => LedgerError::NotALedger(p.clone()),
        LedgerError::NotEmpty(p) => LedgerError::NotEmpty(p.clone()),
        LedgerError::BadConfig { path, reason } => LedgerError::BadConfig {
            path: path.clone(),
            reason: reason.clone(),
        },
        LedgerError::Locked(p) => LedgerError::Locked(p.clone()),
        LedgerError::BadName(s) => LedgerError::BadName(s.clone()),
        LedgerError::KeyType(s) => LedgerError::KeyType(s.clone()),
        LedgerError::Key(s) => LedgerError::Key(s.clone()),
        LedgerError::BadVerifierKey(s) => LedgerError::BadVerifierKey(s.clone()),
        LedgerError::BadNote(s) => LedgerError::BadNote(s.clone()),
        LedgerError::BadSignature(s) => LedgerError::BadSignature(s.clone()),
        LedgerError::NotSignedBy(s) => LedgerError::NotSignedBy(s.clone()),
        LedgerError::BadCheckpoint(s) => LedgerError::BadCheckpoint(s.clone()),
        LedgerError::BadTile(s) => LedgerError::BadTile(s.clone()),
        LedgerError::BadBundle { bundle, reason } => LedgerError::BadBundle {
            bundle: bundle.clone(),
            reason: reason.clone(),
        },
        LedgerError::NotIncluded(s) => LedgerError::NotIncluded(s.clone()),
        LedgerError::BadProof(s) => LedgerError::BadProof(s.clone()),
        LedgerError::Remote(s) => LedgerError::Remote(s.clone()),
    }
}
