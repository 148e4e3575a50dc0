//! Whatever is left under `output/`, `finish` finishes a bundle that verifies: entries
//! that are not regular files or folders, names that are not UTF-8 and files over the
//! output quota are removed and recorded by `output_skipped`; a 1 TiB sparse file is
//! never read; `verify` checks the new event.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Instant;

use common::*;
use provrun_evidence::*;

fn new_recorder(name: &str) -> (std::path::PathBuf, Recorder) {
    let dir = scratch(name);
    let rec = Recorder::create(&dir, "run-out", Durability::Flush, &run_started()).unwrap();
    (dir, rec)
}

fn skipped(dir: &std::path::Path) -> Vec<OutputSkipped> {
    read_events(dir)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::OutputSkipped)
        .map(|e| serde_json::from_value(e.payload).unwrap())
        .collect()
}

#[test]
fn special_files_are_left_out_recorded_and_removed() {
    let (dir, rec) = new_recorder("special");
    let out = rec.output_dir();
    fs::write(out.join("ok.txt"), b"ok").unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(out.join("sock")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", out.join("link")).unwrap();
    fs::create_dir(out.join("sgid")).unwrap();
    fs::set_permissions(out.join("sgid"), fs::Permissions::from_mode(0o2755)).unwrap();
    fs::write(out.join("sgid/x"), b"x").unwrap();
    fs::set_permissions(out.join("sgid/x"), fs::Permissions::from_mode(0o4000)).unwrap();
    // A device node needs CAP_MKNOD: root (as CI runs) makes one; others test the rest.
    let dev = out.join("null");
    let made = std::process::Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("note: cannot make a device node here (not root); that case is not tested");
    }
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    let r = verify(&dir);
    assert!(r.ok && r.complete, "{r:#?}");

    let mut got: Vec<(String, String, String)> = skipped(&dir)
        .into_iter()
        .map(|s| (s.path, s.kind, s.reason))
        .collect();
    got.sort();
    let mut want = vec![
        ("link".into(), "symlink".into(), "not_regular".into()),
        ("sock".into(), "socket".into(), "not_regular".into()),
    ];
    if made {
        want.insert(
            1,
            ("null".into(), "char_device".into(), "not_regular".into()),
        );
    }
    assert_eq!(got, want);
    for gone in ["link", "sock", "null"] {
        assert!(
            fs::symlink_metadata(out.join(gone)).is_err(),
            "{gone} stays"
        );
    }
    // Set-uid, set-gid and sticky bits are gone; the file is still readable.
    let dmode = fs::metadata(out.join("sgid")).unwrap().permissions().mode();
    assert_eq!(dmode & 0o7777, 0o755);
    let fmode = fs::metadata(out.join("sgid/x"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(fmode & 0o7777, 0o400);
}

#[test]
fn a_terabyte_sparse_file_over_the_quota_is_left_out_without_being_read() {
    let (dir, rec) = new_recorder("sparse");
    let out = rec.output_dir();
    let f = fs::File::create(out.join("huge")).unwrap();
    if let Err(e) = f.set_len(1 << 40) {
        eprintln!("note: this file system cannot hold a 1 TiB sparse file ({e}); skipped");
        return;
    }
    drop(f);
    fs::write(out.join("small.txt"), b"12345").unwrap();
    let started = Instant::now();
    rec.finish_with(
        RunEnd::new(RunStatus::Finished),
        &OutputPolicy {
            max_total_bytes: 1 << 20,
        },
    )
    .unwrap();
    // Reading 1 TiB of zeros takes many minutes; being left out takes no time.
    assert!(started.elapsed().as_secs() < 60);
    let s = skipped(&dir);
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].path.as_str(), s[0].reason.as_str(), s[0].size),
        ("huge", "over_quota", Some(1 << 40))
    );
    let r = verify(&dir);
    assert!(r.ok && r.complete, "{r:#?}");
    let outputs: Vec<String> = read_events(&dir)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventType::OutputProduced)
        .map(|e| e.payload["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(outputs, ["small.txt"]);
}

#[test]
fn the_quota_counts_files_in_path_order_and_an_exact_fit_is_kept() {
    let (dir, rec) = new_recorder("quota-order");
    let out = rec.output_dir();
    fs::write(out.join("a"), [0u8; 6]).unwrap();
    fs::write(out.join("b"), [0u8; 5]).unwrap();
    fs::write(out.join("c"), [0u8; 4]).unwrap();
    rec.finish_with(
        RunEnd::new(RunStatus::Finished),
        &OutputPolicy {
            max_total_bytes: 10,
        },
    )
    .unwrap();
    let s = skipped(&dir);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].path.as_str(), s[0].size), ("b", Some(5)));
    assert!(verify(&dir).ok);
}

#[test]
fn names_are_escaped_losslessly() {
    assert_eq!(escape_path_bytes(b"plain/\xc3\xa9"), "plain/é");
    assert_eq!(escape_path_bytes(b"a\\b\xff\x80"), "a\\\\b\\xff\\x80");
    // A name that looks like an escape cannot be confused with one.
    assert_ne!(escape_path_bytes(b"\\xff"), escape_path_bytes(b"\xff"));
}

/// A bundle with one `output_skipped` event, and its log lines.
fn skipped_bundle(name: &str) -> (std::path::PathBuf, Vec<String>) {
    let (dir, rec) = new_recorder(name);
    std::os::unix::fs::symlink("x", rec.output_dir().join("link")).unwrap();
    fs::write(rec.output_dir().join("keep.txt"), b"k").unwrap();
    rec.record(&tool_call("c1", false)).unwrap();
    rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    assert!(verify(&dir).ok);
    let lines = read_lines(&dir);
    (dir, lines)
}

#[test]
fn verify_checks_output_skipped_events() {
    // An entry recorded as left out that is still in the bundle.
    let (dir, lines) = skipped_bundle("skip-present");
    fs::write(dir.join("output/link"), b"back").unwrap();
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Outputs), "{r:#?}");
    let _ = lines;

    // A path that does not escape its raw bytes.
    let (dir, lines) = skipped_bundle("skip-mismatch");
    let lines: Vec<String> = lines
        .into_iter()
        .map(|l| l.replace("\"path\":\"link\"", "\"path\":\"other\""))
        .collect();
    write_lines(&dir, &rechain(&dir, &lines));
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Outputs), "{r:#?}");

    // An output_skipped event anywhere but the block before run_finished.
    let (dir, lines) = skipped_bundle("skip-moved");
    let at = lines
        .iter()
        .position(|l| l.contains("\"output_skipped\""))
        .unwrap();
    let mut moved = lines.clone();
    let line = moved.remove(at);
    moved.insert(1, line);
    write_lines(&dir, &rechain(&dir, &moved));
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Sequence), "{r:#?}");
}
