//! How a log's lines are chained: the hash each line's successor names in `prev` (and
//! the last one's, the head the statement pins).
//!
//! Three schemes, chosen by `run_started.chain` (docs/evidence.md §2a):
//! - chain 1 (no `chain` member: every log written before redactable logs): a line's hash
//!   is the SHA-256 of its bytes.
//! - chain 2 (`"chain": 2`, what [`crate::Recorder::create`] writes): a line's hash is
//!   the SHA-256 of its *commitment form*: the canonical JSON of the line with every string
//!   in its `payload`, at any depth (member names are not strings here), replaced by the
//!   lower-case hex SHA-256 of the string's UTF-8 bytes. The hash then commits to each
//!   string through its digest alone, so a redaction can remove a string, keep its digest
//!   (in `redactions.jsonl`) and leave the chain, the head and the statement as they were.
//!   A chain-2 line must be exactly canonical (the tie-rounding form earlier writers used
//!   for some numbers is refused there), so no two byte forms share a hash.
//! - chain 3 (`"chain": 3`, what [`crate::Recorder::create`] writes now): as chain 2, with
//!   each string replaced by its *salted* commitment `SHA-256(salt ‖ bytes)`, the salt
//!   derived from the run's secret, the line and the string's pointer ([`crate::salt`]),
//!   so a removed string's commitment cannot be checked by guessing.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::canonical::{keys_in_canonical_order, write_canonical, write_canonical_str};
use crate::error::{EvidenceError, Result};
use crate::salt::{LineSalts, commit};

/// The `run_started` payload member that names the chain scheme.
pub const CHAIN_KEY: &str = "chain";
/// The chain scheme new logs are written with.
pub const CHAIN: u64 = 3;
/// The first chain scheme whose strings are committed with salts.
pub(crate) const SALTED: u64 = 3;

/// The chain scheme a `run_started` payload declares: its `chain` member, 1 without one.
pub fn chain_of(run_started: &Value) -> u64 {
    run_started
        .get(CHAIN_KEY)
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// Digests that stand in for strings a redaction removed from one line: JSON Pointer
/// (RFC 6901, from the line's root: `/payload/result`) → hex SHA-256 of the original
/// string.
pub type LineSubstitutions = BTreeMap<String, String>;

/// The envelope of one line, borrowed: what its hash is made of besides the payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Envelope<'a> {
    pub confidence: &'a str,
    pub prev: Option<&'a str>,
    pub run_id: &'a str,
    pub seq: u64,
    pub ts: &'a str,
    pub kind: &'a str,
    pub v: u64,
}

impl Envelope<'_> {
    /// The line's canonical JSON with `payload_text` (already canonical) as its payload.
    pub(crate) fn text(&self, payload_text: &str) -> String {
        let mut t = String::with_capacity(payload_text.len() + 256);
        t.push_str("{\"confidence\":");
        write_canonical_str(self.confidence, &mut t);
        t.push_str(",\"payload\":");
        t.push_str(payload_text);
        t.push_str(",\"prev\":");
        match self.prev {
            Some(h) => write_canonical_str(h, &mut t),
            None => t.push_str("null"),
        }
        t.push_str(",\"run_id\":");
        write_canonical_str(self.run_id, &mut t);
        t.push_str(",\"seq\":");
        t.push_str(&self.seq.to_string());
        t.push_str(",\"ts\":");
        write_canonical_str(self.ts, &mut t);
        t.push_str(",\"type\":");
        write_canonical_str(self.kind, &mut t);
        t.push_str(",\"v\":");
        t.push_str(&self.v.to_string());
        t.push('}');
        t
    }

    /// The chain-2 hash of the line with this envelope and `payload` (chain 3 when
    /// `salts` are given: each string committed with its salt), the strings at the
    /// pointers of `subst` taken as the digests given there. Fails if a pointer of `subst`
    /// does not name a string of the payload, or the salts lack a string's salt.
    pub(crate) fn commitment_hash(
        &self,
        payload: &Value,
        subst: Option<&LineSubstitutions>,
        salts: Option<&LineSalts>,
    ) -> Result<String> {
        let mut text = String::with_capacity(256);
        let mut used = 0usize;
        let mut pointer = String::from("/payload");
        let mut form = Form {
            subst,
            salts,
            used: &mut used,
        };
        form.write(payload, &mut text, &mut pointer)?;
        let wanted = subst.map_or(0, BTreeMap::len);
        if used != wanted {
            return Err(EvidenceError::Canonical(format!(
                "{} redacted string(s) named for this line are not strings of its payload",
                wanted - used
            )));
        }
        Ok(hex::encode(Sha256::digest(self.text(&text).as_bytes())))
    }
}

