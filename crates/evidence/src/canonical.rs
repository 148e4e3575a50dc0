//! RFC 8785 (JSON Canonicalization Scheme) serialisation over `serde_json::Value`.
//!
//! Object members are sorted by the UTF-16 code units of their names, no whitespace is
//! written, strings use the minimal escaping of ECMAScript `JSON.stringify`, and numbers
//! use the ECMAScript `Number.prototype.toString` form (by `ryu-js`: the shortest digits
//! that read back as the same double, the even one when two are equally close, as RFC
//! 8785 Appendix B wants). Integers whose magnitude is at most 2^53 are written exactly;
//! larger ones go through IEEE 754 double like any other number, as the RFC requires.
//!
//! Versions before this one wrote the last digit of a number whose shortest form is an
//! exact tie rounded up instead of to even (`1424953923781206.3` for the double that is
//! exactly 1424953923781206.25; the RFC says `…206.2`). Their event lines are still
//! accepted as canonical: [`is_canonical`] takes either form.

use serde_json::Value;

use crate::error::{EvidenceError, Result};

/// Largest integer magnitude that an IEEE 754 double holds exactly.
const MAX_SAFE: u64 = 1 << 53;

/// How doubles are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Numbers {
    /// RFC 8785 (ECMAScript), ties to even.
    Rfc,
    /// As versions before the fix wrote them (a tie's last digit rounded up): only to
    /// accept their lines as canonical.
    Legacy,
}

/// Serialise `value` as RFC 8785 canonical JSON.
///
/// Fails only for a number that is not finite, which `serde_json::Value` cannot
/// normally hold.
///
/// # Errors
///
/// [`EvidenceError::Canonical`] for a number that is not finite.
pub fn to_canonical_string(value: &Value) -> Result<String> {
    let mut out = String::with_capacity(128);
    write_value(value, &mut out, Numbers::Rfc)?;
    Ok(out)
}

/// How `text` compares with the canonical JSON of `value` (which was parsed from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// The form this version writes.
    Exact,
    /// The form earlier versions wrote for tie numbers (accepted in chain-1 logs only).
    Legacy,
    /// Neither.
    Not,
}

/// Whether `text` is the canonical JSON of `value` (which was parsed from it): the form
/// this version writes, or the one earlier versions wrote for tie numbers.
pub(crate) fn canonical_form(value: &Value, text: &str) -> Result<Form> {
    if to_canonical_string(value)? == text {
        return Ok(Form::Exact);
    }
    let mut legacy = String::with_capacity(text.len());
    write_value(value, &mut legacy, Numbers::Legacy)?;
    Ok(if legacy == text {
        Form::Legacy
    } else {
        Form::Not
    })
}

/// Whether `text` is the canonical JSON of `value` in either form [`canonical_form`]
/// accepts.
#[cfg(test)]
pub(crate) fn is_canonical(value: &Value, text: &str) -> Result<bool> {
    Ok(canonical_form(value, text)? != Form::Not)
}

/// Serialise any `Serialize` value as canonical JSON (through `serde_json::Value`).
///
/// # Errors
///
/// [`EvidenceError::Canonical`] when `value` cannot be turned into a `serde_json::Value`
/// (e.g. a map whose keys are not strings) or holds a number that is not finite.
pub fn to_canonical_string_of<T: serde::Serialize + ?Sized>(value: &T) -> Result<String> {
    let v = serde_json::to_value(value).map_err(|e| EvidenceError::Canonical(e.to_string()))?;
    to_canonical_string(&v)
}

fn write_value(value: &Value, out: &mut String, numbers: Numbers) -> Result<()> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(n, out, numbers)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out, numbers)?;
            }
            out.push(']');
        }
        // Already in order (serde_json's map is sorted by bytes, which is the UTF-16
        // order for almost every key): no copy, no sort.
        Value::Object(map) if keys_in_canonical_order(map) => {
            write_members(map.iter(), out, numbers)?
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            write_members(entries.into_iter(), out, numbers)?;
        }
    }
    Ok(())
}

/// An object's members, in the order given, as `{"k":v,…}`.
fn write_members<'a>(
    members: impl Iterator<Item = (&'a String, &'a Value)>,
    out: &mut String,
    numbers: Numbers,
) -> Result<()> {
    out.push('{');
    for (i, (k, v)) in members.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(k, out);
        out.push(':');
        write_value(v, out, numbers)?;
    }
    out.push('}');
    Ok(())
}

/// Whether the map's iteration order is already RFC 8785's (UTF-16 code units).
pub(crate) fn keys_in_canonical_order(map: &serde_json::Map<String, Value>) -> bool {
    let mut keys = map.keys();
    let Some(mut prev) = keys.next() else {
        return true;
    };
    for k in keys {
        let in_order = if prev.is_ascii() && k.is_ascii() {
            prev.as_bytes() < k.as_bytes()
        } else {
            prev.encode_utf16().cmp(k.encode_utf16()) == std::cmp::Ordering::Less
        };
        if !in_order {
            return false;
        }
        prev = k;
    }
    true
}

/// Append the canonical JSON of `value` to `out`.
pub(crate) fn write_canonical(value: &Value, out: &mut String) -> Result<()> {
    write_value(value, out, Numbers::Rfc)
}

/// Append `s` as a canonical JSON string to `out`.
pub(crate) fn write_canonical_str(s: &str, out: &mut String) {
    write_string(s, out);
}

