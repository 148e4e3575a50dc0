//! What an add reports: each leaf's index and whether it was new, and the checkpoint
//! after it (shared by a folder's adds, a bucket's and the commits they share).

use crate::note::Checkpoint;

/// One leaf of an add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    /// Its index in the tree.
    pub index: u64,
    /// Whether this add appended it (`false`: the tree already held it).
    pub new: bool,
}

/// What an add did.
#[derive(Debug, Clone)]
pub struct AddOutcome {
    /// Each leaf asked for, in order.
    pub added: Vec<Added>,
    /// The checkpoint after the add (the old one when nothing was new).
    pub checkpoint: Checkpoint,
    /// The files of an earlier, interrupted add that this one removed first.
    pub repaired: Vec<String>,
}
