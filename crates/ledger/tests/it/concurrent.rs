//! Adds from many threads of one process at once: they share commits, each caller gets
//! its own leaves' indexes, and the log verifies.

use provrun_evidence::dsse::PrivateKey;
use provrun_ledger::*;

#[test]
fn concurrent_adds_share_commits_and_each_gets_its_own_indexes() {
    let tmp = std::env::temp_dir().join(format!("provrun-group-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let key_file = tmp.join("k.pem");
    let key = PrivateKey::Ed25519([5; 32]);
    std::fs::write(&key_file, key.to_pem().unwrap()).unwrap();
    let dir = tmp.join("ledger");
    init(&dir, &key_file, "example.com/group").unwrap();
    let leaf = |t: usize, i: usize| leaf_data(&format!("{:064x}", t * 1000 + i));
    let results: Vec<Vec<(Vec<u8>, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let dir = &dir;
                s.spawn(move || {
                    (0..20)
                        .map(|i| {
                            let l = leaf(t, i);
                            let out = add_leaves(dir, std::slice::from_ref(&l), None).unwrap();
                            assert!(out.added[0].new);
                            (l, out.added[0].index)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ledger = Ledger::open(&dir, None).unwrap();
    assert_eq!(ledger.checkpoint().size, 160);
    for (l, index) in results.into_iter().flatten() {
        assert_eq!(ledger.find(&l).unwrap(), Some(index));
    }
    drop(ledger);
    assert!(verify_ledger(&dir, None).ok);
    let _ = std::fs::remove_dir_all(&tmp);
}
