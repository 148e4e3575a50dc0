//! Ed25519 DSSE signing of the statement (feature `dsse`).
#![cfg(feature = "dsse")]

use crate::common;

use std::fs;

use common::*;
use provrun_evidence::dsse::*;
use provrun_evidence::*;

const SEED: [u8; 32] = [7u8; 32];

fn opts(key: [u8; 32]) -> VerifyOptions {
    VerifyOptions {
        public_key: Some(key),
        ..VerifyOptions::default()
    }
}

#[test]
fn signed_statement_verifies_with_its_key_only() {
    let dir = make_bundle("signed", Durability::Flush);
    let path = sign_bundle(&dir, &SEED).unwrap();
    assert_eq!(path, dir.join(DSSE_FILE));
    let public = public_key(&SEED);

    let r = verify_with(&dir, &opts(public));
    assert!(r.ok && r.complete, "{r:#?}");
    assert_eq!(
        r.check(CheckCode::Signature).unwrap().status,
        CheckStatus::Pass
    );

    let r = verify(&dir);
    assert!(r.ok, "{r:#?}");
    assert_eq!(
        r.check(CheckCode::Signature).unwrap().status,
        CheckStatus::Warn
    );

    let other = public_key(&[8u8; 32]);
    let r = verify_with(&dir, &opts(other));
    assert_eq!(fails(&r), [CheckCode::Signature], "{r:#?}");

    let env: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(env["payloadType"], IN_TOTO_PAYLOAD_TYPE);
    assert_eq!(env["signatures"][0]["keyid"], sha256_hex(&public));
}

#[test]
fn any_change_to_the_envelope_or_a_missing_one_fails() {
    let dir = make_bundle("signed-flip", Durability::Flush);
    let path = sign_bundle(&dir, &SEED).unwrap();
    let public = public_key(&SEED);
    let orig = fs::read(&path).unwrap();
    for i in (0..orig.len()).step_by(7) {
        let mut b = orig.clone();
        b[i] ^= 0x01;
        fs::write(&path, &b).unwrap();
        let r = verify_with(&dir, &opts(public));
        assert!(!r.ok, "flipping byte {i} of the envelope went unnoticed");
    }
    fs::remove_file(&path).unwrap();
    assert_eq!(
        fails(&verify_with(&dir, &opts(public))),
        [CheckCode::Signature]
    );
}

#[test]
fn reopen_removes_the_signature_with_the_statement() {
    let dir = scratch("signed-pause");
    let rec = Recorder::create(&dir, "r", Durability::Flush, &run_started()).unwrap();
    rec.finish(RunEnd::new(RunStatus::Paused)).unwrap();
    sign_bundle(&dir, &SEED).unwrap();
    drop(rec);
    let rec = Recorder::reopen(&dir, Durability::Flush).unwrap();
    assert!(!dir.join(DSSE_FILE).exists() && !dir.join("statement.json").exists());
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    sign_bundle(&dir, &SEED).unwrap();
    assert!(verify_with(&dir, &opts(public_key(&SEED))).ok);
}

#[test]
fn keys_parse_from_raw_bytes_or_hex() {
    assert_eq!(parse_key(&SEED).unwrap(), SEED);
    let text = format!("{}\n", hex::encode(SEED));
    assert_eq!(parse_key(text.as_bytes()).unwrap(), SEED);
    assert!(parse_key(b"zz").is_err());
    assert!(parse_key(&[0u8; 31]).is_err());
}

