//! Bundles as leaves: the leaf of a bundle is `sha256:<hex of its statement.json>\n`.
//! Adding checks the bundle first; checking a bundle's inclusion proves its statement is
//! a leaf of a signed checkpoint, from a ledger folder or offline from a checkpoint and a
//! proof.

use std::path::Path;

use provrun_evidence::dsse::PrivateKey;
use sha2::{Digest as _, Sha256};

use crate::append::{AddOutcome, add_leaves};
use crate::error::{LedgerError, Result};
use crate::ledger::{InclusionProof, Ledger, decode_hashes};
use crate::merkle::{leaf_hash, verify_inclusion};
use crate::note::{Checkpoint, VerifierKey};

/// The name of a bundle's statement.
const STATEMENT_FILE: &str = "statement.json";

/// The leaf of a statement whose SHA-256 is `hex`: `sha256:<hex>\n`.
pub fn leaf_data(statement_sha256: &str) -> Vec<u8> {
    format!("sha256:{statement_sha256}\n").into_bytes()
}

/// The hex SHA-256 of the bundle's `statement.json`.
///
/// # Errors
///
/// [`LedgerError::BadBundle`] when the bundle has no readable `statement.json`.
pub fn statement_digest(bundle: &Path) -> Result<String> {
    let bytes = crate::files::read_bounded(&bundle.join(STATEMENT_FILE), 64 * 1024 * 1024)
        .map_err(|e| LedgerError::BadBundle {
            bundle: bundle.display().to_string(),
            reason: format!("no readable {STATEMENT_FILE}: {e}"),
        })?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// The statement digest of a bundle that may be added: it verifies and its run ended
/// (the log ends with `run_finished` and the statement is written).
///
/// # Errors
///
/// [`LedgerError::BadBundle`] when the bundle does not verify, its run never finished, or
/// its statement cannot be read.
pub fn checked_digest(bundle: &Path) -> Result<String> {
    let report = provrun_evidence::verify(bundle);
    let refuse = |reason: String| LedgerError::BadBundle {
        bundle: bundle.display().to_string(),
        reason,
    };
    if let Some(failed) = report.failures().next() {
        return Err(refuse(format!(
            "does not verify ({}: {})",
            failed.code.as_str(),
            failed.detail
        )));
    }
    if !report.complete {
        return Err(refuse("its run never finished (no statement)".into()));
    }
    statement_digest(bundle)
}

/// Add finished bundles to the ledger at `dir` (each checked first; none is added when
/// one is refused), signing with `key` or the ledger's own key file. A bundle whose
/// statement is already a leaf keeps its index.
///
/// # Errors
///
/// [`LedgerError::BadBundle`] when a bundle is refused (see [`checked_digest`]); otherwise
/// the errors of [`add_leaves`].
pub fn add_bundles(dir: &Path, bundles: &[&Path], key: Option<&PrivateKey>) -> Result<AddOutcome> {
    let leaves = bundles
        .iter()
        .map(|b| checked_digest(b).map(|d| leaf_data(&d)))
        .collect::<Result<Vec<_>>>()?;
    add_leaves(dir, &leaves, key)
}

/// Add one finished bundle to the ledger at `dir` with the ledger's own key: what a run
/// does when it ends with `--ledger DIR` (and what a server calls for each run it
/// finishes). Returns the add's outcome: the bundle's index and the new checkpoint.
///
/// # Errors
///
/// As [`add_bundles`].
pub fn append_bundle(dir: &Path, bundle: &Path) -> Result<AddOutcome> {
    add_bundles(dir, &[bundle], None)
}

/// Where a bundle's statement sits in a log, as proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inclusion {
    /// The leaf's index.
    pub index: u64,
    /// The checkpoint the proof verified against.
    pub checkpoint: Checkpoint,
    /// The key that signed it (`NAME+KEYHASH+BASE64`).
    pub key: String,
}

/// Prove and check that the statement whose SHA-256 is `statement_sha256` is a leaf of
/// the ledger at `dir`, whose checkpoint must verify with `key` (by default the key its
/// `ledger.json` names).
///
/// # Errors
///
/// The errors of [`Ledger::open`] and of reading its tiles; [`LedgerError::NotIncluded`] when
/// the statement is not a leaf; [`LedgerError::BadProof`] when the proof does not verify
/// against the checkpoint.
pub fn check_in_ledger(
    dir: &Path,
    statement_sha256: &str,
    key: Option<&VerifierKey>,
) -> Result<Inclusion> {
    check_included(&Ledger::open(dir, key)?, statement_sha256)
}

/// [`check_in_ledger`] for a ledger already open (a folder or a URL).
///
/// # Errors
///
/// As [`check_in_ledger`], without the errors of opening it.
pub fn check_included(ledger: &Ledger, statement_sha256: &str) -> Result<Inclusion> {
    let leaf = leaf_data(statement_sha256);
    let index = ledger
        .find(&leaf)?
        .ok_or_else(|| LedgerError::NotIncluded(statement_sha256.to_owned()))?;
    let proof = ledger.inclusion_proof(index)?;
    let checkpoint = ledger.checkpoint().clone();
    check_proof(&proof, &checkpoint, &leaf)?;
    Ok(Inclusion {
        index,
        checkpoint,
        key: ledger.key().to_text(),
    })
}

/// Check offline that the statement whose SHA-256 is `statement_sha256` is a leaf of the
/// log that signed `checkpoint` (a signed note) with `key`, by the inclusion `proof` (as
/// `provrun ledger proof --json` prints it).
///
/// # Errors
///
/// The errors of [`Checkpoint::open`] when the checkpoint does not verify with `key`;
/// [`LedgerError::BadProof`] when `proof` is not an inclusion proof or does not verify.
pub fn check_offline(
    key: &VerifierKey,
    checkpoint: &[u8],
    proof: &[u8],
    statement_sha256: &str,
) -> Result<Inclusion> {
    let cp = Checkpoint::open(checkpoint, key)?;
    let proof: InclusionProof = serde_json::from_slice(proof)
        .map_err(|e| LedgerError::BadProof(format!("not an inclusion proof: {e}")))?;
    check_proof(&proof, &cp, &leaf_data(statement_sha256))?;
    Ok(Inclusion {
        index: proof.index,
        checkpoint: cp,
        key: key.to_text(),
    })
}

fn check_proof(proof: &InclusionProof, cp: &Checkpoint, leaf: &[u8]) -> Result<()> {
    if proof.tree_size != cp.size {
        return Err(LedgerError::BadProof(format!(
            "the proof is for a tree of {} leaves, the checkpoint names {}",
            proof.tree_size, cp.size
        )));
    }
    let hashes = decode_hashes(&proof.hashes)?;
    if verify_inclusion(
        proof.index,
        proof.tree_size,
        &leaf_hash(leaf),
        &hashes,
        &cp.root,
    ) {
        Ok(())
    } else {
        Err(LedgerError::BadProof(format!(
            "the proof does not put this statement at index {} of the checkpoint's tree",
            proof.index
        )))
    }
}
