//! Writing a pack: [`PackWriter`] cuts each blob into content-defined chunks, stores the
//! new ones compressed and appends the blob's index record (reusing the chunks of a
//! recent blob it starts with); [`rewrite`] copies the blobs a bundle keeps to a new pack.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use super::{
    AVG_CHUNK, BLOB_FIXED, BlobReader, CHUNK_FIXED, HEADER, KIND_BLOB, KIND_CHUNK, MAX_CHUNK,
    MIN_CHUNK, MIN_SHARED, PackIndex, PackSource, ZSTD_LEVEL,
};

/// Appends blobs to a pack: the writer side, kept by the recorder.
///
/// It holds the pack's descriptor only while it is in use: [`PackWriter::park`] gives it
/// back (a run waiting on its model then holds one descriptor, its locked log), and the
/// next write opens the pack again at `path`, refusing a file that is not the one it
/// created or resumed (another device or inode: the pack was moved or replaced).
pub(crate) struct PackWriter {
    /// The open pack, when in use; `None` once parked.
    file: Option<Arc<File>>,
    /// The pack's device and inode, checked whenever it is opened again.
    id: (u64, u64),
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
        PackWriter::with_file(file, path, HEADER.len() as u64)
    }

    fn with_file(file: File, path: &Path, len: u64) -> io::Result<PackWriter> {
        Ok(PackWriter {
            id: file_id(&file)?,
            file: Some(Arc::new(file)),
            path: path.to_path_buf(),
            len,
            chunks: HashMap::new(),
            n_chunks: 0,
            blobs: HashMap::new(),
            lists: Vec::new(),
            by_first: HashMap::new(),
            broken: None,
            recent: Vec::new(),
        })
    }

    /// The open pack: the one in use, else the file at `path` opened again for
    /// appending, which must be the pack this writer made or resumed.
    pub(crate) fn handle(&mut self) -> io::Result<Arc<File>> {
        if let Some(f) = &self.file {
            return Ok(Arc::clone(f));
        }
        let file = std::fs::OpenOptions::new().append(true).open(&self.path)?;
        if file_id(&file)? != self.id {
            return Err(io::Error::other(
                "the pack was moved or replaced while its bundle was being written",
            ));
        }
        let file = Arc::new(file);
        self.file = Some(Arc::clone(&file));
        Ok(file)
    }

    /// Give the pack's descriptor back until the next write (which reopens it).
    pub(crate) fn park(&mut self) {
        self.file = None;
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
        let mut w = PackWriter::with_file(file, path, len)?;
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
        let (resume, mut hasher, base_recent) = self.reuse_prefix(bytes, &mut list, &mut ends);
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
                    let frame = compress(raw)?;
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
        let (base, shared) = self.base_for(&list);
        blob_record(&mut out, digest, bytes.len(), base, shared, &list[shared..]);
        self.append(&out)?;
        for (d, o) in fresh {
            self.chunks.insert(d, o);
        }
        self.n_chunks = next;
        self.note_blob(digest, list);
        if bytes.len() <= RECENT_MAX_BYTES && ends.len() > 1 {
            self.keep_recent(bytes, resume, base_recent, ends);
        }
        Ok((digest, Put::Written))
    }

    /// Keeps `bytes` (chunk ends `ends`) as a recent blob. When it starts with the first
    /// `resume` bytes of recent blob `base`, it takes that blob's place and its buffer,
    /// so only the bytes past the shared prefix are copied (a request that resends a
    /// growing history would otherwise copy the whole history each time).
    fn keep_recent(
        &mut self,
        bytes: &[u8],
        resume: usize,
        base: Option<usize>,
        ends: Vec<(u32, usize, Sha256)>,
    ) {
        let mut buf = match base {
            Some(i) => {
                let mut buf = self.recent.remove(i).bytes;
                buf.truncate(resume);
                buf
            }
            None => {
                if self.recent.len() == RECENT_BLOBS {
                    self.recent.remove(0);
                }
                Vec::with_capacity(bytes.len())
            }
        };
        buf.extend_from_slice(&bytes[buf.len()..]);
        self.recent.push(Recent { bytes: buf, ends });
    }

    /// The base for a blob of chunks `list`: the latest blob starting with the same
    /// chunk, if it shares enough, as its ordinal plus one and the count of leading chunks
    /// shared; `(0, 0)` for none.
    fn base_for(&self, list: &[u32]) -> (u32, usize) {
        list.first()
            .and_then(|f| self.by_first.get(f))
            .map(|&b| {
                let prev = &self.lists[b as usize];
                let n = prev.iter().zip(list).take_while(|(a, b)| a == b).count();
                (b, n)
            })
            .filter(|(_, n)| *n >= MIN_SHARED)
            .map_or((0u32, 0usize), |(b, n)| (b + 1, n))
    }

    /// Appends `out` (whole records) to the pack.
    fn append(&mut self, out: &[u8]) -> io::Result<()> {
        let file = self.handle()?;
        if let Err(e) = (&*file).write_all(out) {
            // Cut what was appended so the pack stays whole records; if even that fails
            // the pack's tail is torn, which a reader treats like a torn log line.
            if let Err(cut) = file.set_len(self.len) {
                self.broken = Some(format!("{e}; cutting the partial record failed: {cut}"));
            }
            return Err(e);
        }
        self.len += out.len() as u64;
        Ok(())
    }

    /// Fill `list`/`ends` with the leading chunks `bytes` shares with the recent blob it
    /// shares most with; returns where chunking resumes (0 when none is shared), the
    /// hash state after the shared bytes, and which recent blob it was.
    fn reuse_prefix(
        &self,
        bytes: &[u8],
        list: &mut Vec<u32>,
        ends: &mut Vec<(u32, usize, Sha256)>,
    ) -> (usize, Sha256, Option<usize>) {
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
        // The blobs with the most chunks first: one that cannot share more chunks than
        // the best found so far is not compared at all.
        let mut order: Vec<usize> = (0..self.recent.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.recent[i].ends.len()));
        let mut best: Option<(usize, usize)> = None;
        for i in order {
            if best.is_some_and(|(_, n)| n >= self.recent[i].ends.len()) {
                break;
            }
            let n = shared(&self.recent[i]);
            if n > best.map_or(0, |(_, b)| b) {
                best = Some((i, n));
            }
        }
        let Some((i, n)) = best else {
            return (0, Sha256::new(), None);
        };
        let r = &self.recent[i];
        for (ordinal, end, state) in &r.ends[..n] {
            list.push(*ordinal);
            ends.push((*ordinal, *end, state.clone()));
        }
        let (_, end, state) = &r.ends[n - 1];
        (*end, state.clone(), Some(i))
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
            w.handle()?.sync_data()?;
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

