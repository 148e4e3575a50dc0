//! Blob store v2: every blob of a bundle in one append-only pack file, `blobs/pack`,
//! cut into content-defined chunks (FastCDC) that are stored once each, compressed with
//! zstd, and an index record per blob naming its chunks.
//!
//! The format is specified byte by byte in `docs/evidence.md` (§4b). This module reads
//! and writes it; nothing here trusts the bytes it reads: every length is bounded, every
//! reference checked, and a hostile pack yields a [`PackError`], never a panic.
//!
//! The code: `source` (random access to a pack's bytes), `index` (the records and their
//! framing), `read` (chunks and blobs read back and checked), `write` (the writer).

mod index;
mod read;
mod source;
#[cfg(test)]
mod tests;
mod write;

pub use index::{BlobEntry, ChunkEntry, PackIndex, TornTail, read_index};
pub use read::{BlobReader, read_chunk};
pub use source::{FileSource, PackSource};
pub(crate) use write::{PackWriter, rewrite};

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
