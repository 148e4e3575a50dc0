//! The order an add makes its writes durable in (through the test-only probe): every tile
//! the new checkpoint names, and the folder entry of each, is synced before the checkpoint
//! is renamed into place (so a power loss never leaves a checkpoint naming leaves that
//! were not on disk), the new checkpoint's own data is synced before the rename, and the
//! rename is synced before the add returns.

use std::path::PathBuf;

use provrun_ledger::probe::{Op, record};
use provrun_ledger::*;

use crate::common::{leaf, new_ledger};

#[test]
fn every_tile_a_checkpoint_names_is_durable_before_the_checkpoint_is_renamed() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = new_ledger(tmp.path());
    // Adds of several shapes: a first leaf, a full tile and more, single leaves.
    for batch in [1u64, 300, 1, 1, 255, 513] {
        let start = Ledger::open(&dir, None).unwrap().checkpoint().size;
        let leaves: Vec<Vec<u8>> = (start..start + batch).map(leaf).collect();
        let (out, ops) = record(|| add_leaves(&dir, &leaves, None));
        out.unwrap();
        let rename = ops
            .iter()
            .position(|o| matches!(o, Op::Rename { .. }))
            .expect("an add renames its checkpoint");
        let Op::Rename { from, to } = &ops[rename] else {
            unreachable!()
        };
        assert_eq!(to, &dir.join(CHECKPOINT_FILE));
        let before = &ops[..rename];
        let written: Vec<&PathBuf> = before
            .iter()
            .filter_map(|o| match o {
                Op::Write(p) => Some(p),
                _ => None,
            })
            .collect();
        assert!(
            written.contains(&from),
            "the checkpoint was not written first"
        );
        assert!(written.len() >= 2, "{ops:?}");
        for path in written {
            let w = before
                .iter()
                .position(|o| o == &Op::Write(path.clone()))
                .unwrap();
            assert!(
                before[w..].contains(&Op::SyncFile(path.clone())),
                "{} not synced before the rename: {ops:?}",
                path.display()
            );
            if path != from {
                let parent = path.parent().unwrap().to_path_buf();
                assert!(
                    before[w..].contains(&Op::SyncDir(parent.clone())),
                    "{}'s folder not synced before the rename: {ops:?}",
                    path.display()
                );
            }
        }
        assert!(
            ops[rename..].contains(&Op::SyncDir(dir.clone())),
            "the rename was not synced: {ops:?}"
        );
    }
}
