//! A bundle as one plain tar: packing a folder (deterministic: sorted names, zeroed times
//! and owners, symlinks kept as links), unpacking one safely, and packing a folder as a
//! stream of chunks for a download.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures_util::stream::BoxStream;
use tokio::sync::mpsc;

use crate::error::{Result, StoreError};

/// Every entry under `dir`, depth first in name order, with its name relative to it.
fn entries(dir: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
    fn walk(dir: &Path, rel: &Path, out: &mut Vec<(PathBuf, PathBuf)>) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for e in entries {
            let path = e.path();
            let name = rel.join(e.file_name());
            let is_dir = e.file_type()?.is_dir();
            out.push((path.clone(), name.clone()));
            if is_dir {
                walk(&path, &name, out)?;
            }
        }
        Ok(())
    }
    let mut items = Vec::new();
    walk(dir, Path::new(""), &mut items)
        .map_err(|e| StoreError::io("read", dir.display().to_string(), e))?;
    Ok(items)
}

/// Write the tar of `folder`'s contents into `out`, and hand `out` back.
fn write_tar<W: Write>(folder: &Path, out: W) -> Result<W> {
    let items = entries(folder)?;
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Deterministic);
    for (path, name) in items {
        builder
            .append_path_with_name(&path, &name)
            .map_err(|e| StoreError::io("pack", path.display().to_string(), e))?;
    }
    builder
        .into_inner()
        .map_err(|e| StoreError::io("pack", folder.display().to_string(), e))
}

/// A plain tar of a folder's contents (names relative to it, in sorted order, symlinks
/// kept as links, times and owners zeroed, so the same bundle gives the same bytes).
///
/// # Errors
///
/// [`StoreError::Io`] when the folder or one of its entries cannot be read.
pub fn tar_folder(folder: &Path) -> Result<Vec<u8>> {
    write_tar(folder, Vec::new())
}

/// Unpack a bundle tar into `into` (made if missing). Entries that would land outside it
/// (absolute names, `..`, links out) are refused, by the tar crate's `unpack_in`; `name`
/// names the tar in messages.
///
/// # Errors
///
/// [`StoreError::Io`] when `into` cannot be made; [`StoreError::Tar`] when `bytes` is not a
/// tar, an entry would land outside `into`, or an entry cannot be unpacked.
pub fn untar(bytes: &[u8], into: &Path, name: &str) -> Result<()> {
    std::fs::create_dir_all(into)
        .map_err(|e| StoreError::io("make", into.display().to_string(), e))?;
    let bad = |message: String| StoreError::Tar {
        name: name.to_owned(),
        message,
    };
    let mut archive = tar::Archive::new(Cursor::new(bytes));
    archive.set_preserve_permissions(false);
    archive.set_preserve_mtime(false);
    let entries = archive
        .entries()
        .map_err(|e| bad(format!("not a tar archive: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(format!("not a tar archive: {e}")))?;
        let entry_name = entry
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        match entry.unpack_in(into) {
            Ok(true) => {}
            Ok(false) => {
                return Err(bad(format!(
                    "the archive's entry `{entry_name}` leaves the bundle"
                )));
            }
            Err(e) => return Err(bad(format!("cannot unpack `{entry_name}`: {e}"))),
        }
    }
    Ok(())
}

/// The tar bytes of a bundle, in chunks, as they are read or made.
pub type TarChunks = BoxStream<'static, Result<Bytes>>;

/// A `Write` that hands each chunk written to a channel (from a blocking thread).
struct ChannelWriter {
    tx: mpsc::Sender<Result<Bytes>>,
    buf: Vec<u8>,
}

/// Chunks of about this size go down the channel.
const CHUNK: usize = 64 * 1024;

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "reader gone"))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// The tar of `folder` (as [`tar_folder`] makes it) as a stream of chunks, packed on a
/// blocking thread while the stream is read: a large bundle is never whole in memory.
/// An error while packing ends the stream with that error. Must be called within a
/// tokio runtime.
pub fn tar_folder_stream(folder: PathBuf) -> TarChunks {
    let (tx, mut rx) = mpsc::channel::<Result<Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let writer = ChannelWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        let packed = write_tar(&folder, writer).and_then(|mut w| {
            w.flush()
                .map_err(|e| StoreError::io("pack", folder.display().to_string(), e))
        });
        if let Err(e) = packed {
            // The reader may be gone already; then nobody needs the error.
            let _ = tx.blocking_send(Err(e));
        }
    });
    Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_round_trips_through_tar_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("blobs/sha256")).unwrap();
        std::fs::write(src.join("events.jsonl"), "{}\n").unwrap();
        std::fs::write(src.join("blobs/sha256/ab"), [0u8, 1, 2, 255]).unwrap();
        let tar = tar_folder(&src).unwrap();
        assert_eq!(tar, tar_folder(&src).unwrap(), "not deterministic");
        let back = dir.path().join("back");
        untar(&tar, &back, "t").unwrap();
        assert_eq!(std::fs::read(back.join("events.jsonl")).unwrap(), b"{}\n");
        assert_eq!(
            std::fs::read(back.join("blobs/sha256/ab")).unwrap(),
            [0u8, 1, 2, 255]
        );
    }

    #[test]
    fn an_archive_that_leaves_its_folder_is_refused() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(2);
        header.set_mode(0o644);
        // Written raw: the builder itself refuses `..` in names.
        let name = b"../escaped";
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        header.set_cksum();
        builder.append(&header, &b"hi"[..]).unwrap();
        let tar = builder.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let into = dir.path().join("in");
        assert!(untar(&tar, &into, "t").is_err());
        assert!(!dir.path().join("escaped").exists());
        assert!(untar(b"not a tar at all, not even close to 512 bytes", &into, "t").is_err());
    }

    #[tokio::test]
    async fn the_streamed_tar_is_the_same_bytes_as_the_packed_one() {
        use futures_util::StreamExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("output")).unwrap();
        // Larger than a chunk, so the stream has several.
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("output/big.bin"), &big).unwrap();
        std::fs::write(dir.path().join("events.jsonl"), "{}\n").unwrap();
        let mut stream = tar_folder_stream(dir.path().to_path_buf());
        let mut streamed = Vec::new();
        let mut chunks = 0;
        while let Some(chunk) = stream.next().await {
            streamed.extend_from_slice(&chunk.unwrap());
            chunks += 1;
        }
        assert!(chunks > 1, "{chunks}");
        assert_eq!(streamed, tar_folder(dir.path()).unwrap());
    }
}
