//! What a redaction removes: the selectors (`--blob`, `--path`, `--match`) turned into
//! the strings, blobs and files to remove, and the places a pattern matches where nothing
//! can be removed (which refuse the redaction: a redacted bundle must hold none of what
//! was asked to go).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::forms::{forms, string_forms};
use super::{PLACEHOLDER, Place, Removed, Round, protected};
use crate::chain::push_token;
use crate::event::{BlobRef, Event, EventType, FileRecord, RunFinished};
use crate::fsutil::sha256_hex;
use crate::salt::Salts;

/// What to remove, as asked.
pub enum Selector<'a> {
    /// The blob with this hex SHA-256.
    Blob(String),
    /// The file `input/<path>` or `output/<path>`.
    Path(String),
    /// Whatever this matches, in any form a bundle holds it: each string of the log, each
    /// blob and each input and output file — its bytes, the strings of a JSON body
    /// decoded (and of JSON inside a string), the deltas of a streamed body joined, a
    /// base64, percent-encoded, gzip or zstd text decoded. A blob in an encoding this
    /// cannot read (another compression) refuses the redaction, naming the blob, unless
    /// a [`Selector::Blob`] removes it.
    Match(&'a dyn Fn(&[u8]) -> bool),
}

/// The log of the bundle being redacted, and what earlier redactions removed.
pub(super) struct Source<'a> {
    pub root: &'a Path,
    pub events: &'a [Event],
    pub rounds: &'a [Round],
    /// The log's chain scheme.
    pub chain: u64,
    /// Its salts (chain 3).
    pub salts: Option<&'a Salts>,
}

/// What a redaction removes, found.
#[derive(Default)]
pub(super) struct Plan {
    /// (seq, pointer) → the removed string's digest.
    pub texts: BTreeMap<(u64, String), String>,
    /// Blob digest → its ref and every place naming it.
    pub blobs: BTreeMap<String, (BlobRef, Vec<Place>)>,
    /// `input/…` or `output/…` → the file's record and the line recording it.
    pub files: BTreeMap<String, (FileRecord, u64)>,
    /// Where a pattern matched but nothing may be removed.
    pub conflicts: Vec<String>,
    /// Blobs a pattern could not search (an encoding not read): digest → why. Refused
    /// unless the blob is removed.
    pub unreadable: BTreeMap<String, String>,
}

impl Plan {
    /// The removed pieces as the record lists them.
    pub(super) fn removed(&self) -> Vec<Removed> {
        let mut out: Vec<Removed> = self
            .texts
            .iter()
            .map(|((seq, pointer), sha256)| Removed::Text {
                seq: *seq,
                pointer: pointer.clone(),
                sha256: sha256.clone(),
            })
            .collect();
        out.extend(self.blobs.values().map(|(r, places)| Removed::Blob {
            sha256: r.digest.sha256.clone(),
            size: r.size,
            media_type: r.media_type.clone(),
            events: places.clone(),
        }));
        out.extend(self.files.iter().map(|(path, (rec, seq))| Removed::File {
            path: path.clone(),
            sha256: rec.sha256.clone(),
            size: rec.size,
            seq: *seq,
        }));
        out
    }

    pub(super) fn is_empty(&self) -> bool {
        self.texts.is_empty() && self.blobs.is_empty() && self.files.is_empty()
    }
}