fn write_number(n: &serde_json::Number, out: &mut String, numbers: Numbers) -> Result<()> {
    if let Some(u) = n.as_u64() {
        if u <= MAX_SAFE {
            out.push_str(&u.to_string());
            return Ok(());
        }
    } else if let Some(i) = n.as_i64()
        && i.unsigned_abs() <= MAX_SAFE
    {
        out.push_str(&i.to_string());
        return Ok(());
    }
    let f = n
        .as_f64()
        .ok_or_else(|| EvidenceError::Canonical(format!("number {n} is not representable")))?;
    match numbers {
        Numbers::Rfc => write_f64(f, out),
        Numbers::Legacy => write_f64_legacy(f, out),
    }
}

/// Format a double as ECMAScript's `Number.prototype.toString` does.
pub(crate) fn write_f64(f: f64, out: &mut String) -> Result<()> {
    if !f.is_finite() {
        return Err(EvidenceError::Canonical(format!(
            "{f} is not a finite number"
        )));
    }
    // ryu-js writes -0 as "0", as ECMAScript (and RFC 8785) want.
    out.push_str(ryu_js::Buffer::new().format_finite(f));
    Ok(())
}

/// How versions before the fix formatted a double: ECMAScript's layout of Rust's
/// shortest round-trip digits, which round an exact tie's last digit up. Used only to
/// accept their lines ([`is_canonical`]).
fn write_f64_legacy(f: f64, out: &mut String) -> Result<()> {
    if !f.is_finite() {
        return Err(EvidenceError::Canonical(format!(
            "{f} is not a finite number"
        )));
    }
    if f == 0.0 {
        out.push('0');
        return Ok(());
    }
    if f < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` yields the shortest digits that round-trip, e.g. "1.2345e-7".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci
        .split_once('e')
        .ok_or_else(|| EvidenceError::Canonical(format!("unexpected float form {sci}")))?;
    let exp: i32 = exp
        .parse()
        .map_err(|_| EvidenceError::Canonical(format!("unexpected float form {sci}")))?;
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i32;
    let n = exp + 1; // value = 0.d1d2..dk * 10^n
    if k <= n && n <= 21 {
        out.push_str(&digits);
        for _ in 0..(n - k) {
            out.push('0');
        }
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        for _ in 0..(-n) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let e = n - 1;
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&e.unsigned_abs().to_string());
    }
    Ok(())
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(x: f64) -> String {
        let mut s = String::new();
        write_f64(x, &mut s).unwrap();
        s
    }

    #[test]
    fn numbers_follow_ecmascript() {
        // Vectors from RFC 8785 appendix B and ECMAScript behaviour.
        assert_eq!(f(0.0), "0");
        assert_eq!(f(-0.0), "0");
        assert_eq!(f(1.0), "1");
        assert_eq!(f(-1.5), "-1.5");
        assert_eq!(f(1e21), "1e+21");
        assert_eq!(f(1e20), "100000000000000000000");
        assert_eq!(f(123456789012345680000.0), "123456789012345680000");
        assert_eq!(f(0.000001), "0.000001");
        assert_eq!(f(0.0000001), "1e-7");
        assert_eq!(f(5e-324), "5e-324");
        assert_eq!(f(1.7976931348623157e308), "1.7976931348623157e+308");
        assert_eq!(f(9007199254740994.0), "9007199254740994");
        assert_eq!(f(333333333.3333333), "333333333.3333333");
        assert_eq!(f(0.1), "0.1");
        assert_eq!(f(1e23), "1e+23");
        assert_eq!(f(4.5e-7), "4.5e-7");
        assert!(write_f64(f64::NAN, &mut String::new()).is_err());
    }

    #[test]
    fn ties_go_to_even_and_the_earlier_form_is_still_canonical() {
        // RFC 8785 Appendix B: exactly 1424953923781206.25, written with the even digit.
        let tie = f64::from_bits(0x43143ff3c1cb0959);
        assert_eq!(f(tie), "1424953923781206.2");
        let mut legacy = String::new();
        write_f64_legacy(tie, &mut legacy).unwrap();
        assert_eq!(legacy, "1424953923781206.3");
        let v = json!([tie]);
        assert!(is_canonical(&v, "[1424953923781206.2]").unwrap());
        assert!(is_canonical(&v, "[1424953923781206.3]").unwrap());
        assert!(!is_canonical(&v, "[1424953923781206.25]").unwrap());
        assert!(!is_canonical(&v, "[ 1424953923781206.2]").unwrap());
    }

    #[test]
    fn big_integers_go_through_double() {
        let v = json!(9007199254740993u64); // 2^53 + 1: not a double
        assert_eq!(to_canonical_string(&v).unwrap(), "9007199254740992");
        let v = json!(-42i64);
        assert_eq!(to_canonical_string(&v).unwrap(), "-42");
    }

    #[test]
    fn keys_sorted_by_utf16_and_strings_escaped() {
        // U+FB33 sorts after U+1F600 by UTF-16 code units (0xFB33 > 0xD83D), though it is
        // the smaller code point: RFC 8785 wants the UTF-16 order.
        let v = json!({"\u{fb33}": 1, "\u{1f600}": 2, "b": [true, null], "a\n": "x\u{1}\"\\\u{7f}\u{2028}"});
        assert_eq!(
            to_canonical_string(&v).unwrap(),
            "{\"a\\n\":\"x\\u0001\\\"\\\\\u{7f}\u{2028}\",\"b\":[true,null],\"\u{1f600}\":2,\"\u{fb33}\":1}"
        );
    }

    #[test]
    fn nested_objects_sorted() {
        let v = json!({"z": {"y": 1, "x": 2}, "a": []});
        assert_eq!(
            to_canonical_string(&v).unwrap(),
            r#"{"a":[],"z":{"x":2,"y":1}}"#
        );
    }
}
