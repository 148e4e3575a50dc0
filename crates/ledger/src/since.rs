//! Checking a log against checkpoints someone kept: each held checkpoint must be signed
//! by the log's key, and the current tree must extend the held tree (an RFC 6962
//! consistency proof, computed from the current log's tiles, checked against both
//! roots). A log rewritten since — a run removed, replaced or reordered, even by the
//! holder of the log's own key — fails here, naming where the two histories part.

use crate::error::Result;
use crate::ledger::{Ledger, decode_hashes};
use crate::merkle::{self, verify_consistency};
use crate::note::Checkpoint;
use crate::tiles::TileReader;

/// How the current log stands against one held checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    /// The current tree extends the held one.
    Consistent {
        /// The held checkpoint.
        held: Checkpoint,
        /// How many hashes the consistency proof had.
        proof_len: usize,
    },
    /// The current log does not hold the held tree.
    Diverged {
        /// The held checkpoint.
        held: Checkpoint,
        /// What was found: the two logs part at or before this many leaves.
        at: u64,
        /// Why, in words.
        reason: String,
    },
}

impl Since {
    /// Whether the held checkpoint is consistent with the current log.
    pub fn holds(&self) -> bool {
        matches!(self, Since::Consistent { .. })
    }
}

/// Check the current log of `ledger` against the held checkpoint `note` (a signed note,
/// as `ledger add` printed it or `checkpoint` held it), which must be signed by the
/// log's key.
///
/// # Errors
///
/// The errors of [`Checkpoint::open`] when `note` is not a checkpoint of this log signed
/// by its key; [`crate::LedgerError::BadTile`], [`crate::LedgerError::Io`] or [`crate::LedgerError::Remote`]
/// when the current log's tiles cannot be read.
pub fn check_since(ledger: &Ledger, note: &[u8]) -> Result<Since> {
    let held = Checkpoint::open(note, ledger.key())?;
    let current = ledger.checkpoint();
    if held.size > current.size {
        return Ok(Since::Diverged {
            at: current.size,
            reason: format!(
                "the log holds {} leaves, fewer than the {} of the held checkpoint: it was cut \
                 back, and parts from the held history at or before leaf {}",
                current.size, held.size, current.size
            ),
            held,
        });
    }
    if held.size == 0 {
        let ok = held.root == merkle::empty_root();
        return Ok(if ok {
            Since::Consistent { held, proof_len: 0 }
        } else {
            Since::Diverged {
                at: 0,
                reason: "the held checkpoint of 0 leaves does not have the empty tree's root"
                    .into(),
                held,
            }
        });
    }
    let proof = if held.size < current.size {
        decode_hashes(&ledger.consistency_proof(held.size)?.hashes)?
    } else {
        Vec::new()
    };
    if verify_consistency(held.size, current.size, &held.root, &current.root, &proof) {
        return Ok(Since::Consistent {
            proof_len: proof.len(),
            held,
        });
    }
    // The current log's own tree at the held size, from its tiles.
    let mut tiles = TileReader::over(Box::new(&**ledger.files()), current.size);
    let prefix = merkle::root(&mut tiles, held.size)?;
    let reason = if prefix == held.root {
        // The prefix matches but the proof does not: the current checkpoint's root is not
        // its tiles' root.
        format!(
            "the current checkpoint's root is not the root of the log's own tiles (its first \
             {} leaves do give the held root)",
            held.size
        )
    } else {
        format!(
            "the log's first {} leaves hash to {}, not to the held checkpoint's root {}: \
             the two histories part at or before leaf {}",
            held.size,
            b64(&prefix),
            b64(&held.root),
            held.size
        )
    };
    Ok(Since::Diverged {
        at: held.size,
        reason,
        held,
    })
}

fn b64(h: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(h)
}

/// The window in which the histories part, over several held checkpoints: the largest
/// size they agree on and the smallest they do not. `None` when none diverges.
pub fn divergence(results: &[Since]) -> Option<(u64, u64)> {
    let agree = results
        .iter()
        .filter_map(|s| match s {
            Since::Consistent { held, .. } => Some(held.size),
            Since::Diverged { .. } => None,
        })
        .max()
        .unwrap_or(0);
    results
        .iter()
        .filter_map(|s| match s {
            Since::Diverged { at, .. } => Some(*at),
            Since::Consistent { .. } => None,
        })
        .min()
        .map(|at| (agree.min(at), at))
}
