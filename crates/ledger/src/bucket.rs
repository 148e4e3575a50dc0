//! A ledger in object storage (`s3://BUCKET/PREFIX`), written by any number of processes
//! at once with only the two conditional writes every S3-compatible store has: make an
//! object only if it is not there (`If-None-Match: *`), and replace it only if it is still
//! the version read (`If-Match: ETAG`). The layout is the folder's (C2SP tlog-tiles), so the
//! bucket can be served as static files; tiles are written once and the checkpoint is
//! replaced by compare-and-swap.
//!
//! How writers share it without a lock. Beside the layout two more objects are kept:
//! `pending/<id>` (the leaves of one batch, written once) and `next` (the batch that may
//! extend the tree of the current checkpoint: its base size, the base root, the pending
//! object and its count). An add:
//!
//! 1. reads the checkpoint (and its version) and `next`;
//! 2. if `next` claims the current size, that batch is unfinished (its writer may have
//!    died): it finishes it (below), and starts again;
//! 3. keeps its leaves the log does not hold yet, writes them as `pending/<id>`, and claims
//!    the current size by replacing `next` conditionally: only one batch is ever claimed
//!    for a given size (a writer that loses the race finishes the winner's batch, then
//!    tries again on the larger tree);
//! 4. finishes its batch: the tiles of the tree grown by exactly those leaves, each made
//!    only if absent (a tile already there must be byte for byte the same: whoever made it
//!    finished the same batch), then the new checkpoint — Ed25519 signatures are
//!    deterministic, so every writer finishing a batch makes the same note — replacing the
//!    old one only if it is still the version read.
//!
//! Every tile at a position past the checkpoint is therefore written by the one batch
//! claimed for that position, whoever finishes it: the log never forks, each statement is
//! added once, and a writer that dies at any moment leaves a claimed batch the next writer
//! completes. Partial tiles replaced by full ones are kept (readers of older checkpoints
//! may need them).

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use provrun_evidence::dsse::PrivateKey;
use serde::{Deserialize, Serialize};

use crate::append::State;
use crate::error::{LedgerError, Result};
use crate::files::{LogFiles, Remote};
use crate::index::LeafIndex;
use crate::ledger::{CHECKPOINT_FILE, CONFIG_FILE, Config, ed25519_public};
use crate::merkle::{Hash, empty_root, leaf_hash, verify_consistency};
use crate::note::{Checkpoint, MAX_NOTE_BYTES, VerifierKey, sign_note};
use crate::outcome::{AddOutcome, Added};
use crate::tiles::{TileId, TileReader, encode_entries};

/// The object naming the batch that may extend the current tree.
const NEXT: &str = "next";
/// Where batches' leaves are kept.
const PENDING: &str = "pending";
/// How many times an add starts again after losing a race before it gives up.
const MAX_ROUNDS: usize = 1000;

/// The claim of a batch on a size of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Next {
    /// The tree size it extends.
    base: u64,
    /// That tree's root (base64).
    root: String,
    /// The pending object holding its leaves.
    leaves: String,
    /// How many leaves.
    count: u64,
}

fn remote_err(e: provrun_store::StoreError) -> LedgerError {
    LedgerError::Remote(e.to_string())
}

/// A ledger in a bucket, opened for writing with its signing key.
pub struct BucketLedger {
    remote: Remote,
    vkey: VerifierKey,
    key: PrivateKey,
}

impl std::fmt::Debug for BucketLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketLedger")
            .field("at", &self.remote.describe())
            .field("origin", &self.vkey.name)
            .finish()
    }
}

impl BucketLedger {
    /// Make a new, empty ledger at `url` (nothing may be there yet), signed by `key`
    /// under `origin`. Its `ledger.json` names the verifier key only. Returns the
    /// verifier key.
    ///
    /// # Errors
    ///
    /// [`LedgerError::KeyType`] for a key that is not Ed25519; [`LedgerError::BadName`];
    /// [`LedgerError::NotEmpty`] when a ledger is already there; [`LedgerError::Remote`]
    /// when the bucket cannot be written.
    pub fn init(url: &str, key: &PrivateKey, origin: &str) -> Result<VerifierKey> {
        let remote = Remote::open(url)?;
        let vkey = VerifierKey::new(origin, ed25519_public(key)?)?;
        let config = Config {
            format: 1,
            origin: origin.to_owned(),
            verifier_key: vkey.to_text(),
            key_file: std::path::PathBuf::new(),
        };
        let mut text =
            serde_json::to_string_pretty(&config).map_err(|e| LedgerError::BadConfig {
                path: url.into(),
                reason: e.to_string(),
            })?;
        text.push('\n');
        let objects = remote.objects();
        if !remote
            .block_on(objects.create(CONFIG_FILE, text.into_bytes()))
            .map_err(remote_err)?
        {
            return Err(LedgerError::NotEmpty(url.into()));
        }
        let empty = Checkpoint {
            origin: origin.to_owned(),
            size: 0,
            root: empty_root(),
        };
        let note = sign_note(&empty.to_text(), origin, key)?;
        if !remote
            .block_on(objects.create(CHECKPOINT_FILE, note.into_bytes()))
            .map_err(remote_err)?
        {
            return Err(LedgerError::NotEmpty(url.into()));
        }
        Ok(vkey)
    }

