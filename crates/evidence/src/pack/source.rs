//! Random access to a pack's bytes: the [`PackSource`] trait, over a byte slice or a
//! pack file opened for reading ([`FileSource`]).

use std::fs::File;
use std::io;
use std::path::Path;

/// Random access to a pack's bytes: a file or a byte slice.
pub trait PackSource {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`; an error if the bytes are not all there.
    ///
    /// # Errors
    ///
    /// An `io::Error` (`UnexpectedEof` when the source is too short) when the bytes from
    /// `offset` cannot all be read.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl PackSource for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = start
            .checked_add(buf.len())
            .filter(|e| *e <= <[u8]>::len(self))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(&self[start..end]);
        Ok(())
    }
}

impl<T: PackSource + ?Sized> PackSource for &T {
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_at(offset, buf)
    }
}

/// A pack file opened for reading, with its length when opened.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
}

impl FileSource {
    /// Open `path` for reading: a regular file, never through a symlink.
    ///
    /// # Errors
    ///
    /// An `io::Error` when `path` cannot be opened, is a symlink or not a regular file, or
    /// its metadata cannot be read.
    pub fn open(path: &Path) -> io::Result<FileSource> {
        let file = crate::fsutil::open_regular(path)?;
        let len = file.metadata()?.len();
        Ok(FileSource { file, len })
    }
}

impl PackSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt as _;
        if offset.saturating_add(buf.len() as u64) > self.len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.file.read_exact_at(buf, offset)
    }
}
