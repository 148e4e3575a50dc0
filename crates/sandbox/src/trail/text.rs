//! Text of the trail's records: bytes written losslessly as text, known secrets masked,
//! and arguments cut at a character boundary.

/// `text` with every occurrence of each of `secrets` masked: each of its bytes becomes
/// `*`, so lengths stay right. Secrets shorter than 4 bytes are ignored (they would mask
/// ordinary words).
pub fn mask_secrets(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), &"*".repeat(secret.len()));
        }
    }
    out
}

/// `bytes` as text, losslessly: valid UTF-8 stays, a backslash becomes `\\`, and each
/// byte that is not part of valid UTF-8 becomes `\xHH`.
#[cfg_attr(not(feature = "confine"), allow(dead_code))]
pub(crate) fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `text` cut to at most `limit` bytes at a character boundary.
pub(crate) fn cut_at(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_byte_for_byte() {
        let secrets = vec!["sk-live-123456".to_owned(), "ab".to_owned()];
        assert_eq!(
            mask_secrets("key=sk-live-123456;again sk-live-123456 ab", &secrets),
            "key=**************;again ************** ab"
        );
        assert_eq!(mask_secrets("nothing", &secrets), "nothing");
    }

    #[test]
    fn bytes_are_escaped_losslessly() {
        assert_eq!(escape_bytes(b"plain"), "plain");
        assert_eq!(escape_bytes(b"a\\b"), "a\\\\b");
        assert_eq!(escape_bytes(b"x\xffy\xc3"), "x\\xffy\\xc3");
        assert_eq!(escape_bytes("é".as_bytes()), "é");
    }

    #[test]
    fn cuts_keep_whole_characters() {
        assert_eq!(cut_at("héllo", 2), "h");
        assert_eq!(cut_at("héllo", 3), "hé");
        assert_eq!(cut_at("hi", 10), "hi");
    }
}
