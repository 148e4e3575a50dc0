//! `Recorder::begin` and `PendingBundle`: inputs staged before `run_started` is written,
//! seen at the same folder once the bundle is in place; a bundle begun and dropped leaves
//! nothing behind; one begun is locked against another writer.

use std::os::unix::fs::MetadataExt as _;

use provrun_evidence::{BlobLayout, Durability, EvidenceError, Recorder, RunEnd, RunStatus};

use crate::common::{run_started, scratch};

#[test]
fn inputs_staged_before_the_start_are_the_bundles_and_an_open_handle_follows_them() {
    let dir = scratch("pending-start");
    let root = dir.join("bundle");
    let pending = Recorder::begin(&root, "run-p", Durability::Flush, BlobLayout::Pack).unwrap();
    // Not there yet: built aside.
    assert!(!root.exists());
    let input = pending.input_dir();
    std::fs::write(input.join("a.txt"), "alpha").unwrap();
    // What a server would have bound: the folder itself.
    let held = std::fs::File::open(&input).unwrap();
    let rec = pending.start(&run_started()).unwrap();
    assert_eq!(rec.input_dir(), root.join("input"));
    let staged = std::fs::metadata(root.join("input")).unwrap();
    let followed = held.metadata().unwrap();
    assert_eq!(
        (staged.dev(), staged.ino()),
        (followed.dev(), followed.ino())
    );
    let files = rec.record_inputs().unwrap();
    assert_eq!(files.len(), 1);
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    let report = provrun_evidence::verify(&root);
    assert!(report.ok, "{report:?}");
    // Nothing hidden is left beside it.
    let beside: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["bundle"]);
}

#[test]
fn a_bundle_begun_and_dropped_leaves_nothing_and_is_locked_while_it_lasts() {
    let dir = scratch("pending-drop");
    let root = dir.join("bundle");
    let pending = Recorder::begin(&root, "run-p", Durability::Flush, BlobLayout::Pack).unwrap();
    std::fs::write(pending.input_dir().join("a.txt"), "alpha").unwrap();
    match Recorder::create(&root, "run-q", Durability::Flush, &run_started()) {
        Err(EvidenceError::BundleLocked { .. }) => {}
        other => panic!("a second writer got in: {other:?}"),
    }
    drop(pending);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // An empty folder of its name, begun in and dropped, is left empty.
    std::fs::create_dir(&root).unwrap();
    let pending = Recorder::begin(&root, "run-p", Durability::Flush, BlobLayout::Pack).unwrap();
    drop(pending);
    assert!(root.is_dir());
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
    // And the bundle can then be made.
    let rec = Recorder::create(&root, "run-r", Durability::Flush, &run_started()).unwrap();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    assert!(provrun_evidence::verify(&root).ok);
}
