//! Redaction (docs/evidence.md §8): a bundle with a tool result, a model response blob and
//! an output file removed still verifies, with its original signature; the removed bytes
//! are nowhere in it; a forged redaction record, or content removed without one, fails.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use common::*;
use provrun_evidence::dsse::{KeyAlgorithm, PrivateKey, sign_bundle_with};
use provrun_evidence::redaction::{
    REDACTIONS_FILE, RecordSigner, RedactRequest, Redaction, Removed, Selector, Signer, redact,
};
use provrun_evidence::*;
use serde_json::{Value, json};

const TOOL_SECRET: &str = "tool-secret-7f3a9c";
const MODEL_SECRET: &str = "model-secret-41be07";
const FILE_SECRET: &str = "file-secret-c0ffee";

/// A finished bundle whose tool result, model response and one output file hold a secret
/// each; the response's blob ref.
fn secret_bundle(name: &str, layout: BlobLayout) -> (PathBuf, BlobRef) {
    let dir = scratch(name);
    let rec =
        Recorder::create_with_layout(&dir, "run-r", Durability::Flush, &run_started(), layout)
            .unwrap();
    fs::write(rec.input_dir().join("a.txt"), b"hello\n").unwrap();
    rec.record_inputs().unwrap();
    let request = rec
        .put_blob(br#"{"messages":[]}"#, "application/json")
        .unwrap();
    let body = format!("data: {{\"text\":\"{MODEL_SECRET}\"}}\n\ndata: [DONE]\n\n");
    let response = rec.put_blob(body.as_bytes(), "text/event-stream").unwrap();
    rec.record(&ModelCalled {
        model: "test".into(),
        stream: true,
        request: Some(request),
        response: Some(response.clone()),
        usage: json!({"input_tokens": 10}),
        finish_reason: Some("tool_calls".into()),
        duration_ms: 12,
        error: None,
        attempts: vec![],
        response_rendered: false,
        http: None,
        tool_calls: Vec::new(),
    })
    .unwrap();
    let mut call = tool_call("c1", false);
    call.result = json!({"text": format!("the file says {TOOL_SECRET}"), "lines": 1});
    rec.record(&call).unwrap();
    rec.step().unwrap();
    fs::write(rec.output_dir().join("private.txt"), FILE_SECRET).unwrap();
    fs::write(rec.output_dir().join("public.txt"), b"ok\n").unwrap();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    (dir, response)
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The three pieces, each by the selector a user would use for it.
fn request<'a>(
    tool: &'a dyn Fn(&[u8]) -> bool,
    response: &BlobRef,
    signer: Option<RecordSigner<'a>>,
) -> RedactRequest<'a> {
    RedactRequest {
        selectors: vec![
            Selector::Match(tool),
            Selector::Blob(response.digest.sha256.clone()),
            Selector::Path("output/private.txt".into()),
        ],
        reason: "personal data (ticket 12)".into(),
        signer,
    }
}

fn signer_of(key: &PrivateKey) -> Signer {
    let public = key.public();
    Signer {
        key_id: public.key_id(),
        public_key: public.to_pem().unwrap(),
    }
}

fn tool_secret(b: &[u8]) -> bool {
    contains(b, TOOL_SECRET)
}

/// A finished bundle and its redacted copy (the tool result, the response blob and one
/// output file removed).
pub(crate) fn redacted_pair(layout: BlobLayout, name: &str) -> (PathBuf, PathBuf) {
    let (src, out, _) = redacted(layout, name);
    (src, out)
}

fn redacted(layout: BlobLayout, name: &str) -> (PathBuf, PathBuf, PrivateKey) {
    let (src, response) = secret_bundle(name, layout);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256).unwrap();
    sign_bundle_with(&src, &key).unwrap();
    let out = scratch(&format!("{name}-new"));
    let sign = |m: &[u8]| key.sign(m);
    let signer = RecordSigner {
        signer: signer_of(&key),
        sign: &sign,
    };
    let outcome = redact(&src, &out, &request(&tool_secret, &response, Some(signer))).unwrap();
    assert_eq!(outcome.record.removed.len(), 3, "{:?}", outcome.record);
    (src, out, key)
}

