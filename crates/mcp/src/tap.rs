//! A reader between a stdio server's stdout and the JSON-RPC transport. It passes every
//! byte through unchanged and notes what the transport would drop or not keep:
//!
//! - the first line that is not JSON, so that a server sending garbage is named as such
//!   (the transport itself skips such lines silently);
//! - the lines that are not JSON before the server is ready (a start-up banner), so that
//!   they are recorded rather than swallowed;
//! - each listed tool's `execution` object from the raw `tools/list` answer (the SDK's
//!   tool type has no such field, so it would be lost).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

/// Lines longer than this are not checked (the transport judges them itself). A tool list
/// with full schemas is one line, so this is generous.
const CHECKED_LINE: usize = 4 << 20;
/// How much of a bad line a message quotes.
const QUOTED: usize = 120;
/// How many banner lines are kept, and how much of each.
const BANNER_LINES: usize = 8;
const BANNER_CHARS: usize = 240;

/// What the tap saw, shared with its reader.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The first line that does not parse as JSON.
    pub(crate) first_bad: Option<String>,
    /// Lines that are not JSON, sent before the server was ready (the first few).
    pub(crate) banner: Vec<String>,
    /// Banner lines beyond those kept.
    pub(crate) banner_dropped: usize,
    /// Set once the server is ready: later lines are no longer a banner.
    pub(crate) ready: bool,
    /// Each tool's `execution` object, by the tool's name, as `tools/list` sent it.
    pub(crate) execution: BTreeMap<String, Value>,
}

/// Shared state of one tap.
pub(crate) type Shared = Arc<Mutex<Seen>>;

/// Passes bytes through unchanged, checking each complete line.
pub(crate) struct Tap<R> {
    inner: R,
    line: Vec<u8>,
    too_long: bool,
    seen: Shared,
}

impl<R> Tap<R> {
    pub(crate) fn new(inner: R) -> (Self, Shared) {
        let seen = Shared::default();
        (
            Tap {
                inner,
                line: Vec::new(),
                too_long: false,
                seen: Arc::clone(&seen),
            },
            seen,
        )
    }

    fn see(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b != b'\n' {
                if self.line.len() < CHECKED_LINE {
                    self.line.push(b);
                } else {
                    self.too_long = true;
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let skipped = std::mem::replace(&mut self.too_long, false);
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if skipped || text.is_empty() {
                continue;
            }
            let Ok(mut seen) = self.seen.lock() else {
                continue;
            };
            match serde_json::from_str::<Value>(text) {
                Ok(message) => {
                    if !seen.ready {
                        note_execution(&mut seen, &message);
                    }
                }
                Err(_) => {
                    if seen.first_bad.is_none() {
                        seen.first_bad = Some(text.chars().take(QUOTED).collect());
                    }
                    if !seen.ready {
                        if seen.banner.len() < BANNER_LINES {
                            seen.banner.push(text.chars().take(BANNER_CHARS).collect());
                        } else {
                            seen.banner_dropped += 1;
                        }
                    }
                }
            }
        }
    }
}

/// From a `tools/list` answer, each tool's `execution` object.
fn note_execution(seen: &mut Seen, message: &Value) {
    let Some(tools) = message
        .get("result")
        .and_then(|r| r.get("tools"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for tool in tools {
        if let (Some(name), Some(execution)) = (tool["name"].as_str(), tool.get("execution")) {
            seen.execution.insert(name.to_string(), execution.clone());
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Tap<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let fresh = buf.filled()[before..].to_vec();
            self.see(&fresh);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[tokio::test]
    async fn the_first_non_json_line_is_noted_and_bytes_pass_unchanged() {
        let input: &[u8] = b"{\"jsonrpc\":\"2.0\"}\n\nnot json {{\n{\"ok\":1}\nalso bad\n";
        let (mut tap, seen) = Tap::new(input);
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, input);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.first_bad.as_deref(), Some("not json {{"));
        assert_eq!(seen.banner, ["not json {{", "also bad"]);
    }

    #[tokio::test]
    async fn good_lines_note_nothing() {
        let (mut tap, seen) = Tap::new(&b"{}\n[1,2]\n"[..]);
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        let seen = seen.lock().unwrap();
        assert!(seen.first_bad.is_none());
        assert!(seen.banner.is_empty());
    }

    #[tokio::test]
    async fn lines_after_ready_are_no_banner_and_banners_are_bounded() {
        let mut input = String::new();
        for i in 0..10 {
            input.push_str(&format!("banner {i}\n"));
        }
        let (mut tap, seen) = Tap::new(input.as_bytes());
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        {
            let mut s = seen.lock().unwrap();
            assert_eq!(s.banner.len(), BANNER_LINES);
            assert_eq!(s.banner_dropped, 2);
            s.ready = true;
        }
        let (mut tap2, seen2) = Tap::new(&b"late\n"[..]);
        seen2.lock().unwrap().ready = true;
        tap2.read_to_end(&mut out).await.unwrap();
        let s = seen2.lock().unwrap();
        assert_eq!(s.first_bad.as_deref(), Some("late"));
        assert!(s.banner.is_empty());
    }

    #[tokio::test]
    async fn the_execution_of_listed_tools_is_kept() {
        let input = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b"}]}}
"#;
        let (mut tap, seen) = Tap::new(&input[..]);
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        let s = seen.lock().unwrap();
        assert_eq!(s.execution.len(), 1);
        assert_eq!(s.execution["a"]["taskSupport"], "required");
    }
}
