//! End-to-end tests of the recorder and `verify`: a finished bundle verifies, every kind
//! of tampering is caught, interrupted runs are incomplete but not corrupt, hostile
//! bundles never make `verify` panic.

use crate::common;

use std::fs;

use common::*;
use provrun_evidence::*;
use serde_json::json;

#[test]
fn finished_bundle_verifies_complete_under_every_policy() {
    for d in [
        Durability::Flush,
        Durability::PerEvent,
        Durability::PerStep,
        Durability::AtEnd,
        Durability::GroupCommit,
    ] {
        let dir = make_bundle("policy", d);
        let r = verify(&dir);
        assert!(r.ok && r.complete, "{d:?}: {r:#?}");
        assert_eq!(r.exit_code(), 0);
        assert!(
            r.checks.iter().all(|c| c.status == CheckStatus::Pass),
            "{r:#?}"
        );
    }
}

// One long scenario: one bundle's log, blob layout and statement checked against the docs.
#[test]
fn log_layout_and_statement_are_as_documented() {
    let dir = make_bundle("layout", Durability::Flush);
    let lines = read_lines(&dir);
    let types: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        types,
        [
            "run_started",
            "input_staged",
            "input_staged",
            "model_called",
            "tool_called",
            "tool_called",
            "tool_called",
            "declared",
            "trace_imported",
            "output_produced",
            "output_produced",
            "run_finished"
        ]
    );
    for (i, l) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(
            to_canonical_string(&v).unwrap(),
            *l,
            "line {i} is canonical"
        );
        assert_eq!(v["seq"], json!(i));
        assert_eq!(v["v"], json!(1));
        // New logs chain each line's commitment form (docs/evidence.md §2a).
        let want_prev = if i == 0 {
            json!(null)
        } else {
            json!(line_hash_in(&dir, &lines[i - 1], CHAIN).unwrap())
        };
        assert_eq!(v["prev"], want_prev);
        assert_ne!(
            want_prev,
            json!(sha256_hex(lines[i.saturating_sub(1)].as_bytes()))
        );
    }
    let started: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(started["payload"]["chain"], json!(CHAIN));
    // Keys appear in RFC 8785 order.
    assert!(lines[0].starts_with(r#"{"confidence":"observed","payload":{"#));
    let declared: serde_json::Value = serde_json::from_str(&lines[7]).unwrap();
    assert_eq!(declared["confidence"], "declared");
    assert_eq!(declared["payload"]["source"], "read_file");
    let inputs: Vec<_> = lines[1..3]
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["payload"]["path"].clone())
        .collect();
    assert_eq!(inputs, [json!("a.txt"), json!("sub/b.bin")]);
    let big: serde_json::Value = serde_json::from_str(&lines[6]).unwrap();
    assert_eq!(big["payload"]["result"], json!(null));
    let blob = BlobRef::from_value(&big["payload"]["result_blob"]).unwrap();
    assert_eq!(
        read_blob(&dir, &blob).unwrap().len() as u64,
        blob.size,
        "the blob is in the pack"
    );
    // run_started says which blob layout the bundle uses.
    let started: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(started["payload"]["blob_store"], "pack");
    assert!(dir.join("blobs/pack").is_file() && !dir.join("blobs/sha256").exists());
    let finished: serde_json::Value = serde_json::from_str(&lines[11]).unwrap();
    assert_eq!(finished["payload"]["event_count"], json!(12));
    assert_eq!(finished["payload"]["status"], "finished");

    let st: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("statement.json")).unwrap()).unwrap();
    assert_eq!(st["_type"], STATEMENT_TYPE);
    assert_eq!(st["predicateType"], PREDICATE_TYPE);
    // Statement format 3 (format 2's subjects: the outputs under `output/`, then the log,
    // always; the project's own build type and builder URIs).
    assert_eq!(started["payload"]["statement"], 3);
    assert_eq!(
        st["predicate"]["buildDefinition"]["buildType"],
        "https://github.com/provrun/provrun/blob/main/docs/evidence.md#build-type-agent-run-v1"
    );
    assert_eq!(st["subject"][0]["name"], "output/d/x.md");
    assert_eq!(st["subject"][1]["name"], "output/response.txt");
    assert_eq!(st["subject"][1]["digest"]["sha256"], sha256_hex(b"done\n"));
    assert_eq!(st["subject"][2]["name"], "events.jsonl");
    assert_eq!(
        st["subject"][2]["digest"]["sha256"],
        sha256_hex(&fs::read(dir.join("events.jsonl")).unwrap())
    );
    assert_eq!(st["subject"].as_array().unwrap().len(), 3);
    let pred = &st["predicate"];
    assert_eq!(
        pred["buildDefinition"]["resolvedDependencies"][0]["name"],
        "input/a.txt"
    );
    assert_eq!(pred["runDetails"]["metadata"]["invocationId"], "run-1");
    assert_eq!(
        pred["runDetails"]["builder"]["id"],
        "https://github.com/provrun/provrun/builder/provrun/test"
    );
    let log = &pred["runDetails"]["byproducts"][0];
    assert_eq!(
        log["digest"]["sha256"],
        sha256_hex(&fs::read(dir.join("events.jsonl")).unwrap())
    );
    assert_eq!(log["annotations"]["event_count"], json!(12));
    assert_eq!(
        log["annotations"]["head"],
        line_hash_in(&dir, &lines[11], CHAIN).unwrap()
    );
}

