//! Bundles of the first blob layout (loose `blobs/sha256/<hex>` files), written by the
//! version before the pack existed (`tests/fixtures`), still verify, read back and
//! reopen; a reopened one goes on storing loose blobs.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use provrun_evidence::*;

fn fixture(name: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dir = scratch(name);
    copy_tree(&from, &dir);
    // git keeps no empty folders.
    for sub in ["input", "output"] {
        fs::create_dir_all(dir.join(sub)).unwrap();
    }
    dir
}

fn refs(events: &[Event]) -> Vec<BlobRef> {
    fn walk(v: &serde_json::Value, out: &mut Vec<BlobRef>) {
        if let Some(b) = BlobRef::from_value(v) {
            out.push(b);
            return;
        }
        match v {
            serde_json::Value::Object(m) => m.values().for_each(|x| walk(x, out)),
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for e in events {
        walk(&e.payload, &mut out);
    }
    out
}

#[test]
fn an_old_layout_bundle_verifies_and_reads_back() {
    let dir = fixture("bundle-v1-hello");
    let r = verify(&dir);
    assert!(r.ok && r.complete, "{r:#?}");
    assert_eq!(r.check(CheckCode::Pack).unwrap().status, CheckStatus::Pass);
    assert!(
        r.check(CheckCode::Blobs)
            .unwrap()
            .detail
            .contains("5 blob(s)")
    );
    let events = read_events(&dir).unwrap();
    assert_eq!(
        BlobLayout::of_run_started(&events[0].payload),
        Some(BlobLayout::Loose)
    );
    let refs = refs(&events);
    assert!(!refs.is_empty());
    for b in &refs {
        let bytes = read_blob(&dir, b).unwrap();
        assert_eq!(bytes, fs::read(dir.join(b.relative_path())).unwrap());
        assert_eq!(read_blob_by_digest(&dir, &b.digest.sha256).unwrap(), bytes);
    }
    // Damage is still caught in the old layout.
    let b = &refs[0];
    fs::write(dir.join(b.relative_path()), b"changed").unwrap();
    let r = verify(&dir);
    assert!(r.failures().any(|c| c.code == CheckCode::Blobs), "{r:#?}");
    assert!(read_blob(&dir, b).is_err());
}

#[test]
fn an_old_layout_paused_bundle_reopens_and_keeps_its_layout() {
    let dir = fixture("bundle-v1-paused");
    let r = verify(&dir);
    assert!(r.ok && r.complete, "{r:#?}");
    let rec = Recorder::reopen(&dir, Durability::PerEvent).unwrap();
    assert_eq!(rec.blob_layout(), BlobLayout::Loose);
    let blob = rec.put_blob(b"a later blob", "text/plain").unwrap();
    let mut call = tool_call("greet", false);
    call.result_blob = Some(blob.clone());
    rec.record(&call).unwrap();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    assert!(dir.join(blob.relative_path()).is_file());
    assert!(!dir.join("blobs/pack").exists());
    let r = verify(&dir);
    assert!(r.ok && r.complete, "{r:#?}");
}

/// The double that is exactly 1424953923781206.25: RFC 8785 writes it
/// `1424953923781206.2` (ties to even); versions before the fix wrote `…206.3`.
const TIE: u64 = 0x43143ff3c1cb0959;

#[test]
fn numbers_are_written_as_rfc_8785_says_and_earlier_tie_forms_still_verify() {
    let dir = scratch("compat-tie");
    let rec = Recorder::create(&dir, "run-tie", Durability::Flush, &run_started()).unwrap();
    rec.declarer()
        .declare("measure", serde_json::json!({"x": f64::from_bits(TIE)}))
        .unwrap();
    drop(rec);
    let lines = read_lines(&dir);
    assert!(
        lines[1].contains(r#""x":1424953923781206.2}"#),
        "{}",
        lines[1]
    );
    let report = verify(&dir);
    assert!(report.ok, "{report:?}");

    // A log chained by commitments takes only the exact form: the earlier writers' tie
    // form would be a second spelling of the same line with the same hash.
    let mut old = lines.clone();
    old[1] = old[1].replace("1424953923781206.2}", "1424953923781206.3}");
    write_lines(&dir, &old);
    let report = verify(&dir);
    assert_eq!(
        report.check(CheckCode::Parse).unwrap().status,
        CheckStatus::Fail,
        "{report:?}"
    );

    // The same line in a log as earlier versions wrote it (chained by bytes, no `chain`
    // member; the line is the last one, so no later line chains to it): still canonical,
    // so the bundle verifies and reopens.
    let mut started: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    started["payload"]
        .as_object_mut()
        .unwrap()
        .remove(provrun_evidence::CHAIN_KEY);
    let mut earlier = rechain(
        &dir,
        &[to_canonical_string(&started).unwrap(), lines[1].clone()],
    );
    // Logs chained without salts have no salts.json.
    std::fs::remove_file(dir.join(provrun_evidence::SALTS_FILE)).unwrap();
    earlier[1] = earlier[1].replace("1424953923781206.2}", "1424953923781206.3}");
    write_lines(&dir, &earlier);
    let report = verify(&dir);
    assert!(report.ok, "{report:?}");
    assert_eq!(
        report.check(CheckCode::Parse).unwrap().status,
        CheckStatus::Pass
    );
    let rec = Recorder::reopen(&dir, Durability::Flush).unwrap();
    assert_eq!(rec.event_count(), 2);
    drop(rec);

    // Any other spelling of the number is not canonical.
    let mut other = earlier;
    other[1] = other[1].replace("1424953923781206.3}", "1424953923781206.20}");
    write_lines(&dir, &other);
    let report = verify(&dir);
    assert_eq!(
        report.check(CheckCode::Parse).unwrap().status,
        CheckStatus::Fail
    );
}
