//! Keeping the real key out of everything the program gets and the bundle keeps: one
//! [`Masker`] that finds a secret in every form an upstream may echo it in, and the
//! [`Redactor`] that applies it to a response as it streams.
//!
//! An upstream may echo a credential (an error that quotes the key), and not always as
//! the raw bytes: a JSON body may escape any character of it (`sk\u002dREAL…`, `\/`, or
//! the escapes of an escaped string nested in another), a URL or form may percent-encode
//! it, a header or a data URL may carry it in base64. The masker searches for each
//! secret as a sequence of characters, each of which may be written:
//!
//! - as itself (its UTF-8 bytes);
//! - as a JSON escape: `\uXXXX` (hex digits in either case; a surrogate pair beyond the
//!   BMP) or the short escape of `"`, `\`, `/`, and the control characters — where the
//!   backslash may itself be escaped, up to [`ESCAPE_DEPTH`] strings deep (`\\u002d`,
//!   `\u005cu002d`);
//! - percent-encoded (`%2D`, `%2d`, and `%252D` when encoded twice);
//! - as an HTML character reference (`&#45;`, `&#x2d;`);
//!
//! and also for the base64 (standard and URL-safe) of the secret at each of the three
//! alignments a base64 text can hold it at (every whole 3-byte group of it, which leaves
//! at most two bytes at either end), and for its UTF-16 (little- and big-endian) bytes.
//! Each occurrence found is replaced, byte for byte, by `*`: lengths (and a
//! `content-length`) stay right, and a JSON text stays JSON. The same masker serves the
//! response bodies, the headers given to the program, and every string the recorder
//! derives from an exchange (errors, parsed fields).
//!
//! A stream passes through as it arrives: each chunk goes on at once except its last few
//! bytes when they could be the beginning of a secret in one of these forms split across
//! chunks.

use std::sync::Arc;

use base64::Engine as _;

/// How many strings deep a JSON escape of a secret's character is looked for: a
/// backslash escaped this many times over (`\u002d`, `\\u002d`, `\\\\u002d`).
pub const ESCAPE_DEPTH: u8 = 3;

/// One element of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// A character, found in any of the encodings the module docs list.
    Char(char),
    /// A byte, found only as itself.
    Byte(u8),
}

/// What is searched for: a sequence of units.
#[derive(Debug, Clone)]
struct Pattern {
    units: Vec<Unit>,
    /// Bytes a match can start with.
    starts: [bool; 256],
}

/// Finds and masks the secrets it was made with, in every form the module docs list.
/// Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    patterns: Vec<Pattern>,
    /// Bytes a match of any pattern can start with.
    starts: Vec<bool>,
}

impl Masker {
    /// A masker of `secrets` (empty ones are ignored).
    pub fn new(secrets: &[String]) -> Masker {
        let mut patterns = Vec::new();
        for s in secrets.iter().filter(|s| !s.is_empty()) {
            patterns.push(Pattern::chars(s.chars()));
            for engine in [
                &base64::engine::general_purpose::STANDARD_NO_PAD,
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ] {
                for text in base64_cores(s.as_bytes(), engine) {
                    patterns.push(Pattern::chars(text.chars()));
                }
            }
            if !s.is_ascii() || s.len() >= 4 {
                let le: Vec<u8> = s.encode_utf16().flat_map(u16::to_le_bytes).collect();
                let be: Vec<u8> = s.encode_utf16().flat_map(u16::to_be_bytes).collect();
                patterns.push(Pattern::bytes(&le));
                patterns.push(Pattern::bytes(&be));
            }
        }
        let mut starts = vec![false; 256];
        for p in &patterns {
            for (b, can) in p.starts.iter().enumerate() {
                starts[b] |= *can;
            }
        }
        Masker {
            inner: Arc::new(Inner { patterns, starts }),
        }
    }