/// Append `s` to a JSON Pointer as one reference token (`~` → `~0`, `/` → `~1`).
pub(crate) fn push_token(pointer: &mut String, s: &str) {
    pointer.push('/');
    for c in s.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// How strings are written in a commitment form: the digests a redaction left, the
/// line's salts (chain 3), and how many of those digests were used.
struct Form<'a> {
    subst: Option<&'a LineSubstitutions>,
    salts: Option<&'a LineSalts>,
    used: &'a mut usize,
}

impl Form<'_> {
    /// The commitment form of `value` (canonical JSON, each string replaced by the hex
    /// SHA-256 of its bytes — salted under chain 3 — or by the digest `subst` gives for
    /// its pointer).
    fn write(&mut self, value: &Value, out: &mut String, pointer: &mut String) -> Result<()> {
        let tracked = self.subst.is_some() || self.salts.is_some();
        match value {
            Value::String(s) => {
                let given = self.subst.and_then(|m| m.get(pointer.as_str()));
                if let Some(d) = given {
                    *self.used += 1;
                    write_canonical_str(d, out);
                } else if let Some(salts) = self.salts {
                    let salt = salts.salt(pointer).ok_or_else(|| {
                        EvidenceError::Canonical(format!(
                            "no salt for the string at {pointer} (salts.json does not reveal it)"
                        ))
                    })?;
                    write_canonical_str(&commit(&salt, s), out);
                } else {
                    write_canonical_str(&hex::encode(Sha256::digest(s.as_bytes())), out);
                }
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let len = pointer.len();
                    if tracked {
                        push_token(pointer, &i.to_string());
                    }
                    self.write(item, out, pointer)?;
                    pointer.truncate(len);
                }
                out.push(']');
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                if !keys_in_canonical_order(map) {
                    entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                }
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_canonical_str(k, out);
                    out.push(':');
                    let len = pointer.len();
                    if tracked {
                        push_token(pointer, k);
                    }
                    self.write(v, out, pointer)?;
                    pointer.truncate(len);
                }
                out.push('}');
            }
            other => write_canonical(other, out)?,
        }
        Ok(())
    }
}

/// The chain hash of one log line (its text without the `\n`) under scheme `chain`: what
/// the next line's `prev` must be. For tests and other verifiers that rebuild a chain.
/// Chain 3 needs the run's salts: [`line_hash_salted`]; here it is hashed as chain 2.
///
/// # Errors
///
/// [`EvidenceError::Canonical`] when, under scheme 2 or later, `line` is not JSON or its
/// payload cannot be written as canonical JSON.
pub fn line_hash(line: &str, chain: u64) -> Result<String> {
    line_hash_with(line, chain, None)
}

/// The chain-3 hash of one log line (its text without the `\n`) of a log whose run
/// secret is `secret` (the `secret` of its `salts.json`, 32 bytes).
///
/// # Errors
///
/// [`EvidenceError::Canonical`] when `line` is not JSON or its payload cannot be written as
/// canonical JSON.
pub fn line_hash_salted(line: &str, secret: &[u8; 32]) -> Result<String> {
    let seq = serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get("seq").and_then(Value::as_u64))
        .unwrap_or_default();
    let salts = LineSalts::Seed(crate::salt::line_seed(secret, seq));
    line_hash_with(line, SALTED, Some(&salts))
}