    /// Open the ledger at `url` to add to it, signing with `key`, which must be the key
    /// its `ledger.json` names.
    ///
    /// # Errors
    ///
    /// [`LedgerError::Remote`] when the bucket cannot be read; [`LedgerError::NotALedger`]
    /// when there is no ledger; [`LedgerError::Key`] for another key.
    pub fn open(url: &str, key: &PrivateKey) -> Result<BucketLedger> {
        let remote = Remote::open(url)?;
        let vkey = Config::read_from(&remote)?.key()?;
        if ed25519_public(key)? != vkey.public {
            return Err(LedgerError::Key(format!(
                "the signing key is not the ledger's key {}",
                vkey.to_text()
            )));
        }
        Ok(BucketLedger {
            remote,
            vkey,
            key: key.clone(),
        })
    }

    /// Add `leaves` (each at most 65535 bytes); a leaf the log already holds keeps its
    /// index. Returns once every leaf is under a signed checkpoint in the bucket.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadProof`] for an entry too long; [`LedgerError::Remote`] when the
    /// bucket fails; [`LedgerError::BadTile`] when a tile already there is not the one
    /// this batch makes (a corrupt bucket); the checkpoint's errors when it does not verify.
    ///
    /// Adds from several threads of one process share a round of the protocol, as a
    /// folder's do.
    pub fn add(&self, leaves: &[Vec<u8>]) -> Result<AddOutcome> {
        if let Some(big) = leaves.iter().find(|l| l.len() > usize::from(u16::MAX)) {
            return Err(LedgerError::BadProof(format!(
                "an entry of {} bytes is longer than a tile entry may be",
                big.len()
            )));
        }
        crate::group::submit_to(
            format!("bucket:{}", self.remote.describe()),
            leaves.to_vec(),
            &|all, index| self.add_now(all, index),
        )
    }

    fn add_now(&self, leaves: &[Vec<u8>], index: &mut Option<LeafIndex>) -> Result<AddOutcome> {
        let hashes: Vec<Hash> = leaves.iter().map(|l| leaf_hash(l)).collect();
        for _ in 0..MAX_ROUNDS {
            let (note, version) = self.checkpoint()?;
            let old = Checkpoint::open(&note, &self.vkey)?;
            let next = self.next()?;
            if let Some((claim, _)) = &next
                && claim.base == old.size
            {
                self.finish(claim, &old, &version)?;
                continue;
            }
            // What the log holds already.
            let existing = match LeafIndex::refresh(index, &self.remote, &old) {
                Ok(()) => match index.as_ref() {
                    Some(ix) => ix.find(&self.remote, &hashes)?,
                    None => crate::ledger::find_leaves_in(&self.remote, old.size, &hashes)?,
                },
                Err(e) => {
                    *index = None;
                    return Err(e);
                }
            };
            let mut fresh: Vec<&Vec<u8>> = Vec::new();
            let mut position: HashMap<Hash, u64> = HashMap::new();
            let mut added = Vec::with_capacity(leaves.len());
            for ((leaf, hash), known) in leaves.iter().zip(&hashes).zip(existing) {
                if let Some(index) = known {
                    added.push(Added { index, new: false });
                } else if let Some(&index) = position.get(hash) {
                    added.push(Added { index, new: false });
                } else {
                    let index = old.size + fresh.len() as u64;
                    position.insert(*hash, index);
                    fresh.push(leaf);
                    added.push(Added { index, new: true });
                }
            }
            if fresh.is_empty() {
                return Ok(AddOutcome {
                    added,
                    checkpoint: old,
                    repaired: Vec::new(),
                });
            }
            let pending = format!("{PENDING}/{}-{}", old.size, random_id()?);
            self.remote
                .block_on(
                    self.remote
                        .objects()
                        .create(&pending, encode_entries(&fresh)),
                )
                .map_err(remote_err)?;
            let claim = Next {
                base: old.size,
                root: B64.encode(old.root),
                leaves: pending.clone(),
                count: fresh.len() as u64,
            };
            let body =
                serde_json::to_vec(&claim).map_err(|e| LedgerError::Remote(e.to_string()))?;
            let objects = self.remote.objects();
            let claimed = match &next {
                Some((_, v)) => self.remote.block_on(objects.replace(NEXT, body, v)),
                None => self.remote.block_on(objects.create(NEXT, body)),
            }
            .map_err(remote_err)?;
            if !claimed {
                // Another writer claimed this size first: finish its batch, then try again.
                let _ = self.remote.block_on(objects.delete(&pending));
                continue;
            }
            let checkpoint = self.finish(&claim, &old, &version)?;
            return Ok(AddOutcome {
                added,
                checkpoint,
                repaired: Vec::new(),
            });
        }
        Err(LedgerError::Remote(format!(
            "gave up adding to {} after {MAX_ROUNDS} rounds of other writers' adds",
            self.remote.describe()
        )))
    }

