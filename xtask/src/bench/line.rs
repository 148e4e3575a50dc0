//! One figure line of the bench (the driver's JSON object, or the peer's converted) and
//! the reading of its flat fields.

/// A flat JSON object's field, as its raw text (numbers, `null`, `true`) or a string's
/// contents. Enough for the one-line objects the driver and the peer print.
pub(super) fn field(line: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":");
    let start = line.find(&pat)? + pat.len();
    let rest = line[start..].trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next()?),
                '"' => return Some(out),
                c => out.push(c),
            }
        }
        None
    } else {
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim().to_string())
    }
}

pub(super) fn num(line: &str, key: &str) -> Option<f64> {
    field(line, key).and_then(|v| v.parse().ok())
}

/// One figure line: ours (the driver's line verbatim) or the peer's (converted).
#[derive(Clone)]
pub(super) struct Line {
    pub(super) name: String,
    pub(super) json: String,
}

impl Line {
    pub(super) fn get(&self, key: &str) -> Option<f64> {
        num(&self.json, key)
    }
}