/// The chain hash of one log line (its text without the `\n`) under scheme `chain`, for a
/// line of the bundle at `bundle`: under chain 3 its strings are salted with the salts of
/// the bundle's `salts.json`. For tests and tools that rewrite a log and chain it again.
///
/// # Errors
///
/// [`EvidenceError::Canonical`] when, under scheme 2 or later, `line` is not JSON or its
/// payload cannot be written as canonical JSON, and under chain 3 when the bundle's
/// `salts.json` cannot be read or does not cover the line.
pub fn line_hash_in(bundle: &std::path::Path, line: &str, chain: u64) -> Result<String> {
    if chain < SALTED {
        return line_hash(line, chain);
    }
    let salts = crate::salt::Salts::read(bundle)
        .map_err(EvidenceError::Canonical)?
        .ok_or_else(|| {
            EvidenceError::Canonical(format!("{} is missing", crate::salt::SALTS_FILE))
        })?;
    let seq = serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get("seq").and_then(Value::as_u64))
        .unwrap_or_default();
    let line_salts = salts.line(seq).ok_or_else(|| {
        EvidenceError::Canonical(format!(
            "{} does not cover line {seq}",
            crate::salt::SALTS_FILE
        ))
    })?;
    line_hash_with(line, chain, Some(&line_salts))
}

fn line_hash_with(line: &str, chain: u64, salts: Option<&LineSalts>) -> Result<String> {
    if chain < 2 {
        return Ok(hex::encode(Sha256::digest(line.as_bytes())));
    }
    let v: Value =
        serde_json::from_str(line).map_err(|e| EvidenceError::Canonical(e.to_string()))?;
    let field = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
    let envelope = Envelope {
        confidence: field("confidence"),
        prev: v.get("prev").and_then(Value::as_str),
        run_id: field("run_id"),
        seq: v.get("seq").and_then(Value::as_u64).unwrap_or_default(),
        ts: field("ts"),
        kind: field("type"),
        v: v.get("v").and_then(Value::as_u64).unwrap_or_default(),
    };
    envelope.commitment_hash(v.get("payload").unwrap_or(&Value::Null), None, salts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_commitment_form_replaces_each_string_by_its_digest() {
        let payload = json!({"a": "x", "b": [1, "y", {"c/d": "z"}], "n": null, "t": true});
        let env = Envelope {
            confidence: "observed",
            prev: None,
            run_id: "r",
            seq: 0,
            ts: "t",
            kind: "declared",
            v: 1,
        };
        let d = |s: &str| hex::encode(Sha256::digest(s.as_bytes()));
        let form = format!(
            "{{\"a\":\"{}\",\"b\":[1,\"{}\",{{\"c/d\":\"{}\"}}],\"n\":null,\"t\":true}}",
            d("x"),
            d("y"),
            d("z")
        );
        let want = hex::encode(Sha256::digest(env.text(&form).as_bytes()));
        assert_eq!(env.commitment_hash(&payload, None, None).unwrap(), want);
        // A string replaced, with its digest given at its pointer: the same hash.
        let mut redacted = payload.clone();
        redacted["b"][2]["c/d"] = json!("[redacted]");
        let subst: LineSubstitutions = [("/payload/b/2/c~1d".to_owned(), d("z"))].into();
        assert_eq!(
            env.commitment_hash(&redacted, Some(&subst), None).unwrap(),
            want
        );
        // Without the digest, or with a wrong one, another hash.
        assert_ne!(env.commitment_hash(&redacted, None, None).unwrap(), want);
        let wrong: LineSubstitutions = [("/payload/b/2/c~1d".to_owned(), d("q"))].into();
        assert_ne!(
            env.commitment_hash(&redacted, Some(&wrong), None).unwrap(),
            want
        );
        // A pointer that names no string is an error.
        let nowhere: LineSubstitutions = [("/payload/b/0".to_owned(), d("q"))].into();
        assert!(env.commitment_hash(&payload, Some(&nowhere), None).is_err());
    }
}
