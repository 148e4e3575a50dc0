//! The `layout` check: the bundle's folders hold what they should, of the right kinds,
//! with the blob store `run_started` declares, and no temporary file of an unfinished
//! write.

use super::bundle::Bundle;
use super::{Acc, Check, CheckCode};
use crate::recorder::BlobLayout;

/// `layout` (of a bundle whose path is a folder).
pub(super) fn layout(b: &Bundle<'_>) -> Check {
    let mut acc = Acc::new(CheckCode::Layout);
    for p in &b.dir.problems {
        acc.fail(p.clone());
    }
    if b.dir.present.contains("blobs") {
        match b.blob_layout {
            BlobLayout::Loose => {
                if b.dir.has_pack {
                    acc.fail("blobs/pack in a bundle whose run_started declares loose blobs");
                }
                // Without run_started (an empty or unreadable log) the layout is not
                // known: a bundle interrupted at its creation may hold neither.
                if !b.dir.has_sha_dir && b.declared.is_some() {
                    acc.fail("blobs/sha256 is missing");
                }
            }
            BlobLayout::Pack => {
                if b.dir.has_sha_dir {
                    acc.fail("blobs/sha256 in a bundle whose run_started declares a pack");
                }
            }
        }
    }
    for l in b.leftovers() {
        acc.fail_or_warn(b.shape.complete, format!("leftover temporary file {l}"));
    }
    acc.pass = "bundle layout as expected".to_owned();
    acc.done()
}
