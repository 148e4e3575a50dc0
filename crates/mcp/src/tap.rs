//! A reader between a stdio server's stdout and the JSON-RPC transport that notes the
//! first line that is not JSON, so that a server sending garbage is named as such (the
//! transport itself skips such lines silently).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// Lines longer than this are not checked (the transport judges them itself).
const CHECKED_LINE: usize = 64 * 1024;
/// How much of a bad line a message quotes.
const QUOTED: usize = 120;

/// The first line a server sent that does not parse as JSON, shared with its reader.
pub(crate) type BadLine = Arc<Mutex<Option<String>>>;

/// Passes bytes through unchanged, checking each complete line.
pub(crate) struct Tap<R> {
    inner: R,
    line: Vec<u8>,
    too_long: bool,
    bad: BadLine,
}

impl<R> Tap<R> {
    pub(crate) fn new(inner: R) -> (Self, BadLine) {
        let bad = BadLine::default();
        (
            Tap {
                inner,
                line: Vec::new(),
                too_long: false,
                bad: Arc::clone(&bad),
            },
            bad,
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
            if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err()
                && let Ok(mut bad) = self.bad.lock()
                && bad.is_none()
            {
                *bad = Some(text.chars().take(QUOTED).collect());
            }
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
        let (mut tap, bad) = Tap::new(input);
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, input);
        assert_eq!(bad.lock().unwrap().as_deref(), Some("not json {{"));
    }

    #[tokio::test]
    async fn good_lines_note_nothing() {
        let (mut tap, bad) = Tap::new(&b"{}\n[1,2]\n"[..]);
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        assert!(bad.lock().unwrap().is_none());
    }
}