#[test]
fn report_serialises_in_the_documented_shape() {
    let dir = make_bundle("json", Durability::Flush);
    let v = serde_json::to_value(verify(&dir)).unwrap();
    let obj = v.as_object().unwrap();
    // `status` was added later, extending the shape: how the run ended.
    assert_eq!(
        obj.keys().collect::<Vec<_>>(),
        ["checks", "complete", "ok", "status"]
    );
    assert_eq!(v["status"], "finished");
    let codes: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "layout",
            "parse",
            "chain",
            "sequence",
            "blobs",
            "pack",
            "inputs",
            "outputs",
            "statement",
            "tool-calls",
            "signature"
        ]
    );
    assert_eq!(v["checks"][0]["status"], "pass");
    assert_eq!(v["checks"][0].as_object().unwrap().len(), 3);
}

#[test]
fn create_refuses_a_non_empty_directory() {
    let dir = scratch("nonempty");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("x"), b"x").unwrap();
    let err = Recorder::create(&dir, "r", Durability::Flush, &run_started()).unwrap_err();
    assert!(matches!(err, EvidenceError::BundleNotEmpty(_)), "{err}");
    // An empty existing directory is fine.
    let empty = scratch("empty");
    fs::create_dir_all(&empty).unwrap();
    Recorder::create(&empty, "r", Durability::Flush, &run_started()).unwrap();
}

