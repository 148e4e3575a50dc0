//! Making a redacted bundle: the source checked, the plan made, the new bundle built in a
//! hidden folder beside its path (the log with each removed string replaced by
//! [`PLACEHOLDER`], the blob store without the removed blobs, `input/` and `output/`
//! without the removed files, the statement and its signature as they were, the
//! redaction record appended), checked, and renamed into place.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

pub use super::plan::Selector;
use super::plan::{Plan, Source, plan};
use super::{
    LogFacts, PLACEHOLDER, REDACTION_PAYLOAD_TYPE, REDACTION_TYPE, REDACTIONS_FILE, Redaction,
    Signer, pointer_tokens, read_redactions, substitutions_of,
};
use crate::canonical::to_canonical_string;
use crate::dsse::pae;
use crate::error::{EvidenceError, Result};
use crate::event::Event;
use crate::fsutil::sha256_hex;
use crate::log::{ChainInputs, RawLine, scan_log, walk};
use crate::recorder::{BlobLayout, EVENTS_FILE, PACK_FILE, STATEMENT_FILE};
use crate::salt::{LineSalts, SALTS_FILE, Salts};

/// Signs a redaction record: the signer named in it, and the signature of a message
/// (`PAE(payloadType, payload)`) by its key.
pub struct RecordSigner<'a> {
    /// The key that signs, as the record names it.
    pub signer: Signer,
    /// Sign a message.
    pub sign: &'a dyn Fn(&[u8]) -> Vec<u8>,
}

/// What to remove, why, and who signs.
pub struct RedactRequest<'a> {
    /// What to remove.
    pub selectors: Vec<Selector<'a>>,
    /// Why (recorded as it is).
    pub reason: String,
    /// Who signs the record, if anyone.
    pub signer: Option<RecordSigner<'a>>,
}

/// What a redaction did.
#[derive(Debug, Clone)]
pub struct RedactOutcome {
    /// The record appended to `redactions.jsonl`.
    pub record: Redaction,
    /// Where the redacted bundle is.
    pub bundle: PathBuf,
}

fn refuse(why: impl Into<String>) -> EvidenceError {
    EvidenceError::Redaction(why.into())
}

/// Write to `out` (a new or empty folder) a copy of the finished bundle `source` without
/// what `request` selects, recording what was removed and why in its
/// `redactions.jsonl`. The source must verify; the copy is checked before it is put in
/// place. [`EvidenceError::Redaction`] for a request that cannot be met (a selector that
/// names nothing, text in a log chained by bytes, a pattern that matches what must stay).
///
/// # Errors
///
/// [`EvidenceError::Redaction`] when the source does not verify or is not finished, or the
/// request cannot be met; [`EvidenceError::BundleNotEmpty`] when `out` is a non-empty
/// folder; [`EvidenceError::Io`] when the source cannot be read or the copy written.
pub fn redact(source: &Path, out: &Path, request: &RedactRequest<'_>) -> Result<RedactOutcome> {
    let report = crate::verify(source);
    if let Some(c) = report.failures().next() {
        return Err(refuse(format!(
            "the bundle does not verify ({}: {}); only a bundle that verifies is redacted",
            c.code.as_str(),
            c.detail
        )));
    }
    if !report.complete {
        return Err(refuse(
            "the run never finished; only a finished bundle is redacted",
        ));
    }
    let rounds = read_redactions(source).map_err(refuse)?;
    let inputs = ChainInputs {
        subst: substitutions_of(&rounds),
        salts: Salts::read(source).map_err(refuse)?,
    };
    let log_path = source.join(EVENTS_FILE);
    let scan = scan_log(&log_path).map_err(|e| EvidenceError::io("read", &log_path, e))?;
    let mut events: Vec<Event> = Vec::with_capacity(scan.lines.len());
    let mut head = String::new();
    for line in walk(&scan, &inputs) {
        events.push(line.event.map_err(refuse)?);
        head = line.hash.unwrap_or_default();
    }
    let chain = events
        .first()
        .map_or(1, |e| crate::chain::chain_of(&e.payload));
    let src = Source {
        root: source,
        events: &events,
        rounds: &rounds,
        chain,
        salts: inputs.salts.as_ref(),
    };
    let read_blob =
        |r: &crate::event::BlobRef| crate::read_blob(source, r).map_err(|e| e.to_string());
    let plan = plan(&src, &request.selectors, &read_blob).map_err(refuse)?;
    check_plan(&plan, chain)?;
    let salts = match &inputs.salts {
        Some(s) if chain >= crate::chain::SALTED => {
            Some(revealed_salts(s, &events, &plan, &inputs.subst)?)
        }
        _ => None,
    };
    let statement = std::fs::read(source.join(STATEMENT_FILE))
        .map_err(|e| EvidenceError::io("read", source.join(STATEMENT_FILE), e))?;
    let log = LogFacts {
        sha256: rounds
            .first()
            .map_or(scan.file_sha256.clone(), |r| r.record.log.sha256.clone()),
        event_count: events.len() as u64,
        head,
    };
    let record = Redaction {
        record_type: REDACTION_TYPE.to_owned(),
        run_id: events.first().map(|e| e.run_id.clone()).unwrap_or_default(),
        statement: crate::event::Digest {
            sha256: sha256_hex(&statement),
        },
        log,
        previous: rounds.last().map(|r| r.line_sha256.clone()),
        reason: request.reason.clone(),
        redacted_on: crate::recorder::now_rfc3339(),
        signer: request.signer.as_ref().map(|s| s.signer.clone()),
        removed: plan.removed(),
    };
    let line = record_line(&record, request.signer.as_ref())?;
    build(
        source,
        out,
        &Copy {
            lines: &scan.lines,
            events: &events,
            plan: &plan,
            record_line: &line,
            salts: salts.as_ref(),
        },
    )?;
    Ok(RedactOutcome {
        record,
        bundle: out.to_path_buf(),
    })
}

