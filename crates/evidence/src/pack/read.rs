//! Reading data out of a pack: one chunk decompressed and checked ([`read_chunk`]), and
//! [`BlobReader`], which rebuilds blobs from their chunks (with a bounded cache of
//! decompressed chunks) and checks their sizes and digests, one by one or all at once.

use std::collections::HashMap;

use sha2::{Digest as _, Sha256};

use super::{ChunkEntry, PackError, PackIndex, PackSource, Region, err, read_index};

/// Read and check one chunk: decompress its frame (to at most its `raw_len`) and check
/// that the bytes have that length and digest.
///
/// # Errors
///
/// [`PackError`] when the chunk's bytes cannot be read, do not decompress, or do not have
/// the chunk's length and digest.
pub fn read_chunk<S: PackSource + ?Sized>(
    src: &S,
    chunk: &ChunkEntry,
) -> Result<Vec<u8>, PackError> {
    let mut dec = zstd::bulk::Decompressor::new()
        .map_err(|e| err(chunk.offset, Region::Chunk, format!("no zstd context: {e}")))?;
    read_chunk_with(src, chunk, &mut dec)
}

/// [`read_chunk`] with a decompression context to reuse.
fn read_chunk_with<S: PackSource + ?Sized>(
    src: &S,
    chunk: &ChunkEntry,
    dec: &mut zstd::bulk::Decompressor<'static>,
) -> Result<Vec<u8>, PackError> {
    let mut frame = vec![0u8; chunk.data_len as usize];
    src.read_at(chunk.data_offset, &mut frame)
        .map_err(|e| err(chunk.offset, Region::Chunk, format!("cannot read: {e}")))?;
    let raw = dec
        .decompress(&frame, chunk.raw_len as usize)
        .map_err(|e| {
            err(
                chunk.offset,
                Region::Chunk,
                format!("compressed data does not decompress: {e}"),
            )
        })?;
    if raw.len() != chunk.raw_len as usize {
        return Err(err(
            chunk.offset,
            Region::Chunk,
            format!(
                "decompresses to {} bytes, the record says {}",
                raw.len(),
                chunk.raw_len
            ),
        ));
    }
    if Sha256::digest(&raw).as_slice() != chunk.digest {
        return Err(err(
            chunk.offset,
            Region::Chunk,
            "data does not match the chunk's digest",
        ));
    }
    Ok(raw)
}

