//! DSSE (Dead Simple Signing Envelope) over `statement.json`, signed with Ed25519 or
//! ECDSA P-256.
//!
//! The envelope is written to `statement.dsse.json` beside the statement:
//! `{"payload":<base64 of statement.json's bytes>,"payloadType":"application/vnd.in-toto+json",
//! "signatures":[{"keyid":<the key's id>,"sig":<base64 signature>}]}`,
//! the signature being over `PAE(payloadType, payload bytes)`. Signing and checking need
//! the crate feature `dsse`; [`pae`] is always available.
//!
//! Keys (`PrivateKey`, `PublicKey`, with the `dsse` feature): a private key is read from a
//! PKCS#8 PEM file (`-----BEGIN PRIVATE KEY-----`, what `provrun keygen` and `openssl
//! genpkey` write; a P-256 key also from a SEC1 `EC PRIVATE KEY` file), an Ed25519 key also
//! as a raw 32-byte seed (binary or 64 hex digits); a public key from an SPKI PEM file
//! (`-----BEGIN PUBLIC KEY-----`), an Ed25519 one also as 32 raw bytes / hex. A key's id is
//! the hex SHA-256 of its 32 raw public key bytes (Ed25519) or of its SPKI DER encoding
//! (P-256). The functions taking a `[u8; 32]` seed or key are the Ed25519-only interface
//! of earlier versions, kept.

#[cfg(feature = "dsse")]
mod ed25519;
#[cfg(feature = "dsse")]
mod keys;
#[cfg(feature = "dsse")]
mod model_signing;
#[cfg(feature = "dsse")]
pub use ed25519::{
    generate_seed, key_id, parse_key, parse_private_key, parse_public_key, private_key_pem,
    public_key, public_key_pem,
};
#[cfg(feature = "dsse")]
pub use keys::{KeyAlgorithm, PrivateKey, PublicKey};
#[cfg(feature = "dsse")]
pub use model_signing::{
    MODEL_SIGNING_PREDICATE_TYPE, ModelSignature, SIGSTORE_BUNDLE_MEDIA_TYPE, model_signature,
};

/// Name of the envelope file in a bundle.
pub const DSSE_FILE: &str = "statement.dsse.json";

/// DSSE `payloadType` of an in-toto statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// DSSE v1 Pre-Authentication Encoding:
/// `"DSSEv1" SP len(type) SP type SP len(body) SP body`, lengths in ASCII decimal bytes.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

#[cfg(feature = "dsse")]
pub use signing::*;

#[cfg(feature = "dsse")]
mod signing {
    use std::path::{Path, PathBuf};

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as B64;
    use serde_json::{Value, json};

    use super::keys::is_signature_form;
    use super::{DSSE_FILE, IN_TOTO_PAYLOAD_TYPE, PrivateKey, PublicKey, pae};
    use crate::canonical::to_canonical_string;
    use crate::error::{EvidenceError, Result};
    use crate::fsutil::{open_regular, write_atomic};
    use crate::recorder::STATEMENT_FILE;

    /// Sign the bundle's `statement.json` with an Ed25519 seed and write
    /// `statement.dsse.json` atomically ([`sign_bundle_with`] for either algorithm).
    ///
    /// # Errors
    ///
    /// As [`sign_bundle_with`].
    pub fn sign_bundle(bundle: &Path, seed: &[u8; 32]) -> Result<PathBuf> {
        sign_bundle_with(bundle, &PrivateKey::Ed25519(*seed))
    }

    /// Sign the bundle's `statement.json` with `key` (Ed25519 or ECDSA P-256) and write
    /// `statement.dsse.json` atomically, replacing an earlier envelope.
    ///
    /// # Errors
    ///
    /// [`EvidenceError::Io`] when `statement.json` cannot be read (missing, not a regular
    /// file, too large) or the envelope cannot be written.
    pub fn sign_bundle_with(bundle: &Path, key: &PrivateKey) -> Result<PathBuf> {
        let statement_path = bundle.join(STATEMENT_FILE);
        let statement = read_small(&statement_path)
            .map_err(|e| EvidenceError::io("read", &statement_path, e))?;
        let sig = key.sign(&pae(IN_TOTO_PAYLOAD_TYPE, &statement));
        let envelope = json!({
            "payloadType": IN_TOTO_PAYLOAD_TYPE,
            "payload": B64.encode(&statement),
            "signatures": [{
                "keyid": key.public().key_id(),
                "sig": B64.encode(sig),
            }],
        });
        let mut text = to_canonical_string(&envelope)?;
        text.push('\n');
        write_atomic(bundle, DSSE_FILE, text.as_bytes(), true)
            .map_err(|e| EvidenceError::io("write", bundle.join(DSSE_FILE), e))?;
        Ok(bundle.join(DSSE_FILE))
    }