/// Every string of a JSON value with its pointer (`prefix` + RFC 6901 tokens).
pub(super) fn strings<'v>(v: &'v Value, pointer: &mut String, out: &mut Vec<(String, &'v str)>) {
    match v {
        Value::String(s) => out.push((pointer.clone(), s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                strings(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = pointer.len();
                push_token(pointer, k);
                strings(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// Every member name of a JSON value, with the pointer of its object.
fn member_names<'v>(v: &'v Value, pointer: &mut String, out: &mut Vec<(String, &'v str)>) {
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                member_names(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                out.push((pointer.clone(), k));
                let len = pointer.len();
                push_token(pointer, k);
                member_names(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// Every blob ref of a line's payload, with the pointer (from the line's root) of each.
pub(crate) fn ref_places(payload: &Value, out: &mut Vec<(String, BlobRef)>) {
    refs(payload, &mut String::from("/payload"), out);
}

/// Every blob ref of a JSON value, with the pointer of the ref.
fn refs(v: &Value, pointer: &mut String, out: &mut Vec<(String, BlobRef)>) {
    if let Some(r) = BlobRef::from_value(v) {
        out.push((pointer.clone(), r));
        return;
    }
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                refs(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = pointer.len();
                push_token(pointer, k);
                refs(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

impl Source<'_> {
    /// Every blob the log names, with the places naming it.
    pub(super) fn blob_places(&self) -> BTreeMap<String, (BlobRef, Vec<Place>)> {
        let mut out: BTreeMap<String, (BlobRef, Vec<Place>)> = BTreeMap::new();
        for ev in self.events {
            let mut found = Vec::new();
            refs(&ev.payload, &mut String::from("/payload"), &mut found);
            for (pointer, r) in found {
                let entry = out
                    .entry(r.digest.sha256.clone())
                    .or_insert_with(|| (r.clone(), Vec::new()));
                entry.1.push(Place {
                    seq: ev.seq,
                    pointer,
                });
            }
        }
        out
    }

    /// The files the bundle holds by the log: every input, and the outputs of the final
    /// block (`input/…` or `output/…` → record and line).
    pub(super) fn files(&self) -> BTreeMap<String, (FileRecord, u64)> {
        let mut out = BTreeMap::new();
        for ev in self
            .events
            .iter()
            .filter(|e| e.kind == EventType::InputStaged)
        {
            if let Ok(rec) = serde_json::from_value::<FileRecord>(ev.payload.clone()) {
                out.insert(format!("input/{}", rec.path), (rec, ev.seq));
            }
        }
        let last = self.events.last();
        let finished =
            last.and_then(|e| serde_json::from_value::<RunFinished>(e.payload.clone()).ok());
        if let (Some(last), Some(finished)) = (last, finished) {
            let end = last.seq as usize;
            let start = end.saturating_sub(finished.outputs as usize);
            for ev in &self.events[start..end] {
                if let Ok(rec) = serde_json::from_value::<FileRecord>(ev.payload.clone()) {
                    out.insert(format!("output/{}", rec.path), (rec, ev.seq));
                }
            }
        }
        out
    }

    /// What earlier redactions removed: strings, blobs and files.
    pub(super) fn removed_before(
        &self,
    ) -> (BTreeSet<(u64, String)>, BTreeSet<String>, BTreeSet<String>) {
        let (mut texts, mut blobs, mut files) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for r in self.rounds {
            for item in &r.record.removed {
                match item {
                    Removed::Text { seq, pointer, .. } => {
                        texts.insert((*seq, pointer.clone()));
                    }
                    Removed::Blob { sha256, .. } => {
                        blobs.insert(sha256.clone());
                    }
                    Removed::File { path, .. } => {
                        files.insert(path.clone());
                    }
                }
            }
        }
        (texts, blobs, files)
    }
}

impl Source<'_> {
    /// The commitment a removed string keeps in the record: under chain 3 its salted
    /// commitment, else the SHA-256 of its bytes. `None` when the salts do not reveal the
    /// string's salt (a corrupt copy; the source verified, so not expected).
    fn commitment(&self, seq: u64, pointer: &str, s: &str) -> Option<String> {
        if self.chain < crate::chain::SALTED {
            return Some(sha256_hex(s.as_bytes()));
        }
        let salt = self.salts?.line(seq)?.salt(pointer)?;
        Some(crate::salt::commit(&salt, s))
    }
}

/// Whether `f` matches any form of a text.
fn any_form(f: &dyn Fn(&[u8]) -> bool, forms: &[std::borrow::Cow<'_, [u8]>]) -> bool {
    forms.iter().any(|form| f(form))
}

/// The media type a file's forms are read as, by its name.
fn media_of(path: &str) -> &'static str {
    if path.ends_with(".jsonl") || path.ends_with(".ndjson") {
        "application/x-ndjson"
    } else if path.ends_with(".json") {
        "application/json"
    } else {
        "application/octet-stream"
    }
}

/// Turn the selectors into a plan. `read_blob` gives a blob's bytes; files are read from
/// the bundle. Errors are for selectors that name nothing there is to remove. A pattern
/// is tried on every form of each text ([`super::forms`]).
pub(super) fn plan(
    src: &Source<'_>,
    selectors: &[Selector<'_>],
    read_blob: &dyn Fn(&BlobRef) -> Result<Vec<u8>, String>,
) -> Result<Plan, String> {
    let mut plan = Plan::default();
    let places = src.blob_places();
    let files = src.files();
    let (texts_before, blobs_before, files_before) = src.removed_before();
    for sel in selectors {
        match sel {
            Selector::Blob(hex) => {
                let found = places
                    .get(hex)
                    .ok_or_else(|| format!("no event names the blob {hex}"))?;
                if blobs_before.contains(hex) {
                    return Err(format!("the blob {hex} was removed already"));
                }
                plan.blobs.insert(hex.clone(), found.clone());
            }
            Selector::Path(path) => {
                let found = files.get(path).ok_or_else(|| {
                    format!(
                        "`{path}` is not a recorded input (input/…) or output (output/…) of the run"
                    )
                })?;
                if files_before.contains(path) {
                    return Err(format!("`{path}` was removed already"));
                }
                plan.files.insert(path.clone(), found.clone());
            }
            Selector::Match(f) => {
                match_log(src, *f, &texts_before, &mut plan)?;
                for (hex, found) in &places {
                    if blobs_before.contains(hex) {
                        continue;
                    }
                    let bytes = read_blob(&found.0)?;
                    match forms(&bytes, &found.0.media_type) {
                        Ok(forms) if any_form(*f, &forms) => {
                            plan.blobs.insert(hex.clone(), found.clone());
                        }
                        Ok(_) => {}
                        // A match in the raw bytes still removes it; otherwise it cannot
                        // be told.
                        Err(_) if f(&bytes) => {
                            plan.blobs.insert(hex.clone(), found.clone());
                        }
                        Err(why) => {
                            plan.unreadable.insert(hex.clone(), why);
                        }
                    }
                }
                for (path, found) in files.iter().filter(|(p, _)| !files_before.contains(*p)) {
                    let bytes =
                        std::fs::read(src.root.join(path)).map_err(|e| format!("{path}: {e}"))?;
                    let hit = match forms(&bytes, media_of(path)) {
                        Ok(forms) => any_form(*f, &forms),
                        // A compressed file that cannot be read is removed whole only when
                        // its bytes match; otherwise it is named like an unreadable blob.
                        Err(why) => {
                            if !f(&bytes) {
                                plan.conflicts.push(format!(
                                    "{path}: {why}; it cannot be searched (remove it with --path)"
                                ));
                            }
                            f(&bytes)
                        }
                    };
                    if hit {
                        plan.files.insert(path.clone(), found.clone());
                    }
                }
                match_kept_files(src.root, *f, &mut plan);
            }
        }
    }
    // An unreadable blob removed by another selector is no longer a question.
    let removed: BTreeSet<String> = plan.blobs.keys().cloned().collect();
    plan.unreadable.retain(|hex, _| !removed.contains(hex));
    let explicit_files: BTreeSet<&str> = plan.files.keys().map(String::as_str).collect();
    plan.conflicts.retain(|c| {
        !explicit_files
            .iter()
            .any(|p| c.starts_with(&format!("{p}: ")))
    });
    Ok(plan)
}

/// A pattern over the log: the strings it may remove go to the plan, the matches in
/// places that must stay (the envelope, member names, protected strings) are conflicts.
fn match_log(
    src: &Source<'_>,
    f: &dyn Fn(&[u8]) -> bool,
    before: &BTreeSet<(u64, String)>,
    plan: &mut Plan,
) -> Result<(), String> {
    for name in crate::log::ENVELOPE_KEYS {
        if f(name.as_bytes()) {
            plan.conflicts
                .push(format!("the envelope member name `{name}` of every line"));
        }
    }
    for ev in src.events {
        let line = ev.seq + 1;
        for (name, value) in [
            ("run_id", ev.run_id.clone()),
            ("ts", ev.ts.clone()),
            ("type", ev.kind.as_str().to_owned()),
            ("confidence", ev.confidence.as_str().to_owned()),
            ("prev", ev.prev.clone().unwrap_or_default()),
            ("seq", ev.seq.to_string()),
            ("v", ev.v.to_string()),
        ] {
            if f(value.as_bytes()) {
                plan.conflicts.push(format!("line {line}: its `{name}`"));
            }
        }
        let mut names = Vec::new();
        member_names(&ev.payload, &mut String::from("/payload"), &mut names);
        for (pointer, name) in names {
            if f(name.as_bytes()) {
                plan.conflicts
                    .push(format!("line {line}: a member name at {pointer}"));
            }
        }
        let mut scalars = Vec::new();
        other_scalars(&ev.payload, &mut String::from("/payload"), &mut scalars);
        for (pointer, text) in scalars {
            if f(text.as_bytes()) {
                plan.conflicts
                    .push(format!("line {line}: the number or boolean at {pointer}"));
            }
        }
        let mut leaves = Vec::new();
        strings(&ev.payload, &mut String::from("/payload"), &mut leaves);
        for (pointer, s) in leaves {
            if (s == PLACEHOLDER && before.contains(&(ev.seq, pointer.clone())))
                || !any_form(f, &string_forms(s))
            {
                continue;
            }
            if protected(ev.kind.as_str(), &ev.payload, &pointer) {
                plan.conflicts.push(format!(
                    "line {line}: {pointer} (a {} field verify relies on)",
                    ev.kind.as_str()
                ));
            } else {
                let digest = src.commitment(ev.seq, &pointer, s).ok_or_else(|| {
                    format!("line {line}: the salts do not reveal the salt of {pointer}")
                })?;
                plan.texts.insert((ev.seq, pointer), digest);
            }
        }
    }
    Ok(())
}

/// Every number and boolean of a JSON value, as its canonical text, with its pointer.
fn other_scalars(v: &Value, pointer: &mut String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Number(_) | Value::Bool(_) => {
            let mut text = String::new();
            if crate::canonical::write_canonical(v, &mut text).is_ok() {
                out.push((pointer.clone(), text));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                other_scalars(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = pointer.len();
                push_token(pointer, k);
                other_scalars(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// A pattern over the files a redaction keeps as they are: the statement, its signature
/// and the earlier redaction records. A match there cannot be removed.
fn match_kept_files(root: &Path, f: &dyn Fn(&[u8]) -> bool, plan: &mut Plan) {
    for name in [
        crate::recorder::STATEMENT_FILE,
        crate::dsse::DSSE_FILE,
        super::REDACTIONS_FILE,
    ] {
        if let Ok(bytes) = std::fs::read(root.join(name))
            && f(&bytes)
        {
            plan.conflicts.push(format!("{name} (kept as it is)"));
        }
    }
}
