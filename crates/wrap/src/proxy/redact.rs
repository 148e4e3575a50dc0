//! [`Redactor`]: secrets taken out of a response as it streams, without holding back
//! anything that cannot be the start of one.
//!
//! An upstream may echo a credential (an error that quotes the key). The program must not
//! see it and the bundle must not keep it, but the stream must still pass through as it
//! arrives. Each chunk is passed on at once except its last few bytes when they could be
//! the beginning of a secret split across chunks; every whole occurrence is replaced by
//! as many `*` (so lengths, and a `content-length`, stay right).

/// Replaces secrets in a stream of chunks.
#[derive(Debug, Default)]
pub struct Redactor {
    secrets: Vec<Vec<u8>>,
    held: Vec<u8>,
    hit: bool,
}

impl Redactor {
    /// A redactor of `secrets` (empty ones are ignored).
    pub fn new(secrets: &[String]) -> Self {
        Redactor {
            secrets: secrets
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| s.as_bytes().to_vec())
                .collect(),
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
        if self.secrets.is_empty() {
            return chunk.to_vec();
        }
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(chunk);
        self.mask(&mut buf);
        let keep = self.partial_tail(&buf);
        self.held = buf.split_off(buf.len() - keep);
        buf
    }

    /// What is still held back, at the end of the stream (it cannot hold a whole secret).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }

    fn mask(&mut self, buf: &mut [u8]) {
        for secret in &self.secrets {
            let first = secret[0];
            let mut i = 0;
            // Only where the secret's first byte is: a byte-by-byte comparison at every
            // offset cost more than the rest of the proxy's path together.
            while let Some(at) = buf
                .get(i..)
                .and_then(|rest| rest.iter().position(|b| *b == first))
            {
                let start = i + at;
                if start + secret.len() > buf.len() {
                    break;
                }
                if buf[start..].starts_with(secret) {
                    buf[start..start + secret.len()].fill(b'*');
                    self.hit = true;
                    i = start + secret.len();
                } else {
                    i = start + 1;
                }
            }
        }
    }

    /// The length of the longest end of `buf` that is the start (not the whole) of a
    /// secret.
    fn partial_tail(&self, buf: &[u8]) -> usize {
        let mut longest = 0;
        for secret in &self.secrets {
            let most = (secret.len() - 1).min(buf.len());
            for n in (longest + 1..=most).rev() {
                if buf[buf.len() - n..] == secret[..n] {
                    longest = n;
                    break;
                }
            }
        }
        longest
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
}
