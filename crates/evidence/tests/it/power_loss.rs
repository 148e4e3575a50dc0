//! Simulated power loss, per durability policy.
//!
//! A scripted run records into a bundle while the `sync-probe` feature reports every
//! sync the recorder makes (log bytes covered, file data synced, directory synced), and
//! the test notes each point where the recorder *acknowledged* events as durable (under
//! the policy's promise). Each report takes a snapshot of what was written by then. For
//! every instant, the test rebuilds the bundles that a power loss could leave: the log's
//! synced prefix, plus any prefix of its un-synced tail (cut at a line boundary or inside
//! a line), possibly followed by zero bytes (space the file system allocated but never
//! wrote); every file whose data and name were synced as it was; every other file
//! absent, intact, empty or zero-filled.
//!
//! It checks that each acknowledgement was honest (the acknowledged lines, and every
//! file they name, were on stable storage at that instant), and what `verify` makes of
//! the rebuilt bundles: under `PerEvent` and `GroupCommit` every one is complete or
//! incomplete, never failed; under `PerStep` and `AtEnd` the ones without an un-synced
//! tail are too, while a surviving tail line may name a blob that did not survive, which
//! `verify` cannot tell from a deleted blob and reports as a `blobs` failure.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use common::{run_started, scratch, tool_call};
use provrun_evidence::probe::{SyncPoint, set_observer};
use provrun_evidence::*;
use serde_json::{Value, json};

/// What happened at one instant of the timeline.
#[derive(Debug, Clone)]
enum Mark {
    /// A sync returned.
    Sync(SyncPoint),
    /// The recorder promised that the first `lines` lines (and the files they name) are
    /// durable, and with `statement`, `statement.json` too.
    Ack { lines: usize, statement: bool },
}

/// One instant, with what had been written by then.
#[derive(Debug, Clone)]
struct Entry {
    mark: Mark,
    /// Every file of the bundle but the log, relative, with its length.
    files: BTreeMap<PathBuf, u64>,
    /// Bytes in the log.
    log_len: u64,
}

/// Bundles under observation, and each one's timeline.
static TIMELINES: Mutex<Vec<(PathBuf, Vec<Entry>)>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

fn snapshot(root: &Path) -> (BTreeMap<PathBuf, u64>, u64) {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, u64>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                walk(root, &e.path(), out);
            } else {
                let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
                if rel != Path::new("events.jsonl") {
                    out.insert(rel, meta.len());
                }
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(root, root, &mut files);
    let log_len = std::fs::metadata(root.join("events.jsonl")).map_or(0, |m| m.len());
    (files, log_len)
}

fn note(root: &Path, mark: Mark) {
    let (files, log_len) = snapshot(root);
    let mut t = TIMELINES.lock().unwrap();
    if let Some((_, entries)) = t.iter_mut().find(|(r, _)| r == root) {
        entries.push(Entry {
            mark,
            files,
            log_len,
        });
    }
}

fn observe(root: &Path) {
    INSTALL.call_once(|| {
        assert!(set_observer(|point| {
            let path = match &point {
                SyncPoint::Log { path, .. }
                | SyncPoint::File { path }
                | SyncPoint::Dir { path } => path.clone(),
            };
            let root = TIMELINES
                .lock()
                .unwrap()
                .iter()
                .map(|(r, _)| r.clone())
                .find(|r| path.starts_with(r));
            if let Some(root) = root {
                note(&root, Mark::Sync(point));
            }
        }));
    });
    TIMELINES
        .lock()
        .unwrap()
        .push((root.to_path_buf(), Vec::new()));
}

fn timeline(root: &Path) -> Vec<Entry> {
    let t = TIMELINES.lock().unwrap();
    t.iter().find(|(r, _)| r == root).unwrap().1.clone()
}

/// Ack the first `lines` lines if the policy promises per-event durability.
fn ack_event(rec: &Recorder, per_event: bool) {
    if per_event {
        note(
            rec.bundle_dir(),
            Mark::Ack {
                lines: rec.event_count() as usize,
                statement: false,
            },
        );
    }
}

