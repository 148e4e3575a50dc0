//! The ledger's scenario (`ledger_100k`): a log grown to 1,000, 10,000 and 100,000 leaves
//! by adds of 1,000 leaves, and at each size single-leaf adds timed one by one (each a
//! full add: lock, checkpoint check, duplicate search, tiles and a new signed checkpoint,
//! every sync), with the size of an inclusion proof (it grows as log2 n) and of a
//! consistency proof from half the size; then `verify` of the whole log, and the disk's
//! own `write` + `fdatasync` beside it (an add's cost is mostly its syncs).

use std::time::Instant;

use provrun_evidence::dsse::{KeyAlgorithm, PrivateKey};
use provrun_ledger::{Ledger, add_leaves, decode_hashes, init, leaf_data, verify_ledger};
use serde_json::json;

use crate::figure::{Figure, round};
use crate::harness::{discard_tree, work_dir};

/// The leaf for number `n`: a statement line of a digest made from `n`.
fn leaf(n: u64) -> Vec<u8> {
    leaf_data(&format!("{n:064x}"))
}

/// The scenario's figures: one per size (`ledger_add_1k` …), the batched fill, the
/// whole log's `verify`, and single adds from 1, 4 and 16 writers at once
/// (`ledger_add_writers_N`: adds per commit, latency).
pub(crate) fn ledger_100k(quick: bool) -> Vec<Figure> {
    let dir = work_dir();
    let key = dir.path().join("log.pem");
    let pem = PrivateKey::generate(KeyAlgorithm::Ed25519)
        .and_then(|k| k.to_pem())
        .expect("a key");
    std::fs::write(&key, pem).expect("write the key");
    let ledger = dir.path().join("ledger");
    init(&ledger, &key, "bench.example/ledger").expect("init");
    let sizes: &[u64] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    let singles = if quick { 30 } else { 200 };
    let mut figures = Vec::new();
    let mut next = 0u64;
    let mut fill_seconds = 0.0;
    let mut filled = 0u64;
    for &size in sizes {
        // Grow to the size in adds of 1,000 leaves.
        let t = Instant::now();
        while next < size {
            let n = (size - next).min(1000);
            let leaves: Vec<Vec<u8>> = (next..next + n).map(leaf).collect();
            add_leaves(&ledger, &leaves, None).expect("batched add");
            next += n;
            filled += n;
        }
        fill_seconds += t.elapsed().as_secs_f64();
        // Single-leaf adds at this size.
        let mut lat = Vec::with_capacity(singles);
        let t = Instant::now();
        for _ in 0..singles {
            let one = Instant::now();
            add_leaves(&ledger, &[leaf(next)], None).expect("single add");
            lat.push(one.elapsed().as_secs_f64() * 1e3);
            next += 1;
        }
        let seconds = t.elapsed().as_secs_f64();
        let opened = Ledger::open(&ledger, None).expect("open");
        let n = opened.checkpoint().size;
        let proof_started = Instant::now();
        let samples = 50u64;
        let mut hashes = 0usize;
        for i in 0..samples {
            let p = opened.inclusion_proof(i * (n / samples)).expect("proof");
            hashes += decode_hashes(&p.hashes).expect("hashes").len();
        }
        let proof_ms = proof_started.elapsed().as_secs_f64() * 1e3 / samples as f64;
        let consistency = opened
            .consistency_proof(n / 2)
            .expect("consistency")
            .hashes
            .len();
        drop(opened);
        let mut fig = Figure::new(
            &format!("ledger_add_{}k", size / 1000),
            singles as u64,
            seconds,
        );
        fig.latencies_ms = lat;
        fig.extra = vec![
            ("tree_size", json!(n)),
            (
                "inclusion_hashes",
                json!(round(hashes as f64 / samples as f64, 2)),
            ),
            ("log2_n", json!(round((n as f64).log2(), 2))),
            ("consistency_hashes", json!(consistency)),
            ("proof_ms", json!(round(proof_ms, 3))),
        ];
        figures.push(fig);
    }
    let mut fill = Figure::new("ledger_fill_by_1000", filled, fill_seconds);
    fill.extra = vec![(
        "leaves_per_second",
        json!(round(filled as f64 / fill_seconds, 1)),
    )];
    figures.push(fill);
    let t = Instant::now();
    let report = verify_ledger(&ledger, None);
    assert!(report.ok, "the bench's ledger does not verify: {report:?}");
    let mut verified = Figure::new(
        &format!("ledger_verify_{}k", next / 1000),
        next,
        t.elapsed().as_secs_f64(),
    );
    verified.extra = vec![("tree_size", json!(report.size))];
    figures.push(verified);
    // Single adds from 1, 4 and 16 threads at once: they share commits (one checkpoint and
    // one round of syncs for every add queued while another writes).
    for writers in [1usize, 4, 16] {
        let per_writer = if quick { 10 } else { 40 };
        let t = Instant::now();
        let start = next;
        let outcomes: Vec<(f64, u64)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let ledger = &ledger;
                    s.spawn(move || {
                        (0..per_writer)
                            .map(|i| {
                                let one = Instant::now();
                                let leaf = leaf(start + (w * per_writer + i) as u64);
                                let out =
                                    add_leaves(ledger, &[leaf], None).expect("concurrent add");
                                (one.elapsed().as_secs_f64() * 1e3, out.checkpoint.size)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a writer"))
                .collect()
        });
        let seconds = t.elapsed().as_secs_f64();
        let adds = outcomes.len() as u64;
        next += adds;
        let commits: std::collections::BTreeSet<u64> =
            outcomes.iter().map(|(_, size)| *size).collect();
        let mut fig = Figure::new(&format!("ledger_add_writers_{writers}"), adds, seconds);
        fig.latencies_ms = outcomes.iter().map(|(ms, _)| *ms).collect();
        fig.extra = vec![
            ("writers", json!(writers)),
            ("commits", json!(commits.len())),
            (
                "adds_per_commit",
                json!(round(adds as f64 / commits.len() as f64, 2)),
            ),
            ("adds_per_second", json!(round(adds as f64 / seconds, 1))),
        ];
        figures.push(fig);
    }
    // What one write + fdatasync costs on this disk at the same time: an add makes two
    // journal commits (tiles and the new checkpoint, then the rename).
    let mut baseline = crate::disk::fsync_baseline(quick);
    baseline.name = "ledger_fsync_baseline".into();
    figures.push(baseline);
    discard_tree(dir.path());
    figures
}