#[test]
fn a_tool_result_a_response_blob_and_an_output_file_are_removed_and_the_bundle_verifies() {
    for layout in [BlobLayout::Loose, BlobLayout::Pack] {
        let (src, out, key) = redacted(layout, &format!("redact-{layout:?}"));
        // The original signature, by the run's key, still verifies on the copy.
        let report = verify_with(&out, &VerifyOptions::with_key(key.public()));
        assert!(report.ok && report.complete, "{report:#?}");
        assert_eq!(
            report.check(CheckCode::Signature).unwrap().status,
            CheckStatus::Pass
        );
        let check = report.check(CheckCode::Redactions).unwrap();
        assert_eq!(check.status, CheckStatus::Pass, "{check:?}");
        assert!(
            check.detail.contains("1 string(s), 1 blob(s), 1 file(s)"),
            "{check:?}"
        );
        assert_eq!(report.redactions.len(), 1);
        let r = &report.redactions[0];
        assert_eq!(r.signature, SignatureStatus::Verified);
        assert_eq!(r.record.reason, "personal data (ticket 12)");
        assert_eq!(
            r.record.signer.as_ref().unwrap().key_id,
            key.public().key_id()
        );
        let kinds: Vec<&str> = r
            .record
            .removed
            .iter()
            .map(|x| match x {
                Removed::Text { pointer, .. } => pointer.as_str(),
                Removed::Blob { .. } => "blob",
                Removed::File { path, .. } => path.as_str(),
            })
            .collect();
        assert_eq!(
            kinds,
            ["/payload/result/text", "blob", "output/private.txt"]
        );
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["redactions"][0]["signature"], "verified");
        assert_eq!(v["redactions"][0]["record"]["removed"][1]["kind"], "blob");

        // The statement and its signature are the original's, byte for byte; the log keeps
        // its length, order and head.
        for name in ["statement.json", "statement.dsse.json"] {
            assert_eq!(
                fs::read(src.join(name)).unwrap(),
                fs::read(out.join(name)).unwrap()
            );
        }
        let (old, new) = (read_lines(&src), read_lines(&out));
        assert_eq!(old.len(), new.len());
        let changed: Vec<usize> = (0..old.len()).filter(|&i| old[i] != new[i]).collect();
        assert_eq!(changed.len(), 1, "only the tool call's line differs");
        assert!(new[changed[0]].contains("\"text\":\"[redacted]\""));
        assert_eq!(read_events(&out).unwrap().len(), old.len());
        // The kept output is still there; the removed blob cannot be read.
        assert_eq!(fs::read(out.join("output/public.txt")).unwrap(), b"ok\n");
        let response = &r.record.removed[1];
        let Removed::Blob { sha256, .. } = response else {
            panic!("{response:?}")
        };
        assert!(read_blob_by_digest(&out, sha256).is_err());
        assert!(read_blob_by_digest(&src, sha256).is_ok());

        // No byte of any file of the copy holds what was removed (loose blobs are stored
        // as they are; a pack compresses, so its kept blobs are read back too).
        for file in bundle_files(&out) {
            let bytes = fs::read(out.join(&file)).unwrap();
            for secret in [TOOL_SECRET, MODEL_SECRET, FILE_SECRET] {
                assert!(!contains(&bytes, secret), "{secret} in {}", file.display());
            }
        }
        for ev in read_events(&out).unwrap() {
            let mut refs = Vec::new();
            collect_blob_refs(&ev.payload, &mut refs);
            for b in refs.iter().filter(|b| b.digest.sha256 != *sha256) {
                let bytes = read_blob(&out, b).unwrap();
                assert!(!contains(&bytes, MODEL_SECRET));
            }
        }
        // And they were there before.
        let all: Vec<u8> = bundle_files(&src)
            .iter()
            .flat_map(|f| fs::read(src.join(f)).unwrap())
            .collect();
        assert!(contains(&all, TOOL_SECRET) && contains(&all, FILE_SECRET));
    }
}

