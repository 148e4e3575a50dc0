//! C2SP signed notes with Ed25519 signatures, verifier keys (`NAME+KEYHASH+BASE64`), and
//! the checkpoint a note's text holds (C2SP tlog-checkpoint: origin, tree size, root).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use provrun_evidence::dsse::{PrivateKey, PublicKey};
use sha2::{Digest as _, Sha256};

use crate::error::LedgerError;
use crate::merkle::Hash;

/// The signature type byte of Ed25519 note signatures.
const ED25519: u8 = 0x01;
/// The most signature lines a note may carry before it is refused as too large.
const MAX_SIGNATURES: usize = 100;
/// The longest note read (a checkpoint with its signatures is far smaller).
pub const MAX_NOTE_BYTES: usize = 64 * 1024;

/// Whether `name` may name a key (and a log's origin): non-empty, at most 255 bytes, no
/// whitespace, no `+`, no control characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '+')
}

/// The 4-byte key hash of an Ed25519 key named `name`:
/// `SHA-256(name ‖ 0x0A ‖ 0x01 ‖ key)[:4]`, big-endian.
pub fn key_hash(name: &str, public: &[u8; 32]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', ED25519]);
    h.update(public);
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// A note verifier key: who signs, and the Ed25519 key to check it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierKey {
    /// The key name (for a ledger, its origin).
    pub name: String,
    /// The key hash signatures carry.
    pub hash: u32,
    /// The Ed25519 public key.
    pub public: [u8; 32],
}

impl VerifierKey {
    /// The verifier key of `name` and an Ed25519 public key.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadName`] when `name` cannot name a log.
    pub fn new(name: &str, public: [u8; 32]) -> Result<VerifierKey, LedgerError> {
        if !valid_name(name) {
            return Err(LedgerError::BadName(name.to_owned()));
        }
        Ok(VerifierKey {
            name: name.to_owned(),
            hash: key_hash(name, &public),
            public,
        })
    }