    pub(crate) fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
        use std::io::Read as _;
        let limit = 64 * 1024 * 1024;
        let mut bytes = Vec::new();
        open_regular(path)?
            .take(limit + 1)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "file too large",
            ));
        }
        Ok(bytes)
    }

    /// Check an envelope's form and payload without a key: canonical JSON of exactly
    /// `payload`, `payloadType` (the in-toto type) and `signatures`, a payload that is
    /// exactly `statement`, and at least one signature of the form `{keyid, sig}` with a
    /// base64 signature of 64 bytes (Ed25519) or in DER (ECDSA). Returns the parsed
    /// envelope, or what is wrong.
    pub(crate) fn check_envelope_form(
        envelope: &[u8],
        statement: &[u8],
    ) -> std::result::Result<Envelope, String> {
        let v: Value =
            serde_json::from_slice(envelope).map_err(|e| format!("envelope is not JSON: {e}"))?;
        // Like every JSON file of a bundle, the envelope is canonical JSON and one `\n`,
        // with exactly the members DSSE defines: nothing in it can change unnoticed.
        let mut canonical = to_canonical_string(&v).map_err(|e| e.to_string())?;
        canonical.push('\n');
        if canonical.as_bytes() != envelope {
            return Err("envelope is not canonical JSON followed by a newline".into());
        }
        let exact = |o: &Value, keys: &[&str]| {
            o.as_object()
                .is_some_and(|m| m.len() == keys.len() && keys.iter().all(|k| m.contains_key(*k)))
        };
        if !exact(&v, &["payload", "payloadType", "signatures"]) {
            return Err("envelope members are not exactly payload, payloadType, signatures".into());
        }
        let payload_type = v["payloadType"]
            .as_str()
            .ok_or("envelope has no payloadType")?;
        if payload_type != IN_TOTO_PAYLOAD_TYPE {
            return Err(format!("unexpected payloadType {payload_type:?}"));
        }
        let payload = B64
            .decode(v["payload"].as_str().ok_or("envelope has no payload")?)
            .map_err(|e| format!("payload is not base64: {e}"))?;
        if payload != statement {
            return Err("the signed payload is not statement.json".into());
        }
        let sigs = v["signatures"]
            .as_array()
            .ok_or("envelope has no signatures")?;
        if sigs.is_empty() {
            return Err("envelope has no signatures".into());
        }
        let mut signatures = Vec::new();
        for (i, s) in sigs.iter().enumerate() {
            let keyid = s["keyid"].as_str();
            let raw = s["sig"].as_str().and_then(|t| B64.decode(t).ok());
            match (exact(s, &["keyid", "sig"]), keyid, raw) {
                (true, Some(keyid), Some(raw)) => {
                    if !is_signature_form(&raw) {
                        return Err(format!(
                            "signature {i} is neither 64 bytes (Ed25519) nor a DER ECDSA signature"
                        ));
                    }
                    signatures.push((keyid.to_owned(), raw));
                }
                _ => {
                    return Err(format!(
                        "signature {i} is not {{\"keyid\": text, \"sig\": base64}}"
                    ));
                }
            }
        }
        Ok(Envelope {
            message: pae(payload_type, &payload),
            signatures,
        })
    }

    /// A well-formed envelope: the signed message and its signatures by key id.
    pub(crate) struct Envelope {
        message: Vec<u8>,
        signatures: Vec<(String, Vec<u8>)>,
    }

    impl Envelope {
        /// The key ids the signatures name (unauthenticated in DSSE).
        pub(crate) fn key_ids(&self) -> Vec<&str> {
            self.signatures.iter().map(|(k, _)| k.as_str()).collect()
        }
    }

    /// Check an envelope against the statement's bytes and a public key. Returns a
    /// description of what was verified, or of what is wrong.
    pub(crate) fn check_envelope(
        envelope: &[u8],
        statement: &[u8],
        key: &PublicKey,
    ) -> std::result::Result<String, String> {
        let env = check_envelope_form(envelope, statement)?;
        let keyid = key.key_id();
        for (id, sig) in &env.signatures {
            // The keyid is unauthenticated in DSSE; still, ours must name our key.
            if *id == keyid && key.verify(&env.message, sig) {
                return Ok(format!("statement signed by key {keyid}{}", alg_note(key)));
            }
        }
        Err(format!(
            "no signature verifies with the given key {keyid}{}",
            alg_note(key)
        ))
    }

    /// `" (ecdsa-p256)"` for a P-256 key; nothing for Ed25519, the default.
    fn alg_note(key: &PublicKey) -> String {
        match key {
            PublicKey::Ed25519(_) => String::new(),
            PublicKey::EcdsaP256(_) => format!(" ({})", key.algorithm().as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_matches_the_dsse_spec_vector() {
        // From the DSSE v1 protocol specification.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }
}
