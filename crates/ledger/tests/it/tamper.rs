//! What `verify_ledger` and proof checking catch: a changed leaf, a changed tile hash, a
//! changed checkpoint line, a checkpoint signed by another key, a file the layout does not
//! know; and what it only warns of: a torn tail, which the next add removes.

use std::path::Path;

use provrun_ledger::tiles::{TileId, TileKind};
use provrun_ledger::*;

use crate::common::{leaf, new_ledger};

fn fails(dir: &Path, code: &str) {
    let report = verify_ledger(dir, None);
    assert!(!report.ok, "{report:#?}");
    assert!(
        report
            .checks
            .iter()
            .any(|c| c.code == code && c.status == Status::Fail),
        "{code} does not fail: {report:#?}"
    );
}

/// A ledger of 300 leaves: one full tile and a partial one at level 0, a partial at 1.
fn ledger(tmp: &Path) -> std::path::PathBuf {
    let (dir, _) = new_ledger(tmp);
    let leaves: Vec<Vec<u8>> = (0..300).map(leaf).collect();
    add_leaves(&dir, &leaves, None).unwrap();
    assert!(verify_ledger(&dir, None).ok);
    dir
}

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

#[test]
fn a_changed_leaf_hash_or_checkpoint_line_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ledger(tmp.path());
    let entries = dir.join(
        TileId {
            kind: TileKind::Entries,
            index: 0,
            width: 256,
        }
        .path(),
    );
    // A leaf: one hex digit of entry 3 changed (still a valid leaf line).
    let original = std::fs::read(&entries).unwrap();
    let mut changed = original.clone();
    changed[3 * 74 + 2 + 10] = if changed[3 * 74 + 2 + 10] == b'a' {
        b'b'
    } else {
        b'a'
    };
    std::fs::write(&entries, &changed).unwrap();
    // The hash tiles still hold the signed tree: the entry and the leaf are blamed.
    fails(&dir, "entries");
    fails(&dir, "root");
    let report = verify_ledger(&dir, None);
    let check = |code: &str| {
        report
            .checks
            .iter()
            .find(|c| c.code == code)
            .unwrap()
            .clone()
    };
    assert_eq!(check("tiles").status, Status::Pass, "{report:#?}");
    let entries_detail = check("entries").detail;
    assert!(
        entries_detail.contains("leaf 3 (tile/entries/000, entry 3)"),
        "{entries_detail}"
    );
    std::fs::write(&entries, &original).unwrap();
    // A hash in a tile.
    let tile = dir.join(
        TileId {
            kind: TileKind::Hashes(0),
            index: 1,
            width: 44,
        }
        .path(),
    );
    flip(&tile, 40);
    fails(&dir, "tiles");
    flip(&tile, 40);
    assert!(verify_ledger(&dir, None).ok);
    // Each line of the checkpoint, and its signature.
    let cp = dir.join(CHECKPOINT_FILE);
    let note = std::fs::read_to_string(&cp).unwrap();
    let lines: Vec<&str> = note.lines().collect();
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
        let mut changed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        changed[i] = match i {
            1 => "301".to_owned(),
            _ => line.replacen(|c: char| c.is_ascii_alphanumeric(), "Z", 1),
        };
        std::fs::write(&cp, changed.join("\n") + "\n").unwrap();
        fails(&dir, "checkpoint");
    }
    std::fs::write(&cp, &note).unwrap();
    assert!(verify_ledger(&dir, None).ok);
    // A proof checked against a checkpoint whose root line changed.
    let vkey = Config::read(&dir).unwrap().key().unwrap();
    let ledger = Ledger::open(&dir, None).unwrap();
    let proof = serde_json::to_vec(&ledger.inclusion_proof(7).unwrap()).unwrap();
    drop(ledger);
    let digest = std::str::from_utf8(&leaf(7)[7..71]).unwrap().to_owned();
    check_offline(&vkey, note.as_bytes(), &proof, &digest).unwrap();
    assert!(check_offline(&vkey, note.as_bytes(), &proof, &"0".repeat(64)).is_err());
    let mut p: serde_json::Value = serde_json::from_slice(&proof).unwrap();
    p["hashes"][0] = serde_json::json!(base64_of([7u8; 32]));
    let bad = serde_json::to_vec(&p).unwrap();
    assert!(check_offline(&vkey, note.as_bytes(), &bad, &digest).is_err());
}

fn base64_of(bytes: [u8; 32]) -> String {
    encode_hashes(&[bytes]).remove(0)
}

#[test]
fn another_key_an_unknown_file_and_a_torn_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ledger(tmp.path());
    // A checkpoint checked against another key.
    let other = VerifierKey::new(
        "example.com/provrun-test",
        [
            0x3d, 0x40, 0x17, 0xc3, 0xe8, 0x43, 0x89, 0x5a, 0x92, 0xb7, 0x0a, 0xa7, 0x4d, 0x1b,
            0x7e, 0xbc, 0x9c, 0x98, 0x2c, 0xcf, 0x2e, 0xc4, 0x96, 0x8c, 0xc0, 0xcd, 0x55, 0xf1,
            0x2a, 0xf4, 0x66, 0x0c,
        ],
    )
    .unwrap();
    let report = verify_ledger(&dir, Some(&other));
    assert!(!report.ok, "{report:#?}");
    // A file the layout does not know.
    std::fs::write(dir.join("tile/0/notes.txt"), "x").unwrap();
    fails(&dir, "files");
    std::fs::remove_file(dir.join("tile/0/notes.txt")).unwrap();
    // A torn tail: tiles beyond the checkpoint, as an interrupted add leaves them.
    let beyond = dir.join(
        TileId {
            kind: TileKind::Hashes(0),
            index: 1,
            width: 45,
        }
        .path(),
    );
    std::fs::write(&beyond, [0u8; 17]).unwrap();
    std::fs::write(dir.join(".checkpoint.tmp-1"), "half").unwrap();
    let report = verify_ledger(&dir, None);
    assert!(report.ok, "{report:#?}");
    let files = report.checks.iter().find(|c| c.code == "files").unwrap();
    assert_eq!(files.status, Status::Warn, "{files:?}");
    assert!(files.detail.contains("torn tail"), "{files:?}");
    // The next add removes it, then appends.
    let out = add_leaves(&dir, &[leaf(300)], None).unwrap();
    assert_eq!(out.repaired.len(), 2, "{:?}", out.repaired);
    assert_eq!(out.added[0].index, 300);
    let report = verify_ledger(&dir, None);
    assert!(
        report.ok && report.checks.iter().all(|c| c.status == Status::Pass),
        "{report:#?}"
    );
}
