//! The program's stdout and stderr: passed on to the runtime's own as they come, hashed,
//! counted, and kept up to [`KEEP_BYTES`] for the bundle.

use std::io::{Read, Write};
use std::thread::JoinHandle;

use sha2::{Digest as _, Sha256};

/// How much of each stream the bundle keeps (as a blob); the digest and size always
/// cover all of it.
pub const KEEP_BYTES: usize = 4 << 20;

/// What one stream carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teed {
    /// SHA-256 hex of all of it.
    pub sha256: String,
    /// Its length.
    pub size: u64,
    /// The bytes, when all of them fit in [`KEEP_BYTES`].
    pub kept: Option<Vec<u8>>,
}

/// Where a stream is passed on to.
#[derive(Debug, Clone, Copy)]
pub enum Sink {
    /// The runtime's stdout.
    Stdout,
    /// The runtime's stderr.
    Stderr,
    /// Nowhere (only hashed and kept).
    Nowhere,
}

/// Reads `from` to its end on a thread, passing each read on to `sink` at once.
pub fn tee(from: impl Read + Send + 'static, sink: Sink) -> JoinHandle<Teed> {
    std::thread::spawn(move || {
        let mut from = from;
        let mut hash = Sha256::new();
        let mut size = 0u64;
        let mut kept = Vec::new();
        let mut fits = true;
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let chunk = &buf[..n];
            hash.update(chunk);
            size += n as u64;
            if fits && kept.len() + n <= KEEP_BYTES {
                kept.extend_from_slice(chunk);
            } else {
                fits = false;
                kept = Vec::new();
            }
            // A closed stdout (`provrun wrap … | head`) does not stop the reading.
            let _ = match sink {
                Sink::Stdout => {
                    let mut out = std::io::stdout().lock();
                    out.write_all(chunk).and_then(|()| out.flush())
                }
                Sink::Stderr => std::io::stderr().lock().write_all(chunk),
                Sink::Nowhere => Ok(()),
            };
        }
        Teed {
            sha256: hex::encode(hash.finalize()),
            size,
            kept: fits.then_some(kept),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_hashed_counted_and_kept() {
        let t = tee(&b"hello\n"[..], Sink::Nowhere).join().unwrap();
        assert_eq!(t.size, 6);
        assert_eq!(
            t.sha256,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(t.kept.as_deref(), Some(&b"hello\n"[..]));
        let big = vec![b'x'; KEEP_BYTES + 1];
        let t = tee(std::io::Cursor::new(big), Sink::Nowhere)
            .join()
            .unwrap();
        assert_eq!(t.size, KEEP_BYTES as u64 + 1);
        assert!(t.kept.is_none());
    }
}