/// A file's device and inode.
fn file_id(file: &File) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// `raw` as one zstd frame, with this thread's compression context (one per thread, not
/// one per writer: thousands of runs in flight would each keep one otherwise).
fn compress(raw: &[u8]) -> io::Result<Vec<u8>> {
    thread_local! {
        static ZSTD: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    ZSTD.with(|slot| {
        let mut slot = slot.borrow_mut();
        let zc = match &mut *slot {
            Some(z) => z,
            empty => empty.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL)?),
        };
        zc.compress(raw)
    })
}

/// Writes a blob's index record to `out`: its digest and size, its base (ordinal plus one,
/// 0 for none) and the chunks taken from it, then its own chunks.
fn blob_record(
    out: &mut Vec<u8>,
    digest: [u8; 32],
    size: usize,
    base: u32,
    shared: usize,
    own: &[u32],
) {
    let body_len = BLOB_FIXED as usize + 4 * own.len();
    out.push(KIND_BLOB);
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&digest);
    out.extend_from_slice(&(size as u64).to_le_bytes());
    out.extend_from_slice(&base.to_le_bytes());
    out.extend_from_slice(&(shared as u32).to_le_bytes());
    out.extend_from_slice(&(own.len() as u32).to_le_bytes());
    for o in own {
        out.extend_from_slice(&o.to_le_bytes());
    }
}