/// Every blob ref in a payload.
fn collect_blob_refs(v: &Value, out: &mut Vec<BlobRef>) {
    if let Some(r) = BlobRef::from_value(v) {
        out.push(r);
        return;
    }
    match v {
        Value::Array(a) => a.iter().for_each(|x| collect_blob_refs(x, out)),
        Value::Object(m) => m.values().for_each(|x| collect_blob_refs(x, out)),
        _ => {}
    }
}

#[test]
fn a_redacted_bundle_is_redacted_again_with_a_second_record() {
    let (_src, out, _key) = redacted(BlobLayout::Pack, "redact-twice");
    let again = scratch("redact-twice-again");
    let outcome = redact(
        &out,
        &again,
        &RedactRequest {
            selectors: vec![Selector::Path("output/public.txt".into())],
            reason: "second look".into(),
            signer: None,
        },
    )
    .unwrap();
    assert!(outcome.record.previous.is_some());
    let report = verify(&again);
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.redactions.len(), 2);
    assert_eq!(report.redactions[1].signature, SignatureStatus::Unsigned);
    assert!(!again.join("output/public.txt").exists());
    // What was removed once cannot be removed again.
    let err = redact(
        &again,
        &scratch("redact-twice-3"),
        &RedactRequest {
            selectors: vec![Selector::Path("output/public.txt".into())],
            reason: "x".into(),
            signer: None,
        },
    )
    .unwrap_err();
    assert!(matches!(err, EvidenceError::Redaction(_)), "{err}");
}

#[test]
fn requests_that_cannot_be_met_write_nothing() {
    let (src, _) = secret_bundle("redact-refused", BlobLayout::Pack);
    let cases: Vec<(Selector<'_>, &str)> = vec![
        (Selector::Blob("ab".repeat(32)), "no event names"),
        (
            Selector::Path("output/nothing.txt".into()),
            "not a recorded",
        ),
        // The run's id is in every line's envelope, which a redaction cannot touch.
        (
            Selector::Match(&|b: &[u8]| contains(b, "run-r")),
            "nothing can be removed",
        ),
        // The tool's name is what verify checks calls by.
        (
            Selector::Match(&|b: &[u8]| b == b"read_file"),
            "nothing can be removed",
        ),
        (
            Selector::Match(&|b: &[u8]| contains(b, "no-such-text")),
            "nothing matches",
        ),
        // An envelope member's name is on every line and cannot go either.
        (
            Selector::Match(&|b: &[u8]| b == b"prev"),
            "the envelope member name `prev`",
        ),
        // Nor can a number.
        (
            Selector::Match(&|b: &[u8]| b == b"0"),
            "nothing can be removed",
        ),
    ];
    for (i, (sel, why)) in cases.into_iter().enumerate() {
        let out = scratch(&format!("redact-refused-{i}"));
        let err = redact(
            &src,
            &out,
            &RedactRequest {
                selectors: vec![sel],
                reason: "r".into(),
                signer: None,
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains(why), "{i}: {err}");
        assert!(!out.exists(), "{i}");
    }
    let parent = src.parent().unwrap();
    let leftovers = fs::read_dir(parent)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().contains("provrun-redacting")
        })
        .count();
    assert_eq!(leftovers, 0);
}

/// Rewrite the first redaction record of `bundle` with `edit`, keeping its signatures.
fn edit_record(bundle: &Path, edit: impl FnOnce(&mut Value)) {
    let text = fs::read_to_string(bundle.join(REDACTIONS_FILE)).unwrap();
    let mut envelope: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let payload = B64.decode(envelope["payload"].as_str().unwrap()).unwrap();
    let mut record: Value = serde_json::from_slice(&payload).unwrap();
    edit(&mut record);
    envelope["payload"] = json!(B64.encode(to_canonical_string(&record).unwrap()));
    fs::write(
        bundle.join(REDACTIONS_FILE),
        format!("{}\n", to_canonical_string(&envelope).unwrap()),
    )
    .unwrap();
}

fn copy_of(bundle: &Path, name: &str) -> PathBuf {
    let to = scratch(name);
    copy_tree(bundle, &to);
    to
}

