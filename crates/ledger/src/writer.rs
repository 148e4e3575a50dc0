//! Where a command adds to a ledger: a folder (its own key file, `flock`), or a bucket
//! (`s3://…`, the signing key given, conditional writes: [`crate::BucketLedger`]). A
//! `file://` URL is its folder.

use std::path::{Path, PathBuf};

use provrun_evidence::dsse::PrivateKey;

use crate::append::add_leaves;
use crate::bucket::BucketLedger;
use crate::bundle::{checked_digest, leaf_data};
use crate::error::{LedgerError, Result};
use crate::note::VerifierKey;
use crate::outcome::AddOutcome;

/// The folder a `file://` URL names, or `location` itself when it is no URL; `None` for
/// another URL.
fn folder_of(location: &str) -> Option<PathBuf> {
    if let Some(rest) = location.strip_prefix("file://") {
        return Some(PathBuf::from(rest));
    }
    (!location.contains("://")).then(|| PathBuf::from(location))
}

/// Whether a ledger location is object storage this build writes (`s3://`, `s3a://`).
fn is_bucket(location: &str) -> bool {
    location.starts_with("s3://") || location.starts_with("s3a://")
}

/// Make a new, empty ledger at `location` (a folder, `file://` or `s3://`), signed by the
/// Ed25519 key in `key_file` under `origin`. A folder's `ledger.json` keeps the key file's
/// path; a bucket's names only the verifier key.
///
/// # Errors
///
/// As [`crate::init`] and [`BucketLedger::init`]; [`LedgerError::Remote`] for a URL of a
/// scheme no ledger is written to.
pub fn init_at(location: &str, key_file: &Path, origin: &str) -> Result<VerifierKey> {
    if let Some(dir) = folder_of(location) {
        return crate::init(&dir, key_file, origin);
    }
    if is_bucket(location) {
        let key = crate::ledger::load_signing_key(key_file)?;
        return BucketLedger::init(location, &key, origin);
    }
    Err(unsupported(location))
}

fn unsupported(location: &str) -> LedgerError {
    LedgerError::Remote(format!(
        "`{location}`: a ledger is written in a folder, a file:// folder or an s3:// bucket"
    ))
}

/// A ledger opened for adding.
#[derive(Debug)]
pub enum LedgerWriter {
    /// A folder; its own key file signs unless a key is given.
    Folder(PathBuf, Option<PrivateKey>),
    /// A bucket, with the signing key.
    Bucket(BucketLedger),
}

impl LedgerWriter {
    /// Open the ledger at `location` for adding, signing with `key` (required for a
    /// bucket; a folder's `ledger.json` names its key file otherwise).
    ///
    /// # Errors
    ///
    /// [`LedgerError::Key`] when a bucket is given no key, or another key than its own;
    /// [`LedgerError::NotALedger`] when nothing is there; [`LedgerError::Remote`] for a URL
    /// that cannot be used; the errors of reading the configuration.
    pub fn open(location: &str, key: Option<&PrivateKey>) -> Result<LedgerWriter> {
        if let Some(dir) = folder_of(location) {
            let config = crate::Config::read(&dir)?;
            let key = match key {
                Some(k) => k.clone(),
                None => crate::ledger::load_signing_key(&config.key_file)?,
            };
            if crate::ledger::ed25519_public(&key)? != config.key()?.public {
                return Err(LedgerError::Key(format!(
                    "the signing key is not the ledger's key {}",
                    config.verifier_key
                )));
            }
            return Ok(LedgerWriter::Folder(dir, Some(key)));
        }
        if is_bucket(location) {
            let key = key.ok_or_else(|| {
                LedgerError::Key(format!(
                    "a ledger in a bucket ({location}) is written with its signing key given \
                     (--ledger-key / --key)"
                ))
            })?;
            return BucketLedger::open(location, key).map(LedgerWriter::Bucket);
        }
        Err(unsupported(location))
    }

    /// Add leaves (see [`add_leaves`] and [`BucketLedger::add`]).
    ///
    /// # Errors
    ///
    /// As those.
    pub fn add(&self, leaves: &[Vec<u8>]) -> Result<AddOutcome> {
        match self {
            LedgerWriter::Folder(dir, key) => add_leaves(dir, leaves, key.as_ref()),
            LedgerWriter::Bucket(b) => b.add(leaves),
        }
    }

    /// Add finished bundles (each checked first; none is added when one is refused).
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadBundle`] when a bundle is refused; otherwise as [`LedgerWriter::add`].
    pub fn add_bundles(&self, bundles: &[&Path]) -> Result<AddOutcome> {
        let leaves = bundles
            .iter()
            .map(|b| checked_digest(b).map(|d| leaf_data(&d)))
            .collect::<Result<Vec<_>>>()?;
        self.add(&leaves)
    }
}
