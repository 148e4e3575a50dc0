//! Reading an `events.jsonl` file back: split into lines with bounded memory, hash each
//! line, parse and check each one against the line format.

use std::io::{self, Read};
use std::path::Path;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::canonical::{Form, canonical_form};
use crate::chain::{Envelope, LineSubstitutions, SALTED, chain_of};
use crate::event::{Event, EventType, FORMAT_VERSION, check_payload};
use crate::fsutil::open_regular;
use crate::salt::{LineSalts, SALTS_FILE, Salts};

/// Longest event line accepted when reading a log (16 MiB). Longer lines are hashed
/// (so the chain can still be followed) but not parsed.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One `\n`-terminated line of the log.
#[derive(Debug)]
pub(crate) struct RawLine {
    /// The bytes without the `\n`, or `None` when the line exceeded [`MAX_LINE_BYTES`].
    pub bytes: Option<Vec<u8>>,
    /// Length of the line without the `\n`.
    pub len: u64,
    /// SHA-256 hex of the line without its `\n`.
    pub hash: String,
}

/// The whole log, split into lines.
#[derive(Debug)]
pub(crate) struct LogScan {
    /// Complete lines.
    pub lines: Vec<RawLine>,
    /// Length of a trailing line that has no `\n` (a torn write), if any.
    pub torn_len: Option<u64>,
    /// Whether every byte of that trailing line is zero (what a power loss leaves where
    /// the file system had extended the file but not yet written its data).
    pub torn_zeros: bool,
    /// SHA-256 hex of every byte of the file.
    pub file_sha256: String,
    /// Bytes up to and including the last `\n`.
    pub good_len: u64,
}

/// Read and split a log file. Never follows a symlink.
pub(crate) fn scan_log(path: &Path) -> io::Result<LogScan> {
    let mut file = open_regular(path)?;
    let mut whole = Sha256::new();
    let mut line_hasher = Sha256::new();
    let mut line_buf: Option<Vec<u8>> = Some(Vec::new());
    let mut line_len = 0u64;
    let mut line_zeros = true;
    let mut lines = Vec::new();
    let mut good_len = 0u64;
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        whole.update(chunk);
        let mut start = 0;
        while start < chunk.len() {
            let rest = &chunk[start..];
            let (piece, newline) = match rest.iter().position(|b| *b == b'\n') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            line_hasher.update(piece);
            line_len += piece.len() as u64;
            line_zeros &= piece.iter().all(|b| *b == 0);
            if let Some(b) = line_buf.as_mut() {
                if b.len() + piece.len() > MAX_LINE_BYTES {
                    line_buf = None;
                } else {
                    b.extend_from_slice(piece);
                }
            }
            start += piece.len();
            if newline {
                start += 1;
                total += line_len + 1;
                good_len = total;
                let hash = hex::encode(std::mem::take(&mut line_hasher).finalize());
                lines.push(RawLine {
                    bytes: line_buf.replace(Vec::new()),
                    len: line_len,
                    hash,
                });
                line_len = 0;
                line_zeros = true;
            }
        }
    }
    Ok(LogScan {
        lines,
        torn_len: (line_len > 0).then_some(line_len),
        torn_zeros: line_len > 0 && line_zeros,
        file_sha256: hex::encode(whole.finalize()),
        good_len,
    })
}

/// The envelope keys every event line has, exactly.
pub(crate) const ENVELOPE_KEYS: [&str; 8] = [
    "confidence",
    "payload",
    "prev",
    "run_id",
    "seq",
    "ts",
    "type",
    "v",
];

/// Parse one line and check it against the line format: UTF-8, JSON, canonical form,
/// envelope fields and types, a known event type, and a payload that fits its type
/// and confidence. Does not check the chain or the sequence. Also says whether the line
/// is in the exact canonical form (not the tie-rounding form earlier writers used for
/// some numbers).
pub(crate) fn parse_line_form(line: &RawLine) -> Result<(Event, bool), String> {
    let (value, exact) = parse_canonical_form(line)?;
    if let Some(name) = value.get("type").and_then(Value::as_str)
        && EventType::from_name(name).is_none()
    {
        return Err(format!("unknown event type {name:?}"));
    }
    let event: Event = serde_json::from_value(value).map_err(|e| format!("bad envelope: {e}"))?;
    check_envelope(event.v, event.prev.as_deref(), &event.payload)?;
    check_payload(event.kind, event.confidence, &event.payload)
        .map_err(|e| format!("{} payload: {e}", event.kind.as_str()))?;
    Ok((event, exact))
}

/// The first checks of [`parse_line_form`], which do not depend on the event type:
/// UTF-8, JSON, canonical form, exactly the envelope's keys. Returns the parsed line,
/// and whether the form is exact.
pub(crate) fn parse_canonical_form(line: &RawLine) -> Result<(Value, bool), String> {
    let Some(bytes) = line.bytes.as_deref() else {
        return Err(format!(
            "line of {} bytes exceeds the {MAX_LINE_BYTES}-byte limit",
            line.len
        ));
    };
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let form = canonical_form(&value, text).map_err(|e| e.to_string())?;
    if form == Form::Not {
        return Err("not in canonical JSON form (RFC 8785)".to_owned());
    }
    let obj = value.as_object().ok_or("not a JSON object")?;
    if obj.len() != ENVELOPE_KEYS.len() || !ENVELOPE_KEYS.iter().all(|k| obj.contains_key(*k)) {
        return Err(format!(
            "envelope must have exactly the keys {ENVELOPE_KEYS:?}"
        ));
    }
    Ok((value, form == Form::Exact))
}

