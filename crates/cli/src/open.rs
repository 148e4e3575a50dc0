//! Opening what a user names as a bundle, for every command, through the store crate: a
//! folder, a bundle `.tar`, or its `s3://`/`file://` URL. Nothing there is a usage error
//! (exit 2); a command that changes a bundle is refused a tar or an object, with why.

use std::path::{Path, PathBuf};

use provrun_store::{Location, OpenBundle, StoreError};

use crate::{EXIT_USAGE, fail};

/// `arg` opened for reading (a tar unpacked into a temporary folder). Nothing at `arg`
/// is exit 2, `no bundle at …`; any other failure to open it (unreadable, a damaged tar,
/// a bucket that cannot be reached) exits with `code`, the message prefixed by `what`
/// (`view: `, or empty).
pub(crate) fn for_reading(arg: &Path, what: &str, code: u8) -> Result<OpenBundle, u8> {
    let opened = Location::parse(arg).and_then(|location| provrun_store::open_blocking(&location));
    opened.map_err(|e| match e {
        StoreError::NotFound(_) | StoreError::BadUrl { .. } => {
            fail(EXIT_USAGE, format!("{what}{e}"))
        }
        e => fail(code, format!("{what}{e}")),
    })
}

/// The folder of a bundle that a command (`what`) changes in place; a tar or an object is
/// refused with exit 2 and why (nothing is changed), and so is nothing at all.
pub(crate) fn in_place(arg: &Path, what: &str) -> Result<PathBuf, u8> {
    Location::parse(arg)
        .and_then(|location| location.writable_folder().map(Path::to_path_buf))
        .map_err(|e| fail(EXIT_USAGE, format!("{what}: {e}")))
}
