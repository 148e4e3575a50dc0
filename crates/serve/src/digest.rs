//! The SHA-256 digests the server compares and names things by (tokens, agent files).

use sha2::{Digest, Sha256};

/// SHA-256 of `text`.
pub(crate) fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