    /// Whether it has nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.inner.patterns.is_empty()
    }

    /// Masks every whole occurrence in `bytes`; returns whether there was one.
    pub fn mask(&self, bytes: &mut [u8]) -> bool {
        self.scan(bytes, false).0
    }

    /// Whether `bytes` hold a secret in any form.
    pub fn holds(&self, bytes: &[u8]) -> bool {
        let mut copy = bytes.to_vec();
        self.mask(&mut copy)
    }

    /// `text` with every occurrence masked.
    pub fn mask_str(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_owned();
        }
        let mut bytes = text.as_bytes().to_vec();
        if !self.mask(&mut bytes) {
            return text.to_owned();
        }
        // A match spans whole characters, so what is left is still UTF-8.
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Masks every string (and object key) in `value`; returns whether there was an
    /// occurrence.
    pub fn mask_value(&self, value: &mut serde_json::Value) -> bool {
        use serde_json::Value;
        if self.is_empty() {
            return false;
        }
        match value {
            Value::String(s) => {
                let masked = self.mask_str(s);
                let hit = masked != *s;
                *s = masked;
                hit
            }
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |hit, v| self.mask_value(v) | hit),
            Value::Object(map) => {
                let mut hit = false;
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    hit |= self.mask_value(&mut v);
                    let key = self.mask_str(&k);
                    hit |= key != k;
                    map.insert(key, v);
                }
                hit
            }
            _ => false,
        }
    }

    /// Masks every whole occurrence in `buf`; returns whether there was one and, when
    /// `streaming`, where the earliest possible start of an occurrence cut off by the end
    /// of `buf` is (`buf.len()` when there is none).
    fn scan(&self, buf: &mut [u8], streaming: bool) -> (bool, usize) {
        let inner = &*self.inner;
        let mut hit = false;
        let mut hold = buf.len();
        if inner.patterns.is_empty() {
            return (false, hold);
        }
        let mut pos = 0;
        while pos < buf.len() {
            if !inner.starts[usize::from(buf[pos])] {
                pos += 1;
                continue;
            }
            let mut masked_to = None;
            let mut partial = false;
            for p in inner
                .patterns
                .iter()
                .filter(|p| p.starts[usize::from(buf[pos])])
            {
                let mut search = Search {
                    buf,
                    partial: false,
                };
                if let Some(end) = search.units(&p.units, pos) {
                    masked_to = Some(masked_to.map_or(end, |m: usize| m.max(end)));
                } else {
                    partial |= search.partial;
                }
            }
            if let Some(end) = masked_to {
                buf[pos..end].fill(b'*');
                hit = true;
                pos = end;
                continue;
            }
            if streaming && partial && hold == buf.len() {
                hold = pos;
            }
            pos += 1;
        }
        (hit, hold)
    }
}

impl Pattern {
    fn chars(chars: impl Iterator<Item = char>) -> Pattern {
        let units: Vec<Unit> = chars.map(Unit::Char).collect();
        let mut starts = [false; 256];
        if let Some(Unit::Char(c)) = units.first() {
            let mut buf = [0u8; 4];
            starts[usize::from(c.encode_utf8(&mut buf).as_bytes()[0])] = true;
            for b in [b'\\', b'%', b'&'] {
                starts[usize::from(b)] = true;
            }
        }
        Pattern { units, starts }
    }

    fn bytes(bytes: &[u8]) -> Pattern {
        let mut starts = [false; 256];
        if let Some(b) = bytes.first() {
            starts[usize::from(*b)] = true;
        }
        Pattern {
            units: bytes.iter().copied().map(Unit::Byte).collect(),
            starts,
        }
    }
}

/// The base64 texts every base64 of a longer string holding `secret` holds, one per
/// alignment: the encoding of the secret's whole 3-byte groups from the first group
/// boundary on (at least two groups).
fn base64_cores(secret: &[u8], engine: &base64::engine::GeneralPurpose) -> Vec<String> {
    (0..3)
        .filter_map(|skip| {
            let rest = secret.get(skip..)?;
            let groups = rest.len() / 3;
            (groups >= 2).then(|| engine.encode(&rest[..groups * 3]))
        })
        .collect()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `uXXXX`: the letters of a JSON escape of the UTF-16 unit `unit` after its backslash.
fn u_escape(unit: u16) -> [u8; 5] {
    let digit = |shift: u16| HEX[usize::from((unit >> shift) & 15)];
    [b'u', digit(12), digit(8), digit(4), digit(0)]
}

/// The short JSON escape letter of `c`, when it has one.
fn short_escape(c: char) -> Option<u8> {
    Some(match c {
        '"' => b'"',
        '\\' => b'\\',
        '/' => b'/',
        '\u{8}' => b'b',
        '\u{c}' => b'f',
        '\n' => b'n',
        '\r' => b'r',
        '\t' => b't',
        _ => return None,
    })
}

/// One search at one position: whether the buffer ran out while a match was still
/// possible.
struct Search<'a> {
    buf: &'a [u8],
    partial: bool,
}

