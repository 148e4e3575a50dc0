//! The salts of a log chained by salted commitments (chain 3, docs/evidence.md §2a).
//!
//! Under chain 3 a line's hash commits to each payload string `s` at JSON Pointer `p` of
//! line `seq` as `SHA-256(salt(seq, p) ‖ s)`, where
//!
//! - the run has one 32-byte **secret**, drawn from the OS's random source when the
//!   bundle is created and kept in `salts.json` (`{"format":1,"secret":HEX}`);
//! - a line's **seed** is `HMAC-SHA256(secret, decimal(seq))`;
//! - a string's **salt** is `HMAC-SHA256(seed, p)` (`p` as UTF-8, e.g. `/payload/text`).
//!
//! So nobody can check a guess of a removed string against its commitment without that
//! string's salt. A redacted copy keeps no secret: its `salts.json` lists, per line, the
//! line's seed (`"HEX"`), or for a line that lost a string only the salts of the strings
//! it kept (`{POINTER: HEX, …}`) — each derived one way from the level above, so what the
//! copy reveals gives nothing of a removed string's salt.

use std::collections::BTreeMap;
use std::path::Path;

use hmac::{Hmac, Mac as _};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// The file of a bundle that holds its salts (chain 3).
pub const SALTS_FILE: &str = "salts.json";
/// The format of `salts.json`.
const FORMAT: u64 = 1;
/// The largest `salts.json` read (a redacted copy lists a seed per line).
const MAX_SALTS_BYTES: u64 = 512 * 1024 * 1024;

/// A secret, seed or salt: 32 bytes.
pub(crate) type Salt = [u8; 32];

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &Salt, message: &[u8]) -> Salt {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// A line's seed: `HMAC-SHA256(secret, decimal(seq))`.
pub(crate) fn line_seed(secret: &Salt, seq: u64) -> Salt {
    hmac(secret, seq.to_string().as_bytes())
}

/// A string's salt: `HMAC-SHA256(seed, pointer)`.
pub(crate) fn string_salt(seed: &Salt, pointer: &str) -> Salt {
    hmac(seed, pointer.as_bytes())
}

/// The salted commitment of a string: lower-case hex `SHA-256(salt ‖ UTF-8 bytes)`.
pub(crate) fn commit(salt: &Salt, s: &str) -> String {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(s.as_bytes());
    hex::encode(h.finalize())
}

/// A fresh secret from the OS's random source.
pub(crate) fn new_secret() -> std::io::Result<Salt> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(secret)
}

/// What a bundle's `salts.json` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Salts {
    /// The run's secret: every line's seed derives from it (an original bundle).
    Secret(Salt),
    /// Per line (by `seq`), what a redacted copy reveals.
    Revealed(Vec<LineSalts>),
}

/// What a redacted copy keeps of one line's salts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LineSalts {
    /// The line's seed: every string of the line kept.
    Seed(Salt),
    /// The salts of the strings the line kept, by pointer (the line lost a string).
    Strings(BTreeMap<String, Salt>),
}

impl LineSalts {
    /// The salt of the string at `pointer`, when this line reveals it.
    pub(crate) fn salt(&self, pointer: &str) -> Option<Salt> {
        match self {
            LineSalts::Seed(seed) => Some(string_salt(seed, pointer)),
            LineSalts::Strings(m) => m.get(pointer).copied(),
        }
    }
}

impl Salts {
    /// What the salts say of line `seq`, or `None` when they do not cover it.
    pub(crate) fn line(&self, seq: u64) -> Option<LineSalts> {
        match self {
            Salts::Secret(secret) => Some(LineSalts::Seed(line_seed(secret, seq))),
            Salts::Revealed(lines) => usize::try_from(seq)
                .ok()
                .and_then(|i| lines.get(i))
                .cloned(),
        }
    }

