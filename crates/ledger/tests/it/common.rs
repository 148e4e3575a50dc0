//! Helpers the ledger tests share: a ledger in a temporary folder with its key, and the
//! leaf the tests add for a number.

use std::path::{Path, PathBuf};

use provrun_evidence::dsse::{KeyAlgorithm, PrivateKey};
use provrun_ledger::{VerifierKey, init, leaf_data};
use sha2::{Digest as _, Sha256};

/// A new ledger at `tmp/ledger`, its key file at `tmp/log.pem`.
pub(crate) fn new_ledger(tmp: &Path) -> (PathBuf, VerifierKey) {
    let key = tmp.join("log.pem");
    std::fs::write(
        &key,
        PrivateKey::generate(KeyAlgorithm::Ed25519)
            .unwrap()
            .to_pem()
            .unwrap(),
    )
    .unwrap();
    let dir = tmp.join("ledger");
    let vkey = init(&dir, &key, "example.com/provrun-test").unwrap();
    (dir, vkey)
}

/// The leaf the tests add as number `n`: a statement line of the digest of `n`.
pub(crate) fn leaf(n: u64) -> Vec<u8> {
    leaf_data(&hex::encode(Sha256::digest(n.to_string())))
}