/// A plan that cannot be carried out is refused before anything is written.
fn check_plan(plan: &Plan, chain: u64) -> Result<()> {
    if !plan.conflicts.is_empty() {
        let n = plan.conflicts.len();
        let shown: Vec<&str> = plan.conflicts.iter().take(8).map(String::as_str).collect();
        return Err(refuse(format!(
            "the pattern matches where nothing can be removed ({n} place(s): {}{}); make it narrower",
            shown.join("; "),
            if n > 8 { "; …" } else { "" }
        )));
    }
    if !plan.texts.is_empty() && chain < 2 {
        return Err(refuse(format!(
            "{} string(s) of the log match, but this bundle's log chains its lines' bytes \
             (it was written before redactable logs), so text in it cannot be removed; blobs \
             and files can",
            plan.texts.len()
        )));
    }
    if !plan.unreadable.is_empty() {
        let n = plan.unreadable.len();
        let shown: Vec<String> = plan
            .unreadable
            .iter()
            .take(8)
            .map(|(hex, why)| format!("blob {hex}: {why}"))
            .collect();
        return Err(refuse(format!(
            "{n} blob(s) cannot be searched for the pattern ({}{}); remove each with --blob \
             if it may hold the text",
            shown.join("; "),
            if n > 8 { "; …" } else { "" }
        )));
    }
    if plan.is_empty() {
        return Err(refuse("nothing matches: there is nothing to remove"));
    }
    Ok(())
}

/// The salts a redacted copy of a chain-3 log keeps: each line's seed, or, for a line
/// that lost a string (now or in an earlier redaction), the salt of every string it keeps
/// and of no other — so nothing in the copy reveals a removed string's salt.
fn revealed_salts(
    source: &Salts,
    events: &[Event],
    plan: &Plan,
    before: &crate::log::Substitutions,
) -> Result<Salts> {
    let mut lines = Vec::with_capacity(events.len());
    for ev in events {
        let removed: std::collections::BTreeSet<&str> = plan
            .texts
            .range((ev.seq, String::new())..(ev.seq + 1, String::new()))
            .map(|((_, p), _)| p.as_str())
            .chain(
                before
                    .get(&ev.seq)
                    .into_iter()
                    .flat_map(|m| m.keys().map(String::as_str)),
            )
            .collect();
        let line_salts = source
            .line(ev.seq)
            .ok_or_else(|| refuse(format!("salts.json does not cover line {}", ev.seq + 1)))?;
        if removed.is_empty() {
            lines.push(line_salts);
            continue;
        }
        let mut strings = Vec::new();
        super::plan::strings(&ev.payload, &mut String::from("/payload"), &mut strings);
        let mut kept = std::collections::BTreeMap::new();
        for (pointer, _) in strings {
            if removed.contains(pointer.as_str()) {
                continue;
            }
            let salt = line_salts.salt(&pointer).ok_or_else(|| {
                refuse(format!(
                    "salts.json does not reveal the salt of {pointer} on line {}",
                    ev.seq + 1
                ))
            })?;
            kept.insert(pointer, salt);
        }
        lines.push(LineSalts::Strings(kept));
    }
    Ok(Salts::Revealed(lines))
}