/// The envelope checks of [`parse_line_form`] after its fields parsed: the format version,
/// `prev`'s form, a payload that is an object.
pub(crate) fn check_envelope(v: u64, prev: Option<&str>, payload: &Value) -> Result<(), String> {
    if v != FORMAT_VERSION {
        return Err(format!("unsupported format version {v}"));
    }
    if let Some(prev) = prev
        && !is_sha256_hex(prev)
    {
        return Err("prev is not 64 lower-case hex digits".to_owned());
    }
    if !payload.is_object() {
        return Err("payload is not an object".to_owned());
    }
    Ok(())
}

/// Whether `s` is 64 lower-case hex digits.
pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One line of a log as [`walk`] hands it over: parsed, and checked against its place
/// in the chain and the sequence. Verification and the recorder's reopening both read a
/// log through this, each wording (and weighing) what it finds in its own terms.
#[derive(Debug)]
pub(crate) struct WalkedLine<'a> {
    /// The line's index (its expected `seq`; its line number is one more).
    pub index: usize,
    /// The line as read.
    pub raw: &'a RawLine,
    /// The event, or why the line is not one (see [`parse_line_form`]).
    pub event: Result<Event, String>,
    /// The line's chain hash (see [`crate::chain`]): what the next line's `prev` must be.
    /// `None` when it cannot be computed (a chain-2 line that did not parse).
    pub hash: Option<String>,
    /// Whether the event's `prev` is the chain hash of the line before (`null` for the
    /// first line). `false` when the line did not parse.
    pub chained: bool,
    /// Whether the event's `seq` is its index. `false` when the line did not parse.
    pub in_sequence: bool,
}

/// Strings a redaction removed, by line: seq → the line's substitutions.
pub(crate) type Substitutions = std::collections::BTreeMap<u64, LineSubstitutions>;

/// What a reader chains a log with besides its lines: the digests of the strings a
/// redaction removed, and the run's salts (`salts.json`, chain 3).
#[derive(Debug, Default)]
pub(crate) struct ChainInputs {
    /// The digests of removed strings, by line.
    pub subst: Substitutions,
    /// The salts, when the bundle has them.
    pub salts: Option<Salts>,
}

/// The chain hash of a parsed line under `chain` (its bytes' SHA-256 for chain 1; under
/// chain 3 its strings are committed with `salts`, which must be there).
pub(crate) fn event_hash(
    raw: &RawLine,
    ev: &Event,
    chain: u64,
    subst: Option<&LineSubstitutions>,
    salts: Option<&LineSalts>,
) -> Result<String, String> {
    if chain < 2 {
        return Ok(raw.hash.clone());
    }
    if chain >= SALTED && salts.is_none() {
        return Err(format!(
            "line {} of a log chained by salted commitments, and no salts for it ({SALTS_FILE})",
            ev.seq + 1
        ));
    }
    Envelope {
        confidence: ev.confidence.as_str(),
        prev: ev.prev.as_deref(),
        run_id: &ev.run_id,
        seq: ev.seq,
        ts: &ev.ts,
        kind: ev.kind.as_str(),
        v: ev.v,
    }
    .commitment_hash(&ev.payload, subst, salts.filter(|_| chain >= SALTED))
    .map_err(|e| e.to_string())
}

/// Walk a scanned log line by line: parse each line and check its chain link and its
/// sequence number (the checks every reader of a log makes before trusting it). The
/// chain scheme is the one line 0's `run_started` declares; `inputs` give the digests of
/// strings a redaction removed, and the salts of a log chained by salted commitments.
pub(crate) fn walk<'a>(
    scan: &'a LogScan,
    inputs: &'a ChainInputs,
) -> impl Iterator<Item = WalkedLine<'a>> + 'a {
    let mut chain = 1u64;
    let mut before: Option<Option<String>> = None;
    scan.lines.iter().enumerate().map(move |(index, raw)| {
        let mut event = parse_line_form(raw);
        if index == 0
            && let Ok((ev, _)) = &event
            && ev.kind == EventType::RunStarted
        {
            chain = chain_of(&ev.payload);
        }
        if chain >= 2 && matches!(&event, Ok((_, false))) {
            event = Err(
                "not in the exact canonical form a log chained by commitments \
                         requires (a number in an earlier writer's form)"
                    .to_owned(),
            );
        }
        let event = event.map(|(ev, _)| ev);
        let hash = match &event {
            Ok(ev) => {
                let salts = inputs.salts.as_ref().and_then(|s| s.line(index as u64));
                event_hash(
                    raw,
                    ev,
                    chain,
                    inputs.subst.get(&(index as u64)),
                    salts.as_ref(),
                )
                .ok()
            }
            Err(_) if chain < 2 => Some(raw.hash.clone()),
            Err(_) => None,
        };
        let (chained, in_sequence) = match (&event, &before) {
            (Ok(ev), None) => (ev.prev.is_none(), ev.seq == index as u64),
            (Ok(ev), Some(prev)) => (
                prev.is_some() && ev.prev.as_deref() == prev.as_deref(),
                ev.seq == index as u64,
            ),
            (Err(_), _) => (false, false),
        };
        before = Some(hash.clone());
        WalkedLine {
            index,
            raw,
            event,
            hash,
            chained,
            in_sequence,
        }
    })
}