/// Decompressed chunks kept by a [`BlobReader`], within a byte budget, and the
/// decompression context reused for the others.
#[derive(Default)]
struct ChunkCache {
    map: HashMap<u32, std::sync::Arc<Vec<u8>>>,
    bytes: usize,
    dec: Option<zstd::bulk::Decompressor<'static>>,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache")
            .field("chunks", &self.map.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// Bytes of decompressed chunks a reader keeps (64 MiB).
const CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Reads blobs out of a pack, rebuilding each from its chunks and checking its digest.
#[derive(Debug)]
pub struct BlobReader<S> {
    src: S,
    index: PackIndex,
    cache: std::sync::Mutex<ChunkCache>,
}

impl<S: PackSource> BlobReader<S> {
    /// Index `src`.
    ///
    /// # Errors
    ///
    /// [`PackError`] when the pack's index cannot be read, as for [`read_index`].
    pub fn new(src: S) -> Result<Self, PackError> {
        let index = read_index(&src)?;
        Ok(BlobReader {
            src,
            index,
            cache: std::sync::Mutex::new(ChunkCache::default()),
        })
    }

    /// The pack's index.
    pub fn index(&self) -> &PackIndex {
        &self.index
    }

    /// The source.
    pub fn source(&self) -> &S {
        &self.src
    }

    fn chunk(&self, c: u32) -> Result<std::sync::Arc<Vec<u8>>, PackError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = cache.map.get(&c) {
            return Ok(std::sync::Arc::clone(b));
        }
        let entry = &self.index.chunks[c as usize];
        let dec =
            match &mut cache.dec {
                Some(d) => d,
                slot => slot.insert(zstd::bulk::Decompressor::new().map_err(|e| {
                    err(entry.offset, Region::Chunk, format!("no zstd context: {e}"))
                })?),
            };
        let raw = std::sync::Arc::new(read_chunk_with(&self.src, entry, dec)?);
        if cache.bytes + raw.len() > CACHE_BYTES {
            cache.map.clear();
            cache.bytes = 0;
        }
        cache.bytes += raw.len();
        cache.map.insert(c, std::sync::Arc::clone(&raw));
        Ok(raw)
    }

    /// Feed blob `ordinal`'s bytes, chunk by chunk, to `sink`, checking each chunk, the
    /// total size and the blob's digest.
    ///
    /// # Errors
    ///
    /// [`PackError`] when there is no blob `ordinal`, one of its chunks cannot be read or
    /// fails its check, or the rebuilt bytes do not match its size or digest; `sink` may
    /// have had some chunks by then.
    pub fn visit(&self, ordinal: u32, mut sink: impl FnMut(&[u8])) -> Result<(), PackError> {
        let Some(entry) = self.index.blobs.get(ordinal as usize) else {
            return Err(err(0, Region::Index, format!("no blob {ordinal}")));
        };
        let mut hasher = Sha256::new();
        let mut total = 0u64;
        for c in self.index.chunk_list(ordinal) {
            let raw = self.chunk(c)?;
            total += raw.len() as u64;
            if total > entry.size {
                return Err(err(
                    entry.offset,
                    Region::Index,
                    "its chunks are longer than its size",
                ));
            }
            hasher.update(raw.as_slice());
            sink(&raw);
        }
        if total != entry.size {
            return Err(err(
                entry.offset,
                Region::Index,
                format!(
                    "its chunks hold {total} bytes, the record says {}",
                    entry.size
                ),
            ));
        }
        if hasher.finalize().as_slice() != entry.digest {
            return Err(err(
                entry.offset,
                Region::Index,
                "the bytes rebuilt from its chunks do not match its digest",
            ));
        }
        Ok(())
    }

    /// The bytes of blob `ordinal`, checked.
    ///
    /// # Errors
    ///
    /// [`PackError`] when there is no blob `ordinal` or its bytes fail a check, as for
    /// [`BlobReader::visit`].
    pub fn read(&self, ordinal: u32) -> Result<Vec<u8>, PackError> {
        let cap = self
            .index
            .blobs
            .get(ordinal as usize)
            .map_or(0, |e| e.size.min(16 * 1024 * 1024) as usize);
        let mut out = Vec::with_capacity(cap);
        self.visit(ordinal, |b| out.extend_from_slice(b))?;
        Ok(out)
    }

    /// Check blob `ordinal` without keeping its bytes.
    ///
    /// # Errors
    ///
    /// [`PackError`] when there is no blob `ordinal` or its bytes fail a check, as for
    /// [`BlobReader::visit`].
    pub fn check(&self, ordinal: u32) -> Result<(), PackError> {
        self.visit(ordinal, |_| {})
    }

    /// Check every blob (as [`BlobReader::check`] does each), reporting each result to
    /// `report` in order. A blob that starts with its base's leading chunks resumes the
    /// SHA-256 state its base had after them, which is the same state, so each chunk's
    /// bytes are hashed about once however many blobs repeat them.
    pub fn check_all(&self, mut report: impl FnMut(u32, Result<(), PackError>)) {
        let blobs = &self.index.blobs;
        // Which (blob, chunk count) states later blobs start from.
        let mut wanted: HashMap<(u32, u64), Option<(Sha256, u64)>> = HashMap::new();
        for b in blobs {
            if let Some(base) = b.base {
                wanted.insert((base, b.base_chunks), None);
            }
        }
        for (i, entry) in blobs.iter().enumerate() {
            let i = i as u32;
            let resumed = entry
                .base
                .and_then(|b| wanted.get(&(b, entry.base_chunks)).cloned().flatten());
            let (mut hasher, mut total, mut pos, chunks) = match resumed {
                Some((h, t)) => (h, t, entry.base_chunks, entry.own.clone()),
                None => (Sha256::new(), 0, 0, self.index.chunk_list(i)),
            };
            let mut result = Ok(());
            for c in chunks {
                match self.chunk(c) {
                    Ok(raw) => {
                        hasher.update(raw.as_slice());
                        total += raw.len() as u64;
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                pos += 1;
                if let Some(slot) = wanted.get_mut(&(i, pos)) {
                    *slot = Some((hasher.clone(), total));
                }
            }
            if result.is_ok() {
                result = if total != entry.size {
                    Err(err(
                        entry.offset,
                        Region::Index,
                        format!(
                            "its chunks hold {total} bytes, the record says {}",
                            entry.size
                        ),
                    ))
                } else if hasher.finalize().as_slice() != entry.digest {
                    Err(err(
                        entry.offset,
                        Region::Index,
                        "the bytes rebuilt from its chunks do not match its digest",
                    ))
                } else {
                    Ok(())
                };
            }
            if result.is_err() {
                // Nothing may resume from a blob that did not check out.
                for ((b, _), slot) in wanted.iter_mut() {
                    if *b == i {
                        *slot = None;
                    }
                }
            }
            report(i, result);
        }
    }
}