#[test]
fn a_finished_writer_gives_up_the_lock_at_once_under_every_policy() {
    for d in [
        Durability::Flush,
        Durability::PerEvent,
        Durability::PerStep,
        Durability::AtEnd,
        Durability::GroupCommit,
    ] {
        let dir = scratch("release");
        let rec = Recorder::create(&dir, "r", d, &run_started()).unwrap();
        rec.finish(RunEnd {
            status: RunStatus::Paused,
            usage: json!({}),
            error: None,
        })
        .unwrap();
        // The recorder (and the committer's copy of its log) may still be alive: the
        // lock is gone all the same, so a resume right after a pause never trips on it.
        let again = Recorder::reopen(&dir, d).unwrap_or_else(|e| panic!("{d:?}: {e}"));
        drop(rec);
        drop(again);
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn create_removes_what_a_killed_create_left_and_refuses_a_live_one() {
    let dir = scratch("staging");
    fs::create_dir_all(&dir).unwrap();
    let bundle = dir.join("b");
    let staging = dir.join(".b.provrun-creating");
    // What a `create` killed before its rename leaves: a hidden folder, no bundle.
    fs::create_dir_all(staging.join("blobs/sha256")).unwrap();
    fs::write(staging.join("events.jsonl"), b"").unwrap();
    let rec = Recorder::create(&bundle, "r", Durability::AtEnd, &run_started()).unwrap();
    assert!(!staging.exists());
    // While a recorder lives, the bundle is locked: no second writer.
    match Recorder::reopen(&bundle, Durability::AtEnd) {
        Err(EvidenceError::BundleLocked { path, .. }) => assert_eq!(path, bundle),
        other => panic!("{other:?}"),
    }
    drop(rec);
    assert!(!verify(&bundle).complete);
    assert!(verify(&bundle).ok);
    Recorder::reopen(&bundle, Durability::AtEnd).expect("free once the recorder is gone");

    // A `create` of the same bundle still at work holds its hidden folder: refused, and
    // the folder and the path are left alone.
    let other = dir.join("c");
    let busy = dir.join(".c.provrun-creating");
    fs::create_dir(&busy).unwrap();
    fs::write(busy.join("events.jsonl"), b"").unwrap();
    let held = BundleLock::acquire(&busy).unwrap();
    match Recorder::create(&other, "r", Durability::AtEnd, &run_started()) {
        Err(EvidenceError::BundleLocked { path, .. }) => assert_eq!(path, other),
        other => panic!("{other:?}"),
    }
    assert!(busy.exists() && !other.exists());
    drop(held);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn recorder_refuses_structural_events_and_appends_after_finish() {
    let dir = scratch("refuse");
    let rec = Recorder::create(&dir, "r", Durability::Flush, &run_started()).unwrap();
    assert!(matches!(
        rec.record(&run_started()),
        Err(EvidenceError::OutOfOrder(_))
    ));
    let fin = RunFinished {
        status: RunStatus::Finished,
        event_count: 1,
        outputs: 0,
        usage: json!(null),
        error: None,
    };
    assert!(matches!(
        rec.record(&fin),
        Err(EvidenceError::OutOfOrder(_))
    ));
    let clone = rec.clone();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    assert!(matches!(
        clone.record(&tool_call("c", false)),
        Err(EvidenceError::OutOfOrder(_))
    ));
    assert!(clone.declarer().declare("x", json!(1)).is_err());
    let r = verify(&dir);
    assert!(r.ok && r.complete, "{r:#?}");
}

fn tampered(name: &str, edit: impl FnOnce(&std::path::Path)) -> VerifyReport {
    // Cases that edit loose blobs run on a bundle of the first layout.
    let layout = if name.starts_with("blob-") {
        BlobLayout::Loose
    } else {
        BlobLayout::Pack
    };
    let orig = make_bundle_with(name, Durability::Flush, layout);
    let dir = scratch(&format!("{name}-copy"));
    copy_tree(&orig, &dir);
    edit(&dir);
    verify(&dir)
}

#[test]
fn dropped_reordered_duplicated_and_appended_events_fail() {
    let r = tampered("drop", |d| {
        let mut l = read_lines(d);
        l.remove(4);
        write_lines(d, &l);
    });
    assert!(!r.ok && fails(&r).contains(&CheckCode::Chain), "{r:#?}");

    let r = tampered("reorder", |d| {
        let mut l = read_lines(d);
        l.swap(4, 5);
        write_lines(d, &l);
    });
    assert!(!r.ok && fails(&r).contains(&CheckCode::Chain), "{r:#?}");

    let r = tampered("dup", |d| {
        let mut l = read_lines(d);
        let x = l[3].clone();
        l.insert(4, x);
        write_lines(d, &l);
    });
    assert!(!r.ok && fails(&r).contains(&CheckCode::Sequence), "{r:#?}");

    // An event appended after run_finished, correctly chained.
    let r = tampered("append", |d| {
        let mut l = read_lines(d);
        let x = l[7].clone();
        l.push(x);
        write_lines(d, &rechain(d, &l));
    });
    assert!(!r.ok, "{r:#?}");
    assert!(
        fails(&r).contains(&CheckCode::Sequence) && fails(&r).contains(&CheckCode::Statement),
        "{r:#?}"
    );

    // Drop the last events and re-chain: caught by the statement's count and head.
    let r = tampered("truncate-rechain", |d| {
        let mut l = read_lines(d);
        l.truncate(9);
        write_lines(d, &l);
    });
    assert!(!r.ok && fails(&r).contains(&CheckCode::Statement), "{r:#?}");
}

#[test]
fn payload_rewritten_with_chain_recomputed_is_caught_by_the_statement() {
    let r = tampered("rewrite", |d| {
        let mut l = read_lines(d);
        let mut v: serde_json::Value = serde_json::from_str(&l[5]).unwrap();
        v["payload"]["result"] = json!("forged");
        l[5] = to_canonical_string(&v).unwrap();
        write_lines(d, &rechain(d, &l));
    });
    assert!(!r.ok, "{r:#?}");
    assert_eq!(fails(&r), [CheckCode::Statement], "{r:#?}");
    let detail = &r.check(CheckCode::Statement).unwrap().detail;
    assert!(detail.contains("byproducts"), "{detail}");
}

// One flat table of edits, each beside the check it must fail; split, the table would scatter.
#[test]
fn changed_added_and_removed_files_fail() {
    type Edit = Box<dyn FnOnce(&std::path::Path)>;
    let cases: Vec<(&str, Edit, CheckCode)> = vec![
        (
            "in-change",
            Box::new(|d| fs::write(d.join("input/a.txt"), b"hellO\n").unwrap()),
            CheckCode::Inputs,
        ),
        (
            "in-add",
            Box::new(|d| fs::write(d.join("input/new"), b"x").unwrap()),
            CheckCode::Inputs,
        ),
        (
            "in-rm",
            Box::new(|d| fs::remove_file(d.join("input/sub/b.bin")).unwrap()),
            CheckCode::Inputs,
        ),
        (
            "out-change",
            Box::new(|d| fs::write(d.join("output/response.txt"), b"d0ne\n").unwrap()),
            CheckCode::Outputs,
        ),
        (
            "out-add",
            Box::new(|d| fs::write(d.join("output/extra.txt"), b"").unwrap()),
            CheckCode::Outputs,
        ),
        (
            "out-rm",
            Box::new(|d| fs::remove_file(d.join("output/d/x.md")).unwrap()),
            CheckCode::Outputs,
        ),
        (
            "blob-add",
            Box::new(|d| {
                fs::write(d.join("blobs/sha256").join(sha256_hex(b"new")), b"new").unwrap()
            }),
            CheckCode::Blobs,
        ),
        (
            "blob-rm",
            Box::new(|d| fs::remove_file(d.join("blobs/sha256").join(sha256_hex(b"[]"))).unwrap()),
            CheckCode::Blobs,
        ),
        (
            "blob-change",
            Box::new(|d| {
                fs::write(d.join("blobs/sha256").join(sha256_hex(b"[]")), b"[1]").unwrap()
            }),
            CheckCode::Blobs,
        ),
        (
            "pack-append",
            Box::new(|d| {
                // A whole, valid extra chunk and blob record: unreferenced.
                let extra = scratch("pack-append-src");
                let rec = Recorder::create(&extra, "x", Durability::Flush, &run_started()).unwrap();
                rec.put_blob(b"smuggled", "text/plain").unwrap();
                let other = fs::read(extra.join("blobs/pack")).unwrap();
                let mut pack = fs::read(d.join("blobs/pack")).unwrap();
                pack.extend_from_slice(&other[16..]);
                fs::write(d.join("blobs/pack"), pack).unwrap()
            }),
            CheckCode::Blobs,
        ),
        (
            "pack-rm",
            Box::new(|d| fs::remove_file(d.join("blobs/pack")).unwrap()),
            CheckCode::Pack,
        ),
        (
            "pack-cut",
            Box::new(|d| {
                let pack = fs::read(d.join("blobs/pack")).unwrap();
                fs::write(d.join("blobs/pack"), &pack[..pack.len() - 3]).unwrap()
            }),
            CheckCode::Pack,
        ),
        (
            "pack-header",
            Box::new(|d| {
                let mut pack = fs::read(d.join("blobs/pack")).unwrap();
                pack[13] = 2; // another format version
                fs::write(d.join("blobs/pack"), pack).unwrap()
            }),
            CheckCode::Pack,
        ),
        (
            "pack-chunk-data",
            Box::new(|d| {
                let mut pack = fs::read(d.join("blobs/pack")).unwrap();
                let idx = provrun_evidence::pack::read_index(pack.as_slice()).unwrap();
                let c = &idx.chunks[1];
                pack[(c.data_offset + u64::from(c.data_len) / 2) as usize] ^= 1;
                fs::write(d.join("blobs/pack"), pack).unwrap()
            }),
            CheckCode::Pack,
        ),
        (
            "pack-index",
            Box::new(|d| {
                let mut pack = fs::read(d.join("blobs/pack")).unwrap();
                let idx = provrun_evidence::pack::read_index(pack.as_slice()).unwrap();
                // The size field of a blob record.
                let b = &idx.blobs[0];
                pack[(b.offset + 5 + 32) as usize] ^= 1;
                fs::write(d.join("blobs/pack"), pack).unwrap()
            }),
            CheckCode::Blobs,
        ),
        (
            "pack-and-loose",
            Box::new(|d| fs::create_dir(d.join("blobs/sha256")).unwrap()),
            CheckCode::Layout,
        ),
        (
            "statement-change",
            Box::new(|d| {
                let s = fs::read_to_string(d.join("statement.json")).unwrap();
                fs::write(
                    d.join("statement.json"),
                    s.replace("provrun/test", "provrun/evil"),
                )
                .unwrap()
            }),
            CheckCode::Statement,
        ),
        (
            "statement-rm",
            Box::new(|d| fs::remove_file(d.join("statement.json")).unwrap()),
            CheckCode::Statement,
        ),
        (
            "stray",
            Box::new(|d| fs::write(d.join("notes.txt"), b"x").unwrap()),
            CheckCode::Layout,
        ),
    ];
    for (name, edit, code) in cases {
        let r = tampered(name, edit);
        if name == "statement-rm" {
            // Without the statement the run is merely unfinished.
            assert!(r.ok && !r.complete, "{name}: {r:#?}");
            assert_eq!(r.check(code).unwrap().status, CheckStatus::Warn);
            assert_eq!(r.exit_code(), 3);
            continue;
        }
        assert!(!r.ok, "{name}: {r:#?}");
        assert!(fails(&r).contains(&code), "{name}: {r:#?}");
        assert_eq!(r.exit_code(), 1);
    }
}

#[test]
fn torn_last_line_is_incomplete_not_corrupt() {
    let dir = scratch("torn");
    let rec = Recorder::create(&dir, "r", Durability::PerEvent, &run_started()).unwrap();
    rec.record(&tool_call("c1", false)).unwrap();
    drop(rec);
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(dir.join("events.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut f, br#"{"confidence":"obs"#).unwrap();
    let r = verify(&dir);
    assert!(r.ok && !r.complete, "{r:#?}");
    assert_eq!(r.check(CheckCode::Parse).unwrap().status, CheckStatus::Warn);
    assert_eq!(r.exit_code(), 3);
}

/// A finished bundle turned into an unfinished one whose log is `log`, taken from the
/// bundle `src` (whose salts its lines are chained with).
fn unfinished_with_log(name: &str, src: &std::path::Path, log: &[u8]) -> VerifyReport {
    let orig = make_bundle(name, Durability::Flush);
    let dir = scratch(&format!("{name}-copy"));
    copy_tree(&orig, &dir);
    fs::remove_file(dir.join("statement.json")).unwrap();
    fs::write(dir.join("events.jsonl"), log).unwrap();
    fs::copy(src.join(SALTS_FILE), dir.join(SALTS_FILE)).unwrap();
    verify(&dir)
}

#[test]
fn zeros_after_the_last_complete_line_are_a_torn_tail() {
    // What a power loss can leave: the file extended, its last data never written.
    let src = make_bundle("zeros-src", Durability::Flush);
    let lines = read_lines(&src);
    let mut log: Vec<u8> = lines[..3]
        .iter()
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect();
    let mut cut = log.clone();
    log.resize(log.len() + 4096, 0);
    let r = unfinished_with_log("zeros-tail", &src, &log);
    assert!(r.ok && !r.complete, "{r:#?}");
    assert_eq!(r.exit_code(), 3);
    let parse = r.check(CheckCode::Parse).unwrap();
    assert_eq!(parse.status, CheckStatus::Warn);
    assert!(parse.detail.contains("4096 zero bytes"), "{}", parse.detail);
    // Part of the next line, then zeros: torn as well.
    cut.extend_from_slice(&lines[3].as_bytes()[..20]);
    cut.resize(cut.len() + 100, 0);
    let r = unfinished_with_log("zeros-torn", &src, &cut);
    assert_eq!(r.exit_code(), 3, "{r:#?}");
}

#[test]
fn zeros_inside_the_log_or_followed_by_data_are_corrupt() {
    let src = make_bundle("zeros-mid-src", Durability::Flush);
    let lines = read_lines(&src);
    let text = |ls: &[String]| -> Vec<u8> {
        ls.iter()
            .flat_map(|l| format!("{l}\n").into_bytes())
            .collect()
    };
    // A line overwritten by zeros, the rest intact after it.
    let mut log = text(&lines[..2]);
    log.extend(std::iter::repeat_n(0u8, lines[2].len()));
    log.push(b'\n');
    log.extend(text(&lines[3..5]));
    let r = unfinished_with_log("zeros-mid", &src, &log);
    assert_eq!(r.exit_code(), 1, "{r:#?}");
    assert!(fails(&r).contains(&CheckCode::Parse), "{r:#?}");
    // A run of zeros, then a later line with its newline (a block written out of order).
    let mut log = text(&lines[..2]);
    log.extend(std::iter::repeat_n(0u8, 512));
    log.extend(text(&lines[3..4]));
    let r = unfinished_with_log("zeros-then-data", &src, &log);
    assert_eq!(r.exit_code(), 1, "{r:#?}");
    assert!(fails(&r).contains(&CheckCode::Parse), "{r:#?}");
    // Zeros, then more bytes without a newline: still torn, since no complete line
    // follows the zeros (nothing recorded is claimed by them).
    let mut log = text(&lines[..2]);
    log.extend(std::iter::repeat_n(0u8, 16));
    log.extend_from_slice(b"tail");
    let r = unfinished_with_log("zeros-then-bytes", &src, &log);
    assert_eq!(r.exit_code(), 3, "{r:#?}");
    assert!(
        !r.check(CheckCode::Parse)
            .unwrap()
            .detail
            .contains("zero bytes")
    );
}

#[test]
fn a_damaged_blob_no_event_names_is_a_warning_only_while_unfinished() {
    // A power loss can keep a blob's name but not its data (empty or zero-filled).
    let orig = make_bundle_with("blob-damage", Durability::Flush, BlobLayout::Loose);
    let stray = sha256_hex(b"never recorded");
    let lines = read_lines(&orig);
    for (finished, content) in [(false, &b""[..]), (false, &[0u8; 40][..]), (true, &b""[..])] {
        let dir = scratch("blob-damage-copy");
        copy_tree(&orig, &dir);
        fs::write(dir.join("blobs/sha256").join(&stray), content).unwrap();
        if !finished {
            fs::remove_file(dir.join("statement.json")).unwrap();
            let log: String = lines[..lines.len() - 3]
                .iter()
                .map(|l| format!("{l}\n"))
                .collect();
            fs::write(dir.join("events.jsonl"), log).unwrap();
        }
        let r = verify(&dir);
        let blobs = r.check(CheckCode::Blobs).unwrap();
        if finished {
            assert_eq!(r.exit_code(), 1, "{r:#?}");
            assert_eq!(blobs.status, CheckStatus::Fail);
        } else {
            assert_eq!(r.exit_code(), 3, "{r:#?}");
            assert_eq!(blobs.status, CheckStatus::Warn);
        }
        assert!(
            blobs.detail.contains("does not match its name"),
            "{}",
            blobs.detail
        );
    }
    // A blob an event names, with other content: always a failure.
    let dir = scratch("blob-damage-named");
    copy_tree(&orig, &dir);
    fs::remove_file(dir.join("statement.json")).unwrap();
    let named = fs::read_dir(dir.join("blobs/sha256"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let len = fs::metadata(&named).unwrap().len() as usize;
    fs::write(&named, vec![0u8; len]).unwrap();
    let r = verify(&dir);
    assert_eq!(r.exit_code(), 1, "{r:#?}");
    assert_eq!(r.check(CheckCode::Blobs).unwrap().status, CheckStatus::Fail);
}

#[test]
fn every_line_prefix_of_a_finished_log_is_incomplete() {
    let orig = make_bundle("prefix", Durability::Flush);
    let lines = read_lines(&orig);
    for n in 0..=lines.len() {
        let dir = scratch("prefix-copy");
        copy_tree(&orig, &dir);
        fs::remove_file(dir.join("statement.json")).unwrap();
        let mut text: String = lines[..n].iter().map(|l| format!("{l}\n")).collect();
        if n < lines.len() {
            text.push_str(&lines[n][..lines[n].len() / 2]); // and a torn piece of the next
        }
        fs::write(dir.join("events.jsonl"), text).unwrap();
        let r = verify(&dir);
        assert!(r.ok && !r.complete, "prefix of {n} lines: {r:#?}");
    }
}

#[test]
fn reopen_continues_a_paused_run_on_the_same_chain() {
    let dir = scratch("pause");
    let rec = Recorder::create(&dir, "r", Durability::PerStep, &run_started()).unwrap();
    rec.record(&tool_call("c9", true)).unwrap();
    rec.finish(RunEnd::new(RunStatus::Paused)).unwrap();
    let r = verify(&dir);
    assert!(r.ok && r.complete, "paused: {r:#?}");
    drop(rec);

    let rec = Recorder::reopen(&dir, Durability::PerStep).unwrap();
    assert!(!dir.join("statement.json").exists());
    assert_eq!(rec.event_count(), 3);
    rec.record(&tool_call("c9", false)).unwrap();
    let r = verify(&dir);
    assert!(r.ok && !r.complete, "resumed, unfinished: {r:#?}");
    fs::write(rec.output_dir().join("response.txt"), b"ok").unwrap();
    let f = rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    assert_eq!(f.facts.event_count, 6);
    let r = verify(&dir);
    assert!(r.ok && r.complete, "resumed and finished: {r:#?}");
    drop(rec);

    // A finished run cannot be reopened.
    assert!(matches!(
        Recorder::reopen(&dir, Durability::Flush),
        Err(EvidenceError::OutOfOrder(_))
    ));
}

#[test]
fn reopen_cuts_a_torn_line_and_refuses_a_broken_chain() {
    let dir = scratch("reopen-torn");
    let rec = Recorder::create(&dir, "r", Durability::Flush, &run_started()).unwrap();
    rec.record(&tool_call("c1", false)).unwrap();
    drop(rec);
    let log = dir.join("events.jsonl");
    let good = fs::read(&log).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(b"{\"conf");
    fs::write(&log, &torn).unwrap();
    let rec = Recorder::reopen(&dir, Durability::Flush).unwrap();
    assert_eq!(fs::read(&log).unwrap(), good);
    rec.finish(RunEnd::new(RunStatus::Failed)).unwrap();
    assert!(verify(&dir).ok);

    let dir = scratch("reopen-bad");
    let rec = Recorder::create(&dir, "r", Durability::Flush, &run_started()).unwrap();
    rec.record(&tool_call("c1", false)).unwrap();
    rec.record(&tool_call("c2", false)).unwrap();
    drop(rec);
    let mut l = read_lines(&dir);
    l.swap(1, 2);
    write_lines(&dir, &l);
    assert!(matches!(
        Recorder::reopen(&dir, Durability::Flush),
        Err(EvidenceError::InvalidLog { .. })
    ));
}

#[test]
fn deferred_call_never_completed_fails_a_finished_run() {
    let dir = scratch("deferred");
    let rec = Recorder::create(&dir, "r", Durability::Flush, &run_started()).unwrap();
    rec.record(&tool_call("c1", true)).unwrap();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    let r = verify(&dir);
    assert_eq!(fails(&r), [CheckCode::ToolCalls], "{r:#?}");
}

#[test]
fn declarer_writes_declared_events_only() {
    let dir = scratch("declarer");
    let rec = Recorder::create(&dir, "r", Durability::Flush, &run_started()).unwrap();
    let d = rec.declarer();
    let seq = d.declare("license", json!("MIT")).unwrap();
    assert_eq!(seq, 1);
    let l = read_lines(&dir);
    let v: serde_json::Value = serde_json::from_str(&l[1]).unwrap();
    assert_eq!(v["type"], "declared");
    assert_eq!(v["confidence"], "declared");
    assert_eq!(
        v["payload"],
        json!({"source": null, "kind": "license", "data": "MIT"})
    );

    // A declared event with another confidence is rejected by verify.
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    let dir2 = scratch("declarer-forged");
    copy_tree(&dir, &dir2);
    let mut l = read_lines(&dir2);
    l[1] = l[1].replace("\"confidence\":\"declared\"", "\"confidence\":\"observed\"");
    write_lines(&dir2, &rechain(&dir2, &l));
    let r = verify(&dir2);
    assert!(fails(&r).contains(&CheckCode::Parse), "{r:#?}");
}

#[test]
fn blobs_are_deduplicated_and_content_addressed() {
    let dir = scratch("blobs");
    let rec = Recorder::create(&dir, "r", Durability::GroupCommit, &run_started()).unwrap();
    let a = rec.put_blob(b"same", "text/plain").unwrap();
    let pack_len = fs::metadata(dir.join("blobs/pack")).unwrap().len();
    let b = rec.put_blob(b"same", "text/plain").unwrap();
    assert_eq!(a, b);
    assert_eq!(
        fs::metadata(dir.join("blobs/pack")).unwrap().len(),
        pack_len,
        "the same bytes are stored once"
    );
    assert_eq!(a.digest.sha256, sha256_hex(b"same"));
    assert_eq!(a.size, 4);
    assert_eq!(read_blob(&dir, &a).unwrap(), b"same");
    assert_eq!(
        read_blob_by_digest(&dir, &a.digest.sha256).unwrap(),
        b"same"
    );
    // The first layout, on request: one file per blob.
    let loose = scratch("blobs-loose");
    let rec = Recorder::create_with_layout(
        &loose,
        "r",
        Durability::Flush,
        &run_started(),
        BlobLayout::Loose,
    )
    .unwrap();
    assert_eq!(rec.blob_layout(), BlobLayout::Loose);
    let a = rec.put_blob(b"same", "text/plain").unwrap();
    assert_eq!(fs::read(loose.join(a.relative_path())).unwrap(), b"same");
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        json!({"digest": {"sha256": sha256_hex(b"same")}, "size": 4, "media_type": "text/plain"})
    );
    let (v, none) = rec.tool_value(json!({"small": true})).unwrap();
    assert_eq!((v, none), (json!({"small": true}), None));
}

#[test]
fn reopen_after_a_crash_while_finishing_then_finish_again() {
    let dir = make_bundle("crash-finish", Durability::Flush);
    // Simulate a kill after the output_produced block but before run_finished.
    let mut l = read_lines(&dir);
    l.pop();
    write_lines(&dir, &l);
    fs::remove_file(dir.join("statement.json")).unwrap();
    let r = verify(&dir);
    assert!(r.ok && !r.complete, "{r:#?}");
    let rec = Recorder::reopen(&dir, Durability::Flush).unwrap();
    fs::write(rec.output_dir().join("late.txt"), b"late").unwrap();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    let r = verify(&dir);
    assert!(r.ok && r.complete, "{r:#?}");
    let st: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("statement.json")).unwrap()).unwrap();
    // Two outputs and the log.
    assert_eq!(st["subject"].as_array().unwrap().len(), 4);
}

#[test]
fn handles_are_send_sync_and_futures_send() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    fn assert_send<T: Send>(_: &T) {}
    assert_send_sync::<Recorder>();
    assert_send_sync::<Declarer>();
    let dir = scratch("send");
    let rec = Recorder::create(&dir, "r", Durability::GroupCommit, &run_started()).unwrap();
    let fut = rec.record_async(&tool_call("c", false));
    assert_send(&fut);
    assert_eq!(fut.wait().unwrap(), 1);
}

#[test]
fn events_and_blobs_read_back_checked() {
    let dir = make_bundle("read", Durability::Flush);
    let events = read_events(&dir).unwrap();
    assert_eq!(events.len(), 12);
    assert_eq!(events[3].kind, EventType::ModelCalled);
    let called: ModelCalled = serde_json::from_value(events[3].payload.clone()).unwrap();
    let response = read_blob(&dir, called.response.as_ref().unwrap()).unwrap();
    assert!(response.starts_with(b"data: "));

    let mut forged = called.response.clone().unwrap();
    forged.size += 1;
    assert!(read_blob(&dir, &forged).is_err());
    forged.digest.sha256 = "../../events.jsonl".into();
    assert!(read_blob(&dir, &forged).is_err());

    let mut l = read_lines(&dir);
    l.swap(2, 3);
    write_lines(&dir, &l);
    assert!(matches!(
        read_events(&dir),
        Err(EvidenceError::InvalidLog { .. })
    ));
}

#[test]
fn reopen_drops_blobs_no_event_names_from_the_pack_and_cuts_a_torn_tail() {
    let index_of = |dir: &std::path::Path| {
        provrun_evidence::pack::read_index(fs::read(dir.join("blobs/pack")).unwrap().as_slice())
            .unwrap()
    };
    let named = |rec: &Recorder, id: &str, bytes: &[u8]| {
        let blob = rec.put_blob(bytes, "text/plain").unwrap();
        let mut call = tool_call(id, false);
        call.result_blob = Some(blob);
        rec.record(&call).unwrap();
    };
    let long = |seed: u8| -> Vec<u8> {
        (0..40_000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 ^ seed)
            .collect()
    };
    for orphan_in_the_middle in [false, true] {
        let dir = scratch("reopen-pack");
        let rec = Recorder::create(&dir, "r", Durability::PerEvent, &run_started()).unwrap();
        named(&rec, "a", &long(1));
        rec.put_blob(&long(2), "text/plain").unwrap(); // stored, then the crash
        if orphan_in_the_middle {
            named(&rec, "c", &long(3));
        }
        drop(rec);
        // A record cut short by the crash.
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(dir.join("blobs/pack"))
            .unwrap();
        std::io::Write::write_all(&mut f, &[1, 200, 0, 0, 0, 7, 7]).unwrap();
        let r = verify(&dir);
        assert_eq!(r.exit_code(), 3, "{r:#?}");
        assert_eq!(r.check(CheckCode::Pack).unwrap().status, CheckStatus::Warn);
        assert_eq!(r.check(CheckCode::Blobs).unwrap().status, CheckStatus::Warn);
        assert_eq!(
            index_of(&dir).blobs.len(),
            2 + usize::from(orphan_in_the_middle)
        );

        let rec = Recorder::reopen(&dir, Durability::PerEvent).unwrap();
        let index = index_of(&dir);
        assert!(index.torn.is_none());
        assert_eq!(index.blobs.len(), 1 + usize::from(orphan_in_the_middle));
        assert!(index.find_hex(&sha256_hex(&long(2))).is_none());
        named(&rec, "d", &long(4));
        rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
        let r = verify(&dir);
        assert!(r.ok && r.complete, "{r:#?}");
        let leftovers: Vec<_> = fs::read_dir(dir.join("blobs"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["pack"]);
    }
}

#[test]
fn every_statement_names_the_log_and_an_empty_subject_list_fails_verify() {
    for status in [
        RunStatus::Paused,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::Finished,
    ] {
        let dir = scratch(&format!("subject-{}", status.as_str()));
        let rec = Recorder::create(&dir, "r", Durability::Flush, &run_started()).unwrap();
        rec.record(&tool_call("c1", status == RunStatus::Paused))
            .unwrap();
        rec.finish(RunEnd::new(status)).unwrap();
        let path = dir.join("statement.json");
        let st: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        // No outputs: the log is the one subject.
        let subjects = st["subject"].as_array().unwrap();
        assert_eq!(subjects.len(), 1, "{status:?}: {st}");
        assert_eq!(subjects[0]["name"], "events.jsonl");
        assert_eq!(
            subjects[0]["digest"]["sha256"],
            sha256_hex(&fs::read(dir.join("events.jsonl")).unwrap())
        );
        let r = verify(&dir);
        assert!(r.ok && r.complete, "{status:?}: {r:#?}");

        // The statement of a bundle of format 2 with its subjects taken away fails.
        let mut emptied = st.clone();
        emptied["subject"] = json!([]);
        fs::write(&path, to_canonical_string(&emptied).unwrap() + "\n").unwrap();
        let r = verify(&dir);
        assert!(!r.ok, "{status:?}: {r:#?}");
        let failed: Vec<&Check> = r
            .checks
            .iter()
            .filter(|c| c.status == CheckStatus::Fail)
            .collect();
        assert!(
            failed.iter().any(|c| c.detail.contains("no subject")),
            "{failed:#?}"
        );
    }
}

#[test]
fn builder_ids_become_uris_and_uris_stay_as_given() {
    assert_eq!(
        builder_uri("provrun/0.1.0"),
        "https://github.com/provrun/provrun/builder/provrun/0.1.0"
    );
    assert_eq!(
        builder_uri("my tool 1"),
        "https://github.com/provrun/provrun/builder/my%20tool%201"
    );
    // Each format's builder id and build type, as its bundles were written: format 2's
    // placeholder URIs stay, so its statements are rebuilt byte for byte.
    assert_eq!(
        provrun_evidence::builder_id(1, "provrun/0.1.0"),
        "provrun/0.1.0"
    );
    assert_eq!(
        provrun_evidence::builder_id(2, "provrun/0.1.0"),
        "https://provrun.invalid/builder/provrun/0.1.0"
    );
    assert_eq!(
        provrun_evidence::builder_id(3, "provrun/0.1.0"),
        builder_uri("provrun/0.1.0")
    );
    assert_eq!(
        provrun_evidence::build_type(2),
        provrun_evidence::LEGACY_BUILD_TYPE
    );
    assert_eq!(
        provrun_evidence::build_type(3),
        provrun_evidence::BUILD_TYPE
    );
    assert_eq!(
        builder_uri("https://example.com/ci/runner@v2"),
        "https://example.com/ci/runner@v2"
    );
    // Not a URI: no scheme, or a space in it.
    assert!(builder_uri("://x").starts_with(BUILDER_URI_BASE));
    assert!(builder_uri("https://a b").starts_with(BUILDER_URI_BASE));
}

#[test]
fn an_importer_stamps_events_with_the_times_its_record_gives() {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let dir = scratch("clock");
    let start = UNIX_EPOCH + Duration::from_millis(1_765_000_000_123);
    let options = CreateOptions::default().clock(start);
    let rec =
        Recorder::create_with(&dir, "run-1", Durability::Flush, &run_started(), &options).unwrap();
    rec.set_clock(Some(start + Duration::from_millis(2_500)));
    rec.record(&tool_call("c1", false)).unwrap();
    rec.set_clock(None);
    let before = SystemTime::now();
    rec.record(&tool_call("c1", false)).unwrap();
    rec.set_clock(Some(start + Duration::from_secs(60)));
    rec.finish(RunEnd {
        status: RunStatus::Finished,
        usage: json!({}),
        error: None,
    })
    .unwrap();
    let lines = read_lines(&dir);
    let ts: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["ts"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ts[0], "2025-12-06T05:46:40.123Z");
    assert_eq!(ts[1], "2025-12-06T05:46:42.623Z");
    // Back on the clock: now, not the importer's time.
    let now = humantime::parse_rfc3339(&ts[2]).unwrap();
    assert!(now + Duration::from_secs(1) >= before, "{}", ts[2]);
    assert_eq!(ts.last().unwrap(), "2025-12-06T05:47:40.123Z");
    // The statement's times are those of run_started and run_finished.
    let st: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("statement.json")).unwrap()).unwrap();
    let metadata = &st["predicate"]["runDetails"]["metadata"];
    assert_eq!(metadata["startedOn"], ts[0].as_str());
    assert_eq!(metadata["finishedOn"], ts.last().unwrap().as_str());
    assert!(verify(&dir).ok);
}
