//! Reading a session log one line at a time without building it as JSON values: each
//! line is checked for depth, then read into `Line`, whose fields borrow their raw JSON
//! text from the line; only the small parts a format needs (a `type`, a `call_id`) are
//! decoded. A call's arguments and result stay raw text (`RawCall`) until the call is
//! recorded, one at a time, so that the memory an import takes stays a small multiple of
//! the log's size whatever the log holds (a line of a million tiny numbers costs its
//! bytes, not a value each).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{LoggedCall, arguments_of};

/// How deeply a line's JSON may nest; a deeper line is skipped (and counted).
pub const MAX_JSON_DEPTH: usize = 64;

/// A call's arguments or result larger than this stays its JSON text (a string) in the
/// record instead of being read as a JSON value.
pub const MAX_VALUE_BYTES: usize = 4 << 20;

/// How a line of a log read.
pub(crate) enum Read<'a> {
    /// A JSON object, its fields of interest raw.
    Object(Line<'a>),
    /// JSON, but not an object.
    Other,
    /// Not JSON (or not UTF-8).
    Unreadable,
    /// Nested deeper than [`MAX_JSON_DEPTH`].
    TooDeep,
}

/// The fields of a log line the known formats look at, raw.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Line<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub timestamp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub payload: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub message: Option<&'a RawValue>,
    #[serde(rename = "sessionId", borrow, default)]
    pub session_id: Option<&'a RawValue>,
}

/// Reads one line (without its newline).
pub(crate) fn read(line: &[u8]) -> Read<'_> {
    if depth(line) > MAX_JSON_DEPTH {
        return Read::TooDeep;
    }
    let Ok(text) = std::str::from_utf8(line) else {
        return Read::Unreadable;
    };
    // Only an object is a line (serde would read an array into the fields too).
    if text.trim_start().starts_with('{')
        && let Ok(l) = serde_json::from_str::<Line<'_>>(text)
    {
        return Read::Object(l);
    }
    if serde_json::from_str::<&RawValue>(text).is_ok() {
        Read::Other
    } else {
        Read::Unreadable
    }
}

/// How deeply `text` nests arrays and objects (outside strings), as far as it can tell.
pub(crate) fn depth(text: &[u8]) -> usize {
    let (mut depth, mut most, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                most = most.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// `raw` as a string, when it is one.
pub(crate) fn string(raw: Option<&RawValue>) -> Option<Cow<'_, str>> {
    let raw = raw?;
    if !raw.get().starts_with('"') {
        return None;
    }
    serde_json::from_str::<Cow<'_, str>>(raw.get()).ok()
}

/// Whether `raw` is there and not `null`.
pub(crate) fn present(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|r| r.get() != "null")
}

/// Whether `raw` is a JSON object.
pub(crate) fn object(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|r| r.get().starts_with('{'))
}

/// `raw` read as a value of the shape `T` (`None` when it is not one).
pub(crate) fn shaped<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Option<T> {
    let raw = raw?;
    raw.get()
        .starts_with('{')
        .then(|| serde_json::from_str(raw.get()).ok())
        .flatten()
}

/// Calls `each` with every element of the array `raw` (nothing when it is not an array),
/// one at a time: an array is never held as a whole.
pub(crate) fn each_element<'a>(raw: Option<&'a RawValue>, mut each: impl FnMut(&'a RawValue)) {
    use serde::de::{DeserializeSeed, SeqAccess, Visitor};
    struct Elements<'f, F>(&'f mut F);
    impl<'de, F: FnMut(&'de RawValue)> Visitor<'de> for Elements<'_, F> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while let Some(e) = seq.next_element::<&'de RawValue>()? {
                (self.0)(e);
            }
            Ok(())
        }
    }
    impl<'de, F: FnMut(&'de RawValue)> DeserializeSeed<'de> for Elements<'_, F> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }
    let Some(raw) = raw.filter(|r| r.get().starts_with('[')) else {
        return;
    };
    let mut de = serde_json::Deserializer::from_str(raw.get());
    let _ = Elements(&mut each).deserialize(&mut de);
}

/// How a call's raw arguments are read into the record.
#[derive(Debug, Clone)]
pub(crate) enum RawArguments {
    /// A JSON value, as it is.
    Value(Box<RawValue>),
    /// A JSON string holding JSON text (Codex's `function_call.arguments`): the JSON it
    /// holds, or the text itself.
    JsonText(String),
}

/// How a format reads a call's result (as a JSON value) into what the model was given
/// and whether the call succeeded, given the `is_error` its log says, if it says one.
pub(crate) type ReadResult = fn(&Value, Option<bool>) -> (Value, bool);

/// A tool call as read from a log, its arguments and result still raw.
#[derive(Debug, Clone)]
pub(crate) struct RawCall {
    pub call_id: String,
    pub name: String,
    pub arguments: RawArguments,
    pub result: Option<Box<RawValue>>,
    pub read_result: ReadResult,
    /// The `is_error` a Claude Code result says (`None`: it says nothing).
    pub is_error: Option<bool>,
    pub asked_at: Option<String>,
    pub duration_ms: u64,
}

/// `raw` read as a JSON value when it is small enough, else its text as a string; and
/// whether it was too large.
fn value_of(raw: &RawValue) -> (Value, bool) {
    let text = raw.get();
    if text.len() <= MAX_VALUE_BYTES
        && let Ok(v) = serde_json::from_str::<Value>(text)
    {
        return (v, false);
    }
    if text.starts_with('"')
        && let Ok(s) = serde_json::from_str::<String>(text)
    {
        return (Value::String(s), text.len() > MAX_VALUE_BYTES);
    }
    (Value::String(text.to_owned()), true)
}

impl RawCall {
    /// The call as recorded, and whether a part of it was kept as text for its size.
    pub(crate) fn into_logged(self) -> (LoggedCall, bool) {
        let mut large = false;
        let arguments = match &self.arguments {
            RawArguments::Value(raw) => {
                let (v, big) = value_of(raw);
                large |= big;
                v
            }
            RawArguments::JsonText(text) if text.len() <= MAX_VALUE_BYTES => arguments_of(text),
            RawArguments::JsonText(text) => {
                large = true;
                Value::String(text.clone())
            }
        };
        let (result, ok) = match &self.result {
            None => (Value::Null, false),
            Some(raw) => {
                let (v, big) = value_of(raw);
                large |= big;
                (self.read_result)(&v, self.is_error)
            }
        };
        let logged = LoggedCall {
            call_id: self.call_id,
            name: self.name,
            arguments,
            result,
            ok,
            duration_ms: self.duration_ms,
        };
        (logged, large)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_raw_and_depth_is_capped() {
        assert!(matches!(
            read(br#"{"type":"x","payload":{"a":[1,2]}}"#),
            Read::Object(_)
        ));
        assert!(matches!(read(b"[1,2]"), Read::Other));
        assert!(matches!(read(b"{nope"), Read::Unreadable));
        assert!(matches!(read(b"\xff"), Read::Unreadable));
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(matches!(read(deep.as_bytes()), Read::TooDeep));
        let fine = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(matches!(read(fine.as_bytes()), Read::Other));
        // Brackets in strings do not count.
        assert_eq!(depth(br#"{"a":"[[[[\"[["}"#), 1);
        let mut seen = Vec::new();
        let line = br#"{"payload":[1,{"a":2},"x"]}"#;
        if let Read::Object(l) = read(line) {
            each_element(l.payload, |e| seen.push(e.get().to_owned()));
        }
        assert_eq!(seen, ["1", r#"{"a":2}"#, r#""x""#]);
    }
}
