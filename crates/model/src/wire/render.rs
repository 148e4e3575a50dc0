//! [`RequestRenderer`]: chat-completions request bodies rendered by appending to the
//! previous request's bytes.
//!
//! An agent's history only grows, and every request resends all of it, so rendering each
//! body from scratch (a `serde_json::Value` of the whole history, then its text) costs the
//! square of the run's length. The renderer keeps, for a few recent bodies, the messages
//! they were made from and where each message's bytes end; a request whose messages start
//! with those (compared by value, so a reuse is never wrong) keeps their bytes and renders
//! only the messages after them. The bytes are exactly those of
//! `serde_json::to_vec(&build_request_body(..))`.

use std::sync::Mutex;

use bytes::{BufMut as _, Bytes, BytesMut};
use serde_json::Value;

use super::request::{message_to_wire, request_map};
use crate::types::{Message, ModelRequest};

/// How many bodies a renderer keeps, and the most bytes it keeps in all (a body's
/// messages are counted as many bytes again as the body).
const KEPT_BODIES: usize = 64;
const KEPT_BYTES: usize = 64 * 1024 * 1024;

/// Renders chat-completions request bodies, reusing the bytes of the messages a recent
/// body already holds (see the module docs). One renderer can serve many runs at once:
/// each request takes the kept body it extends, if any, and puts back its own.
#[derive(Debug, Default)]
pub(crate) struct RequestRenderer {
    kept: Mutex<Kept>,
}

/// A clone starts with nothing kept (what it keeps is only ever a shortcut).
impl Clone for RequestRenderer {
    fn clone(&self) -> Self {
        RequestRenderer::default()
    }
}

#[derive(Debug, Default)]
struct Kept {
    bodies: Vec<Rendered>,
    /// Counts renders, to find the least recently used body.
    tick: u64,
}

/// One rendered body and what it was made from.
#[derive(Debug)]
struct Rendered {
    /// The bytes before the messages array (ending `"messages":`).
    pre: Vec<u8>,
    /// The bytes after it.
    post: Vec<u8>,
    /// The messages the array holds.
    messages: Vec<Message>,
    /// Where each message's bytes end in `body`.
    ends: Vec<usize>,
    /// The whole body.
    body: Bytes,
    /// When it was last rendered ([`Kept::tick`]).
    used: u64,
}

impl Rendered {
    /// The memory it holds, about: the body, and its messages as many bytes again.
    fn cost(&self) -> usize {
        2 * self.body.len()
    }

    /// How many leading messages of `messages` this body holds (0 when its frame differs).
    fn shared(&self, pre: &[u8], post: &[u8], messages: &[Message]) -> usize {
        if self.pre != pre || self.post != post || self.messages.len() > messages.len() {
            return 0;
        }
        // The last message first: a body of another run rarely has it, so most
        // candidates are ruled out without comparing the whole history.
        match self.messages.last() {
            Some(last) if *last != messages[self.messages.len() - 1] => return 0,
            _ => {}
        }
        self.messages
            .iter()
            .zip(messages)
            .take_while(|(a, b)| a == b)
            .count()
    }
}

impl RequestRenderer {
    /// The bytes of `serde_json::to_vec(&build_request_body(model, request, stream))`.
    pub(crate) fn render(&self, model: &str, request: &ModelRequest, stream: bool) -> Bytes {
        let (pre, post) = frame(model, request, stream);
        let messages = &request.messages;
        let base = self.take(&pre, &post, messages);
        let (mut body, mut ends, mut kept, shared) = match base {
            Some((r, n)) => {
                let cut = r.ends[n - 1];
                let mut body = r
                    .body
                    .try_into_mut()
                    .unwrap_or_else(|shared| BytesMut::from(&shared[..cut]));
                body.truncate(cut);
                let mut ends = r.ends;
                ends.truncate(n);
                let mut kept = r.messages;
                kept.truncate(n);
                (body, ends, kept, n)
            }
            None => {
                let mut body = BytesMut::with_capacity(pre.len() + post.len() + 2);
                body.extend_from_slice(&pre);
                body.put_u8(b'[');
                (body, Vec::new(), Vec::new(), 0)
            }
        };
        let mut out = (&mut body).writer();
        for (i, m) in messages.iter().enumerate().skip(shared) {
            if i > 0 {
                out.get_mut().put_u8(b',');
            }
            // Writing a `Value` to memory cannot fail.
            let _ = serde_json::to_writer(&mut out, &message_to_wire(m));
            ends.push(out.get_ref().len());
            kept.push(m.clone());
        }
        body.put_u8(b']');
        body.extend_from_slice(&post);
        let body = body.freeze();
        self.keep(Rendered {
            pre,
            post,
            messages: kept,
            ends,
            body: body.clone(),
            used: 0,
        });
        body
    }

    /// Takes out the kept body sharing the most leading messages with `messages` (and
    /// how many), if one shares any.
    fn take(&self, pre: &[u8], post: &[u8], messages: &[Message]) -> Option<(Rendered, usize)> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (i, n) = kept
            .bodies
            .iter()
            .enumerate()
            .map(|(i, r)| (i, r.shared(pre, post, messages)))
            .max_by_key(|(_, n)| *n)
            .filter(|(_, n)| *n > 0)?;
        Some((kept.bodies.swap_remove(i), n))
    }

    /// Keeps `r` for the next request, dropping the least recently used bodies past the
    /// limits.
    fn keep(&self, mut r: Rendered) {
        if r.cost() > KEPT_BYTES || r.messages.is_empty() {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.tick += 1;
        r.used = kept.tick;
        kept.bodies.push(r);
        let mut total: usize = kept.bodies.iter().map(Rendered::cost).sum();
        while kept.bodies.len() > KEPT_BODIES || total > KEPT_BYTES {
            let Some((oldest, _)) = kept.bodies.iter().enumerate().min_by_key(|(_, r)| r.used)
            else {
                break;
            };
            total -= kept.bodies.swap_remove(oldest).cost();
        }
    }
}

/// The body's bytes before and after its messages array: the map
/// [`super::build_request_body`] makes, written member by member as `serde_json`'s
/// compact writer does, with the array left out.
fn frame(model: &str, request: &ModelRequest, stream: bool) -> (Vec<u8>, Vec<u8>) {
    let map = request_map(model, request, stream, Value::Null);
    let mut pre = vec![b'{'];
    let mut post = Vec::new();
    let mut after = false;
    for (i, (key, value)) in map.iter().enumerate() {
        let out = if after { &mut post } else { &mut pre };
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        if key == "messages" {
            after = true;
        } else {
            let _ = serde_json::to_writer(&mut *out, value);
        }
    }
    if after { &mut post } else { &mut pre }.push(b'}');
    (pre, post)
}
