//! A pack's index: the record entries ([`ChunkEntry`], [`BlobEntry`]), [`read_index`],
//! which checks the header, every record's framing and every reference between records
//! without reading chunk data, and a blob's whole chunk list through its bases.

use std::collections::HashMap;
use std::io;

use super::{
    BLOB_FIXED, CHUNK_FIXED, HEADER, KIND_BLOB, KIND_CHUNK, MAX_BODY, MAX_CHUNK, MAX_CHUNK_BODY,
    PackError, PackSource, RECORD_HEADER, Region, err,
};

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

fn io_err(at: u64, region: Region, e: io::Error) -> PackError {
    err(at, region, format!("cannot read: {e}"))
}

/// What the first bytes of a pack say.
enum Header {
    /// The pack header: records follow.
    Valid,
    /// No header, or a torn one (all of it zeros, or a true prefix of the header): the
    /// pack holds nothing, with this torn tail if any bytes are there.
    Empty(Option<TornTail>),
}

/// Checks the pack header (the first 16 bytes of a pack `len` bytes long).
fn read_header<S: PackSource + ?Sized>(src: &S, len: u64) -> Result<Header, PackError> {
    let head_len = len.min(HEADER.len() as u64) as usize;
    let mut head = [0u8; 16];
    src.read_at(0, &mut head[..head_len])
        .map_err(|e| io_err(0, Region::Header, e))?;
    if head_len < HEADER.len() {
        let zeros = head[..head_len].iter().all(|b| *b == 0);
        if !zeros && head[..head_len] != HEADER[..head_len] {
            return Err(err(0, Region::Header, "not a provrun pack header"));
        }
        return Ok(Header::Empty((head_len > 0).then_some(TornTail {
            offset: 0,
            len,
            zeros,
        })));
    }
    if head != HEADER {
        if head.iter().all(|b| *b == 0) && all_zero(src, 0) {
            return Ok(Header::Empty(Some(TornTail {
                offset: 0,
                len,
                zeros: true,
            })));
        }
        return Err(err(
            0,
            Region::Header,
            "not a provrun pack header (magic or version differs)",
        ));
    }
    Ok(Header::Valid)
}

/// Read a pack's index: check the header and the framing of every record, and every
/// reference between records. Chunk *data* is not read here (see [`read_chunk`](super::read_chunk)).
/// A torn end is reported in [`PackIndex::torn`], not as an error.
///
/// # Errors
///
/// [`PackError`], with the offset and region at fault, when the header is not a provrun
/// pack's, a record cannot be read or is badly framed, or a reference between records does
/// not hold.
pub fn read_index<S: PackSource + ?Sized>(src: &S) -> Result<PackIndex, PackError> {
    let mut index = PackIndex::default();
    let len = src.len();
    if let Header::Empty(torn) = read_header(src, len)? {
        index.torn = torn;
        return Ok(index);
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
            add_chunk(src, &mut index, at, body_len)?;
        } else {
            add_blob(src, &mut index, at, body_len, end)?;
        }
        at = end;
        index.good_len = at;
    }
    Ok(index)
}

/// Indexes the chunk record at `at` (its framing already checked): its digest and raw
/// length are read and checked, its data is not.
fn add_chunk<S: PackSource + ?Sized>(
    src: &S,
    index: &mut PackIndex,
    at: u64,
    body_len: u32,
) -> Result<(), PackError> {
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
    let ordinal =
        u32::try_from(index.chunks.len()).map_err(|_| err(at, Region::Chunk, "too many chunks"))?;
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
    Ok(())
}

/// Indexes the blob record at `at` (ending at `end`, its framing already checked): read
/// whole and its base and chunk references checked (`parse_blob`).
fn add_blob<S: PackSource + ?Sized>(
    src: &S,
    index: &mut PackIndex,
    at: u64,
    body_len: u32,
    end: u64,
) -> Result<(), PackError> {
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
    let entry = parse_blob(index, &body, at, end)?;
    let ordinal =
        u32::try_from(index.blobs.len()).map_err(|_| err(at, Region::Index, "too many blobs"))?;
    if index.blob_by_digest.insert(entry.digest, ordinal).is_some() {
        return Err(err(
            at,
            Region::Index,
            "a blob with this digest is indexed twice",
        ));
    }
    index.blobs.push(entry);
    Ok(())
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
