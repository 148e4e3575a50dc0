//! Signing keys of the two algorithms provrun signs with: Ed25519 (the default) and ECDSA
//! over NIST P-256 with SHA-256 (what the OpenSSF model-signing tool and other NIST-only
//! verifiers accept).
//!
//! Files: a private key is a PKCS#8 PEM file (`-----BEGIN PRIVATE KEY-----`; for P-256 a
//! SEC1 `-----BEGIN EC PRIVATE KEY-----` file is read too, as `openssl ecparam -genkey`
//! writes it), a public key an SPKI PEM file (`-----BEGIN PUBLIC KEY-----`). Ed25519 keys
//! are also read as 32 raw bytes or 64 hex digits, as before.
//!
//! Signatures: Ed25519's 64 bytes; ECDSA's ASN.1 DER `Ecdsa-Sig-Value` over the SHA-256 of
//! the message (the form DSSE implementations, Sigstore bundles and OpenSSL use).
//! Key ids: Ed25519's is the hex SHA-256 of its 32 raw bytes (unchanged); P-256's the hex
//! SHA-256 of its SPKI DER encoding.

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use ed25519_dalek::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _};
use ed25519_dalek::{Signer as _, Verifier as _};

use crate::error::{EvidenceError, Result};
use crate::fsutil::sha256_hex;

/// Which algorithm a key is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyAlgorithm {
    /// Ed25519 (RFC 8032): 64-byte signatures.
    Ed25519,
    /// ECDSA on NIST P-256 with SHA-256: DER signatures.
    EcdsaP256,
}

impl KeyAlgorithm {
    /// The name `provrun keygen --algorithm` takes and messages use.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyAlgorithm::Ed25519 => "ed25519",
            KeyAlgorithm::EcdsaP256 => "ecdsa-p256",
        }
    }
}

/// A private signing key.
#[derive(Clone)]
pub enum PrivateKey {
    /// An Ed25519 key by its 32-byte seed.
    Ed25519([u8; 32]),
    /// An ECDSA P-256 key.
    EcdsaP256(Box<p256::ecdsa::SigningKey>),
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PrivateKey({}, key id {})",
            self.algorithm().as_str(),
            self.public().key_id()
        )
    }
}

/// A public key, to check signatures with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// An Ed25519 key by its 32 bytes (a valid curve point).
    Ed25519([u8; 32]),
    /// An ECDSA P-256 key.
    EcdsaP256(p256::ecdsa::VerifyingKey),
}

fn key_error(what: impl std::fmt::Display) -> EvidenceError {
    EvidenceError::Key(what.to_string())
}

impl PrivateKey {
    /// A new random key of `algorithm`, from the operating system's random source.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Key`] when the operating system gives no randomness.
    pub fn generate(algorithm: KeyAlgorithm) -> Result<PrivateKey> {
        match algorithm {
            KeyAlgorithm::Ed25519 => super::ed25519::generate_seed().map(PrivateKey::Ed25519),
            KeyAlgorithm::EcdsaP256 => loop {
                // A random scalar; the rare value outside 1..n is drawn again.
                let seed = super::ed25519::generate_seed()?;
                if let Ok(key) = p256::ecdsa::SigningKey::from_slice(&seed) {
                    return Ok(PrivateKey::EcdsaP256(Box::new(key)));
                }
            },
        }
    }

    /// Read a private key: a PKCS#8 PEM file of either algorithm, a SEC1 PEM file of a
    /// P-256 key, or an Ed25519 seed as 32 raw bytes or 64 hex digits.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Key`] when `bytes` are none of these forms, or a PEM file does not
    /// hold a key of a supported algorithm.
    pub fn parse(bytes: &[u8]) -> Result<PrivateKey> {
        if let Some(text) = super::ed25519::pem_text(bytes, "PRIVATE KEY") {
            if let Ok(k) = ed25519_dalek::SigningKey::from_pkcs8_pem(text) {
                return Ok(PrivateKey::Ed25519(k.to_bytes()));
            }
            return p256::ecdsa::SigningKey::from_pkcs8_pem(text)
                .map(|k| PrivateKey::EcdsaP256(Box::new(k)))
                .map_err(|e| {
                    key_error(format!(
                        "not an Ed25519 or ECDSA P-256 PKCS#8 private key: {e}"
                    ))
                });
        }
        if let Some(text) = super::ed25519::pem_text(bytes, "EC PRIVATE KEY") {
            return p256::SecretKey::from_sec1_pem(text)
                .map(|k| PrivateKey::EcdsaP256(Box::new(k.into())))
                .map_err(|e| key_error(format!("not an ECDSA P-256 SEC1 private key: {e}")));
        }
        super::ed25519::parse_key(bytes).map(PrivateKey::Ed25519)
    }