/// What the redacted copy is made of.
struct Copy<'a> {
    lines: &'a [RawLine],
    events: &'a [Event],
    plan: &'a Plan,
    record_line: &'a str,
    /// The copy's salts (chain 3).
    salts: Option<&'a Salts>,
}

/// The record's line of `redactions.jsonl`: an envelope, signed or with no signatures.
fn record_line(record: &Redaction, signer: Option<&RecordSigner<'_>>) -> Result<String> {
    let payload = crate::canonical::to_canonical_string_of(record)?;
    let signatures = match signer {
        Some(s) => {
            let sig = (s.sign)(&pae(REDACTION_PAYLOAD_TYPE, payload.as_bytes()));
            json!([{"keyid": s.signer.key_id, "sig": B64.encode(sig)}])
        }
        None => json!([]),
    };
    let envelope = json!({
        "payload": B64.encode(payload.as_bytes()),
        "payloadType": REDACTION_PAYLOAD_TYPE,
        "signatures": signatures,
    });
    to_canonical_string(&envelope)
}

/// Build the redacted bundle beside `out`, check it, and rename it into place.
fn build(source: &Path, out: &Path, copy: &Copy<'_>) -> Result<()> {
    if std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) || out.is_file() {
        return Err(EvidenceError::BundleNotEmpty(out.to_path_buf()));
    }
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{name}.provrun-redacting-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let made = write_copy(source, &tmp, copy).and_then(|()| {
        let report = crate::verify(&tmp);
        match report.failures().next() {
            Some(c) => Err(refuse(format!(
                "the redacted copy does not verify ({}: {}); nothing was written",
                c.code.as_str(),
                c.detail
            ))),
            None => Ok(()),
        }
    });
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, out).map_err(|e| {
        let _ = std::fs::remove_dir_all(&tmp);
        EvidenceError::io("rename into", out, e)
    })?;
    crate::fsutil::sync_dir(parent).map_err(|e| EvidenceError::io("sync", parent, e))
}

/// The copy's files, synced.
fn write_copy(source: &Path, dest: &Path, copy: &Copy<'_>) -> Result<()> {
    let Copy {
        lines,
        events,
        plan,
        record_line,
        salts,
    } = *copy;
    let io = |what: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |e| EvidenceError::io(what, p, e)
    };
    std::fs::create_dir_all(dest.join("blobs")).map_err(io("make", dest))?;
    // The log: untouched lines byte for byte, the others with their strings replaced.
    let mut log = Vec::new();
    for (raw, ev) in lines.iter().zip(events) {
        let texts: Vec<&String> = plan
            .texts
            .range((ev.seq, String::new())..(ev.seq + 1, String::new()))
            .map(|((_, p), _)| p)
            .collect();
        if texts.is_empty() {
            log.extend_from_slice(raw.bytes.as_deref().unwrap_or_default());
        } else {
            let mut line: Value =
                serde_json::to_value(ev).map_err(|e| EvidenceError::Canonical(e.to_string()))?;
            for pointer in texts {
                replace_string(&mut line, pointer)?;
            }
            log.extend_from_slice(to_canonical_string(&line)?.as_bytes());
        }
        log.push(b'\n');
    }
    write_synced(&dest.join(EVENTS_FILE), &log)?;
    for name in [STATEMENT_FILE, crate::dsse::DSSE_FILE] {
        if let Ok(bytes) = std::fs::read(source.join(name)) {
            write_synced(&dest.join(name), &bytes)?;
        }
    }
    if let Some(salts) = salts {
        write_synced(&dest.join(SALTS_FILE), &salts.to_bytes())?;
    }
    let mut records = std::fs::read(source.join(REDACTIONS_FILE)).unwrap_or_default();
    records.extend_from_slice(record_line.as_bytes());
    records.push(b'\n');
    write_synced(&dest.join(REDACTIONS_FILE), &records)?;
    for top in ["input", "output"] {
        copy_tree(&source.join(top), &dest.join(top), top, plan)?;
    }
    copy_blobs(source, dest, events, plan)?;
    for d in [dest.join("blobs"), dest.to_path_buf()] {
        crate::fsutil::sync_dir(&d).map_err(io("sync", &d))?;
    }
    Ok(())
}

