//! The forms a text can take in a bundle, for `--match`: a pattern is tried on each.
//!
//! - raw bytes, always;
//! - JSON: every string of a JSON document, decoded (so `\"`, `\\`, `\n` and `\uXXXX`
//!   escapes are undone), and again inside a string that is itself JSON (a tool call's
//!   arguments);
//! - streams: a `text/event-stream` body's events and an NDJSON body's lines, each as
//!   JSON, and the strings at the same place of consecutive events joined in order (the
//!   deltas of a streamed text or of a tool call's arguments, which may split a value);
//! - encodings: a base64 or percent-encoded string decoded, and a gzip or zstd body
//!   decompressed (up to [`MAX_DECODED`] bytes).
//!
//! A body in an encoding not read here (another compression, or one that will not
//! decompress within the bound) cannot be searched: [`forms`] says why, and the
//! redaction refuses it unless the blob is removed by name.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Read as _;

use base64::Engine as _;
use serde_json::Value;

/// The most bytes a compressed body is decompressed to before it counts as unreadable.
pub(crate) const MAX_DECODED: u64 = 256 * 1024 * 1024;
/// How deep strings that hold JSON are followed.
const MAX_NESTING: usize = 4;
/// The shortest string tried as base64.
const MIN_BASE64: usize = 8;

/// Every form of a body of `media_type` a pattern is tried on, or why it cannot be read.
pub(crate) fn forms<'a>(bytes: &'a [u8], media_type: &str) -> Result<Vec<Cow<'a, [u8]>>, String> {
    let mut out = vec![Cow::Borrowed(bytes)];
    let media = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if let Some(decoded) = decompress(bytes, &media)? {
        let more = forms(&decoded, "application/octet-stream")?
            .into_iter()
            .map(|f| Cow::Owned(f.into_owned()))
            .collect::<Vec<_>>();
        out.extend(more);
        return Ok(out);
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(out);
    };
    if media == "text/event-stream" || looks_like_sse(text) {
        let events: Vec<String> = sse_data(text);
        stream_forms(events.iter().map(String::as_str), &mut out);
    } else if media.contains("ndjson") || media.contains("jsonl") {
        stream_forms(text.lines().filter(|l| !l.trim().is_empty()), &mut out);
    } else {
        text_forms(text, 0, &mut out);
    }
    Ok(out)
}

/// The forms of a string of the log: itself, and what it holds when it is JSON or encoded.
pub(crate) fn string_forms(s: &str) -> Vec<Cow<'_, [u8]>> {
    let mut out = vec![Cow::Borrowed(s.as_bytes())];
    text_forms(s, 1, &mut out);
    out
}

/// What a text holds beyond its own bytes: its JSON strings, decoded, and decodings of
/// those strings.
fn text_forms(text: &str, depth: usize, out: &mut Vec<Cow<'_, [u8]>>) {
    if depth > MAX_NESTING {
        return;
    }
    let trimmed = text.trim_start();
    if trimmed.starts_with(['{', '[', '"'])
        && let Ok(v) = serde_json::from_str::<Value>(text)
    {
        let mut strings = Vec::new();
        json_strings(&v, &mut String::new(), &mut strings);
        for (_, s) in strings {
            out.push(Cow::Owned(s.as_bytes().to_vec()));
            text_forms(s, depth + 1, out);
        }
        return;
    }
    if depth > 0 {
        decodings(text, out);
    }
}

