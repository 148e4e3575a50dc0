//! Fuzz target: the pack reader (blob store v2, `blobs/pack`) over arbitrary bytes, from
//! memory and from a file. Nothing may panic; both sources must index the same; and a
//! blob that rebuilds must hash to its digest and have its size.

#![no_main]

use libfuzzer_sys::fuzz_target;
use provrun_evidence::pack::{BlobReader, FileSource, read_chunk, read_index};
use sha2::{Digest as _, Sha256};

fn pack_file() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("provrun-fuzz-pack-{}", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let from_memory = read_index(data);
    let path = pack_file();
    std::fs::write(&path, data).unwrap();
    let from_file = FileSource::open(&path)
        .map_err(|e| e.to_string())
        .and_then(|src| read_index(&src).map_err(|e| e.to_string()));
    assert_eq!(
        from_memory.as_ref().map(|i| (i.chunks.len(), i.blobs.len(), i.good_len, i.torn)).ok(),
        from_file.as_ref().map(|i| (i.chunks.len(), i.blobs.len(), i.good_len, i.torn)).ok(),
        "the file and the bytes index alike"
    );
    let Ok(index) = from_memory else { return };
    assert!(index.good_len <= data.len() as u64);
    for c in &index.chunks {
        if let Ok(raw) = read_chunk(data, c) {
            assert_eq!(raw.len(), c.raw_len as usize);
        }
    }
    let reader = BlobReader::new(data).expect("indexed once, indexes again");
    for (i, b) in index.blobs.iter().enumerate() {
        if let Ok(bytes) = reader.read(i as u32) {
            assert_eq!(bytes.len() as u64, b.size);
            assert_eq!(<[u8; 32]>::from(Sha256::digest(&bytes)), b.digest);
        }
    }
});
