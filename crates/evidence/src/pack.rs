//! Blob store v2: every blob of a bundle in one append-only pack file, `blobs/pack`,
//! cut into content-defined chunks (FastCDC) that are stored once each, compressed with
//! zstd, and an index record per blob naming its chunks.
//!
//! The format is specified byte by byte in `docs/evidence.md` (§4b). This module reads
//! and writes it; nothing here trusts the bytes it reads: every length is bounded, every
//! reference checked, and a hostile pack yields a [`PackError`], never a panic.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// The 16 bytes every pack starts with: the ASCII text `provrun-pack` and the format
/// version 1 as a little-endian `u32`.
pub const HEADER: [u8; 16] = *b"provrun-pack\x01\x00\x00\x00";
/// Record kind byte of a chunk record.
pub const KIND_CHUNK: u8 = 1;
/// Record kind byte of a blob (index) record.
pub const KIND_BLOB: u8 = 2;
/// Bytes before each record's body: the kind byte and the body length (`u32` LE).
pub const RECORD_HEADER: u64 = 5;
/// Content-defined chunking: smallest chunk the writer cuts (except a blob's last one).
pub const MIN_CHUNK: u32 = 2 * 1024;
/// Content-defined chunking: the average chunk size aimed at.
pub const AVG_CHUNK: u32 = 8 * 1024;
/// Largest chunk, writer and reader: a chunk record's `raw_len` is at most this.
pub const MAX_CHUNK: u32 = 64 * 1024;
/// Largest record body a reader accepts (64 MiB).
pub const MAX_BODY: u32 = 64 * 1024 * 1024;
/// Fixed part of a chunk record's body: digest (32) and `raw_len` (4).
const CHUNK_FIXED: u32 = 36;
/// Largest chunk body: the fixed part and a zstd frame of at most `MAX_CHUNK` bytes
/// (which zstd never expands by more than a small bound).
const MAX_CHUNK_BODY: u32 = CHUNK_FIXED + MAX_CHUNK + 1024;
/// Fixed part of a blob record's body: digest (32), size (8), base (4), base_chunks (4),
/// count (4).
const BLOB_FIXED: u32 = 52;
/// zstd level the writer uses (any level reads the same).
const ZSTD_LEVEL: i32 = 3;
/// A blob shares a base blob's leading chunks only when it shares at least this many.
const MIN_SHARED: usize = 3;

/// Where in a pack a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// The 16-byte header.
    Header,
    /// A record's kind byte or body length.
    Record,
    /// A chunk record: its digest, length or compressed data.
    Chunk,
    /// A blob record (the index): its digest, size or chunk list.
    Index,
}

impl Region {
    /// The region as written in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Region::Header => "header",
            Region::Record => "record header",
            Region::Chunk => "chunk",
            Region::Index => "blob index record",
        }
    }
}

/// A problem in a pack: where (byte offset and region) and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pack {} at byte {offset}: {reason}", region.as_str())]
pub struct PackError {
    /// Byte offset in the pack of the record (or header) concerned.
    pub offset: u64,
    /// What kind of bytes are wrong there.
    pub region: Region,
    /// What is wrong.
    pub reason: String,
}

fn err(offset: u64, region: Region, reason: impl Into<String>) -> PackError {
    PackError {
        offset,
        region,
        reason: reason.into(),
    }
}