    /// The algorithm the key is for.
    pub fn algorithm(&self) -> KeyAlgorithm {
        match self {
            PrivateKey::Ed25519(_) => KeyAlgorithm::Ed25519,
            PrivateKey::EcdsaP256(_) => KeyAlgorithm::EcdsaP256,
        }
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        match self {
            PrivateKey::Ed25519(seed) => PublicKey::Ed25519(super::ed25519::public_key(seed)),
            PrivateKey::EcdsaP256(k) => PublicKey::EcdsaP256(*k.verifying_key()),
        }
    }

    /// The key as a PKCS#8 PEM private key file (for Ed25519 the seed alone, PKCS#8 v1,
    /// which OpenSSL and pyca/cryptography read).
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Key`] when the key cannot be encoded.
    pub fn to_pem(&self) -> Result<String> {
        match self {
            PrivateKey::Ed25519(seed) => super::private_key_pem(seed),
            PrivateKey::EcdsaP256(k) => k
                .to_pkcs8_pem(LineEnding::LF)
                .map(|pem| pem.to_string())
                .map_err(|e| key_error(format!("cannot encode the private key: {e}"))),
        }
    }

    /// Sign `message`: Ed25519's 64 bytes, or ECDSA-SHA256 as DER.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        match self {
            PrivateKey::Ed25519(seed) => ed25519_dalek::SigningKey::from_bytes(seed)
                .sign(message)
                .to_bytes()
                .to_vec(),
            PrivateKey::EcdsaP256(k) => {
                let sig: p256::ecdsa::Signature = k.sign(message);
                sig.to_der().as_bytes().to_vec()
            }
        }
    }
}

impl PublicKey {
    /// Read a public key: an SPKI PEM file of either algorithm, or an Ed25519 key as 32
    /// raw bytes or 64 hex digits. The key must be a valid curve point.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Key`] when `bytes` are none of these forms, or the key is not a
    /// valid curve point.
    pub fn parse(bytes: &[u8]) -> Result<PublicKey> {
        if let Some(text) = super::ed25519::pem_text(bytes, "PUBLIC KEY") {
            if let Ok(k) = ed25519_dalek::VerifyingKey::from_public_key_pem(text) {
                return Ok(PublicKey::Ed25519(k.to_bytes()));
            }
            return p256::ecdsa::VerifyingKey::from_public_key_pem(text)
                .map(PublicKey::EcdsaP256)
                .map_err(|e| {
                    key_error(format!(
                        "not an Ed25519 or ECDSA P-256 SPKI public key: {e}"
                    ))
                });
        }
        super::parse_public_key(bytes).map(PublicKey::Ed25519)
    }

    /// The algorithm the key is for.
    pub fn algorithm(&self) -> KeyAlgorithm {
        match self {
            PublicKey::Ed25519(_) => KeyAlgorithm::Ed25519,
            PublicKey::EcdsaP256(_) => KeyAlgorithm::EcdsaP256,
        }
    }

    /// The key's id as envelopes name it: the hex SHA-256 of the 32 key bytes (Ed25519) or
    /// of the SPKI DER encoding (P-256).
    pub fn key_id(&self) -> String {
        match self {
            PublicKey::Ed25519(raw) => sha256_hex(raw),
            PublicKey::EcdsaP256(k) => k
                .to_public_key_der()
                .map(|der| sha256_hex(der.as_bytes()))
                .unwrap_or_default(),
        }
    }

    /// The key as an SPKI PEM public key file.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Key`] when the key cannot be encoded (for Ed25519, not a valid
    /// curve point).
    pub fn to_pem(&self) -> Result<String> {
        match self {
            PublicKey::Ed25519(raw) => super::public_key_pem(raw),
            PublicKey::EcdsaP256(k) => k
                .to_public_key_pem(LineEnding::LF)
                .map_err(|e| key_error(format!("cannot encode the public key: {e}"))),
        }
    }

    /// Whether `signature` (in the key's form: 64 bytes, or DER) is a valid signature of
    /// `message` by this key. Ed25519 is checked strictly (no small-order keys or
    /// malleable signatures).
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        match self {
            PublicKey::Ed25519(raw) => {
                let (Ok(key), Ok(sig)) = (
                    ed25519_dalek::VerifyingKey::from_bytes(raw),
                    ed25519_dalek::Signature::from_slice(signature),
                ) else {
                    return false;
                };
                key.verify_strict(message, &sig).is_ok()
            }
            PublicKey::EcdsaP256(k) => p256::ecdsa::DerSignature::from_bytes(signature)
                .is_ok_and(|sig| k.verify(message, &sig).is_ok()),
        }
    }
}

/// Whether `signature` has the form of a signature of either algorithm: 64 bytes
/// (Ed25519), or a DER ECDSA P-256 signature.
pub(super) fn is_signature_form(signature: &[u8]) -> bool {
    signature.len() == 64 || p256::ecdsa::DerSignature::from_bytes(signature).is_ok()
}
