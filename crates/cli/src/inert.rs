//! Untrusted text made inert before it reaches a person's terminal.
//!
//! What tools and models return, file names, call ids, error messages quoting a path: any
//! of it may hold bytes a terminal acts on — ESC sequences that move the cursor, clear
//! lines, set the window title, write the clipboard (OSC 52) or plant links (OSC 8), other
//! C0 and C1 controls, DEL — or characters that change how text reads without showing
//! themselves: bidi overrides and isolates, zero-width and other invisible format
//! characters, line and paragraph separators. [`inert`] shows each such character as a
//! visible escape (`\x1b`, `\u{202e}`) and leaves every other character as it is;
//! [`inert_block`] does the same but keeps newlines, for multi-line text whose
//! layout is its own. Every writer of the CLI passes untrusted text through one of them.
//!
//! Backslashes are not doubled: `\x1b` in the output is either an escaped ESC or those
//! four characters in the text; the evidence log (JSON) has the exact text.

use std::borrow::Cow;

/// Format characters (Unicode general category `Cf`) and other characters that show
/// nothing, as inclusive ranges: soft hyphen, Arabic and Syriac format marks, the
/// Mongolian vowel separator and free variation selectors, zero-width space/joiners, the
/// left-to-right and right-to-left marks, the bidi embeddings, overrides and isolates,
/// word joiner and invisible operators, deprecated format controls, the byte order mark,
/// interlinear annotation marks, Hangul fillers, the combining grapheme joiner, Khmer
/// inherent vowels, and the tag characters.
const INVISIBLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0x3164, 0x3164),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// Whether `c` must not reach a terminal as it is: a C0 control (newline and tab
/// included), DEL, a C1 control, or an invisible or bidi format character.
pub fn is_unsafe(c: char) -> bool {
    let n = u32::from(c);
    n < 0x20
        || (0x7F..=0x9F).contains(&n)
        || INVISIBLE.iter().any(|&(lo, hi)| (lo..=hi).contains(&n))
}

fn escape(c: char, out: &mut String) {
    use std::fmt::Write as _;
    let n = u32::from(c);
    let _ = match c {
        '\n' => write!(out, "\\n"),
        '\t' => write!(out, "\\t"),
        '\r' => write!(out, "\\r"),
        _ if n <= 0x9F => write!(out, "\\x{n:02x}"),
        _ => write!(out, "\\u{{{n:x}}}"),
    };
}

fn make_inert(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) && !keep(c) {
            escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` for one line of a terminal: every unsafe character ([`is_unsafe`]), newlines
/// and tabs included, shown as a visible escape (`\n`, `\x1b`, `\u{202e}`).
pub fn inert(text: &str) -> Cow<'_, str> {
    make_inert(text, |_| false)
}

/// `text` as a block of lines: like [`inert`], but newlines stay as they are (tabs and
/// carriage returns are escaped like every other control).
pub fn inert_block(text: &str) -> Cow<'_, str> {
    make_inert(text, |c| c == '\n')
}

/// JSON text (as `serde_json` writes it) with every unsafe character inside its strings
/// written as a `\uXXXX` escape: the same JSON value, safe on a terminal. `serde_json`
/// already escapes C0 controls; this adds DEL, C1 controls and the invisible and bidi
/// characters. The layout's own newlines (pretty printing) are kept.
pub fn inert_json(json: &str) -> Cow<'_, str> {
    use std::fmt::Write as _;
    let keep = |c: char| c == '\n' || c == '\t' || c == '\r';
    if !json.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe(c) && !keep(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{u:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character the rule must catch.
    fn every_unsafe() -> Vec<char> {
        let mut all: Vec<char> = (0u32..0x20)
            .chain(0x7F..=0x9F)
            .filter_map(char::from_u32)
            .collect();
        for &(lo, hi) in INVISIBLE {
            all.extend((lo..=hi).filter_map(char::from_u32));
        }
        all
    }

    #[test]
    fn every_control_bidi_and_invisible_character_is_escaped_visibly() {
        let named = [
            '\u{1b}',
            '\u{7}',
            '\u{7f}',
            '\u{9b}',
            '\u{9d}',
            '\u{202a}',
            '\u{202b}',
            '\u{202c}',
            '\u{202d}',
            '\u{202e}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200e}',
            '\u{200f}',
            '\u{61c}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{ad}',
            '\u{2028}',
            '\u{2029}',
            '\u{e0041}',
        ];
        let all = every_unsafe();
        for c in named {
            assert!(
                all.contains(&c),
                "{:x} missing from the table",
                u32::from(c)
            );
        }
        for c in all {
            let text = format!("a{c}b");
            let shown = inert(&text);
            assert!(
                !shown.chars().any(is_unsafe),
                "{:x}: {shown:?}",
                u32::from(c)
            );
            assert!(
                shown.starts_with("a\\") && shown.ends_with('b'),
                "{shown:?}"
            );
            // Visible and unambiguous: the escape names the code point.
            let n = u32::from(c);
            let expected = match c {
                '\n' => "\\n".to_string(),
                '\t' => "\\t".to_string(),
                '\r' => "\\r".to_string(),
                _ if n <= 0x9F => format!("\\x{n:02x}"),
                _ => format!("\\u{{{n:x}}}"),
            };
            assert_eq!(shown, format!("a{expected}b"));
            // JSON: the same value, no unsafe character.
            let json = serde_json::to_string(&text).unwrap();
            let safe = inert_json(&json);
            assert!(!safe.chars().any(is_unsafe), "{safe}");
            assert_eq!(serde_json::from_str::<String>(&safe).unwrap(), text);
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let text = "plain ASCII, accents é ü, CJK 漢字, emoji 🙂, Arabic مرحبا, a \\x1b literal";
        assert!(matches!(inert(text), Cow::Borrowed(_)));
        assert_eq!(inert(text), text);
        for c in (0x20u32..0x7F).chain(0xA0..0xAD).filter_map(char::from_u32) {
            assert!(!is_unsafe(c), "{c:?}");
        }
    }

    #[test]
    fn a_block_keeps_its_lines_and_tabs_only() {
        assert_eq!(inert_block("a\n\tb\x1b[2J\r"), "a\n\\tb\\x1b[2J\\r");
        assert_eq!(inert("a\nb"), "a\\nb");
        assert_eq!(inert("\u{202e}txt.exe"), "\\u{202e}txt.exe");
        assert_eq!(inert("\u{9b}31m"), "\\x9b31m");
        assert_eq!(
            inert_json("{\n  \"a\": \"\u{e0041}\u{7f}\"\n}"),
            "{\n  \"a\": \"\\udb40\\udc41\\u007f\"\n}"
        );
    }
}
