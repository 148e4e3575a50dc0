//! What a user names as one bundle ([`Location`]: a folder, a bundle `.tar`, or the URL
//! of a tar in object storage), whether a command may change it in place, and the rule
//! for bundle ids.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// The name of a bundle's evidence log: a folder without it is no bundle.
pub const EVENTS_FILE: &str = "events.jsonl";

/// Whether `text` names object storage (`scheme://…`) rather than a local path.
pub fn is_url(text: &str) -> bool {
    text.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// Check a bundle id: 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`, so
/// it is a safe file and object name everywhere (and never a hidden or parent folder).
///
/// # Errors
///
/// [`StoreError::BadId`] when `id` breaks the rule above.
pub fn check_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !id.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadId(id.to_owned()))
    }
}

/// Why a bundle `.tar` is not changed in place.
const TAR_READ_ONLY: &str = "it is a .tar, read by unpacking a copy; unpack it (`mkdir B && \
                             tar -xf FILE -C B`) and name the folder B";
/// Why a bundle in object storage is not changed in place.
const OBJECT_READ_ONLY: &str = "it is an object in a bucket, read from a downloaded copy; \
                                download it, unpack it into a folder and name the folder";

/// One bundle as a user names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A bundle folder on this machine.
    Folder(PathBuf),
    /// A bundle packed as one plain tar file on this machine (as `provrun batch` uploads).
    TarFile(PathBuf),
    /// A bundle tar in object storage, by URL: `s3://BUCKET/KEY.tar` or
    /// `file:///FOLDER/KEY.tar`.
    Object(String),
}

impl Location {
    /// What `arg` names: a URL (`scheme://…`) is an object; an existing folder is a
    /// folder; an existing file is a tar. Nothing at a local path is
    /// [`StoreError::NotFound`]. An object's existence is not checked here (that takes a
    /// request): [`crate::open`] finds out.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] when nothing is at a local path; [`StoreError::Io`] when its
    /// metadata cannot be read for another reason.
    pub fn parse(arg: impl AsRef<OsStr>) -> Result<Location> {
        let arg = arg.as_ref();
        let text = arg.to_string_lossy();
        if is_url(&text) {
            return Ok(Location::Object(text.into_owned()));
        }
        let path = PathBuf::from(arg);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => Ok(Location::Folder(path)),
            Ok(_) => Ok(Location::TarFile(path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::NotFound(path.display().to_string()))
            }
            Err(e) => Err(StoreError::io("read", path.display().to_string(), e)),
        }
    }

    /// The bundle as the user named it (a path or a URL), for messages and labels.
    pub fn name(&self) -> String {
        match self {
            Location::Folder(p) | Location::TarFile(p) => p.display().to_string(),
            Location::Object(url) => url.clone(),
        }
    }

    /// The folder itself when the bundle is a folder, which a command may change in
    /// place (append to its log, add a signature); else [`StoreError::ReadOnly`] saying
    /// why not and what to do instead.
    ///
    /// # Errors
    ///
    /// [`StoreError::ReadOnly`] for a local tar or an object in a bucket.
    pub fn writable_folder(&self) -> Result<&Path> {
        match self {
            Location::Folder(p) => Ok(p),
            Location::TarFile(_) => Err(StoreError::ReadOnly {
                name: self.name(),
                reason: TAR_READ_ONLY,
            }),
            Location::Object(_) => Err(StoreError::ReadOnly {
                name: self.name(),
                reason: OBJECT_READ_ONLY,
            }),
        }
    }

    /// Whether a change made to the opened copy can be written back
    /// ([`crate::OpenBundle::write_back`]): a folder is changed in place, a local tar is
    /// packed again over its file; an object in a bucket is not replaced
    /// ([`StoreError::ReadOnly`], with why).
    ///
    /// # Errors
    ///
    /// [`StoreError::ReadOnly`] for an object in a bucket.
    pub fn check_write_back(&self) -> Result<()> {
        match self {
            Location::Object(_) => self.writable_folder().map(|_| ()),
            Location::Folder(_) | Location::TarFile(_) => Ok(()),
        }
    }

    /// A short word for the kind of source: `folder`, `tar` or `object`.
    pub fn kind(&self) -> &'static str {
        match self {
            Location::Folder(_) => "folder",
            Location::TarFile(_) => "tar",
            Location::Object(_) => "object",
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_url("s3://bucket/prefix"));
        assert!(is_url("file:///tmp/x"));
        assert!(!is_url("/tmp/x"));
        assert!(!is_url("relative/a://b"));
        assert!(!is_url("://x"));
    }

    #[test]
    fn ids_must_be_plain_names() {
        for good in ["a", "run-001", "A.b_c", "x".repeat(128).as_str()] {
            assert!(check_id(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "-a",
            ".hidden",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_location_is_a_folder_a_tar_or_an_object_and_only_a_folder_is_changed_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let tar = dir.path().join("b.tar");
        std::fs::write(&tar, b"x").unwrap();
        let folder = Location::parse(dir.path()).unwrap();
        assert_eq!(folder, Location::Folder(dir.path().to_path_buf()));
        assert_eq!(folder.writable_folder().unwrap(), dir.path());
        let file = Location::parse(&tar).unwrap();
        assert_eq!(file, Location::TarFile(tar.clone()));
        let err = file.writable_folder().unwrap_err().to_string();
        assert!(err.contains("tar -xf"), "{err}");
        file.check_write_back().unwrap();
        let object = Location::parse("s3://b/k.tar").unwrap();
        assert!(object.writable_folder().is_err());
        assert!(object.check_write_back().is_err());
        let missing = Location::parse(dir.path().join("nope")).unwrap_err();
        assert!(missing.is_not_found(), "{missing}");
        assert!(missing.to_string().starts_with("no bundle at"));
    }
}