#[test]
fn a_forged_redaction_record_fails_verify() {
    let (src, out, key) = redacted(BlobLayout::Pack, "forge");
    let record: Redaction = verify(&out).redactions[0].record.clone();
    let text_at = |i: usize| match &record.removed[i] {
        Removed::Text { seq, .. } => *seq,
        other => panic!("{other:?}"),
    };
    let seq = text_at(0);

    // The reason changed after signing.
    let b = copy_of(&out, "forge-reason");
    edit_record(&b, |r| r["reason"] = json!("routine clean-up"));
    assert_eq!(fails(&verify(&b)), [CheckCode::Redactions]);

    // The same, with the signature dropped and the signer kept.
    let b = copy_of(&out, "forge-unsigned");
    let text = fs::read_to_string(b.join(REDACTIONS_FILE)).unwrap();
    let mut env: Value = serde_json::from_str(text.trim_end()).unwrap();
    env["signatures"] = json!([]);
    fs::write(
        b.join(REDACTIONS_FILE),
        format!("{}\n", to_canonical_string(&env).unwrap()),
    )
    .unwrap();
    assert_eq!(fails(&verify(&b)), [CheckCode::Redactions]);

    // An unsigned record whose removed string's digest is not the original's breaks the
    // chain.
    let b = copy_of(&out, "forge-digest");
    edit_record(&b, |r| {
        r["removed"][0]["sha256"] = json!(sha256_hex(b"something else"));
        r["signer"] = Value::Null;
    });
    let text = fs::read_to_string(b.join(REDACTIONS_FILE)).unwrap();
    let mut env: Value = serde_json::from_str(text.trim_end()).unwrap();
    env["signatures"] = json!([]);
    fs::write(
        b.join(REDACTIONS_FILE),
        format!("{}\n", to_canonical_string(&env).unwrap()),
    )
    .unwrap();
    let report = verify(&b);
    assert!(fails(&report).contains(&CheckCode::Chain), "{report:#?}");

    // A record that lists a file as removed which is still there, or a blob at a place
    // that does not name it.
    let b = copy_of(&out, "forge-file");
    edit_record(&b, |r| r["removed"][2]["path"] = json!("output/public.txt"));
    assert!(fails(&verify(&b)).contains(&CheckCode::Redactions));
    let b = copy_of(&out, "forge-place");
    edit_record(&b, |r| r["removed"][1]["events"][0]["seq"] = json!(seq));
    assert!(fails(&verify(&b)).contains(&CheckCode::Redactions));

    // A record about another statement.
    let b = copy_of(&out, "forge-statement");
    edit_record(&b, |r| r["statement"]["sha256"] = json!(sha256_hex(b"{}")));
    assert!(fails(&verify(&b)).contains(&CheckCode::Redactions));

    // A field verify relies on (the tool's name) replaced, with a record giving its true
    // digest: the chain holds, the redaction is refused.
    let b = copy_of(&src, "forge-protected");
    let mut lines = read_lines(&b);
    let name_line = lines
        .iter()
        .position(|l| l.contains("\"type\":\"tool_called\""))
        .unwrap();
    lines[name_line] =
        lines[name_line].replace("\"name\":\"read_file\"", "\"name\":\"[redacted]\"");
    write_lines(&b, &lines);
    let mut forged = record.clone();
    forged.signer = None;
    forged.removed = vec![Removed::Text {
        seq: name_line as u64,
        pointer: "/payload/name".into(),
        sha256: salted_commitment(&b, name_line as u64, "/payload/name", "read_file"),
    }];
    forged.log.sha256 = sha256_hex(&fs::read(src.join("events.jsonl")).unwrap());
    let envelope = json!({
        "payload": B64.encode(to_canonical_string_of(&forged).unwrap()),
        "payloadType": "application/vnd.provrun.redaction+json",
        "signatures": [],
    });
    fs::write(
        b.join(REDACTIONS_FILE),
        format!("{}\n", to_canonical_string(&envelope).unwrap()),
    )
    .unwrap();
    let report = verify(&b);
    assert_eq!(fails(&report), [CheckCode::Redactions], "{report:#?}");
    assert!(
        report
            .check(CheckCode::Redactions)
            .unwrap()
            .detail
            .contains("may not be removed")
    );
    drop(key);
}

