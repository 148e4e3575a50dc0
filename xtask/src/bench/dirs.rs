//! Where the bench works: the target folder its binaries, temporary folders and the
//! peer's virtualenv go in.

use std::path::PathBuf;

use crate::root;

/// The target folder (`$CARGO_TARGET_DIR`, relative to the workspace root, or `target`).
pub(super) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root().join(p) })
        .unwrap_or_else(|| root().join("target"))
}
