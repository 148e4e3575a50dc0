//! `verify_with_events` (one read of the log for both the checks and the events) gives
//! back exactly what `read_events` reads, and nothing wherever `read_events` fails.

use crate::common::*;
use crate::redaction::redacted_pair;

use std::fs;
use std::path::Path;

use provrun_evidence::*;

/// The report of `verify` and the events of `read_events`, each on its own, beside the
/// pair `verify_with_events` gives from one read.
fn compare(bundle: &Path) {
    let (report, events) = verify_with_events(bundle, &VerifyOptions::default());
    let alone = verify(bundle);
    assert_eq!(
        serde_json::to_value(&report).unwrap(),
        serde_json::to_value(&alone).unwrap(),
        "{}",
        bundle.display()
    );
    match read_events(bundle) {
        Ok(read) => {
            let events = events.unwrap_or_else(|| panic!("no events for {}", bundle.display()));
            assert_eq!(
                serde_json::to_value(&events).unwrap(),
                serde_json::to_value(&read).unwrap()
            );
        }
        Err(e) => assert!(
            events.is_none(),
            "{}: read_events fails ({e}) but events came back",
            bundle.display()
        ),
    }
}

#[test]
fn one_read_gives_what_verify_and_read_events_give_apart() {
    let (src, out) = redacted_pair(BlobLayout::Pack, "once");
    compare(&src);
    compare(&out);
    assert!(read_events(&out).is_ok());

    // A torn last line: skipped by both.
    let torn = scratch("once-torn");
    copy_tree(&src, &torn);
    let log = torn.join("events.jsonl");
    let mut bytes = fs::read(&log).unwrap();
    bytes.extend_from_slice(br#"{"seq":99,"ty"#);
    fs::write(&log, &bytes).unwrap();
    compare(&torn);

    // A changed byte in a complete line: the chain breaks.
    let flipped = scratch("once-flipped");
    copy_tree(&src, &flipped);
    let log = flipped.join("events.jsonl");
    let text = fs::read_to_string(&log).unwrap();
    fs::write(&log, text.replacen("\"run-r\"", "\"run-x\"", 1)).unwrap();
    assert!(read_events(&flipped).is_err());
    compare(&flipped);

    // Two lines swapped: out of sequence.
    let swapped = scratch("once-swapped");
    copy_tree(&src, &swapped);
    let log = swapped.join("events.jsonl");
    let text = fs::read_to_string(&log).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.swap(1, 2);
    fs::write(&log, format!("{}\n", lines.join("\n"))).unwrap();
    assert!(read_events(&swapped).is_err());
    compare(&swapped);

    // A redacted bundle whose redaction record does not read.
    let broken = scratch("once-broken-record");
    copy_tree(&out, &broken);
    fs::write(broken.join("redactions.jsonl"), b"not json\n").unwrap();
    assert!(read_events(&broken).is_err());
    compare(&broken);

    // No log at all.
    let missing = scratch("once-missing");
    copy_tree(&src, &missing);
    fs::remove_file(missing.join("events.jsonl")).unwrap();
    compare(&missing);
}