/// What to try after a character's encoding ended at the given position.
type Next<'k, 'a> = dyn FnMut(&mut Search<'a>, usize) -> Option<usize> + 'k;

impl<'a> Search<'a> {
    /// The end of a match of `units` starting at `pos`.
    fn units(&mut self, units: &[Unit], pos: usize) -> Option<usize> {
        let Some((first, rest)) = units.split_first() else {
            return Some(pos);
        };
        match *first {
            Unit::Byte(b) => match self.buf.get(pos) {
                None => {
                    self.partial = true;
                    None
                }
                Some(x) if *x == b => self.units(rest, pos + 1),
                Some(_) => None,
            },
            Unit::Char(c) => self.char(c, pos, ESCAPE_DEPTH, &mut |s, end| s.units(rest, end)),
        }
    }

    /// Whether `lit` is at `pos` (ASCII letters in either case when `fold`): its end.
    fn lit(&mut self, lit: &[u8], pos: usize, fold: bool) -> Option<usize> {
        for (i, want) in lit.iter().enumerate() {
            let Some(got) = self.buf.get(pos + i) else {
                self.partial = true;
                return None;
            };
            let same = if fold {
                got.eq_ignore_ascii_case(want)
            } else {
                got == want
            };
            if !same {
                return None;
            }
        }
        Some(pos + lit.len())
    }

    /// Each encoding of `c` at `pos` (with `depth` levels of escapes left), handed to
    /// `next`: the first whole match `next` finds. An escape's characters (its backslash,
    /// its letters; a `%` and its digits) are themselves encodings one level down, so that
    /// a JSON text escaped inside another is found too.
    fn char(&mut self, c: char, pos: usize, depth: u8, next: &mut Next<'_, 'a>) -> Option<usize> {
        let mut utf8 = [0u8; 4];
        let raw = c.encode_utf8(&mut utf8).as_bytes();
        if let Some(end) = self.lit(raw, pos, false)
            && let Some(found) = next(self, end)
        {
            return Some(found);
        }
        let &first = self.buf.get(pos)?;
        if first == b'&' {
            let code = u32::from(c);
            for form in [format!("&#{code};"), format!("&#x{code:x};")] {
                if let Some(end) = self.lit(form.as_bytes(), pos, true)
                    && let Some(found) = next(self, end)
                {
                    return Some(found);
                }
            }
        }
        if depth == 0 || !matches!(first, b'\\' | b'%' | b'&') {
            return None;
        }
        let below = depth - 1;
        // JSON: a backslash, then the escape's letters.
        let mut units = [0u16; 2];
        let units = c.encode_utf16(&mut units);
        let short = short_escape(c);
        let found = self.char('\\', pos, below, &mut |s, after| {
            if let Some(letter) = short
                && let Some(found) = s.seq(&[letter], after, below, false, next)
            {
                return Some(found);
            }
            let high = u_escape(units[0]);
            if units.len() == 1 {
                return s.seq(&high, after, below, true, next);
            }
            let low = u_escape(units[1]);
            s.seq(&high, after, below, true, &mut |s, end| {
                s.char('\\', end, below, &mut |s, after| {
                    s.seq(&low, after, below, true, next)
                })
            })
        });
        if found.is_some() {
            return found;
        }
        // Percent-encoding: each UTF-8 byte as a `%` and two hex digits.
        self.percent(raw, pos, below, next)
    }

    /// The ASCII `letters` at `pos`, each encoded with `depth` levels of escapes left
    /// (letters in either case when `fold`), handed to `next`.
    fn seq(
        &mut self,
        letters: &[u8],
        pos: usize,
        depth: u8,
        fold: bool,
        next: &mut Next<'_, 'a>,
    ) -> Option<usize> {
        let Some((&first, rest)) = letters.split_first() else {
            return next(self, pos);
        };
        let lower = first.to_ascii_lowercase();
        let upper = first.to_ascii_uppercase();
        let cases: &[u8] = if fold && lower != upper {
            &[lower, upper]
        } else {
            &[first]
        };
        for &letter in cases {
            let found = self.char(char::from(letter), pos, depth, &mut |s, end| {
                s.seq(rest, end, depth, fold, next)
            });
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// `bytes` percent-encoded at `pos` (the `%` and the digits with `depth` levels of
    /// escapes left), handed to `next`.
    fn percent(
        &mut self,
        bytes: &[u8],
        pos: usize,
        depth: u8,
        next: &mut Next<'_, 'a>,
    ) -> Option<usize> {
        let Some((first, rest)) = bytes.split_first() else {
            return next(self, pos);
        };
        let escape = [
            b'%',
            HEX[usize::from(first >> 4)],
            HEX[usize::from(first & 15)],
        ];
        self.char('%', pos, depth, &mut |s, after| {
            s.seq(&escape[1..], after, depth, true, &mut |s, end| {
                s.percent(rest, end, depth, next)
            })
        })
    }
}

/// Replaces secrets in a stream of chunks (see the module docs).
#[derive(Debug, Default)]
pub struct Redactor {
    masker: Masker,
    held: Vec<u8>,
    hit: bool,
}

impl Redactor {
    /// A redactor of `secrets` (empty ones are ignored).
    pub fn new(secrets: &[String]) -> Self {
        Redactor::with(Masker::new(secrets))
    }

    /// A redactor using `masker`.
    pub fn with(masker: Masker) -> Self {
        Redactor {
            masker,
            held: Vec::new(),
            hit: false,
        }
    }

    /// Whether any secret was found so far.
    pub fn hit(&self) -> bool {
        self.hit
    }

    /// The bytes of `chunk` (after what was held back) that can be passed on now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.masker.is_empty() {
            return chunk.to_vec();
        }
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(chunk);
        let (hit, hold) = self.masker.scan(&mut buf, true);
        self.hit |= hit;
        self.held = buf.split_off(hold);
        buf
    }

    /// What is still held back, at the end of the stream (masked: it cannot hold a whole
    /// secret, but it is searched again all the same).
    pub fn finish(&mut self) -> Vec<u8> {
        let mut rest = std::mem::take(&mut self.held);
        self.hit |= self.masker.mask(&mut rest);
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(secrets: &[&str], chunks: &[&str]) -> (String, Vec<usize>, bool) {
        let secrets: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        let mut r = Redactor::new(&secrets);
        let mut out = Vec::new();
        let mut passed = Vec::new();
        for c in chunks {
            let now = r.push(c.as_bytes());
            passed.push(now.len());
            out.extend(now);
        }
        out.extend(r.finish());
        (String::from_utf8(out).unwrap(), passed, r.hit())
    }

    fn masked(secret: &str, text: &str) -> String {
        Masker::new(&[secret.to_owned()]).mask_str(text)
    }

    #[test]
    fn a_secret_split_across_chunks_is_masked_and_nothing_else_waits() {
        let (out, passed, hit) = run(
            &["sk-real-key"],
            &[
                "data: {\"e\":\"bad key sk-re",
                "al-key\"}\n\n",
                "data: [DONE]\n\n",
            ],
        );
        assert_eq!(
            out,
            "data: {\"e\":\"bad key ***********\"}\n\ndata: [DONE]\n\n"
        );
        assert!(hit);
        // Only the possible start of the key waited; the event ends went out at once.
        assert_eq!(passed, [20, 15, 14]);
    }

    #[test]
    fn without_secrets_or_matches_every_byte_passes_at_once() {
        let (out, passed, hit) = run(&["sk-real-key"], &["data: a\n\n", "data: b\n\n"]);
        assert_eq!(out, "data: a\n\ndata: b\n\n");
        assert_eq!(passed, [9, 9]);
        assert!(!hit);
        let (out, _, hit) = run(&[], &["sk-real-key"]);
        assert_eq!(out, "sk-real-key");
        assert!(!hit);
        // A held start that turns out not to be the key is passed on whole.
        let (out, passed, _) = run(&["sk-real-key"], &["x sk-", "nope"]);
        assert_eq!(out, "x sk-nope");
        assert_eq!(passed, [2, 7]);
    }

    #[test]
    fn json_escapes_of_any_character_are_masked_however_deep() {
        let key = "sk-REAL/key\"1";
        for text in [
            r#"{"m":"Incorrect API key provided: sk\u002dREAL\/key\"1"}"#,
            r#"{"m":"sk\u002DREAL\u002fkey\u00221"}"#,
            r#"{"m":"\u0073\u006b\u002d\u0052\u0045\u0041\u004c\u002f\u006b\u0065\u0079\u0022\u0031"}"#,
            // A JSON string inside a JSON string, and one more level.
            r#"{"m":"{\"e\":\"sk\\u002dREAL\\/key\\\"1\"}"}"#,
            r#"{"m":"sk\u005cu002dREAL/key\u005c\"1"}"#,
            r#"{"m":"sk\\\\u002dREAL/key\\\\\\\"1"}"#,
        ] {
            let out = masked(key, text);
            assert!(!out.contains("REAL"), "{text} -> {out}");
            assert_eq!(out.len(), text.len(), "{text}");
            assert!(out.starts_with(r#"{"m":""#), "{out}");
        }
        // Beyond the BMP: a surrogate pair.
        let out = masked("sk-\u{1F600}-x", r#""sk-\ud83d\uDE00-x""#);
        assert_eq!(out, format!("\"{}\"", "*".repeat(17)));
    }

    #[test]
    fn percent_html_base64_and_utf16_forms_are_masked() {
        let key = "sk-proj-ABCDEFGHIJKLMNOP";
        let cases = [
            "key=sk%2Dproj%2dABCDEFGHIJKLMNOP&x=1".to_owned(),
            "key=sk%252Dproj-ABCDEFGHIJKLMNOP".to_owned(),
            "<p>sk&#45;proj&#x2D;ABCDEFGHIJKLMNOP</p>".to_owned(),
        ];
        for text in &cases {
            let out = masked(key, text);
            assert!(!out.contains("ABCDEFGH"), "{text} -> {out}");
            assert_eq!(out.len(), text.len());
        }
        use base64::Engine as _;
        for prefix in ["", "a", "ab", "abc:"] {
            for engine in [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::URL_SAFE,
            ] {
                let encoded = engine.encode(format!("{prefix}{key}:more"));
                let out = masked(key, &format!("Basic {encoded}"));
                let back = engine
                    .decode(out.trim_start_matches("Basic ").replace('*', "A"))
                    .unwrap_or_default();
                let back = String::from_utf8_lossy(&back);
                assert!(!back.contains("ABCDEFGH"), "{prefix}: {out} -> {back}");
                assert!(out.contains('*'), "{prefix}: {out}");
            }
        }
        let le: Vec<u8> = key.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let mut bytes = [b"x".as_slice(), &le, b"y"].concat();
        assert!(Masker::new(&[key.to_owned()]).mask(&mut bytes));
        assert!(bytes[1..bytes.len() - 1].iter().all(|b| *b == b'*'));
    }

    #[test]
    fn an_escaped_secret_split_anywhere_is_masked_and_only_its_start_waits() {
        let key = "sk-REAL-key-0123";
        let text = r#"data: {"error":"bad key sk\u002dREAL\u002dkey\u002d0123"}

"#;
        for cut in 1..text.len() {
            let (a, b) = text.split_at(cut);
            let (out, passed, hit) = run(&[key], &[a, b]);
            assert!(hit, "cut at {cut}");
            assert!(!out.contains("REAL"), "cut at {cut}: {out}");
            assert_eq!(out.len(), text.len());
            // Before the key, at most the few bytes that could start one of its forms
            // (a base64 form starts `ay1S`) waited.
            let start = text.find("sk").unwrap();
            assert!(passed[0] + 4 >= cut.min(start), "cut {cut}: {passed:?}");
        }
    }

    #[test]
    fn strings_and_json_values_are_masked_keys_included() {
        let m = Masker::new(&["sk-real-1234".to_owned()]);
        let mut v = serde_json::json!({"error": "Incorrect key sk-real-1234",
            "sk-real-1234": [1, "a sk\u{2d}real-1234 b"], "n": 3});
        assert!(m.mask_value(&mut v));
        let text = v.to_string();
        assert!(!text.contains("real-1234"), "{text}");
        assert_eq!(v["error"], "Incorrect key ************");
        assert!(!m.holds(b"nothing here"));
        assert!(m.holds(b"sk%2Dreal-1234"));
        assert_eq!(Masker::default().mask_str("sk-real-1234"), "sk-real-1234");
    }
}