    /// Parse `NAME+KEYHASH+BASE64` (8 lower-case hex digits; base64 of `0x01 ‖ key`).
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadVerifierKey`] when the text is not of that form, the key is not a valid
    /// Ed25519 key, or the key hash does not match.
    pub fn parse(text: &str) -> Result<VerifierKey, LedgerError> {
        let bad = |why: &str| LedgerError::BadVerifierKey(format!("{why}: `{text}`"));
        let mut parts = text.trim().splitn(3, '+');
        let (Some(name), Some(hash), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("not NAME+KEYHASH+KEY"));
        };
        if !valid_name(name) {
            return Err(bad(
                "the name is empty or has spaces, `+` or control characters",
            ));
        }
        if hash.len() != 8 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("the key hash is not 8 hex digits"));
        }
        let hash = u32::from_str_radix(hash, 16).map_err(|_| bad("bad key hash"))?;
        let raw = B64.decode(key).map_err(|_| bad("the key is not base64"))?;
        let Some((&ED25519, public)) = raw.split_first() else {
            return Err(bad("not an Ed25519 key (type byte 0x01)"));
        };
        let public: [u8; 32] = public
            .try_into()
            .map_err(|_| bad("an Ed25519 key is 32 bytes"))?;
        if PublicKey::parse(&public).is_err() {
            return Err(bad("not a valid Ed25519 public key"));
        }
        if key_hash(name, &public) != hash {
            return Err(bad("the key hash does not match the name and key"));
        }
        Ok(VerifierKey {
            name: name.to_owned(),
            hash,
            public,
        })
    }

    /// The key as text: `NAME+KEYHASH+BASE64`.
    pub fn to_text(&self) -> String {
        let mut raw = vec![ED25519];
        raw.extend_from_slice(&self.public);
        format!("{}+{:08x}+{}", self.name, self.hash, B64.encode(raw))
    }
}

/// Sign `text` (which must end in `\n`) as a note by `name` with an Ed25519 key.
///
/// # Errors
///
/// [`LedgerError::KeyType`] when `key` is not Ed25519; [`LedgerError::BadNote`] when `text`
/// does not end in a newline; [`LedgerError::BadName`] when `name` cannot name a log.
pub fn sign_note(text: &str, name: &str, key: &PrivateKey) -> Result<String, LedgerError> {
    let PublicKey::Ed25519(public) = key.public() else {
        return Err(LedgerError::KeyType(key.algorithm().as_str().to_owned()));
    };
    if !text.ends_with('\n') {
        return Err(LedgerError::BadNote(
            "the text must end with a newline".into(),
        ));
    }
    let vkey = VerifierKey::new(name, public)?;
    let mut sig = vkey.hash.to_be_bytes().to_vec();
    sig.extend_from_slice(&key.sign(text.as_bytes()));
    Ok(format!("{text}\n\u{2014} {name} {}\n", B64.encode(sig)))
}

/// Check a signed note against `key` and return its text: valid UTF-8 without control
/// characters but newlines, a text, a blank line, signature lines; a signature by `key`
/// (matched by name and key hash) that verifies. Signatures by other keys (a witness's
/// cosignature) are ignored.
///
/// # Errors
///
/// [`LedgerError::BadNote`] when the note is malformed or too large;
/// [`LedgerError::BadSignature`] when `key`'s signature does not verify;
/// [`LedgerError::NotSignedBy`] when no signature is by `key`.
pub fn open_note<'a>(note: &'a [u8], key: &VerifierKey) -> Result<&'a str, LedgerError> {
    let bad = |why: &str| LedgerError::BadNote(why.to_owned());
    if note.len() > MAX_NOTE_BYTES {
        return Err(bad("larger than a note may be"));
    }
    let note = std::str::from_utf8(note).map_err(|_| bad("not UTF-8"))?;
    if note.chars().any(|c| c.is_control() && c != '\n') {
        return Err(bad("holds control characters"));
    }
    let split = note
        .rfind("\n\n")
        .ok_or_else(|| bad("no blank line before the signatures"))?;
    let (text, sigs) = (&note[..=split], &note[split + 2..]);
    if sigs.is_empty() || !sigs.ends_with('\n') {
        return Err(bad("no signature lines, or they do not end with a newline"));
    }
    let mut verified = false;
    for (i, line) in sigs.lines().enumerate() {
        if i >= MAX_SIGNATURES {
            return Err(bad("too many signatures"));
        }
        let rest = line
            .strip_prefix("\u{2014} ")
            .ok_or_else(|| bad("a signature line does not start with an em dash"))?;
        let (name, sig) = rest
            .split_once(' ')
            .ok_or_else(|| bad("a signature line has no signature"))?;
        let raw = B64
            .decode(sig)
            .map_err(|_| bad("a signature is not base64"))?;
        if !valid_name(name) || raw.len() < 4 {
            return Err(bad("a signature line is malformed"));
        }
        let hash = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
        if name != key.name || hash != key.hash {
            continue;
        }
        if !PublicKey::Ed25519(key.public).verify(text.as_bytes(), &raw[4..]) {
            return Err(LedgerError::BadSignature(key.name.clone()));
        }
        verified = true;
    }
    if verified {
        Ok(text)
    } else {
        Err(LedgerError::NotSignedBy(key.to_text()))
    }
}

/// A checkpoint: a log's origin, its size, and the root of its tree at that size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's origin line.
    pub origin: String,
    /// How many leaves the tree has.
    pub size: u64,
    /// The tree's root hash.
    pub root: Hash,
}

impl Checkpoint {
    /// The note text: origin, size, base64 root, each ending in `\n`.
    pub fn to_text(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            B64.encode(self.root)
        )
    }

    /// Parse a note text as a checkpoint. Extension lines after the root are allowed
    /// (and ignored) when non-empty.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadCheckpoint`] when the text is not an origin, a size and a root, each on
    /// a line of its own.
    pub fn parse(text: &str) -> Result<Checkpoint, LedgerError> {
        let bad = |why: &str| LedgerError::BadCheckpoint(why.to_owned());
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| bad("the text does not end with a newline"))?;
        let mut lines = body.split('\n');
        let (Some(origin), Some(size), Some(root)) = (lines.next(), lines.next(), lines.next())
        else {
            return Err(bad("fewer than three lines"));
        };
        if origin.is_empty() {
            return Err(bad("empty origin line"));
        }
        let decimal = !size.is_empty()
            && size.bytes().all(|b| b.is_ascii_digit())
            && (size == "0" || !size.starts_with('0'));
        let size: u64 = size
            .parse()
            .ok()
            .filter(|_| decimal)
            .ok_or_else(|| bad("the size is not a decimal number without leading zeros"))?;
        let root: Hash = B64
            .decode(root)
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| bad("the root is not 32 bytes of base64"))?;
        if lines.any(str::is_empty) {
            return Err(bad("an empty extension line"));
        }
        Ok(Checkpoint {
            origin: origin.to_owned(),
            size,
            root,
        })
    }

    /// Open a signed checkpoint note with `key`: the signature, then the text's form,
    /// then that its origin is the key's name.
    ///
    /// # Errors
    ///
    /// The errors of [`open_note`]; [`LedgerError::BadCheckpoint`] when the text is not a
    /// checkpoint or its origin is not the key's name.
    pub fn open(note: &[u8], key: &VerifierKey) -> Result<Checkpoint, LedgerError> {
        let cp = Checkpoint::parse(open_note(note, key)?)?;
        if cp.origin != key.name {
            return Err(LedgerError::BadCheckpoint(format!(
                "its origin `{}` is not the key's name `{}`",
                cp.origin, key.name
            )));
        }
        Ok(cp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_note_specification_example_verifies() {
        // c2sp.org/signed-note's example key and note.
        let key = VerifierKey::parse(
            "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
        )
        .unwrap();
        let note = "This is an example message.\n\n\u{2014} example.com/foo \
                    Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";
        assert_eq!(
            open_note(note.as_bytes(), &key).unwrap(),
            "This is an example message.\n"
        );
        let changed = note.replace("example message", "example massage");
        assert!(open_note(changed.as_bytes(), &key).is_err());
    }

    #[test]
    fn checkpoints_round_trip_and_refuse_bad_lines() {
        let key = PrivateKey::Ed25519([3; 32]);
        let cp = Checkpoint {
            origin: "example.com/log".into(),
            size: 12,
            root: [9; 32],
        };
        let note = sign_note(&cp.to_text(), "example.com/log", &key).unwrap();
        let PublicKey::Ed25519(public) = key.public() else {
            unreachable!()
        };
        let vkey = VerifierKey::new("example.com/log", public).unwrap();
        assert_eq!(VerifierKey::parse(&vkey.to_text()).unwrap(), vkey);
        assert_eq!(Checkpoint::open(note.as_bytes(), &vkey).unwrap(), cp);
        for bad in ["x\n012\nAAAA\n", "x\n1\n", "x\n1\nAAAA\n", "\n1\nAAAA\n"] {
            assert!(Checkpoint::parse(bad).is_err(), "{bad:?}");
        }
        let other = VerifierKey::new("example.com/other", public).unwrap();
        assert!(Checkpoint::open(note.as_bytes(), &other).is_err());
    }
}