fn model_called(request: BlobRef, response: BlobRef) -> ModelCalled {
    ModelCalled {
        model: "test".into(),
        stream: false,
        request: Some(request),
        response: Some(response),
        usage: json!({"input_tokens": 10, "output_tokens": 5}),
        finish_reason: Some("tool_calls".into()),
        duration_ms: 4,
        error: None,
        attempts: vec![],
        response_rendered: false,
        http: None,
        tool_calls: Vec::new(),
    }
}

/// A run of three steps: inputs, then per step two blobs, a model call, tool calls
/// (under `GroupCommit` three at once, awaited together) and an output file; then the
/// end. Returns the bundle.
fn record_run(name: &str, policy: Durability) -> PathBuf {
    let root = scratch(name);
    observe(&root);
    let per_event = matches!(policy, Durability::PerEvent | Durability::GroupCommit);
    let per_step = per_event || policy == Durability::PerStep;
    let rec = Recorder::create(&root, "run-pl", policy, &run_started()).unwrap();
    ack_event(&rec, per_event);
    std::fs::write(rec.input_dir().join("a.txt"), b"alpha\n").unwrap();
    std::fs::create_dir(rec.input_dir().join("sub")).unwrap();
    std::fs::write(rec.input_dir().join("sub/b.bin"), [0u8, 1, 2, 255]).unwrap();
    rec.record_inputs().unwrap();
    ack_event(&rec, per_event);
    for step in 0..3 {
        let request = rec
            .put_blob(
                format!(r#"{{"step":{step},"messages":[]}}"#).as_bytes(),
                "application/json",
            )
            .unwrap();
        let response = rec
            .put_blob(
                format!("data: {{\"step\":{step}}}\n\ndata: [DONE]\n\n").as_bytes(),
                "text/event-stream",
            )
            .unwrap();
        rec.record(&model_called(request, response)).unwrap();
        ack_event(&rec, per_event);
        if policy == Durability::GroupCommit {
            // Three writers' lines, one sync for all of them.
            let pending: Vec<_> = (0..3)
                .map(|i| rec.record_async(&tool_call(&format!("c{step}-{i}"), false)))
                .collect();
            for p in pending {
                let seq = p.wait().unwrap();
                note(
                    rec.bundle_dir(),
                    Mark::Ack {
                        lines: seq as usize + 1,
                        statement: false,
                    },
                );
            }
        } else {
            rec.record(&tool_call(&format!("c{step}"), false)).unwrap();
            ack_event(&rec, per_event);
        }
        let mut big = tool_call(&format!("big{step}"), false);
        let (result, blob) = rec
            .tool_value(json!(format!("{step}").repeat(INLINE_LIMIT + 10)))
            .unwrap();
        big.result = result;
        big.result_blob = blob;
        rec.record(&big).unwrap();
        ack_event(&rec, per_event);
        std::fs::write(
            rec.output_dir().join(format!("step{step}.txt")),
            format!("step {step}\n"),
        )
        .unwrap();
        rec.step().unwrap();
        if per_step {
            note(
                rec.bundle_dir(),
                Mark::Ack {
                    lines: rec.event_count() as usize,
                    statement: false,
                },
            );
        }
    }
    let finished = rec.finish(RunEnd::new(RunStatus::Finished)).unwrap();
    if policy != Durability::Flush {
        note(
            rec.bundle_dir(),
            Mark::Ack {
                lines: finished.facts.event_count as usize,
                statement: true,
            },
        );
    }
    root
}

/// The sha256 hex of every blob a JSON value names.
fn blob_refs(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            if let Some(hex) = m
                .get("digest")
                .and_then(|d| d.get("sha256"))
                .and_then(Value::as_str)
            {
                out.insert(hex.to_owned());
            }
            m.values().for_each(|x| blob_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| blob_refs(x, out)),
        _ => {}
    }
}

/// The pack's path in a bundle.
const PACK: &str = "blobs/pack";