#[test]
fn pem_keys_round_trip_and_name_their_key_id() {
    let seed = generate_seed().unwrap();
    assert_ne!(seed, generate_seed().unwrap(), "two new keys are the same");
    let private = private_key_pem(&seed).unwrap();
    assert!(
        private.starts_with("-----BEGIN PRIVATE KEY-----\n"),
        "{private}"
    );
    assert_eq!(parse_private_key(private.as_bytes()).unwrap(), seed);
    let public = public_key(&seed);
    let public_pem = public_key_pem(&public).unwrap();
    assert!(
        public_pem.starts_with("-----BEGIN PUBLIC KEY-----\n"),
        "{public_pem}"
    );
    assert_eq!(parse_public_key(public_pem.as_bytes()).unwrap(), public);
    assert_eq!(key_id(&public), sha256_hex(&public));
    // The hex and raw forms still read; a public key is not a private key and garbage
    // between PEM armour lines is an error, not a panic.
    assert_eq!(
        parse_private_key(hex::encode(SEED).as_bytes()).unwrap(),
        SEED
    );
    assert!(parse_private_key(public_pem.as_bytes()).is_err());
    assert!(parse_public_key(private.as_bytes()).is_err());
    assert!(
        parse_public_key(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").is_err()
    );
    // An OpenSSL-written key (`openssl genpkey -algorithm ed25519`, RFC 8410 test key).
    let openssl = "-----BEGIN PRIVATE KEY-----\n\
                   MC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n\
                   -----END PRIVATE KEY-----\n";
    let seed = parse_private_key(openssl.as_bytes()).unwrap();
    assert_eq!(
        hex::encode(seed),
        "d4ee72dbf913584ad5b6d8f1f769f8ad3afe7c28cbf1d4fbe097a88f44755842"
    );
}

#[test]
fn a_present_signature_must_be_well_formed_even_without_a_key() {
    let dir = make_bundle("signed-garbage", Durability::Flush);
    // Garbage: fails, not a warning.
    fs::write(dir.join(DSSE_FILE), b"garbage").unwrap();
    let r = verify(&dir);
    assert_eq!(fails(&r), [CheckCode::Signature], "{r:#?}");
    assert_eq!(r.exit_code(), 1);

    // A real envelope: a warning that names the key id, since nothing can be checked.
    sign_bundle(&dir, &SEED).unwrap();
    let r = verify(&dir);
    assert!(r.ok, "{r:#?}");
    let check = r.check(CheckCode::Signature).unwrap();
    assert_eq!(check.status, CheckStatus::Warn);
    assert!(
        check.detail.contains(&key_id(&public_key(&SEED))),
        "{}",
        check.detail
    );

    // An envelope over another statement (here: of another bundle) fails.
    let other = make_bundle("signed-other", Durability::Flush);
    fs::write(other.join("statement.json"), b"{\"x\":1}\n").unwrap();
    sign_bundle(&other, &SEED).unwrap();
    fs::copy(other.join(DSSE_FILE), dir.join(DSSE_FILE)).unwrap();
    let r = verify(&dir);
    assert_eq!(fails(&r), [CheckCode::Signature], "{r:#?}");
    assert!(
        r.check(CheckCode::Signature)
            .unwrap()
            .detail
            .contains("not statement.json")
    );

    // No signatures at all fails too.
    let statement = fs::read(dir.join("statement.json")).unwrap();
    let empty = serde_json::json!({
        "payload": base64_encode(&statement),
        "payloadType": IN_TOTO_PAYLOAD_TYPE,
        "signatures": [],
    });
    fs::write(dir.join(DSSE_FILE), format!("{}\n", canonical(&empty))).unwrap();
    let r = verify(&dir);
    assert_eq!(fails(&r), [CheckCode::Signature], "{r:#?}");
}

/// Standard base64 with padding (what DSSE uses), written out here so the test does not
/// lean on the crate's own encoder.
fn base64_encode(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Canonical JSON of a small object (keys sorted by serde_json's map, no spaces).
fn canonical(v: &serde_json::Value) -> String {
    serde_json::to_string(v).unwrap()
}

#[test]
fn ecdsa_p256_keys_sign_and_verify_and_are_told_apart_from_ed25519() {
    let dir = make_bundle("signed-p256", Durability::Flush);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256).unwrap();
    let public = key.public();
    assert_eq!(public.algorithm(), KeyAlgorithm::EcdsaP256);
    // The PEM files read back as the same keys.
    let pem = key.to_pem().unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{pem}");
    assert_eq!(PrivateKey::parse(pem.as_bytes()).unwrap().public(), public);
    let public_pem = public.to_pem().unwrap();
    assert_eq!(PublicKey::parse(public_pem.as_bytes()).unwrap(), public);
    assert!(PublicKey::parse(pem.as_bytes()).is_err());

    sign_bundle_with(&dir, &key).unwrap();
    let r = verify_with(&dir, &VerifyOptions::with_key(public.clone()));
    assert!(r.ok && r.complete, "{r:#?}");
    let detail = &r.check(CheckCode::Signature).unwrap().detail;
    assert!(
        detail.contains(&public.key_id()) && detail.contains("ecdsa-p256"),
        "{detail}"
    );
    // Without a key the envelope is well formed (a DER signature), and only warns.
    let r = verify(&dir);
    assert!(r.ok, "{r:#?}");
    assert_eq!(
        r.check(CheckCode::Signature).unwrap().status,
        CheckStatus::Warn
    );
    // Another P-256 key, or an Ed25519 key, is no match.
    let other = PrivateKey::generate(KeyAlgorithm::EcdsaP256)
        .unwrap()
        .public();
    assert_eq!(
        fails(&verify_with(&dir, &VerifyOptions::with_key(other))),
        [CheckCode::Signature]
    );
    assert_eq!(
        fails(&verify_with(&dir, &opts(public_key(&SEED)))),
        [CheckCode::Signature]
    );
    // A flipped byte of the DER signature fails.
    let path = dir.join(DSSE_FILE);
    let env: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let sig = env["signatures"][0]["sig"].as_str().unwrap().to_owned();
    let mut raw = base64_decode(&sig);
    let last = raw.len() - 1;
    raw[last] ^= 1;
    let mut changed = env.clone();
    changed["signatures"][0]["sig"] = base64_encode(&raw).into();
    fs::write(&path, format!("{}\n", canonical(&changed))).unwrap();
    assert_eq!(
        fails(&verify_with(&dir, &VerifyOptions::with_key(public))),
        [CheckCode::Signature]
    );
    // An OpenSSL SEC1 key (`openssl ecparam -name prime256v1 -genkey -noout`) reads too,
    // as the key whose public half `openssl ec -pubout` printed.
    let sec1 = "-----BEGIN EC PRIVATE KEY-----\n\
                MHcCAQEEIDPNoYa9FGu5N4Zxe42daZycLcK3OBJp0Hlz4XWwQh4/oAoGCCqGSM49\n\
                AwEHoUQDQgAEVXLHGV2h/+GicMvIXF4fkermmQUSRzPSYM/CM8dov6QJBBX5vxqP\n\
                LFG8fOtpiYKLuMjVi9+B8BUMKBu2VC/28w==\n\
                -----END EC PRIVATE KEY-----\n";
    let openssl_public = "-----BEGIN PUBLIC KEY-----\n\
                          MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEVXLHGV2h/+GicMvIXF4fkermmQUS\n\
                          RzPSYM/CM8dov6QJBBX5vxqPLFG8fOtpiYKLuMjVi9+B8BUMKBu2VC/28w==\n\
                          -----END PUBLIC KEY-----\n";
    let parsed = PrivateKey::parse(sec1.as_bytes()).unwrap();
    assert_eq!(parsed.algorithm(), KeyAlgorithm::EcdsaP256);
    assert_eq!(parsed.public().to_pem().unwrap(), openssl_public);
}

/// Standard base64 decoding, the inverse of [`base64_encode`].
fn base64_decode(text: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|c| *c != b'=') {
        bits = (bits << 6) | A.iter().position(|a| *a == c).unwrap() as u32;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    out
}
