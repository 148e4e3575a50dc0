//! `verify` on hostile bundles: never panics, never follows symlinks, reports failures.

use crate::common;

use std::fs;
use std::os::unix::fs::symlink;

use common::*;
use provrun_evidence::*;

fn copy_of(name: &str) -> std::path::PathBuf {
    let orig = make_bundle(name, Durability::Flush);
    let dir = scratch(&format!("{name}-copy"));
    copy_tree(&orig, &dir);
    dir
}

#[test]
fn missing_or_wrong_bundle_path_fails_cleanly() {
    let r = verify(scratch("nothing-here"));
    assert!(!r.ok && !r.complete);
    assert_eq!(r.checks[0].code, CheckCode::Layout);
    assert_eq!(r.checks.len(), 11);

    let file = scratch("a-file");
    fs::write(&file, b"x").unwrap();
    assert!(!verify(&file).ok);

    let dir = copy_of("missing-log");
    fs::remove_file(dir.join("events.jsonl")).unwrap();
    let r = verify(&dir);
    assert!(
        fails(&r).contains(&CheckCode::Layout) && fails(&r).contains(&CheckCode::Parse),
        "{r:#?}"
    );
}

#[test]
fn symlinks_are_refused_not_followed() {
    // A symlinked input pointing at a file with the right content still fails.
    let dir = copy_of("symlink-input");
    let outside = scratch("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("a.txt"), b"hello\n").unwrap();
    fs::remove_file(dir.join("input/a.txt")).unwrap();
    symlink(outside.join("a.txt"), dir.join("input/a.txt")).unwrap();
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Inputs), "{r:#?}");

    // A symlinked events log.
    let dir = copy_of("symlink-log");
    let real = outside.join("events.jsonl");
    fs::rename(dir.join("events.jsonl"), &real).unwrap();
    symlink(&real, dir.join("events.jsonl")).unwrap();
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Layout), "{r:#?}");

    // A symlinked pack.
    let dir = copy_of("symlink-pack");
    let name = dir.join("blobs/pack");
    fs::rename(&name, outside.join("pack")).unwrap();
    symlink(outside.join("pack"), &name).unwrap();
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Layout), "{r:#?}");
    assert!(fails(&r).contains(&CheckCode::Blobs), "{r:#?}");

    // A symlinked loose blob (the first blob layout).
    let dir = scratch("symlink-blob");
    copy_tree(
        &make_bundle_with("symlink-blob-orig", Durability::Flush, BlobLayout::Loose),
        &dir,
    );
    let name = dir.join("blobs/sha256").join(sha256_hex(b"[]"));
    fs::rename(&name, outside.join("blob")).unwrap();
    symlink(outside.join("blob"), &name).unwrap();
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Blobs), "{r:#?}");

    // The bundle itself through a symlink.
    let dir = copy_of("symlink-root");
    let link = scratch("root-link");
    symlink(&dir, &link).unwrap();
    assert!(fails(&verify(&link)).contains(&CheckCode::Layout));
}

#[test]
fn fifo_in_output_is_refused_without_blocking() {
    let dir = copy_of("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(dir.join("output/pipe"))
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        return; // no mkfifo on this system
    }
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Outputs), "{r:#?}");
}

#[test]
fn non_utf8_huge_and_garbage_lines_fail_without_panic() {
    let dir = copy_of("garbage");
    let mut bytes = fs::read(dir.join("events.jsonl")).unwrap();
    bytes.splice(10..12, [0xff, 0xfe]);
    fs::write(dir.join("events.jsonl"), &bytes).unwrap();
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Parse), "{r:#?}");

    let dir = copy_of("huge");
    let mut bytes = fs::read(dir.join("events.jsonl")).unwrap();
    bytes.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
    bytes.push(b'\n');
    fs::write(dir.join("events.jsonl"), &bytes).unwrap();
    let r = verify(&dir);
    assert!(!r.ok, "{r:#?}");
    assert!(
        r.check(CheckCode::Parse).unwrap().detail.contains("limit"),
        "{r:#?}"
    );

    for junk in [
        &b""[..],
        b"\n",
        b"null\n",
        b"[]\n",
        b"{}\n",
        b"{\"v\":1}\n",
        b"\n\n\n",
    ] {
        let dir = copy_of("junk");
        fs::write(dir.join("events.jsonl"), junk).unwrap();
        fs::remove_file(dir.join("statement.json")).unwrap();
        let r = verify(&dir);
        if junk.is_empty() {
            assert!(r.ok && !r.complete, "empty log: {r:#?}");
        } else {
            assert!(!r.ok, "{:?}: {r:#?}", String::from_utf8_lossy(junk));
        }
    }

    let dir = copy_of("bad-statement");
    fs::write(dir.join("statement.json"), [0xff, 0, 1]).unwrap();
    assert!(fails(&verify(&dir)).contains(&CheckCode::Statement));
}

#[test]
fn wrong_types_in_the_layout_fail() {
    let dir = copy_of("types");
    fs::remove_dir_all(dir.join("output")).unwrap();
    fs::write(dir.join("output"), b"not a dir").unwrap();
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Layout), "{r:#?}");

    let dir = copy_of("types2");
    fs::remove_file(dir.join("statement.json")).unwrap();
    fs::create_dir(dir.join("statement.json")).unwrap();
    assert!(fails(&verify(&dir)).contains(&CheckCode::Layout));

    let dir = copy_of("blob-traversal");
    let mut l = read_lines(&dir);
    l[3] = l[3].replacen(&sha256_hex(br#"{"messages":[]}"#), "../../events.jsonl", 1);
    write_lines(&dir, &rechain(&dir, &l));
    assert!(fails(&verify(&dir)).contains(&CheckCode::Blobs));
}

#[test]
fn a_signature_file_without_statement_fails() {
    let dir = copy_of("sig-orphan");
    fs::remove_file(dir.join("statement.json")).unwrap();
    fs::write(dir.join(provrun_evidence::dsse::DSSE_FILE), b"{}").unwrap();
    let r = verify(&dir);
    assert!(fails(&r).contains(&CheckCode::Signature), "{r:#?}");
}