/// What each line needs on stable storage: the files it names (blobs of the first
/// layout, inputs, outputs), and how many leading bytes of the pack (the end of the
/// last index record of a blob it names; 0 when it names none).
fn named_files(root: &Path, events: &[Event]) -> Vec<(BTreeSet<PathBuf>, u64)> {
    let pack = std::fs::read(root.join(PACK)).ok();
    let index = pack
        .as_ref()
        .map(|p| provrun_evidence::pack::read_index(p.as_slice()).unwrap());
    events
        .iter()
        .map(|e| {
            let mut hexes = BTreeSet::new();
            blob_refs(&e.payload, &mut hexes);
            let mut pack_need = 0;
            if let Some(index) = &index {
                for h in std::mem::take(&mut hexes) {
                    let b = index.find_hex(&h).expect("every named blob is in the pack");
                    pack_need = pack_need.max(index.blobs[b as usize].end);
                }
            }
            let mut files: BTreeSet<PathBuf> = hexes
                .into_iter()
                .map(|h| PathBuf::from("blobs/sha256").join(h))
                .collect();
            let folder = match e.kind {
                EventType::InputStaged => Some("input"),
                EventType::OutputProduced => Some("output"),
                _ => None,
            };
            if let (Some(folder), Some(p)) = (folder, e.payload["path"].as_str()) {
                files.insert(Path::new(folder).join(p));
            }
            if pack_need > 0 {
                files.insert(PathBuf::from(PACK));
            }
            (files, pack_need)
        })
        .collect()
}

/// Durable state at an instant, from the syncs before it.
struct Durable {
    /// Log bytes on stable storage.
    log: u64,
    /// Pack bytes on stable storage.
    pack: u64,
    /// Files whose data is synced.
    data: BTreeSet<PathBuf>,
    /// Files whose data and every folder name up to the bundle are synced.
    whole: BTreeSet<PathBuf>,
}

fn durable_at(root: &Path, entries: &[Entry]) -> Durable {
    let mut log = 0;
    let mut pack = 0;
    // When each file's data, and each folder, was last synced.
    let mut data: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let mut dirs: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        match &e.mark {
            Mark::Sync(SyncPoint::Log { path, len }) if path == &root.join("events.jsonl") => {
                log = log.max(*len);
            }
            // The pack is append-only like the log: a sync makes a prefix durable.
            Mark::Sync(SyncPoint::Log { path, len }) if path == &root.join(PACK) => {
                pack = pack.max(*len);
                data.entry(PathBuf::from(PACK)).or_insert(i);
            }
            Mark::Sync(SyncPoint::File { path }) => {
                data.entry(path.strip_prefix(root).unwrap().to_path_buf())
                    .or_insert(i);
            }
            Mark::Sync(SyncPoint::Dir { path }) => {
                if let Ok(rel) = path.strip_prefix(root) {
                    dirs.entry(rel.to_path_buf()).or_default().push(i);
                }
            }
            _ => {}
        }
    }
    // A file's name is durable once its folder, and each folder above it up to one made
    // at creation (whose own name is durable from then), was synced after its data.
    let synced_after = |d: &Path, at: usize| dirs.get(d).is_some_and(|v| v.iter().any(|j| *j > at));
    let whole = data
        .iter()
        .filter(|(rel, at)| {
            let mut child = rel.as_path();
            loop {
                let Some(d) = child.parent() else {
                    return false;
                };
                if !synced_after(d, **at) {
                    return false;
                }
                let made_at_creation = d.as_os_str().is_empty()
                    || [
                        Path::new("input"),
                        Path::new("output"),
                        Path::new("blobs/sha256"),
                    ]
                    .contains(&d);
                if made_at_creation {
                    return true;
                }
                child = d;
            }
        })
        .map(|(rel, _)| rel.clone())
        .collect();
    Durable {
        log,
        pack,
        data: data.into_keys().collect(),
        whole,
    }
}

/// How a file that is not wholly durable came through the power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lost {
    Absent,
    Intact,
    Empty,
    Zeros,
}

/// How the log's un-synced tail came through.
#[derive(Debug, Clone, Copy)]
struct Tail {
    /// Bytes of the tail kept.
    keep: u64,
    /// Zero bytes after them.
    zeros: u64,
}

/// One file of a post-crash bundle: where, how it came through, its length then.
type FileState = (PathBuf, Lost, u64);

