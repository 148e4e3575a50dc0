//! Where provrun bundles live, and the one way every command reaches them.
//!
//! A user names one bundle as a folder, a bundle `.tar` (as `provrun batch` uploads), or
//! the `s3://` / `file://` URL of such a tar. [`Location::parse`] tells which; [`open`]
//! (or [`open_blocking`]) makes any of them an [`OpenBundle`], a folder the evidence
//! crate reads — a tar is unpacked into a temporary folder that lives as long as the
//! value. A command that changes a bundle asks [`Location::writable_folder`] first, and
//! refuses with its reason when the bundle is not a folder.
//!
//! A [`Store`] holds many bundles, each known by an id ([`check_id`]): a folder
//! (`DEST/<id>`, or `DEST/<id>.tar`) or a bucket prefix (`PREFIX/<id>.tar`). It lists
//! them ([`Store::list`]), opens one ([`Store::open_bundle`]), streams one as a tar
//! ([`Store::tar`], for a download), and takes a finished bundle in ([`Store::put`]).
//!
//! Object storage goes through the `object_store` crate: `s3://` (configured by the
//! standard `AWS_*` variables) and `file://`. Tars are plain and deterministic
//! ([`tar_folder`]); unpacking refuses an entry that would land outside its bundle. The
//! crate knows nothing of events or verification and depends on no other provrun crate.
//!
//! ```
//! # fn main() -> Result<(), provrun_store::StoreError> {
//! let dir = tempfile::tempdir().unwrap();
//! let bundle = dir.path().join("run-1");
//! std::fs::create_dir(&bundle).unwrap();
//! std::fs::write(bundle.join("events.jsonl"), "").unwrap();
//! // The same bundle as a tar, as a batch uploads it.
//! let tar = dir.path().join("run-1.tar");
//! std::fs::write(&tar, provrun_store::tar_folder(&bundle)?).unwrap();
//!
//! let location = provrun_store::Location::parse(&tar)?;
//! let opened = provrun_store::open_blocking(&location)?;
//! assert!(opened.has_log() && opened.is_copy());
//! assert!(location.writable_folder().is_err());
//! # Ok(()) }
//! ```

mod bucket;
mod error;
mod location;
mod objects;
mod open;
mod store;
mod tarball;

pub use error::{Result, StoreError};
pub use location::{EVENTS_FILE, Location, check_id, is_url};
pub use objects::{Objects, Version};
pub use open::{OpenBundle, open, open_blocking, open_in};
pub use store::{Listed, Store, TarDownload};
pub use tarball::{TarChunks, tar_folder, tar_folder_stream, untar};
