//! Unit tests of the pack: round trips, prefix reuse cutting as fresh chunking does,
//! and every flipped byte or cut of a pack caught.

use sha2::{Digest as _, Sha256};

use super::write::PackWriter;
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

/// Requests that resend a growing history with a changing end (as a request body's
/// closing members), between small blobs and a second history: each blob's recent
/// buffer is taken over by the next one, and every blob still reads back and cuts as it
/// would alone.
#[test]
fn a_chain_of_growing_blobs_reads_back_and_cuts_as_each_alone() {
    let mut history = text(70_000, 7);
    let mut other = text(140_000, 8);
    let mut blobs: Vec<Vec<u8>> = Vec::new();
    for step in 0..12u64 {
        history.extend(text(3_000 + 4_000 * (step as usize % 3), 100 + step));
        let mut request = history.clone();
        request.extend(format!("],\"step\":{step}}}").bytes());
        blobs.push(request);
        blobs.push(format!("answer {step}").into_bytes());
        if step % 4 == 1 {
            other.extend(text(9_000, 200 + step));
            blobs.push(other.clone());
        }
    }
    let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    let pack = pack_of(&refs);
    let reader = BlobReader::new(pack.as_slice()).unwrap();
    let idx = reader.index();
    assert_eq!(idx.blobs.len(), blobs.len());
    for (i, want) in blobs.iter().enumerate() {
        assert_eq!(&reader.read(i as u32).unwrap(), want, "blob {i}");
        let alone = pack_of(&[want]);
        let alone = read_index(alone.as_slice()).unwrap();
        let digests = |idx: &PackIndex, b: u32| -> Vec<[u8; 32]> {
            idx.chunk_list(b)
                .into_iter()
                .map(|c| idx.chunks[c as usize].digest)
                .collect()
        };
        assert_eq!(digests(idx, i as u32), digests(&alone, 0), "blob {i}");
    }
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

/// A writer that gives its descriptor back between blobs writes the same pack as one
/// that keeps it, and refuses to write to a file put in the pack's place meanwhile.
#[test]
fn a_parked_writer_reopens_the_same_pack_and_refuses_a_replaced_one() {
    let dir = std::env::temp_dir().join(format!("provrun-pack-park-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let blobs = [text(100_000, 1), text(120_000, 1), text(3_000, 2)];
    let path = dir.join("pack");
    let mut w = PackWriter::create(&path).unwrap();
    for b in &blobs {
        w.park();
        w.put(b).unwrap();
    }
    let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    assert_eq!(std::fs::read(&path).unwrap(), pack_of(&refs));
    // Moved with its folder (as a begun bundle is renamed into place): still the pack.
    let moved = dir.join("moved");
    std::fs::rename(&path, &moved).unwrap();
    w.path = moved.clone();
    w.park();
    w.put(&text(5_000, 3)).expect("the same file, moved");
    // Replaced by another file of the same name: refused, nothing written to it.
    w.park();
    std::fs::rename(&moved, dir.join("old")).unwrap();
    std::fs::write(&moved, HEADER).unwrap();
    let Err(err) = w.put(&text(6_000, 4)) else {
        panic!("a replaced pack was written to");
    };
    assert!(err.to_string().contains("moved or replaced"), "{err}");
    assert_eq!(std::fs::read(&moved).unwrap(), HEADER);
    std::fs::remove_dir_all(&dir).unwrap();
}
