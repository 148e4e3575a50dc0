//! A signature over every file of a folder in the format of the OpenSSF model-signing
//! project (`model_signing verify key --signature SIG --public_key KEY.pub FOLDER` checks
//! it): a Sigstore bundle (media type v0.3) whose DSSE envelope holds an in-toto
//! Statement v1 with the predicate `https://model_signing/signature/v1.0`.
//!
//! The statement's one subject is the folder's name with the SHA-256 of the
//! concatenated digests of its files; the predicate lists each file as a resource
//! (`name`: its `/`-separated path relative to the folder, `algorithm`: `sha256`,
//! `digest`: hex) in path order, component by component, and describes the
//! serialization (`files`, `sha256`, no symlinks, the git paths model-signing always
//! leaves out). The envelope is signed with an ECDSA key (DER signature over
//! `PAE(payloadType, payload)`); the bundle names the key by `publicKey.hint`, the hex
//! SHA-256 of its SPKI PEM text. model-signing accepts NIST curves only, so this takes a
//! P-256 key.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::json;
use sha2::{Digest as _, Sha256};

use super::{IN_TOTO_PAYLOAD_TYPE, PrivateKey, pae};
use crate::canonical::to_canonical_string;
use crate::error::{EvidenceError, Result};
use crate::fsutil::{hash_file, walk_files};

/// The Sigstore bundle media type model-signing writes and requires.
pub const SIGSTORE_BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The predicate type of a model-signing v1.0 statement.
pub const MODEL_SIGNING_PREDICATE_TYPE: &str = "https://model_signing/signature/v1.0";
/// The paths model-signing leaves out of every folder unless told otherwise.
const GIT_PATHS: [&str; 4] = [".git", ".gitattributes", ".github", ".gitignore"];

/// What [`model_signature`] signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSignature {
    /// The signature file's text (a Sigstore bundle, canonical JSON and `\n`).
    pub text: String,
    /// How many files it lists.
    pub files: usize,
    /// The statement's subject digest: SHA-256 over the files' digests in order.
    pub root_digest: String,
}

/// A model-signing signature over every regular file under `folder` (named `name` in
/// the statement), signed with `key` (ECDSA P-256). A symlink, special file or
/// non-UTF-8 name under the folder is an error: model-signing refuses them as well.
///
/// # Errors
///
/// [`EvidenceError::Key`] when `key` is not an ECDSA P-256 key;
/// [`EvidenceError::UnsupportedFile`] for an entry under `folder` it refuses;
/// [`EvidenceError::Io`] when a file cannot be read.
pub fn model_signature(folder: &Path, name: &str, key: &PrivateKey) -> Result<ModelSignature> {
    if !matches!(key, PrivateKey::EcdsaP256(_)) {
        return Err(EvidenceError::Key(format!(
            "the model-signing format takes ECDSA keys on NIST curves only, not {}; make one \
             with `provrun keygen FILE --algorithm ecdsa-p256`",
            key.algorithm().as_str()
        )));
    }
    let walk = walk_files(folder);
    if let Some(problem) = walk.problems.first() {
        return Err(EvidenceError::UnsupportedFile {
            path: folder.to_path_buf(),
            reason: problem.clone(),
        });
    }
    let mut files: Vec<_> = walk
        .files
        .into_iter()
        .filter(|f| !GIT_PATHS.iter().any(|g| under(&f.rel, g)))
        .collect();
    // model-signing orders its resources as paths, component by component.
    files.sort_by(|a, b| a.rel.split('/').cmp(b.rel.split('/')));
    let mut root = Sha256::new();
    let mut resources = Vec::with_capacity(files.len());
    for f in &files {
        let (digest, _) =
            hash_file(&f.path, false).map_err(|e| EvidenceError::io("read", &f.path, e))?;
        let raw = hex::decode(&digest).map_err(|e| EvidenceError::Canonical(e.to_string()))?;
        root.update(&raw);
        resources.push(json!({"name": f.rel, "algorithm": "sha256", "digest": digest}));
    }
    let root_digest = hex::encode(root.finalize());
    let statement = json!({
        "_type": crate::STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": root_digest}}],
        "predicateType": MODEL_SIGNING_PREDICATE_TYPE,
        "predicate": {
            "serialization": {
                "method": "files",
                "hash_type": "sha256",
                "allow_symlinks": false,
                "ignore_paths": GIT_PATHS,
            },
            "resources": resources,
        },
    });
    let payload = to_canonical_string(&statement)?;
    let signature = key.sign(&pae(IN_TOTO_PAYLOAD_TYPE, payload.as_bytes()));
    let public = key.public();
    let hint = hex::encode(Sha256::digest(public.to_pem()?.as_bytes()));
    let bundle = json!({
        "mediaType": SIGSTORE_BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": hint}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": B64.encode(payload.as_bytes()),
            "payloadType": IN_TOTO_PAYLOAD_TYPE,
            "signatures": [{"sig": B64.encode(signature), "keyid": public.key_id()}],
        },
    });
    let mut text = to_canonical_string(&bundle)?;
    text.push('\n');
    Ok(ModelSignature {
        text,
        files: files.len(),
        root_digest,
    })
}

/// Whether the `/`-separated `rel` is `top` or below it.
fn under(rel: &str, top: &str) -> bool {
    rel == top || rel.strip_prefix(top).is_some_and(|r| r.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_in_component_order_and_git_paths_are_left_out() {
        let dir = std::env::temp_dir().join(format!("provrun-ms-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (p, body) in [
            ("a-c", "1"),
            ("a/b", "2"),
            (".gitignore", "x"),
            (".github/w.yml", "y"),
            (".gitx", "3"),
        ] {
            let path = dir.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        let key = PrivateKey::generate(super::super::KeyAlgorithm::EcdsaP256).unwrap();
        let sig = model_signature(&dir, "m", &key).unwrap();
        let bundle: serde_json::Value = serde_json::from_str(&sig.text).unwrap();
        let payload = B64
            .decode(bundle["dsseEnvelope"]["payload"].as_str().unwrap())
            .unwrap();
        let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        let names: Vec<&str> = statement["predicate"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        // "a" < "a-c" as a component, though "a-c" < "a/b" as text.
        assert_eq!(names, [".gitx", "a/b", "a-c"]);
        assert_eq!(sig.files, 3);
        let ed = PrivateKey::Ed25519([1; 32]);
        assert!(model_signature(&dir, "m", &ed).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