/// What each file of a post-crash bundle is.
fn file_states(written: &Entry, d: &Durable, lost: Lost) -> Vec<FileState> {
    written
        .files
        .iter()
        .map(|(rel, &len)| {
            // The salts are made with the bundle, in its folder beside the log: their
            // name has the log's fate, so their data synced is enough.
            let with_the_log = rel == Path::new(provrun_evidence::SALTS_FILE);
            let state = if d.whole.contains(rel) || (with_the_log && d.data.contains(rel)) {
                Lost::Intact
            } else if d.data.contains(rel) {
                // Data synced, name maybe not: there whole, or not at all.
                if lost == Lost::Absent {
                    Lost::Absent
                } else {
                    Lost::Intact
                }
            } else {
                lost
            };
            (rel.clone(), state, len)
        })
        .collect()
}

/// Builds one post-crash bundle at `at`.
fn build(final_root: &Path, at: &Path, log: &[u8], files: &[FileState], pack: &Option<Vec<u8>>) {
    let _ = std::fs::remove_dir_all(at);
    for dir in ["input", "output", "blobs", "blobs/sha256"] {
        if final_root.join(dir).is_dir() {
            std::fs::create_dir_all(at.join(dir)).unwrap();
        }
    }
    if let Some(pack) = pack {
        std::fs::write(at.join(PACK), pack).unwrap();
    }
    std::fs::write(at.join("events.jsonl"), log).unwrap();
    for (rel, state, len) in files {
        if rel == Path::new(PACK) {
            continue;
        }
        let (state, len) = (*state, *len);
        let target = at.join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        match state {
            Lost::Absent => {}
            Lost::Empty => std::fs::write(&target, b"").unwrap(),
            Lost::Zeros => std::fs::write(&target, vec![0u8; len as usize]).unwrap(),
            Lost::Intact => {
                // Appended or written whole: what was there then is a prefix of the end.
                let src = final_root.join(rel);
                match std::fs::read(&src) {
                    Ok(all) => {
                        std::fs::write(&target, &all[..(len as usize).min(all.len())]).unwrap()
                    }
                    // A temporary file renamed or removed since: its bytes are not kept,
                    // zeros of its length stand in (verify judges a leftover temporary
                    // file by its name, not its content).
                    Err(_) => std::fs::write(&target, vec![0u8; len as usize]).unwrap(),
                }
            }
        }
    }
}

/// What a power loss leaves of the pack (append-only, like the log): its synced prefix
/// and then, per `lost`, nothing more (`Absent`), all that was written (`Intact`), half
/// of the un-synced tail, cutting a record (`Empty`), or zeros for the un-synced tail
/// (`Zeros`). A pack whose name was never made durable may be gone, empty or zeros.
fn pack_after(final_pack: &[u8], written: &Entry, d: &Durable, lost: Lost) -> Option<Vec<u8>> {
    let len = *written.files.get(Path::new(PACK))? as usize;
    let synced = (d.pack as usize).min(len);
    if !d.whole.contains(Path::new(PACK)) {
        return match lost {
            Lost::Absent => None,
            Lost::Intact => Some(final_pack[..len].to_vec()),
            Lost::Empty => Some(Vec::new()),
            Lost::Zeros => Some(vec![0; len]),
        };
    }
    let mut out = final_pack[..synced].to_vec();
    match lost {
        Lost::Absent => {}
        Lost::Intact => out.extend_from_slice(&final_pack[synced..len]),
        Lost::Empty => out.extend_from_slice(&final_pack[synced..synced + (len - synced) / 2]),
        Lost::Zeros => out.resize(len, 0),
    }
    Some(out)
}

/// Line boundaries (byte offsets after each `\n`) of the final log, with 0 first.
fn boundaries(log: &[u8]) -> Vec<u64> {
    let mut b = vec![0u64];
    b.extend(
        log.iter()
            .enumerate()
            .filter(|(_, c)| **c == b'\n')
            .map(|(i, _)| i as u64 + 1),
    );
    b
}

