//! The ledger against a model kept in memory: adds of random sizes that cross tile
//! boundaries (levels 0, 1 and 2), and after each one the root, inclusion proofs of
//! leaves old and new, consistency proofs from every earlier checkpoint, and a clean
//! `verify`. Also: an add is idempotent, the tiles a tree has are exactly on disk, and
//! writers in parallel are serialised.

use provrun_ledger::merkle::{Hash, leaf_hash, node_hash, verify_consistency, verify_inclusion};
use provrun_ledger::tiles::{TileKind, tiles_of};
use provrun_ledger::*;

use crate::common::{leaf, new_ledger};

/// RFC 6962's root, straight from its recursive definition.
fn mth(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => provrun_ledger::merkle::empty_root(),
        1 => leaves[0],
        n => {
            let k = 1 << (63 - ((n - 1) as u64).leading_zeros());
            node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
        }
    }
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn random_adds_keep_every_proof_and_checkpoint_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, vkey) = new_ledger(tmp.path());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut model: Vec<Hash> = Vec::new();
    let mut checkpoints: Vec<(u64, Hash)> = Vec::new();
    // Small adds first, then big ones that pass 65,536 leaves (a level-2 tile).
    let mut sizes: Vec<u64> = (0..40).map(|_| 1 + rng.below(20)).collect();
    sizes.extend([255, 1, 256, 511, 3000, 20_000, 42_000]);
    for batch in sizes {
        let start = model.len() as u64;
        let leaves: Vec<Vec<u8>> = (start..start + batch).map(leaf).collect();
        let out = add_leaves(&dir, &leaves, None).unwrap();
        assert!(out.added.iter().all(|a| a.new));
        assert_eq!(out.added.first().unwrap().index, start);
        model.extend(leaves.iter().map(|l| leaf_hash(l)));
        let cp = &out.checkpoint;
        assert_eq!(cp.size, model.len() as u64);
        if cp.size < 5000 {
            assert_eq!(cp.root, mth(&model), "root at {}", cp.size);
        }
        let ledger = Ledger::open(&dir, Some(&vkey)).unwrap();
        assert_eq!(ledger.checkpoint(), cp);
        for _ in 0..6 {
            let i = rng.below(cp.size);
            let p = ledger.inclusion_proof(i).unwrap();
            let hashes = decode_hashes(&p.hashes).unwrap();
            assert!(verify_inclusion(
                i,
                cp.size,
                &model[i as usize],
                &hashes,
                &cp.root
            ));
            assert_eq!(ledger.find(&leaf(i)).unwrap(), Some(i));
        }
        for &(old, old_root) in &checkpoints {
            let p = decode_hashes(&ledger.consistency_proof(old).unwrap().hashes).unwrap();
            assert!(
                verify_consistency(old, cp.size, &old_root, &cp.root, &p),
                "{old} to {}",
                cp.size
            );
        }
        drop(ledger);
        if cp.size < 5000 {
            let report = verify_ledger(&dir, Some(&vkey));
            assert!(report.ok, "{report:#?}");
        }
        checkpoints.push((cp.size, cp.root));
    }
    // The final tree: every tile it has is on disk, and nothing but those and earlier
    // partial tiles of tiles still partial.
    let size = model.len() as u64;
    let last = checkpoints.last().unwrap();
    assert_eq!(last.1, mth(&model), "root at {size}");
    for t in tiles_of(size) {
        assert!(dir.join(t.path()).is_file(), "{} missing", t.path());
    }
    let level2 = tiles_of(size)
        .into_iter()
        .any(|t| t.kind == TileKind::Hashes(2));
    assert!(
        level2,
        "the test did not reach a level-2 tile ({size} leaves)"
    );
    let report = verify_ledger(&dir, None);
    assert!(report.ok, "{report:#?}");
    assert!(
        report.checks.iter().all(|c| c.status == Status::Pass),
        "{report:#?}"
    );
}

#[test]
fn a_leaf_already_in_the_log_keeps_its_index_and_makes_no_new_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = new_ledger(tmp.path());
    let first = add_leaves(&dir, &[leaf(1), leaf(2)], None).unwrap();
    let note = std::fs::read(dir.join(CHECKPOINT_FILE)).unwrap();
    let again = add_leaves(&dir, &[leaf(2), leaf(1), leaf(2)], None).unwrap();
    assert_eq!(
        again.added,
        [
            Added {
                index: 1,
                new: false
            },
            Added {
                index: 0,
                new: false
            },
            Added {
                index: 1,
                new: false
            }
        ]
    );
    assert_eq!(again.checkpoint, first.checkpoint);
    assert_eq!(std::fs::read(dir.join(CHECKPOINT_FILE)).unwrap(), note);
    // Twice in one add: appended once.
    let mixed = add_leaves(&dir, &[leaf(3), leaf(3)], None).unwrap();
    assert_eq!(
        mixed.added[0],
        Added {
            index: 2,
            new: true
        }
    );
    assert_eq!(
        mixed.added[1],
        Added {
            index: 2,
            new: false
        }
    );
    assert_eq!(mixed.checkpoint.size, 3);
}

#[test]
fn writers_in_parallel_are_serialised_and_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = new_ledger(tmp.path());
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let dir = &dir;
            s.spawn(move || {
                for i in 0..40u64 {
                    add_leaves(dir, &[leaf(t * 1000 + i)], None).unwrap();
                }
            });
        }
    });
    let ledger = Ledger::open(&dir, None).unwrap();
    assert_eq!(ledger.checkpoint().size, 160);
    for t in 0..4u64 {
        for i in 0..40u64 {
            assert!(ledger.find(&leaf(t * 1000 + i)).unwrap().is_some());
        }
    }
    drop(ledger);
    assert!(verify_ledger(&dir, None).ok);
}

#[test]
fn init_refuses_a_used_folder_a_bad_origin_and_a_p256_key() {
    use provrun_evidence::dsse::{KeyAlgorithm, PrivateKey};
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = new_ledger(tmp.path());
    let key = tmp.path().join("log.pem");
    assert!(matches!(
        init(&dir, &key, "example.com/x"),
        Err(LedgerError::NotEmpty(_))
    ));
    for bad in ["", "has space", "a+b", "tab\there"] {
        assert!(
            matches!(
                init(&tmp.path().join("n"), &key, bad),
                Err(LedgerError::BadName(_))
            ),
            "{bad:?}"
        );
    }
    let p256 = tmp.path().join("p256.pem");
    std::fs::write(
        &p256,
        PrivateKey::generate(KeyAlgorithm::EcdsaP256)
            .unwrap()
            .to_pem()
            .unwrap(),
    )
    .unwrap();
    assert!(matches!(
        init(&tmp.path().join("p"), &p256, "example.com/x"),
        Err(LedgerError::KeyType(_))
    ));
    assert!(!tmp.path().join("p").exists() && !tmp.path().join("n").exists());
    // An add with another key than the ledger's is refused.
    let other = PrivateKey::generate(KeyAlgorithm::Ed25519).unwrap();
    assert!(matches!(
        add_leaves(&dir, &[leaf(1)], Some(&other)),
        Err(LedgerError::Key(_))
    ));
}