    fn checkpoint(&self) -> Result<(Vec<u8>, provrun_store::Version)> {
        self.remote
            .block_on(
                self.remote
                    .objects()
                    .get_versioned(CHECKPOINT_FILE, MAX_NOTE_BYTES as u64),
            )
            .map_err(remote_err)?
            .ok_or_else(|| LedgerError::NotALedger(self.remote.describe().into()))
    }

    fn next(&self) -> Result<Option<(Next, provrun_store::Version)>> {
        let got = self
            .remote
            .block_on(self.remote.objects().get_versioned(NEXT, 64 * 1024))
            .map_err(remote_err)?;
        got.map(|(bytes, v)| {
            serde_json::from_slice(&bytes)
                .map(|n| (n, v))
                .map_err(|e| LedgerError::Remote(format!("{NEXT}: not a batch claim: {e}")))
        })
        .transpose()
    }

    /// Finish the claimed batch `claim` on the tree `old` (whose checkpoint is at
    /// `version`): its tiles, then the checkpoint. Returns the checkpoint that holds it.
    fn finish(
        &self,
        claim: &Next,
        old: &Checkpoint,
        version: &provrun_store::Version,
    ) -> Result<Checkpoint> {
        let bad = |why: String| LedgerError::BadTile(format!("{NEXT}: {why}"));
        if claim.root != B64.encode(old.root) {
            return Err(bad(format!(
                "claims the tree of {} leaves with another root than the checkpoint's",
                claim.base
            )));
        }
        let objects = self.remote.objects();
        let bytes = self
            .remote
            .block_on(objects.get(&claim.leaves, 256 * 65537))
            .map_err(remote_err)?
            .ok_or_else(|| bad(format!("its leaves {} are missing", claim.leaves)))?;
        let leaves = crate::tiles::decode_entries(&bytes, &claim.leaves)?;
        if leaves.len() as u64 != claim.count {
            return Err(bad(format!(
                "{} holds {} leaves, not {}",
                claim.leaves,
                leaves.len(),
                claim.count
            )));
        }
        let mut state = State::load(&self.remote, old.size)?;
        let mut writes: Vec<(TileId, Vec<u8>)> = Vec::new();
        for leaf in &leaves {
            state.push(leaf, leaf_hash(leaf), &mut writes);
        }
        state.finish(old.size, &mut writes);
        for (id, body) in &writes {
            let path = id.path();
            let made = self
                .remote
                .block_on(objects.create(&path, body.clone()))
                .map_err(remote_err)?;
            if !made {
                let there = self
                    .remote
                    .block_on(objects.get(&path, body.len() as u64 + 1))
                    .map_err(remote_err)?;
                if there.as_deref() != Some(body.as_slice()) {
                    return Err(LedgerError::BadTile(format!(
                        "{path} is already in the bucket and is not the tile this batch makes"
                    )));
                }
            }
        }
        let new = Checkpoint {
            origin: old.origin.clone(),
            size: state.size,
            root: state.root(),
        };
        let note = sign_note(&new.to_text(), &new.origin, &self.key)?;
        let swapped = self
            .remote
            .block_on(objects.replace(CHECKPOINT_FILE, note.into_bytes(), version))
            .map_err(remote_err)?;
        if !swapped {
            // Someone else finished it (the same note), or the tree moved on past it.
            let (note, _) = self.checkpoint()?;
            let now = Checkpoint::open(&note, &self.vkey)?;
            if now.size < new.size {
                return Err(LedgerError::Remote(format!(
                    "the checkpoint changed to {} leaves while a batch of {} was finished",
                    now.size, new.size
                )));
            }
            if now.size > new.size {
                let mut tiles = TileReader::over(Box::new(&self.remote), now.size);
                let proof = crate::merkle::consistency_proof(&mut tiles, new.size, now.size)?;
                if !verify_consistency(new.size, now.size, &new.root, &now.root, &proof) {
                    return Err(LedgerError::BadTile(format!(
                        "the checkpoint of {} leaves does not extend the one this batch made",
                        now.size
                    )));
                }
            } else if now.root != new.root {
                return Err(LedgerError::BadTile(
                    "another checkpoint of the same size: the log forked".into(),
                ));
            }
            tracing::debug!(size = new.size, "a batch finished by another writer");
            return Ok(new);
        }
        tracing::debug!(ledger = %self.remote.describe(), size = new.size, "ledger checkpoint written");
        Ok(new)
    }
}

/// A fresh random id for a pending object.
fn random_id() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| LedgerError::Remote(format!("no random id: {e}")))?;
    Ok(hex::encode(b))
}