/// Every way the un-synced tail `[from, to)` can come through: cut at each line
/// boundary or inside its first or last line, then nothing or zeros up to `to`.
fn tails(bounds: &[u64], from: u64, to: u64) -> Vec<Tail> {
    let mut cuts: BTreeSet<u64> = [0, to - from].into();
    for w in bounds.windows(2) {
        let (a, b) = (w[0], w[1]);
        for c in [a, b] {
            if c >= from && c <= to {
                cuts.insert(c - from);
            }
        }
        // Torn inside the first and the last line of the tail.
        let mid = a + (b - a) / 2;
        if (a == from || b == to) && mid > from && mid < to {
            cuts.insert(mid - from);
        }
    }
    let mut out = Vec::new();
    for keep in cuts {
        out.push(Tail { keep, zeros: 0 });
        // Zeros stand only where bytes were written: the file never grows past them.
        let rest = to - from - keep;
        if rest > 0 {
            out.push(Tail { keep, zeros: rest });
        }
    }
    out
}

/// What the simulation found for one policy.
#[derive(Debug, Default)]
struct Findings {
    instants: usize,
    states: usize,
    complete: usize,
    incomplete: usize,
    /// States that failed, with their failing checks.
    failed: Vec<(String, Vec<CheckCode>)>,
    /// Failed states whose log had no un-synced tail.
    failed_without_tail: usize,
}