/// Replace the string at `pointer` (from the line's root) with the placeholder.
fn replace_string(line: &mut Value, pointer: &str) -> Result<()> {
    let tokens = pointer_tokens(pointer).unwrap_or_default();
    let mut v = line;
    for t in &tokens {
        v = match v {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| refuse(format!("{pointer} names nothing in its line")))?;
    }
    if !v.is_string() {
        return Err(refuse(format!("{pointer} is not a string")));
    }
    *v = Value::String(PLACEHOLDER.to_owned());
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::File::create(path).map_err(|e| EvidenceError::io("create", path, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| EvidenceError::io("write", path, e))
}

/// Copy `input/` or `output/` (named `top` in the plan's paths), leaving out the removed
/// files.
fn copy_tree(from: &Path, to: &Path, top: &str, plan: &Plan) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| EvidenceError::io("make", to, e))?;
    let walk = crate::fsutil::walk_files(from);
    for f in walk.files {
        if plan.files.contains_key(&format!("{top}/{}", f.rel)) {
            continue;
        }
        let target = to.join(&f.rel);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).map_err(|e| EvidenceError::io("make", dir, e))?;
        }
        std::fs::copy(&f.path, &target).map_err(|e| EvidenceError::io("copy", &f.path, e))?;
        std::fs::File::open(&target)
            .and_then(|file| file.sync_all())
            .map_err(|e| EvidenceError::io("sync", &target, e))?;
    }
    Ok(())
}

/// The blob store without the removed blobs: the pack rewritten with the others, or the
/// loose files but those.
fn copy_blobs(source: &Path, dest: &Path, events: &[Event], plan: &Plan) -> Result<()> {
    let layout = events
        .first()
        .and_then(|e| BlobLayout::of_run_started(&e.payload))
        .unwrap_or(BlobLayout::Loose);
    if layout == BlobLayout::Loose {
        let to = dest.join("blobs/sha256");
        std::fs::create_dir_all(&to).map_err(|e| EvidenceError::io("make", &to, e))?;
        for f in crate::fsutil::walk_files(&source.join("blobs/sha256")).files {
            if !plan.blobs.contains_key(&f.rel) {
                std::fs::copy(&f.path, to.join(&f.rel))
                    .map_err(|e| EvidenceError::io("copy", &f.path, e))?;
            }
        }
        return crate::fsutil::sync_dir(&to).map_err(|e| EvidenceError::io("sync", &to, e));
    }
    let path = source.join(PACK_FILE);
    let reader = crate::pack::FileSource::open(&path)
        .map_err(|e| EvidenceError::io("open", &path, e))
        .and_then(|src| {
            crate::pack::BlobReader::new(src).map_err(|e| EvidenceError::UnsupportedFile {
                path: path.clone(),
                reason: e.to_string(),
            })
        })?;
    let keep: Vec<u32> = (0..reader.index().blobs.len() as u32)
        .filter(|&i| {
            !plan
                .blobs
                .contains_key(&hex::encode(reader.index().blobs[i as usize].digest))
        })
        .collect();
    let blobs = dest.join("blobs");
    let tmp = crate::pack::rewrite(&reader, &keep, &blobs, true)
        .map_err(|e| EvidenceError::io("write", &blobs, e))?;
    std::fs::rename(&tmp, dest.join(PACK_FILE)).map_err(|e| EvidenceError::io("rename", &tmp, e))
}
