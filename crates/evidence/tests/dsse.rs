//! Ed25519 DSSE signing of the statement (feature `dsse`).
#![cfg(feature = "dsse")]

mod common;

use std::fs;

use common::*;
use provrun_evidence::dsse::*;
use provrun_evidence::*;

const SEED: [u8; 32] = [7u8; 32];

fn opts(key: [u8; 32]) -> VerifyOptions {
    VerifyOptions {
        public_key: Some(key),
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