    /// The file's bytes: canonical JSON and a newline.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let value = match self {
            Salts::Secret(s) => serde_json::json!({"format": FORMAT, "secret": hex::encode(s)}),
            Salts::Revealed(lines) => {
                let lines: Vec<Value> = lines
                    .iter()
                    .map(|l| match l {
                        LineSalts::Seed(s) => Value::String(hex::encode(s)),
                        LineSalts::Strings(m) => Value::Object(
                            m.iter()
                                .map(|(p, s)| (p.clone(), Value::String(hex::encode(s))))
                                .collect::<Map<_, _>>(),
                        ),
                    })
                    .collect();
                serde_json::json!({"format": FORMAT, "lines": lines})
            }
        };
        let mut text = crate::canonical::to_canonical_string(&value)
            .expect("salts are strings and an integer");
        text.push('\n');
        text.into_bytes()
    }

    /// Parse a `salts.json`.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Salts, String> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("{SALTS_FILE} is not JSON: {e}"))?;
        let obj = v
            .as_object()
            .ok_or_else(|| format!("{SALTS_FILE} is not an object"))?;
        if obj.get("format").and_then(Value::as_u64) != Some(FORMAT) || obj.len() != 2 {
            return Err(format!(
                "{SALTS_FILE} is not {{\"format\": 1}} with `secret` or `lines`"
            ));
        }
        let hex32 = |v: &Value, what: &str| -> Result<Salt, String> {
            v.as_str()
                .and_then(|t| hex::decode(t).ok())
                .and_then(|b| Salt::try_from(b).ok())
                .ok_or_else(|| format!("{SALTS_FILE}: {what} is not 64 hex digits"))
        };
        if let Some(secret) = obj.get("secret") {
            return hex32(secret, "the secret").map(Salts::Secret);
        }
        let lines = obj
            .get("lines")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{SALTS_FILE} has neither `secret` nor a `lines` list"))?;
        lines
            .iter()
            .enumerate()
            .map(|(seq, l)| match l {
                Value::String(_) => hex32(l, &format!("line {seq}'s seed")).map(LineSalts::Seed),
                Value::Object(m) => m
                    .iter()
                    .map(|(p, s)| {
                        hex32(s, &format!("line {seq}'s salt of {p}")).map(|s| (p.clone(), s))
                    })
                    .collect::<Result<_, _>>()
                    .map(LineSalts::Strings),
                _ => Err(format!(
                    "{SALTS_FILE}: line {seq} is neither a seed nor salts"
                )),
            })
            .collect::<Result<_, _>>()
            .map(Salts::Revealed)
    }

    /// Read `salts.json` of the bundle at `root`: `Ok(None)` when there is none.
    pub(crate) fn read(root: &Path) -> Result<Option<Salts>, String> {
        use std::io::Read as _;
        let path = root.join(SALTS_FILE);
        let file = match crate::fsutil::open_regular(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot open {SALTS_FILE}: {e}")),
            Ok(f) => f,
        };
        let mut bytes = Vec::new();
        file.take(MAX_SALTS_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {SALTS_FILE}: {e}"))?;
        if bytes.len() as u64 > MAX_SALTS_BYTES {
            return Err(format!("{SALTS_FILE} is larger than 512 MiB"));
        }
        Salts::parse(&bytes).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_salt_derives_from_the_line_seed_and_the_secret() {
        let secret = [7u8; 32];
        let seed = line_seed(&secret, 12);
        let salt = string_salt(&seed, "/payload/text");
        assert_ne!(seed, line_seed(&secret, 13));
        assert_ne!(salt, string_salt(&seed, "/payload/other"));
        // The commitment is SHA-256 over the salt and then the string's bytes.
        let mut raw = salt.to_vec();
        raw.extend_from_slice("hi".as_bytes());
        assert_eq!(commit(&salt, "hi"), hex::encode(Sha256::digest(&raw)));
        assert_eq!(Salts::Secret(secret).line(12), Some(LineSalts::Seed(seed)));
    }

    #[test]
    fn salts_files_round_trip_and_bad_ones_are_refused() {
        let s = Salts::Secret([1; 32]);
        assert_eq!(Salts::parse(&s.to_bytes()).unwrap(), s);
        let r = Salts::Revealed(vec![
            LineSalts::Seed([2; 32]),
            LineSalts::Strings([("/payload/a".to_owned(), [3; 32])].into()),
        ]);
        assert_eq!(Salts::parse(&r.to_bytes()).unwrap(), r);
        assert_eq!(r.line(1).unwrap().salt("/payload/b"), None);
        assert_eq!(r.line(2), None);
        for bad in [
            &b"{}"[..],
            br#"{"format":2,"secret":"00"}"#,
            br#"{"format":1,"secret":"00"}"#,
            br#"{"format":1,"lines":[1]}"#,
            br#"{"format":1,"lines":["zz"]}"#,
            b"not json",
        ] {
            assert!(
                Salts::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
