//! What the page is built from: a [`BundleSource`], a bundle's log, verdict and readers
//! for its blobs and files. [`BundleSource::folder`] fills it from a bundle folder (a
//! `.tar` or a bucket object is opened as one by the store crate first); another source
//! needs only another constructor that fills the same struct.

use std::io::Read as _;
use std::path::{Component, Path};

use provrun_evidence::{Event, VerifyReport};

/// The most bytes of one input or output file read to show it (and hash it).
pub const FILE_READ_LIMIT: u64 = 16 * 1024 * 1024;

/// Reads a blob's bytes by its SHA-256 hex.
pub type BlobFn = Box<dyn Fn(&str) -> Result<Vec<u8>, String> + Send + Sync>;
/// Reads a staged input or produced output (`input/…` or `output/…`), at most
/// [`FILE_READ_LIMIT`] bytes; `Ok(None)` when the file is larger than that.
pub type FileFn = Box<dyn Fn(&str) -> Result<Option<Vec<u8>>, String> + Send + Sync>;

/// A bundle as the page needs it: its log (or why it could not be read), the verdict of
/// `provrun verify`, and readers for its blobs and files.
pub struct BundleSource {
    /// How to name the bundle to a person (its path).
    pub label: String,
    /// The events, or why the log could not be read.
    pub events: Result<Vec<Event>, String>,
    /// The same checks `provrun verify` runs.
    pub report: VerifyReport,
    /// A blob's bytes by digest, from either blob layout.
    pub blob: BlobFn,
    /// An input or output file's bytes.
    pub file: FileFn,
}

impl BundleSource {
    /// A bundle folder, read with the evidence crate's reader (both blob layouts),
    /// labelled with its path. The log is read and the bundle verified here, once.
    pub fn folder(path: &Path) -> BundleSource {
        let events = provrun_evidence::read_events(path).map_err(|e| e.to_string());
        let report = provrun_evidence::verify(path);
        let root = path.to_path_buf();
        let blob_root = root.clone();
        BundleSource {
            label: path.display().to_string(),
            events,
            report,
            blob: Box::new(move |hex| {
                provrun_evidence::read_blob_by_digest(&blob_root, hex).map_err(|e| e.to_string())
            }),
            file: Box::new(move |rel| read_bundle_file(&root, rel)),
        }
    }

    /// The same source named `label` on the page (e.g. the `.tar` or URL a user gave,
    /// rather than the temporary folder it was unpacked into).
    pub fn with_label(mut self, label: impl Into<String>) -> BundleSource {
        self.label = label.into();
        self
    }
}

/// A file under the bundle named by a path from its log (`input/…` or `output/…`). The
/// path is untrusted: only plain names, no `..`, and no symlink anywhere on the way.
fn read_bundle_file(root: &Path, rel: &str) -> Result<Option<Vec<u8>>, String> {
    let rel_path = Path::new(rel);
    let plain = !rel.is_empty()
        && rel_path
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && rel.split('/').all(|part| !part.is_empty());
    if !plain {
        return Err("the path is not a plain relative path".to_owned());
    }
    let mut at = root.to_path_buf();
    for part in rel_path.components() {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at).map_err(|e| format!("cannot read it: {e}"))?;
        if meta.file_type().is_symlink() {
            return Err("a symlink is on its path; it is not followed".to_owned());
        }
    }
    let meta = std::fs::symlink_metadata(&at).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".to_owned());
    }
    if meta.len() > FILE_READ_LIMIT {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&at)
        .and_then(|f| f.take(FILE_READ_LIMIT + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > FILE_READ_LIMIT {
        return Ok(None);
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::read_bundle_file;

    #[test]
    fn paths_that_leave_the_bundle_or_follow_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("b");
        std::fs::create_dir_all(root.join("output")).unwrap();
        std::fs::write(root.join("output/a.txt"), "hi").unwrap();
        std::fs::write(dir.path().join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("output/link")).unwrap();
        assert_eq!(
            read_bundle_file(&root, "output/a.txt").unwrap(),
            Some(b"hi".to_vec())
        );
        for bad in [
            "../secret",
            "output/../../secret",
            "/etc/passwd",
            "",
            "output//a.txt",
        ] {
            assert!(read_bundle_file(&root, bad).is_err(), "{bad}");
        }
        let err = read_bundle_file(&root, "output/link").unwrap_err();
        assert!(err.contains("symlink"), "{err}");
    }
}