/// Decodings of a string: base64 (standard or URL-safe, a `data:` URL's payload) and
/// percent-encoding.
fn decodings(s: &str, out: &mut Vec<Cow<'_, [u8]>>) {
    let payload = s
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,").map(|(_, d)| d))
        .unwrap_or(s)
        .trim();
    if payload.len() >= MIN_BASE64
        && payload
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=-_\n\r".contains(&b))
    {
        let clean: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
        for engine in [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            if let Ok(decoded) = engine.decode(&clean) {
                out.push(Cow::Owned(decoded));
                break;
            }
        }
    }
    if s.contains('%')
        && let Some(decoded) = percent_decode(s)
    {
        out.push(Cow::Owned(decoded));
    }
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let mut any = false;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            if let Ok(v) = u8::from_str_radix(hex, 16) {
                out.push(v);
                i += 3;
                any = true;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    any.then_some(out)
}

/// Every string of a JSON value, with its pointer.
fn json_strings<'v>(v: &'v Value, pointer: &mut String, out: &mut Vec<(String, &'v str)>) {
    match v {
        Value::String(s) => out.push((pointer.clone(), s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                crate::chain::push_token(pointer, &i.to_string());
                json_strings(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = pointer.len();
                crate::chain::push_token(pointer, k);
                json_strings(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// The forms of a stream of JSON documents (SSE events' data, NDJSON lines): each one's
/// strings, and per place the strings of consecutive documents joined (the deltas of one
/// streamed value), each join tried as JSON too (a tool call's streamed arguments).
fn stream_forms<'t>(docs: impl Iterator<Item = &'t str>, out: &mut Vec<Cow<'_, [u8]>>) {
    let mut joined: BTreeMap<String, String> = BTreeMap::new();
    let mut all_text = String::new();
    for doc in docs {
        match serde_json::from_str::<Value>(doc) {
            Ok(v) => {
                let mut strings = Vec::new();
                json_strings(&v, &mut String::new(), &mut strings);
                for (pointer, s) in strings {
                    out.push(Cow::Owned(s.as_bytes().to_vec()));
                    let mut nested = Vec::new();
                    text_forms(s, 1, &mut nested);
                    out.extend(nested.into_iter().map(|f| Cow::Owned(f.into_owned())));
                    joined.entry(pointer).or_default().push_str(s);
                }
            }
            // Data that is not JSON (a plain-text stream): its text, joined.
            Err(_) => all_text.push_str(doc),
        }
    }
    for text in joined.into_values().chain(std::iter::once(all_text)) {
        if text.is_empty() {
            continue;
        }
        let mut nested = Vec::new();
        text_forms(&text, 1, &mut nested);
        out.extend(nested.into_iter().map(|f| Cow::Owned(f.into_owned())));
        out.push(Cow::Owned(text.into_bytes()));
    }
}

/// Whether a body with no telling media type is a server-sent event stream.
fn looks_like_sse(text: &str) -> bool {
    text.starts_with("data:") || text.starts_with("event:") || text.contains("\ndata:")
}

/// The data of each event of an SSE body: its `data:` lines joined by `\n` (one leading
/// space of each value dropped), as the format says.
fn sse_data(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if let Some(d) = data.take() {
                events.push(d);
            }
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        if field == "data" {
            let d = data.get_or_insert_with(String::new);
            if !d.is_empty() {
                d.push('\n');
            }
            d.push_str(value);
        }
    }
    events.extend(data);
    events
}

/// A gzip or zstd body decompressed (`Ok(None)` when it is neither); an error for a
/// compressed body that cannot be read within the bound, or a compression not read here.
fn decompress(bytes: &[u8], media: &str) -> Result<Option<Vec<u8>>, String> {
    let bounded = |mut r: Box<dyn std::io::Read + '_>, what: &str| -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        (&mut r)
            .take(MAX_DECODED + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("a {what} body that does not decompress: {e}"))?;
        if out.len() as u64 > MAX_DECODED {
            return Err(format!(
                "a {what} body larger than {} MiB decompressed",
                MAX_DECODED >> 20
            ));
        }
        Ok(out)
    };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return bounded(Box::new(flate2::read::MultiGzDecoder::new(bytes)), "gzip").map(Some);
    }
    if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let decoder = zstd::stream::read::Decoder::new(bytes)
            .map_err(|e| format!("a zstd body that does not decompress: {e}"))?;
        return bounded(Box::new(decoder), "zstd").map(Some);
    }
    let unread = [
        ("BZh", "bzip2"),
        ("\u{fd}7zXZ", "xz"),
        ("PK\u{3}\u{4}", "zip"),
    ];
    for (magic, name) in unread {
        if bytes.starts_with(magic.as_bytes()) {
            return Err(format!("a {name} body (not read here)"));
        }
    }
    if [
        "application/x-bzip2",
        "application/x-xz",
        "application/zip",
        "application/x-brotli",
        "application/br",
    ]
    .contains(&media)
    {
        return Err(format!("a body of {media} (not read here)"));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(forms: &[Cow<'_, [u8]>], needle: &str) -> bool {
        forms
            .iter()
            .any(|f| f.windows(needle.len()).any(|w| w == needle.as_bytes()))
    }

    const SECRET: &str = "pw\"Q7z\\9Lk-tok";

    #[test]
    fn json_escaped_text_is_found_decoded() {
        let body = serde_json::json!({"messages": [{"content": format!("the key is {SECRET}.")}]})
            .to_string();
        assert!(!body.contains(SECRET), "the raw body holds it escaped");
        assert!(has(
            &forms(body.as_bytes(), "application/json").unwrap(),
            SECRET
        ));
        // Arguments that are JSON inside a JSON string.
        let args = serde_json::json!({"password": SECRET}).to_string();
        let body = serde_json::json!({"arguments": args}).to_string();
        assert!(has(
            &forms(body.as_bytes(), "application/json").unwrap(),
            SECRET
        ));
        assert!(has(&string_forms(&args), SECRET));
    }

    #[test]
    fn deltas_of_a_stream_are_joined() {
        let (a, b) = SECRET.split_at(6);
        let ev = |t: &str| {
            format!(
                "data: {}\n\n",
                serde_json::json!({"choices": [{"index": 0, "delta": {"content": t}}]})
            )
        };
        let body = format!("{}{}{}data: [DONE]\n\n", ev("so: "), ev(a), ev(b));
        let f = forms(body.as_bytes(), "text/event-stream").unwrap();
        assert!(has(&f, SECRET));
        // Streamed tool arguments: the join is JSON, read again.
        let args = serde_json::json!({"pin": SECRET}).to_string();
        let (x, y) = args.split_at(9);
        let ev = |t: &str| {
            format!(
                "event: content_block_delta\ndata: {}\n\n",
                serde_json::json!({"type": "content_block_delta", "delta": {"partial_json": t}})
            )
        };
        let body = format!("{}{}", ev(x), ev(y));
        assert!(has(
            &forms(body.as_bytes(), "text/event-stream").unwrap(),
            SECRET
        ));
    }

    #[test]
    fn encodings_are_decoded_or_refused() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(SECRET);
        let body =
            serde_json::json!({"data": b64, "url": "https://x/?q=pw%22Q7z%5C9Lk-tok"}).to_string();
        let f = forms(body.as_bytes(), "application/json").unwrap();
        assert_eq!(
            f.iter()
                .filter(|f| has(std::slice::from_ref(f), SECRET))
                .count(),
            2
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, body.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        assert!(has(
            &forms(&gz, "application/octet-stream").unwrap(),
            SECRET
        ));
        let zst = zstd::encode_all(body.as_bytes(), 1).unwrap();
        assert!(has(&forms(&zst, "application/json").unwrap(), SECRET));
        assert!(forms(b"BZh91AY&SY", "application/octet-stream").is_err());
        assert!(forms(b"anything", "application/x-brotli").is_err());
        // A truncated gzip body cannot be searched.
        assert!(forms(&gz[..gz.len() / 2], "application/octet-stream").is_err());
    }
}