/// Random access to a pack's bytes: a file or a byte slice.
pub trait PackSource {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`; an error if the bytes are not all there.
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

/// One chunk record, as indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkEntry {
    /// SHA-256 of the chunk's uncompressed bytes.
    pub digest: [u8; 32],
    /// Length of the uncompressed bytes.
    pub raw_len: u32,
    /// Offset of the record (its kind byte).
    pub offset: u64,
    /// Offset of the zstd frame.
    pub data_offset: u64,
    /// Length of the zstd frame.
    pub data_len: u32,
}

/// One blob record, as indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobEntry {
    /// SHA-256 of the blob's bytes.
    pub digest: [u8; 32],
    /// The blob's length.
    pub size: u64,
    /// Ordinal of the blob record whose leading chunks this blob starts with, if any.
    pub base: Option<u32>,
    /// How many of the base's leading chunks it starts with (0 without a base).
    pub base_chunks: u64,
    /// Ordinals of the chunk records that follow.
    pub own: Vec<u32>,
    /// Offset of the record.
    pub offset: u64,
    /// Offset just past the record.
    pub end: u64,
    /// Length of the blob's whole chunk list (`base_chunks` + `own.len()`).
    pub chunk_count: u64,
}

/// A pack's end that is not a whole record: what an interrupted write leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// Where it starts (the end of the last whole record, or 0 for a torn header).
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// Whether every byte of it is zero (space allocated but never written).
    pub zeros: bool,
}

/// The index of a pack: every whole record, in order.
#[derive(Debug, Clone, Default)]
pub struct PackIndex {
    /// Chunk records by ordinal.
    pub chunks: Vec<ChunkEntry>,
    /// Blob records by ordinal.
    pub blobs: Vec<BlobEntry>,
    /// Blob ordinal by digest.
    pub blob_by_digest: HashMap<[u8; 32], u32>,
    /// Chunk ordinal by digest.
    pub chunk_by_digest: HashMap<[u8; 32], u32>,
    /// Offset just past the last whole record (16 with none, 0 without a whole header).
    pub good_len: u64,
    /// A torn end, if any.
    pub torn: Option<TornTail>,
}

fn all_zero<S: PackSource + ?Sized>(src: &S, from: u64) -> bool {
    let mut buf = [0u8; 4096];
    let mut at = from;
    while at < src.len() {
        let n = (src.len() - at).min(buf.len() as u64) as usize;
        if src.read_at(at, &mut buf[..n]).is_err() || buf[..n].iter().any(|b| *b != 0) {
            return false;
        }
        at += n as u64;
    }
    true
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn digest_at(b: &[u8], at: usize) -> [u8; 32] {
    let mut d = [0u8; 32];
    d.copy_from_slice(&b[at..at + 32]);
    d
}

/// Read a pack's index: check the header and the framing of every record, and every
/// reference between records. Chunk *data* is not read here (see [`read_chunk`]).
/// A torn end is reported in [`PackIndex::torn`], not as an error.
pub fn read_index<S: PackSource + ?Sized>(src: &S) -> Result<PackIndex, PackError> {
    let io_err =
        |at: u64, region: Region, e: io::Error| err(at, region, format!("cannot read: {e}"));
    let mut index = PackIndex::default();
    let len = src.len();
    let head_len = len.min(HEADER.len() as u64) as usize;
    let mut head = [0u8; 16];
    src.read_at(0, &mut head[..head_len])
        .map_err(|e| io_err(0, Region::Header, e))?;
    if head_len < HEADER.len() {
        let zeros = head[..head_len].iter().all(|b| *b == 0);
        if !zeros && head[..head_len] != HEADER[..head_len] {
            return Err(err(0, Region::Header, "not a provrun pack header"));
        }
        if head_len > 0 {
            index.torn = Some(TornTail {
                offset: 0,
                len,
                zeros,
            });
        }
        return Ok(index);
    }
    if head != HEADER {
        if head.iter().all(|b| *b == 0) && all_zero(src, 0) {
            index.torn = Some(TornTail {
                offset: 0,
                len,
                zeros: true,
            });
            return Ok(index);
        }
        return Err(err(
            0,
            Region::Header,
            "not a provrun pack header (magic or version differs)",
        ));
    }
    let mut at = HEADER.len() as u64;
    index.good_len = at;
    while at < len {
        let torn = |zeros| TornTail {
            offset: at,
            len: len - at,
            zeros,
        };
        let mut rh = [0u8; 5];
        let avail = (len - at).min(5) as usize;
        src.read_at(at, &mut rh[..avail])
            .map_err(|e| io_err(at, Region::Record, e))?;
        let kind = rh[0];
        if kind != KIND_CHUNK && kind != KIND_BLOB {
            if all_zero(src, at) {
                index.torn = Some(torn(true));
                return Ok(index);
            }
            return Err(err(
                at,
                Region::Record,
                format!("unknown record kind {kind}"),
            ));
        }
        if avail < 5 {
            index.torn = Some(torn(false));
            return Ok(index);
        }
        let body_len = u32_at(&rh, 1);
        let (min, max, region) = if kind == KIND_CHUNK {
            (CHUNK_FIXED + 1, MAX_CHUNK_BODY, Region::Chunk)
        } else {
            (BLOB_FIXED, MAX_BODY, Region::Index)
        };
        if body_len < min || body_len > max {
            return Err(err(
                at,
                Region::Record,
                format!(
                    "a {} record's body length {body_len} is out of range",
                    region.as_str()
                ),
            ));
        }
        let end = at + RECORD_HEADER + u64::from(body_len);
        if end > len {
            index.torn = Some(torn(false));
            return Ok(index);
        }
        if kind == KIND_CHUNK {
            let mut fixed = [0u8; CHUNK_FIXED as usize];
            src.read_at(at + RECORD_HEADER, &mut fixed)
                .map_err(|e| io_err(at, Region::Chunk, e))?;
            let digest = digest_at(&fixed, 0);
            let raw_len = u32_at(&fixed, 32);
            if raw_len == 0 || raw_len > MAX_CHUNK {
                return Err(err(
                    at,
                    Region::Chunk,
                    format!("raw length {raw_len} is out of range"),
                ));
            }
            let ordinal = u32::try_from(index.chunks.len())
                .map_err(|_| err(at, Region::Chunk, "too many chunks"))?;
            if index.chunk_by_digest.insert(digest, ordinal).is_some() {
                return Err(err(
                    at,
                    Region::Chunk,
                    "a chunk with this digest is stored twice",
                ));
            }
            index.chunks.push(ChunkEntry {
                digest,
                raw_len,
                offset: at,
                data_offset: at + RECORD_HEADER + u64::from(CHUNK_FIXED),
                data_len: body_len - CHUNK_FIXED,
            });
        } else {
            if !(body_len - BLOB_FIXED).is_multiple_of(4) {
                return Err(err(
                    at,
                    Region::Index,
                    "the chunk list is not a whole number of u32",
                ));
            }
            let mut body = vec![0u8; body_len as usize];
            src.read_at(at + RECORD_HEADER, &mut body)
                .map_err(|e| io_err(at, Region::Index, e))?;
            let entry = parse_blob(&index, &body, at, end)?;
            let ordinal = u32::try_from(index.blobs.len())
                .map_err(|_| err(at, Region::Index, "too many blobs"))?;
            if index.blob_by_digest.insert(entry.digest, ordinal).is_some() {
                return Err(err(
                    at,
                    Region::Index,
                    "a blob with this digest is indexed twice",
                ));
            }
            index.blobs.push(entry);
        }
        at = end;
        index.good_len = at;
    }
    Ok(index)
}

fn parse_blob(index: &PackIndex, body: &[u8], at: u64, end: u64) -> Result<BlobEntry, PackError> {
    let digest = digest_at(body, 0);
    let size = u64_at(body, 32);
    let base_field = u32_at(body, 40);
    let base_chunks = u64::from(u32_at(body, 44));
    let count = u32_at(body, 48) as usize;
    if BLOB_FIXED as usize + count * 4 != body.len() {
        return Err(err(
            at,
            Region::Index,
            "the chunk count does not match the record's length",
        ));
    }
    let base = match base_field {
        0 => {
            if base_chunks != 0 {
                return Err(err(at, Region::Index, "base_chunks without a base"));
            }
            None
        }
        n => {
            let b = n - 1;
            let Some(base) = index.blobs.get(b as usize) else {
                return Err(err(
                    at,
                    Region::Index,
                    format!("base blob {b} is not an earlier record"),
                ));
            };
            if base_chunks == 0 || base_chunks > base.chunk_count {
                return Err(err(
                    at,
                    Region::Index,
                    format!(
                        "takes {base_chunks} chunks of base blob {b}, which has {}",
                        base.chunk_count
                    ),
                ));
            }
            Some(b)
        }
    };
    let mut own = Vec::with_capacity(count);
    for i in 0..count {
        let c = u32_at(body, BLOB_FIXED as usize + 4 * i);
        if c as usize >= index.chunks.len() {
            return Err(err(
                at,
                Region::Index,
                format!("chunk {c} is not an earlier record"),
            ));
        }
        own.push(c);
    }
    let chunk_count = base_chunks + own.len() as u64;
    if chunk_count == 0 && size != 0 {
        return Err(err(at, Region::Index, "a non-empty blob without chunks"));
    }
    Ok(BlobEntry {
        digest,
        size,
        base,
        base_chunks,
        own,
        offset: at,
        end,
        chunk_count,
    })
}

impl PackIndex {
    /// The whole chunk list of blob `ordinal` (its base's leading chunks, then its own).
    /// Empty for an unknown ordinal.
    pub fn chunk_list(&self, ordinal: u32) -> Vec<u32> {
        let Some(top) = self.blobs.get(ordinal as usize) else {
            return Vec::new();
        };
        // Walk the base chain from the blob down, noting how many of each record's own
        // chunks are used, then emit them from the bottom up.
        let mut segments: Vec<(u32, usize)> = Vec::new();
        let mut cur = ordinal;
        let mut limit = top.chunk_count;
        loop {
            let e = &self.blobs[cur as usize];
            let from_base = limit.min(e.base_chunks);
            let from_own = ((limit - from_base) as usize).min(e.own.len());
            segments.push((cur, from_own));
            match e.base {
                Some(b) if from_base > 0 => {
                    cur = b;
                    limit = from_base;
                }
                _ => break,
            }
        }
        let mut out = Vec::with_capacity(usize::try_from(top.chunk_count).unwrap_or(0));
        for (b, n) in segments.into_iter().rev() {
            out.extend_from_slice(&self.blobs[b as usize].own[..n]);
        }
        out
    }

    /// The blob ordinal of a digest given as hex, if indexed.
    pub fn find_hex(&self, hex: &str) -> Option<u32> {
        let mut d = [0u8; 32];
        hex::decode_to_slice(hex, &mut d).ok()?;
        self.blob_by_digest.get(&d).copied()
    }
}

/// Read and check one chunk: decompress its frame (to at most its `raw_len`) and check
/// that the bytes have that length and digest.
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

// ---------------------------------------------------------------------------------------
// Writing.

/// Appends blobs to a pack: the writer side, kept by the recorder.
pub(crate) struct PackWriter {
    /// The compression context, reused for every chunk.
    zstd: Option<zstd::bulk::Compressor<'static>>,
    pub(crate) file: std::sync::Arc<File>,
    pub(crate) path: PathBuf,
    /// Bytes in the file (every whole record).
    len: u64,
    chunks: HashMap<[u8; 32], u32>,
    n_chunks: u32,
    blobs: HashMap<[u8; 32], u32>,
    /// Each blob's whole chunk list, to find a base for the next one.
    lists: Vec<Vec<u32>>,
    /// The latest blob whose list starts with a given chunk.
    by_first: HashMap<u32, u32>,
    /// A write failed: the pack may hold a partial record; refuse further writes.
    broken: Option<String>,
    /// The latest few blobs written (bytes and chunk ends): a blob that starts with one
    /// of them (a request resending the history) reuses its chunks instead of chunking
    /// and hashing that prefix again.
    recent: Vec<Recent>,
}

/// A recently written blob, for [`PackWriter::put`]'s prefix reuse.
#[derive(Debug)]
struct Recent {
    bytes: Vec<u8>,
    /// Each chunk's ordinal, the offset just past it, and the blob's hash state there.
    ends: Vec<(u32, usize, Sha256)>,
}

/// How many recent blobs the writer keeps for prefix reuse, and the largest kept.
const RECENT_BLOBS: usize = 4;
const RECENT_MAX_BYTES: usize = 64 * 1024 * 1024;

/// What [`PackWriter::put`] did.
pub(crate) enum Put {
    /// The blob was already in the pack.
    Present,
    /// Bytes were appended.
    Written,
}

impl std::fmt::Debug for PackWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackWriter")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("chunks", &self.n_chunks)
            .field("blobs", &self.lists.len())
            .finish()
    }
}

impl PackWriter {
    /// Create a new pack at `path` (which must not exist) and write its header.
    pub(crate) fn create(path: &Path) -> io::Result<PackWriter> {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)?;
        file.write_all(&HEADER)?;
        Ok(PackWriter::with_file(file, path, HEADER.len() as u64))
    }

    fn with_file(file: File, path: &Path, len: u64) -> PackWriter {
        PackWriter {
            zstd: None,
            file: std::sync::Arc::new(file),
            path: path.to_path_buf(),
            len,
            chunks: HashMap::new(),
            n_chunks: 0,
            blobs: HashMap::new(),
            lists: Vec::new(),
            by_first: HashMap::new(),
            broken: None,
            recent: Vec::new(),
        }
    }

    /// Open an existing pack whose whole records are `index` (the file already cut to
    /// `index.good_len`) to append to it.
    pub(crate) fn resume(path: &Path, index: &PackIndex) -> io::Result<PackWriter> {
        let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
        let mut len = index.good_len;
        if len == 0 {
            // No whole header survived: start the file again.
            file.set_len(0)?;
            file.write_all(&HEADER)?;
            len = HEADER.len() as u64;
        }
        let mut w = PackWriter::with_file(file, path, len);
        w.chunks = index.chunk_by_digest.clone();
        w.n_chunks = index.chunks.len() as u32;
        for (i, b) in index.blobs.iter().enumerate() {
            let list = index.chunk_list(i as u32);
            w.note_blob(b.digest, list);
        }
        Ok(w)
    }

    fn note_blob(&mut self, digest: [u8; 32], list: Vec<u32>) {
        let ordinal = self.lists.len() as u32;
        self.blobs.insert(digest, ordinal);
        if let Some(first) = list.first() {
            self.by_first.insert(*first, ordinal);
        }
        self.lists.push(list);
    }

    /// Store `bytes` unless present: its new chunks and its index record, in one
    /// append. Returns the bytes' SHA-256 (computed here: a prefix shared with a recent
    /// blob is neither chunked nor hashed again) and what was done.
    pub(crate) fn put(&mut self, bytes: &[u8]) -> io::Result<([u8; 32], Put)> {
        if let Some(why) = &self.broken {
            return Err(io::Error::other(format!(
                "the pack is broken by an earlier failure: {why}"
            )));
        }
        let mut out = Vec::with_capacity(bytes.len() / 2 + 128);
        let mut list = Vec::new();
        let mut ends = Vec::new();
        let mut fresh: Vec<([u8; 32], u32)> = Vec::new();
        let mut next = self.n_chunks;
        // Chunks of a recent blob this one starts with, and the hash state after them:
        // the same bytes from the same start cut the same way, as long as both blobs go
        // on for at least a maximal chunk past it (FastCDC's cut depends on the bytes,
        // and on the length left only below that). The rest is chunked afresh.
        let (resume, mut hasher) = self.reuse_prefix(bytes, &mut list, &mut ends);
        for c in fastcdc::v2020::FastCDC::new(&bytes[resume..], MIN_CHUNK, AVG_CHUNK, MAX_CHUNK) {
            let start = resume + c.offset;
            let raw = &bytes[start..start + c.length];
            hasher.update(raw);
            let d: [u8; 32] = Sha256::digest(raw).into();
            let known = self
                .chunks
                .get(&d)
                .copied()
                .or_else(|| fresh.iter().find(|(f, _)| *f == d).map(|(_, o)| *o));
            let ordinal = match known {
                Some(o) => o,
                None => {
                    let zc = match &mut self.zstd {
                        Some(z) => z,
                        slot => slot.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL)?),
                    };
                    let frame = zc.compress(raw)?;
                    let body_len = CHUNK_FIXED as usize + frame.len();
                    out.push(KIND_CHUNK);
                    out.extend_from_slice(&(body_len as u32).to_le_bytes());
                    out.extend_from_slice(&d);
                    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
                    out.extend_from_slice(&frame);
                    let o = next;
                    next += 1;
                    fresh.push((d, o));
                    o
                }
            };
            list.push(ordinal);
            ends.push((ordinal, start + c.length, hasher.clone()));
        }
        let digest: [u8; 32] = hasher.finalize().into();
        if self.blobs.contains_key(&digest) {
            return Ok((digest, Put::Present));
        }
        // A base: the latest blob starting with the same chunk, if it shares enough.
        let (base, shared) = list
            .first()
            .and_then(|f| self.by_first.get(f))
            .map(|&b| {
                let prev = &self.lists[b as usize];
                let n = prev.iter().zip(&list).take_while(|(a, b)| a == b).count();
                (b, n)
            })
            .filter(|(_, n)| *n >= MIN_SHARED)
            .map_or((0u32, 0usize), |(b, n)| (b + 1, n));
        let own = &list[shared..];
        let body_len = BLOB_FIXED as usize + 4 * own.len();
        out.push(KIND_BLOB);
        out.extend_from_slice(&(body_len as u32).to_le_bytes());
        out.extend_from_slice(&digest);
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(&base.to_le_bytes());
        out.extend_from_slice(&(shared as u32).to_le_bytes());
        out.extend_from_slice(&(own.len() as u32).to_le_bytes());
        for o in own {
            out.extend_from_slice(&o.to_le_bytes());
        }
        if let Err(e) = (&*self.file).write_all(&out) {
            // Cut what was appended so the pack stays whole records; if even that fails
            // the pack's tail is torn, which a reader treats like a torn log line.
            if let Err(cut) = self.file.set_len(self.len) {
                self.broken = Some(format!("{e}; cutting the partial record failed: {cut}"));
            }
            return Err(e);
        }
        self.len += out.len() as u64;
        for (d, o) in fresh {
            self.chunks.insert(d, o);
        }
        self.n_chunks = next;
        self.note_blob(digest, list);
        if bytes.len() <= RECENT_MAX_BYTES && ends.len() > 1 {
            if self.recent.len() == RECENT_BLOBS {
                self.recent.remove(0);
            }
            self.recent.push(Recent {
                bytes: bytes.to_vec(),
                ends,
            });
        }
        Ok((digest, Put::Written))
    }

    /// Fill `list`/`ends` with the leading chunks `bytes` shares with the recent blob it
    /// shares most with; returns where chunking resumes (0 when none is shared) and the
    /// hash state after the shared bytes.
    fn reuse_prefix(
        &self,
        bytes: &[u8],
        list: &mut Vec<u32>,
        ends: &mut Vec<(u32, usize, Sha256)>,
    ) -> (usize, Sha256) {
        let max = MAX_CHUNK as usize;
        // For each recent blob, how many of its leading chunks this one repeats: the
        // chunk [start, end) is cut the same way in both blobs when its bytes are equal
        // and both have at least a maximal chunk left from its start.
        let shared = |r: &Recent| {
            let mut start = 0;
            let mut n = 0;
            for &(_, end, _) in &r.ends {
                if r.bytes.len() - start < max
                    || bytes.len() - start < max
                    || bytes.len() < end
                    || r.bytes[start..end] != bytes[start..end]
                {
                    break;
                }
                n += 1;
                start = end;
            }
            n
        };
        let best = self
            .recent
            .iter()
            .map(|r| (r, shared(r)))
            .filter(|(_, n)| *n > 0)
            .max_by_key(|(_, n)| *n);
        let Some((r, n)) = best else {
            return (0, Sha256::new());
        };
        for (ordinal, end, state) in &r.ends[..n] {
            list.push(*ordinal);
            ends.push((*ordinal, *end, state.clone()));
        }
        let (_, end, state) = &r.ends[n - 1];
        (*end, state.clone())
    }

    /// Bytes in the pack.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

/// Rewrite the pack at `path` keeping only the blobs `keep` (ordinals into `reader`'s
/// index, each checked while copied), to a temporary file in the same folder; returns
/// the temporary path, synced when `sync`. The caller renames it into place.
pub(crate) fn rewrite<S: PackSource>(
    reader: &BlobReader<S>,
    keep: &[u32],
    dir: &Path,
    sync: bool,
) -> io::Result<PathBuf> {
    let tmp = crate::fsutil::temp_path(dir, "pack");
    let result = (|| {
        let mut w = PackWriter::create(&tmp)?;
        for &b in keep {
            let bytes = reader
                .read(b)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            w.put(&bytes)?;
        }
        if sync {
            w.file.sync_data()?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack_of(blobs: &[&[u8]]) -> Vec<u8> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "provrun-pack-unit-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pack");
        let mut w = PackWriter::create(&path).unwrap();
        for b in blobs {
            let (d, _) = w.put(b).unwrap();
            assert_eq!(d, <[u8; 32]>::from(Sha256::digest(b)));
        }
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        bytes
    }

    fn text(n: usize, seed: u64) -> Vec<u8> {
        // Deterministic, poorly compressible bytes.
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                b'a' + ((x >> 33) % 26) as u8
            })
            .collect()
    }

    #[test]
    fn blobs_round_trip_and_a_grown_blob_stores_only_its_new_chunks() {
        let a = text(100_000, 1);
        let mut b = a.clone();
        b.extend(text(10_000, 2));
        let empty: &[u8] = b"";
        let pack = pack_of(&[&a, &b, empty, b"tiny"]);
        let reader = BlobReader::new(pack.as_slice()).unwrap();
        let idx = reader.index();
        assert_eq!(idx.blobs.len(), 4);
        assert!(idx.torn.is_none());
        assert_eq!(idx.good_len, pack.len() as u64);
        for (i, want) in [&a[..], &b[..], empty, b"tiny"].iter().enumerate() {
            assert_eq!(reader.read(i as u32).unwrap(), *want);
        }
        // The second blob shares the first one's leading chunks through its base.
        assert_eq!(idx.blobs[1].base, Some(0));
        assert!(idx.blobs[1].base_chunks >= 3);
        // Only its tail was stored again: the pack is far smaller than both blobs.
        let stored: u64 = idx.chunks.iter().map(|c| u64::from(c.raw_len)).sum();
        assert!(
            stored < (a.len() + 40_000) as u64,
            "stored {stored} raw bytes"
        );
    }

    #[test]
    fn reusing_a_recent_blobs_chunks_cuts_as_chunking_afresh_does() {
        let chunk_digests = |blobs: &[&[u8]]| -> Vec<[u8; 32]> {
            let pack = pack_of(blobs);
            let idx = read_index(pack.as_slice()).unwrap();
            let last = idx.blobs.len() as u32 - 1;
            idx.chunk_list(last)
                .into_iter()
                .map(|c| idx.chunks[c as usize].digest)
                .collect()
        };
        let a = text(300_000, 5);
        for extra in [0usize, 10, 5_000, 70_000] {
            let mut b = a.clone();
            b.extend(text(extra, 6));
            let alone = chunk_digests(&[&b]);
            let after = chunk_digests(&[&a, &b]);
            assert_eq!(alone, after, "{extra} bytes more");
        }
        // And a blob that differs early shares nothing it should not.
        let mut c = a.clone();
        c[100] ^= 1;
        assert_eq!(chunk_digests(&[&c]), chunk_digests(&[&a, &c]));
    }

    #[test]
    fn every_flipped_byte_is_caught_and_every_cut_is_torn() {
        let a = text(20_000, 3);
        let mut b = a.clone();
        b.extend(text(5_000, 4));
        let pack = pack_of(&[&a, &b]);
        let check_all = |bytes: &[u8]| -> Result<(), PackError> {
            let r = BlobReader::new(bytes)?;
            if r.index().torn.is_some() {
                return Err(err(0, Region::Record, "torn"));
            }
            for c in &r.index().chunks {
                read_chunk(bytes, c)?;
            }
            // Checking all blobs at once (resuming hash states) agrees with checking
            // each on its own.
            let mut all = Vec::new();
            r.check_all(|_, res| all.push(res.is_ok()));
            let each: Vec<bool> = (0..r.index().blobs.len())
                .map(|i| r.check(i as u32).is_ok())
                .collect();
            assert_eq!(all, each);
            for i in 0..r.index().blobs.len() {
                r.check(i as u32)?;
            }
            let digests: Vec<[u8; 32]> = r.index().blobs.iter().map(|b| b.digest).collect();
            let want: [[u8; 32]; 2] = [Sha256::digest(&a).into(), Sha256::digest(&b).into()];
            if digests != want {
                return Err(err(0, Region::Index, "different blobs"));
            }
            Ok(())
        };
        check_all(&pack).unwrap();
        for i in 0..pack.len() {
            let mut t = pack.clone();
            t[i] ^= 0x20;
            assert!(check_all(&t).is_err(), "flipping byte {i} went unnoticed");
        }
        for cut in 0..pack.len() {
            let idx = read_index(&pack[..cut]).unwrap();
            assert!(idx.good_len <= cut as u64);
            assert_eq!(idx.torn.is_some(), idx.good_len < cut as u64, "cut {cut}");
        }
    }
}
