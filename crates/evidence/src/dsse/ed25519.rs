//! Ed25519 keys as raw 32-byte seeds and public keys: read (raw, hex or PEM), made,
//! written as PEM, named by id. The key types over both algorithms (`keys.rs`) and the
//! envelope's signing build on these; they are also the Ed25519-only interface of earlier
//! versions, kept.

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use ed25519_dalek::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _};
use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::error::{EvidenceError, Result};
use crate::fsutil::sha256_hex;

/// `bytes` as text when it holds a PEM block labelled `label`.
pub(super) fn pem_text<'a>(bytes: &'a [u8], label: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.contains(&format!("-----BEGIN {label}-----"))
        .then_some(text.trim())
}

/// Read a 32-byte Ed25519 key (a private seed or a public key) given either as 32
/// raw bytes or as 64 hex digits (surrounding whitespace ignored).
///
/// # Errors
///
/// [`EvidenceError::Key`] when `bytes` are neither 32 raw bytes nor 64 hex digits.
pub fn parse_key(bytes: &[u8]) -> Result<[u8; 32]> {
    if let Ok(raw) = <[u8; 32]>::try_from(bytes) {
        return Ok(raw);
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| EvidenceError::Key("neither 32 raw bytes nor hex text".into()))?
        .trim();
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out)
        .map_err(|e| EvidenceError::Key(format!("not 64 hex digits: {e}")))?;
    Ok(out)
}

/// Read an Ed25519 private key: a PKCS#8 PEM file, else a raw seed as [`parse_key`]
/// reads it. Returns the 32-byte seed.
///
/// # Errors
///
/// [`EvidenceError::Key`] when a PEM file is not an Ed25519 PKCS#8 key, or other bytes are
/// not a seed [`parse_key`] reads.
pub fn parse_private_key(bytes: &[u8]) -> Result<[u8; 32]> {
    match pem_text(bytes, "PRIVATE KEY") {
        Some(text) => SigningKey::from_pkcs8_pem(text)
            .map(|k| k.to_bytes())
            .map_err(|e| EvidenceError::Key(format!("not an Ed25519 PKCS#8 private key: {e}"))),
        None => parse_key(bytes),
    }
}

/// Read an Ed25519 public key: an SPKI PEM file, else 32 raw bytes or hex as
/// [`parse_key`] reads them. The key must be a valid curve point.
///
/// # Errors
///
/// [`EvidenceError::Key`] when a PEM file is not an Ed25519 SPKI key, other bytes are not a
/// key [`parse_key`] reads, or the key is not a valid curve point.
pub fn parse_public_key(bytes: &[u8]) -> Result<[u8; 32]> {
    let raw = match pem_text(bytes, "PUBLIC KEY") {
        Some(text) => VerifyingKey::from_public_key_pem(text)
            .map(|k| k.to_bytes())
            .map_err(|e| EvidenceError::Key(format!("not an Ed25519 SPKI public key: {e}")))?,
        None => parse_key(bytes)?,
    };
    VerifyingKey::from_bytes(&raw)
        .map_err(|e| EvidenceError::Key(format!("not a valid Ed25519 public key: {e}")))?;
    Ok(raw)
}

/// A new random Ed25519 private seed from the operating system's random source.
///
/// # Errors
///
/// [`EvidenceError::Key`] when the operating system gives no randomness.
pub fn generate_seed() -> Result<[u8; 32]> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| EvidenceError::Key(format!("no randomness from the OS: {e}")))?;
    Ok(seed)
}

/// The seed as a PKCS#8 v1 PEM private key (`-----BEGIN PRIVATE KEY-----`): the seed
/// alone, without the optional public key of v2, which OpenSSL and pyca/cryptography
/// do not read.
///
/// # Errors
///
/// [`EvidenceError::Key`] when the key cannot be encoded.
pub fn private_key_pem(seed: &[u8; 32]) -> Result<String> {
    let bytes = ed25519_dalek::pkcs8::KeypairBytes {
        secret_key: *seed,
        public_key: None,
    };
    bytes
        .to_pkcs8_pem(LineEnding::LF)
        .map(|pem| pem.to_string())
        .map_err(|e| EvidenceError::Key(format!("cannot encode the private key: {e}")))
}

/// The public key as an SPKI PEM public key (`-----BEGIN PUBLIC KEY-----`).
///
/// # Errors
///
/// [`EvidenceError::Key`] when `public` is not a valid Ed25519 public key or cannot be
/// encoded.
pub fn public_key_pem(public: &[u8; 32]) -> Result<String> {
    VerifyingKey::from_bytes(public)
        .map(|k| k.to_public_key_pem(LineEnding::LF))
        .map_err(|e| EvidenceError::Key(format!("not a valid Ed25519 public key: {e}")))?
        .map_err(|e| EvidenceError::Key(format!("cannot encode the public key: {e}")))
}

/// The id of a public key as envelopes name it: hex SHA-256 of its 32 bytes.
pub fn key_id(public: &[u8; 32]) -> String {
    sha256_hex(public)
}

/// The public key of an Ed25519 private seed.
pub fn public_key(seed: &[u8; 32]) -> [u8; 32] {
    SigningKey::from_bytes(seed).verifying_key().to_bytes()
}
