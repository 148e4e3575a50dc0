//! Reading an `events.jsonl` file back: split into lines with bounded memory, hash each
//! line, parse and check each one against the line format.

use std::io::{self, Read};
use std::path::Path;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::canonical::is_canonical;
use crate::event::{Event, EventType, FORMAT_VERSION, check_payload};
use crate::fsutil::open_regular;

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
const ENVELOPE_KEYS: [&str; 8] = [
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
/// and confidence. Does not check the chain or the sequence.
pub(crate) fn parse_line(line: &RawLine) -> Result<Event, String> {
    let value = parse_canonical(line)?;
    if let Some(name) = value.get("type").and_then(Value::as_str)
        && EventType::from_name(name).is_none()
    {
        return Err(format!("unknown event type {name:?}"));
    }
    let event: Event = serde_json::from_value(value).map_err(|e| format!("bad envelope: {e}"))?;
    check_envelope(event.v, event.prev.as_deref(), &event.payload)?;
    check_payload(event.kind, event.confidence, &event.payload)
        .map_err(|e| format!("{} payload: {e}", event.kind.as_str()))?;
    Ok(event)
}

/// The first checks of [`parse_line`], which do not depend on the event type: UTF-8,
/// JSON, canonical form, exactly the envelope's keys. Returns the parsed line.
pub(crate) fn parse_canonical(line: &RawLine) -> Result<Value, String> {
    let Some(bytes) = line.bytes.as_deref() else {
        return Err(format!(
            "line of {} bytes exceeds the {MAX_LINE_BYTES}-byte limit",
            line.len
        ));
    };
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if !is_canonical(&value, text).map_err(|e| e.to_string())? {
        return Err("not in canonical JSON form (RFC 8785)".to_owned());
    }
    let obj = value.as_object().ok_or("not a JSON object")?;
    if obj.len() != ENVELOPE_KEYS.len() || !ENVELOPE_KEYS.iter().all(|k| obj.contains_key(*k)) {
        return Err(format!(
            "envelope must have exactly the keys {ENVELOPE_KEYS:?}"
        ));
    }
    Ok(value)
}

/// The envelope checks of [`parse_line`] after its fields parsed: the format version,
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
    /// The event, or why the line is not one (see [`parse_line`]).
    pub event: Result<Event, String>,
    /// Whether the event's `prev` is the SHA-256 of the line before (`null` for the
    /// first line). `false` when the line did not parse.
    pub chained: bool,
    /// Whether the event's `seq` is its index. `false` when the line did not parse.
    pub in_sequence: bool,
}

/// Walk a scanned log line by line: parse each line and check its chain link and its
/// sequence number (the checks every reader of a log makes before trusting it).
pub(crate) fn walk(scan: &LogScan) -> impl Iterator<Item = WalkedLine<'_>> {
    scan.lines.iter().enumerate().map(|(index, raw)| {
        let before = index.checked_sub(1).map(|j| scan.lines[j].hash.as_str());
        let event = parse_line(raw);
        let (chained, in_sequence) = match &event {
            Ok(ev) => (ev.prev.as_deref() == before, ev.seq == index as u64),
            Err(_) => (false, false),
        };
        WalkedLine {
            index,
            raw,
            event,
            chained,
            in_sequence,
        }
    })
}