#[test]
fn content_removed_without_a_record_fails_verify() {
    let (src, out, _key) = redacted(BlobLayout::Loose, "unrecorded");

    // The record deleted from a redacted copy.
    let b = copy_of(&out, "unrecorded-record");
    fs::remove_file(b.join(REDACTIONS_FILE)).unwrap();
    let report = verify(&b);
    let failed = fails(&report);
    for code in [CheckCode::Chain, CheckCode::Blobs, CheckCode::Outputs] {
        assert!(failed.contains(&code), "{code:?}: {report:#?}");
    }

    // A string replaced in the original, as a redaction would, but with no record.
    let b = copy_of(&src, "unrecorded-text");
    let lines: Vec<String> = read_lines(&b)
        .into_iter()
        .map(|l| l.replace(&format!("the file says {TOOL_SECRET}"), "[redacted]"))
        .collect();
    write_lines(&b, &lines);
    assert!(fails(&verify(&b)).contains(&CheckCode::Chain));

    // A blob or an output file deleted from the original.
    let b = copy_of(&src, "unrecorded-blob");
    let blob = fs::read_dir(b.join("blobs/sha256"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    fs::remove_file(blob).unwrap();
    assert!(fails(&verify(&b)).contains(&CheckCode::Blobs));
    let b = copy_of(&src, "unrecorded-file");
    fs::remove_file(b.join("output/private.txt")).unwrap();
    assert!(fails(&verify(&b)).contains(&CheckCode::Outputs));

    // A second file removed from the redacted copy beyond what its record lists.
    let b = copy_of(&out, "unrecorded-more");
    fs::remove_file(b.join("output/public.txt")).unwrap();
    assert!(fails(&verify(&b)).contains(&CheckCode::Outputs));
}

#[test]
fn a_blob_in_an_encoding_it_cannot_read_is_named_and_goes_only_by_name() {
    let dir = scratch("redact-unreadable");
    let rec = Recorder::create(&dir, "run-u", Durability::Flush, &run_started()).unwrap();
    // A bzip2 body, and a gzip body holding the secret (which is read and searched).
    let bz = rec
        .put_blob(b"BZh91AY&SY\x01\x02\x03 opaque", "application/octet-stream")
        .unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, format!("{{\"t\":\"{TOOL_SECRET}\"}}").as_bytes()).unwrap();
    let gz = rec
        .put_blob(&gz.finish().unwrap(), "application/json")
        .unwrap();
    rec.record(&ModelCalled {
        model: "test".into(),
        request: Some(bz.clone()),
        response: Some(gz.clone()),
        ..ModelCalled::default()
    })
    .unwrap();
    rec.step().unwrap();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    let pattern = |b: &[u8]| contains(b, TOOL_SECRET);
    let refused = redact(
        &dir,
        &scratch("redact-unreadable-out"),
        &RedactRequest {
            selectors: vec![Selector::Match(&pattern)],
            reason: "r".into(),
            signer: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains(&bz.digest.sha256) && refused.contains("bzip2"),
        "{refused}"
    );
    let out = scratch("redact-unreadable-ok");
    let done = redact(
        &dir,
        &out,
        &RedactRequest {
            selectors: vec![
                Selector::Match(&pattern),
                Selector::Blob(bz.digest.sha256.clone()),
            ],
            reason: "r".into(),
            signer: None,
        },
    )
    .unwrap();
    let removed: Vec<&str> = done
        .record
        .removed
        .iter()
        .filter_map(|r| match r {
            Removed::Blob { sha256, .. } => Some(sha256.as_str()),
            _ => None,
        })
        .collect();
    // The gzip body held the secret once decompressed: it went too.
    assert!(removed.contains(&gz.digest.sha256.as_str()), "{removed:?}");
    assert!(removed.contains(&bz.digest.sha256.as_str()));
    assert!(verify(&out).ok);
}