// One loop over crash instants: what was acknowledged and the states seen carry across them.
fn simulate(name: &str, policy: Durability) -> Findings {
    let root = record_run(name, policy);
    let entries = timeline(&root);
    let final_events = read_events(&root).unwrap();
    let named = named_files(&root, &final_events);
    let final_pack = std::fs::read(root.join(PACK)).ok();
    let log = std::fs::read(root.join("events.jsonl")).unwrap();
    let bounds = boundaries(&log);
    let work = scratch(&format!("{name}-crash"));
    let mut f = Findings::default();
    let mut acked = (0usize, false);
    // Log bytes, other files, pack bytes.
    type Seen = (Vec<u8>, Vec<FileState>, Option<Vec<u8>>);
    let mut seen: BTreeSet<Seen> = BTreeSet::new();
    for k in 0..entries.len() {
        let d = durable_at(&root, &entries[..=k]);
        if let Mark::Ack { lines, statement } = entries[k].mark {
            acked = (acked.0.max(lines), acked.1 || statement);
        }
        // No line is durable before the salts its chain is hashed with.
        assert!(
            d.log == 0 || d.data.contains(Path::new(provrun_evidence::SALTS_FILE)),
            "{policy:?}: instant {k}: {} log bytes durable before the salts' data",
            d.log
        );
        // The acknowledgement was honest: every acknowledged line and every file those
        // lines name (and the statement, once acknowledged) was on stable storage.
        assert!(
            bounds[acked.0] <= d.log,
            "{policy:?}: instant {k}: {} lines acknowledged, but only {} of their {} bytes synced",
            acked.0,
            d.log,
            bounds[acked.0]
        );
        for (i, (files, pack_need)) in named.iter().enumerate().take(acked.0) {
            assert!(
                *pack_need <= d.pack,
                "{policy:?}: instant {k}: line {} is acknowledged, but the pack is durable to {} of the {pack_need} bytes it needs",
                i + 1,
                d.pack
            );
            for file in files {
                assert!(
                    d.whole.contains(file),
                    "{policy:?}: instant {k}: line {} is acknowledged, but {} is not durable",
                    i + 1,
                    file.display()
                );
            }
        }
        if acked.1 {
            assert!(
                d.whole.contains(Path::new("statement.json")),
                "{policy:?}: statement acknowledged but not durable"
            );
        }
        // A crash just after this instant (what was written by now) or just before the
        // next (what was written by then), with the same syncs done.
        let mut written = vec![&entries[k]];
        if let Some(next) = entries.get(k + 1) {
            written.push(next);
        }
        f.instants += 1;
        for w in written {
            let to = w.log_len.max(d.log);
            for tail in tails(&bounds, d.log, to) {
                let mut rebuilt = log[..(d.log + tail.keep) as usize].to_vec();
                rebuilt.resize(rebuilt.len() + tail.zeros as usize, 0);
                for lost in [Lost::Absent, Lost::Intact, Lost::Empty, Lost::Zeros] {
                    let mut files = file_states(w, &d, lost);
                    // Synced while the bundle was still being built in its hidden folder
                    // (where no snapshot looks), the salts are there with the log.
                    let salts = Path::new(provrun_evidence::SALTS_FILE);
                    if !files.iter().any(|(rel, ..)| rel == salts) && d.data.contains(salts) {
                        let len = std::fs::metadata(root.join(salts)).unwrap().len();
                        files.push((salts.to_path_buf(), Lost::Intact, len));
                    }
                    let salts_intact = files
                        .iter()
                        .any(|(rel, state, _)| rel == salts && *state == Lost::Intact);
                    let pack = final_pack.as_ref().and_then(|p| pack_after(p, w, &d, lost));
                    // Many instants leave the same bundle: check each one once.
                    if !seen.insert((rebuilt.clone(), files.clone(), pack.clone())) {
                        continue;
                    }
                    let at = work.join("b");
                    build(&root, &at, &rebuilt, &files, &pack);
                    let report = verify(&at);
                    f.states += 1;
                    // Whatever verify says, no acknowledged event is lost: the rebuilt
                    // log starts with every acknowledged line, byte for byte.
                    assert_eq!(
                        rebuilt[..bounds[acked.0] as usize],
                        log[..bounds[acked.0] as usize],
                        "{policy:?}: an acknowledged line was lost"
                    );
                    match report.exit_code() {
                        0 => f.complete += 1,
                        3 => f.incomplete += 1,
                        _ => {
                            if tail.keep == 0 && tail.zeros == 0 {
                                f.failed_without_tail += 1;
                            }
                            f.failed.push((
                                format!(
                                    "instant {k}, {tail:?}, other files {lost:?}{}",
                                    if salts_intact { "" } else { ", salts lost" }
                                ),
                                report.failures().map(|c| c.code).collect(),
                            ));
                        }
                    }
                    if acked.1 && lost == Lost::Intact && tail.keep == 0 {
                        assert_eq!(
                            report.exit_code(),
                            0,
                            "{policy:?}: a finished, acknowledged bundle must verify complete: {:?}",
                            report.failures().collect::<Vec<_>>()
                        );
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    eprintln!(
        "{policy:?}: {} instants, {} post-crash bundles: {} complete, {} incomplete, {} failed ({} of them without an un-synced tail)",
        f.instants,
        f.states,
        f.complete,
        f.incomplete,
        f.failed.len(),
        f.failed_without_tail
    );
    f
}

#[test]
fn per_event_policies_survive_every_power_loss_as_complete_or_incomplete() {
    for (name, policy) in [
        ("pl-per-event", Durability::PerEvent),
        ("pl-group", Durability::GroupCommit),
    ] {
        let f = simulate(name, policy);
        assert!(
            f.failed.is_empty(),
            "{policy:?}: {} post-crash bundles failed verify, e.g. {:?}",
            f.failed.len(),
            &f.failed[..f.failed.len().min(3)]
        );
        // The simulation covered both outcomes (it is not vacuous).
        assert!(f.complete > 0 && f.incomplete > 0, "{f:?}");
    }
}

#[test]
fn per_step_and_at_end_keep_their_synced_prefix() {
    for (name, policy) in [
        ("pl-per-step", Durability::PerStep),
        ("pl-at-end", Durability::AtEnd),
    ] {
        let f = simulate(name, policy);
        // Cut back to what was synced, every bundle verifies.
        assert_eq!(
            f.failed_without_tail,
            0,
            "{policy:?}: {:?}",
            &f.failed[..f.failed.len().min(3)]
        );
        // A surviving un-synced line may name a blob, or an input or output file whose
        // digest it records, that did not survive (these policies sync them together
        // with the lines, at the next sync point): that, and only that, fails — and a
        // line whose salts did not survive cannot be chained (they too are synced with
        // the first sync of the lines).
        for (state, codes) in &f.failed {
            let salts_lost = state.ends_with("salts lost");
            assert!(
                !codes.is_empty()
                    && codes.iter().all(|c| {
                        matches!(c, CheckCode::Blobs | CheckCode::Inputs | CheckCode::Outputs)
                            || (salts_lost && *c == CheckCode::Chain)
                    }),
                "{policy:?}: {state}: {codes:?}"
            );
        }
        assert!(f.complete > 0 && f.incomplete > 0, "{f:?}");
        if policy == Durability::PerStep {
            assert!(
                !f.failed.is_empty(),
                "PerStep syncs blobs only at a step: some un-synced tail should name a lost blob"
            );
        }
    }
}
