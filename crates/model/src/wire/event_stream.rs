//! The one server-sent events (SSE) parser of the crate, to the WHATWG `text/event-stream`
//! rules: every streaming backend reads its live bytes with it, and every recorded SSE
//! body (Chat Completions, Anthropic Messages, OpenAI Responses) is read back with it.
//!
//! The rules it keeps: a byte order mark at the very start is skipped; lines end in CR,
//! LF or CRLF (a CRLF split across two pieces is still one line end); a line starting
//! with `:` is a comment; `field: value` loses one space after the colon, and a line
//! without a colon is a field with an empty value; `data` lines are joined with LF;
//! `event` names the event (`message` when none is given); `id` (without NUL) is kept
//! for the events that follow; `retry` is read when it is all ASCII digits; other fields
//! are ignored; a blank line dispatches the event when it has data; and an event the
//! stream ends before a blank line finishes is dropped. Bytes that are not UTF-8 are
//! read as U+FFFD, as the standard decodes them.

use std::time::Duration;

/// One event of an SSE stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The event's name: its `event` field, or `message` when it had none.
    pub event: String,
    /// Its `data` lines, joined with LF.
    pub data: String,
    /// The last `id` seen in the stream up to this event (empty when none).
    pub id: String,
    /// The reconnection time its `retry` field asked for, if it had one.
    pub retry: Option<Duration>,
}

/// An incremental SSE parser: feed it the stream's bytes in pieces of any size
/// ([`SseParser::push`]); it hands back each event as its blank line arrives.
///
/// ```
/// use provrun_model::SseParser;
///
/// let mut parser = SseParser::new();
/// let mut events = parser.push(b"event: ping\r\ndata: a\r");
/// assert!(events.is_empty());
/// events.extend(parser.push(b"\ndata: b\r\n\r\n: a comment\n"));
/// assert_eq!(events.len(), 1);
/// assert_eq!((events[0].event.as_str(), events[0].data.as_str()), ("ping", "a\nb"));
/// ```
#[derive(Debug, Default)]
pub struct SseParser {
    /// The bytes of the line being read (its end not seen yet).
    line: Vec<u8>,
    /// Whether any byte has been read (a BOM is skipped only at the start).
    started: bool,
    /// The last byte read was a CR: an LF right after it ends no second line.
    after_cr: bool,
    event: String,
    data: String,
    /// Whether a `data` field was seen since the last dispatch.
    has_data: bool,
    id: String,
    retry: Option<Duration>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        SseParser::default()
    }

    /// Reads the next piece of the stream and returns the events it completed, in order.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.started && !bytes.is_empty() {
            // A BOM may itself arrive split; the parts seen so far wait in `line`.
            let seen = self.line.len();
            let bom: &[u8] = b"\xEF\xBB\xBF";
            let need = &bom[seen..];
            let take = need.len().min(bytes.len());
            if bytes[..take] == need[..take] {
                self.line.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if self.line.len() < bom.len() {
                    return out;
                }
                self.line.clear();
            } else {
                // Not a BOM: what was held back is the start of the first line.
            }
            self.started = true;
        }
        while !bytes.is_empty() {
            if self.after_cr && bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
            self.after_cr = false;
            match bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
                Some(end) => {
                    self.line.extend_from_slice(&bytes[..end]);
                    self.after_cr = bytes[end] == b'\r';
                    bytes = &bytes[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_ended(&line) {
                        out.push(event);
                    }
                }
                None => {
                    self.line.extend_from_slice(bytes);
                    bytes = &[];
                }
            }
        }
        out
    }

    /// How many bytes the parser holds for the event being read: a caller reading an
    /// untrusted stream stops when this grows past its limit.
    pub fn buffered(&self) -> usize {
        self.line.len() + self.data.len() + self.event.len()
    }

    /// Handles one whole line; a blank one may complete an event.
    fn line_ended(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => value.clone_into(&mut self.id),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok().map(Duration::from_millis);
            }
            _ => {}
        }
        None
    }

    /// Ends the event being read: it is handed back when it has data.
    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        let retry = self.retry.take();
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event: if event.is_empty() {
                "message".into()
            } else {
                event
            },
            data,
            id: self.id.clone(),
            retry,
        })
    }
}

/// Every event of a whole SSE body, in order (an event the body ends before its blank
/// line is dropped, as the standard says).
///
/// ```
/// let events = provrun_model::parse_event_stream(b"data: {\"a\":1}\n\ndata: [DONE]\n\n");
/// let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
/// assert_eq!(data, ["{\"a\":1}", "[DONE]"]);
/// ```
pub fn parse_event_stream(body: &[u8]) -> Vec<SseEvent> {
    SseParser::new().push(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_and_data(events: &[SseEvent]) -> Vec<(&str, &str)> {
        events
            .iter()
            .map(|e| (e.event.as_str(), e.data.as_str()))
            .collect()
    }

    #[test]
    fn every_line_end_is_read_and_a_split_crlf_is_one_end() {
        let body = b"data: a\r\ndata: b\rdata: c\n\r\nevent: x\rdata:\r\n\n";
        let whole = parse_event_stream(body);
        assert_eq!(names_and_data(&whole), [("message", "a\nb\nc"), ("x", "")]);
        // Byte by byte, the same events come out.
        let mut parser = SseParser::new();
        let split: Vec<SseEvent> = body.iter().flat_map(|b| parser.push(&[*b])).collect();
        assert_eq!(split, whole);
    }

    #[test]
    fn comments_bom_fields_and_an_unfinished_event() {
        let body = "\u{feff}: hello\nid: 7\nretry: 1500\nevent: e\ndata:  two spaces\nnoise\n\n\
                    data\n\nid: a\0b\nretry: 2s\ndata: z\n\ndata: never finished";
        let events = parse_event_stream(body.as_bytes());
        assert_eq!(
            names_and_data(&events),
            [("e", " two spaces"), ("message", ""), ("message", "z")]
        );
        assert_eq!(events[0].retry, Some(Duration::from_millis(1500)));
        assert_eq!(events[1].retry, None);
        // An id with NUL is ignored: the last good one carries on.
        assert!(events.iter().all(|e| e.id == "7"), "{events:?}");
    }

    #[test]
    fn a_bom_split_across_pieces_and_bytes_that_are_not_utf8() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"\xEF").is_empty());
        assert!(parser.push(b"\xBB").is_empty());
        let events = parser.push(b"\xBFdata: \xFFok\n\n");
        assert_eq!(names_and_data(&events), [("message", "\u{fffd}ok")]);
        // A first byte that only looks like a BOM's start is kept.
        let events = parse_event_stream(b"\xEFdata: x\n\n");
        assert!(
            events.is_empty(),
            "the field is named \\xEFdata: {events:?}"
        );
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_its_name_is_reset() {
        let events = parse_event_stream(b"event: ping\n\ndata: d\n\n");
        assert_eq!(names_and_data(&events), [("message", "d")]);
        let mut parser = SseParser::new();
        parser.push(b"data: 12345");
        assert_eq!(parser.buffered(), 11);
    }
}
