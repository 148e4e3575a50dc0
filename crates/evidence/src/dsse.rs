//! DSSE (Dead Simple Signing Envelope) over `statement.json`, signed with Ed25519.
//!
//! The envelope is written to `statement.dsse.json` beside the statement:
//! `{"payload":<base64 of statement.json's bytes>,"payloadType":"application/vnd.in-toto+json",
//! "signatures":[{"keyid":<hex SHA-256 of the public key>,"sig":<base64 signature>}]}`,
//! the signature being over `PAE(payloadType, payload bytes)`. Signing and checking need
//! the crate feature `dsse`; [`pae`] is always available.

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
    use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
    use serde_json::{Value, json};

    use super::{DSSE_FILE, IN_TOTO_PAYLOAD_TYPE, pae};
    use crate::canonical::to_canonical_string;
    use crate::error::{EvidenceError, Result};
    use crate::fsutil::{open_regular, sha256_hex, write_atomic};
    use crate::recorder::STATEMENT_FILE;

    /// Read a 32-byte Ed25519 key (a private seed or a public key) given either as 32
    /// raw bytes or as 64 hex digits (surrounding whitespace ignored).
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

    /// The public key of an Ed25519 private seed.
    pub fn public_key(seed: &[u8; 32]) -> [u8; 32] {
        SigningKey::from_bytes(seed).verifying_key().to_bytes()
    }

    /// Sign the bundle's `statement.json` and write `statement.dsse.json` atomically.
    pub fn sign_bundle(bundle: &Path, seed: &[u8; 32]) -> Result<PathBuf> {
        let statement_path = bundle.join(STATEMENT_FILE);
        let statement = read_small(&statement_path)
            .map_err(|e| EvidenceError::io("read", &statement_path, e))?;
        let key = SigningKey::from_bytes(seed);
        let sig = key.sign(&pae(IN_TOTO_PAYLOAD_TYPE, &statement));
        let envelope = json!({
            "payloadType": IN_TOTO_PAYLOAD_TYPE,
            "payload": B64.encode(&statement),
            "signatures": [{
                "keyid": sha256_hex(key.verifying_key().as_bytes()),
                "sig": B64.encode(sig.to_bytes()),
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

    /// Check an envelope against the statement's bytes and a public key. Returns a
    /// description of what was verified, or of what is wrong.
    pub(crate) fn check_envelope(
        envelope: &[u8],
        statement: &[u8],
        public: &[u8; 32],
    ) -> std::result::Result<String, String> {
        let key = VerifyingKey::from_bytes(public).map_err(|e| format!("bad public key: {e}"))?;
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
        let message = pae(payload_type, &payload);
        let sigs = v["signatures"]
            .as_array()
            .ok_or("envelope has no signatures")?;
        let keyid = sha256_hex(public);
        for s in sigs {
            // The keyid is unauthenticated in DSSE; still, ours must name our key.
            if !exact(s, &["keyid", "sig"]) || s["keyid"].as_str() != Some(keyid.as_str()) {
                continue;
            }
            let Some(raw) = s["sig"].as_str().and_then(|t| B64.decode(t).ok()) else {
                continue;
            };
            let Ok(sig) = Signature::from_slice(&raw) else {
                continue;
            };
            if key.verify_strict(&message, &sig).is_ok() {
                return Ok(format!("statement signed by key {keyid}"));
            }
        }
        Err("no signature verifies with the given key".into())
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
