//! A transparency log of provrun runs.
//!
//! Each finished bundle added to a ledger becomes one leaf, the line
//! `sha256:<hex of its statement.json>\n`, of an append-only RFC 6962 Merkle tree; after
//! each add the ledger signs a checkpoint (a C2SP signed note: origin, tree size, root)
//! with an Ed25519 key. Whoever keeps a checkpoint can then be shown that a run is in the
//! log ([`Ledger::inclusion_proof`], [`check_in_ledger`], [`check_offline`]) and that a
//! later log still holds everything an earlier one did ([`Ledger::consistency_proof`]):
//! a run removed after a checkpoint was handed out is caught by its holder.
//!
//! The folder is the C2SP tlog-tiles layout (`checkpoint`, `tile/<L>/<N>[.p/<W>]`,
//! `tile/entries/<N>[.p/<W>]`) plus `ledger.json`, so it can be served as static files.
//! An add is crash-safe (the [`append`] module says why) and one writer runs at a time
//! ([`LedgerLock`]).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use provrun_evidence::dsse::{KeyAlgorithm, PrivateKey};
//! use provrun_ledger::*;
//!
//! let tmp = std::env::temp_dir().join(format!("provrun-ledger-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&tmp);
//! std::fs::create_dir_all(&tmp)?;
//! let key = tmp.join("log.pem");
//! std::fs::write(&key, PrivateKey::generate(KeyAlgorithm::Ed25519)?.to_pem()?)?;
//! let dir = tmp.join("ledger");
//! let vkey = init(&dir, &key, "example.com/runs")?;
//!
//! // A leaf for a statement whose SHA-256 is all zeros (`add_bundles` checks bundles).
//! let leaf = leaf_data(&"0".repeat(64));
//! let outcome = add_leaves(&dir, &[leaf.clone()], None)?;
//! assert_eq!(outcome.added[0].index, 0);
//!
//! let ledger = Ledger::open(&dir, Some(&vkey))?;
//! assert_eq!(ledger.checkpoint().size, 1);
//! assert_eq!(ledger.find(&leaf)?, Some(0));
//! assert!(verify_ledger(&dir, None).ok);
//! # std::fs::remove_dir_all(&tmp)?;
//! # Ok(())
//! # }
//! ```
//!
//! The format and what the log proves are in `docs/ledger.md` of the repository.

pub mod append;
mod audit;
mod bucket;
mod bundle;
mod error;
pub mod files;
pub(crate) mod group;
mod index;
mod ledger;
pub mod merkle;
pub mod note;
mod outcome;
#[cfg(feature = "sync-probe")]
pub mod probe;
mod since;
// Its items are `pub` for when the feature makes the module public.
#[cfg(not(feature = "sync-probe"))]
#[allow(unreachable_pub)]
mod probe;
pub mod tiles;
mod verify;
pub mod witness;
mod writer;

pub use append::{AddOutcome, Added, add_leaves};
pub use audit::{Audit, audit, logged_statements};
pub use bucket::BucketLedger;
pub use bundle::{
    Inclusion, add_bundles, append_bundle, check_in_ledger, check_included, check_offline,
    checked_digest, leaf_data, statement_digest,
};
pub use error::{LedgerError, Result};
pub use ledger::{
    CHECKPOINT_FILE, CONFIG_FILE, Config, ConsistencyProof, InclusionProof, Ledger, LedgerLock,
    decode_hashes, encode_hashes, init, load_signing_key,
};
pub use note::{Checkpoint, VerifierKey};
pub use since::{Since, check_since, divergence};
pub use verify::{
    LedgerCheck, LedgerReport, Status, is_leaf_line, verify_ledger, verify_ledger_at,
};
pub use writer::{LedgerWriter, init_at};
