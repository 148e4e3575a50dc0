//! Witnesses (C2SP tlog-witness, tlog-cosignature): a third party that cosigns a log's
//! checkpoints only while they grow consistently, so that a log cannot show one history
//! to one reader and another to another (a split view) without a witness noticing.
//!
//! - A witness's key is an Ed25519 key with a name; its verifier key is
//!   `NAME+KEYHASH+BASE64(0x04 ‖ key)`, the key hash `SHA-256(NAME ‖ "\n" ‖ 0x04 ‖ key)[:4]`.
//! - A cosignature is a note signature line `— NAME BASE64(keyhash ‖ time ‖ signature)`:
//!   `time` a big-endian `u64` of POSIX seconds, `signature` Ed25519 over
//!   `"cosignature/v1\ntime " ‖ decimal(time) ‖ "\n"` followed by the checkpoint's text.
//! - [`Witness::add_checkpoint`] answers the `add-checkpoint` request: the log's old size
//!   and a consistency proof from it, then the checkpoint; it cosigns only when the old
//!   size is the last one it cosigned for that log and the proof holds, and keeps the new
//!   checkpoint (on disk, synced, before it answers) as the next request's starting point.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use provrun_evidence::dsse::{PrivateKey, PublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{LedgerError, Result};
use crate::ledger::{ed25519_public, load_signing_key, sync_dir, write_synced};
use crate::merkle::{Hash, empty_root, verify_consistency};
use crate::note::{Checkpoint, MAX_NOTE_BYTES, VerifierKey, open_note, valid_name};

/// The signature type byte of Ed25519 cosignatures (tlog-cosignature).
const COSIGNATURE_V1: u8 = 0x04;
/// The configuration file of a witness folder.
pub const WITNESS_FILE: &str = "witness.json";
/// The folder of a witness's per-log state.
const LOGS_DIR: &str = "logs";
/// The most consistency proof lines a request may carry (tlog-witness).
const MAX_PROOF_LINES: usize = 63;

/// A witness's (cosigner's) verifier key: a name and an Ed25519 key, type 0x04.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessKey {
    /// The witness's name.
    pub name: String,
    /// The key hash its cosignatures carry.
    pub hash: u32,
    /// The Ed25519 public key.
    pub public: [u8; 32],
}

/// `SHA-256(name ‖ "\n" ‖ 0x04 ‖ key)[:4]`, big-endian.
fn cosigner_hash(name: &str, public: &[u8; 32]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', COSIGNATURE_V1]);
    h.update(public);
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

impl WitnessKey {
    /// The verifier key of a witness called `name` with an Ed25519 public key.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadName`] for a name a note cannot carry.
    pub fn new(name: &str, public: [u8; 32]) -> Result<WitnessKey> {
        if !valid_name(name) {
            return Err(LedgerError::BadName(name.to_owned()));
        }
        Ok(WitnessKey {
            name: name.to_owned(),
            hash: cosigner_hash(name, &public),
            public,
        })
    }

    /// Parse `NAME+KEYHASH+BASE64(0x04 ‖ key)`.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadVerifierKey`] when the text is not such a key, or its hash does
    /// not match.
    pub fn parse(text: &str) -> Result<WitnessKey> {
        let bad = |why: &str| LedgerError::BadVerifierKey(format!("{why}: `{}`", text.trim()));
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
        let Some((&COSIGNATURE_V1, public)) = raw.split_first() else {
            return Err(bad("not a witness key (type byte 0x04, cosignature/v1)"));
        };
        let public: [u8; 32] = public
            .try_into()
            .map_err(|_| bad("an Ed25519 key is 32 bytes"))?;
        if PublicKey::parse(&public).is_err() {
            return Err(bad("not a valid Ed25519 public key"));
        }
        if cosigner_hash(name, &public) != hash {
            return Err(bad("the key hash does not match the name and key"));
        }
        Ok(WitnessKey {
            name: name.to_owned(),
            hash,
            public,
        })
    }

    /// The key as text.
    pub fn to_text(&self) -> String {
        let mut raw = vec![COSIGNATURE_V1];
        raw.extend_from_slice(&self.public);
        format!("{}+{:08x}+{}", self.name, self.hash, B64.encode(raw))
    }
}

/// The message a cosignature signs: the header, the time, and the checkpoint's text.
fn cosigned_message(text: &str, time: u64) -> Vec<u8> {
    format!("cosignature/v1\ntime {time}\n{text}").into_bytes()
}

/// A cosignature line (ending in `\n`) by the witness `name` with `key` on a checkpoint
/// whose note text is `text`, made at `time` (POSIX seconds).
///
/// # Errors
///
/// [`LedgerError::KeyType`] when `key` is not Ed25519; [`LedgerError::BadName`] for a name
/// a note cannot carry.
pub fn cosign(text: &str, name: &str, key: &PrivateKey, time: u64) -> Result<String> {
    let wkey = WitnessKey::new(name, ed25519_public(key)?)?;
    let mut sig = wkey.hash.to_be_bytes().to_vec();
    sig.extend_from_slice(&time.to_be_bytes());
    sig.extend_from_slice(&key.sign(&cosigned_message(text, time)));
    Ok(format!("\u{2014} {name} {}\n", B64.encode(sig)))
}

/// The time of a valid cosignature by `key` on the signed note `note`.
///
/// # Errors
///
/// [`LedgerError::BadNote`] for a malformed note; [`LedgerError::NotSignedBy`] when no
/// signature line is by `key`; [`LedgerError::BadSignature`] when one is and does not
/// verify.
pub fn cosignature_time(note: &[u8], key: &WitnessKey) -> Result<u64> {
    let text = std::str::from_utf8(note).map_err(|_| LedgerError::BadNote("not UTF-8".into()))?;
    let split = text
        .rfind("\n\n")
        .ok_or_else(|| LedgerError::BadNote("no blank line before the signatures".into()))?;
    let (body, sigs) = (&text[..=split], &text[split + 2..]);
    for line in sigs.lines() {
        let Some((name, sig)) = line
            .strip_prefix("\u{2014} ")
            .and_then(|r| r.split_once(' '))
        else {
            continue;
        };
        let Ok(raw) = B64.decode(sig) else { continue };
        if name != key.name || raw.len() < 4 || raw[..4] != key.hash.to_be_bytes() {
            continue;
        }
        if raw.len() != 4 + 8 + 64 {
            return Err(LedgerError::BadSignature(key.name.clone()));
        }
        let time = u64::from_be_bytes(raw[4..12].try_into().expect("8 bytes"));
        if PublicKey::Ed25519(key.public).verify(&cosigned_message(body, time), &raw[12..]) {
            return Ok(time);
        }
        return Err(LedgerError::BadSignature(key.name.clone()));
    }
    Err(LedgerError::NotSignedBy(key.to_text()))
}

/// A witness folder's configuration, `witness.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessConfig {
    /// The format (1).
    pub format: u64,
    /// The witness's name (its cosignatures' key name).
    pub name: String,
    /// Its verifier key (`NAME+KEYHASH+BASE64`, type 0x04).
    pub verifier_key: String,
    /// The private key file that cosigns (absolute; never copied into the folder).
    pub key_file: PathBuf,
}

/// What a witness keeps of one log: the last checkpoint it cosigned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogState {
    origin: String,
    size: u64,
    /// Base64 root.
    root: String,
}

/// Make a witness in `dir` (a new or empty folder) that cosigns with the Ed25519 key in
/// `key_file` under `name`; returns its verifier key.
///
/// # Errors
///
/// The errors of [`load_signing_key`]; [`LedgerError::BadName`];
/// [`LedgerError::NotEmpty`] for a non-empty folder; [`LedgerError::Io`] when it cannot
/// be written.
pub fn init_witness(dir: &Path, key_file: &Path, name: &str) -> Result<WitnessKey> {
    let key = load_signing_key(key_file)?;
    let wkey = WitnessKey::new(name, ed25519_public(&key)?)?;
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
        || std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir())
    {
        return Err(LedgerError::NotEmpty(dir.to_path_buf()));
    }
    std::fs::create_dir_all(dir.join(LOGS_DIR)).map_err(|e| LedgerError::io("make", dir, e))?;
    let key_file =
        std::path::absolute(key_file).map_err(|e| LedgerError::io("resolve", key_file, e))?;
    let config = WitnessConfig {
        format: 1,
        name: name.to_owned(),
        verifier_key: wkey.to_text(),
        key_file,
    };
    let mut text = serde_json::to_string_pretty(&config).map_err(|e| LedgerError::BadConfig {
        path: dir.join(WITNESS_FILE),
        reason: e.to_string(),
    })?;
    text.push('\n');
    write_synced(&dir.join(WITNESS_FILE), text.as_bytes())?;
    sync_dir(&dir.join(LOGS_DIR))?;
    sync_dir(dir)?;
    Ok(wkey)
}

/// Why a witness did not cosign: the HTTP status tlog-witness gives it, and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 400, 403, 404, 409 or 422 (500 for a failure of the witness itself).
    pub status: u16,
    /// The body: the size the witness holds (`text/x.tlog.size`) for a 409, else a
    /// message.
    pub body: String,
}

impl Refusal {
    fn new(status: u16, body: impl Into<String>) -> Refusal {
        Refusal {
            status,
            body: body.into(),
        }
    }
}

/// A witness, opened to serve: its key, the logs it witnesses, its state.
pub struct Witness {
    dir: PathBuf,
    name: String,
    key: PrivateKey,
    logs: BTreeMap<String, VerifierKey>,
    /// Held while a request is checked and its new state kept: the check of the old size
    /// and the update are one step (two requests cannot both move a log).
    state: Mutex<()>,
    _lock: crate::ledger::LedgerLock,
}

impl std::fmt::Debug for Witness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Witness")
            .field("dir", &self.dir)
            .field("name", &self.name)
            .field("logs", &self.logs.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Witness {
    /// Open the witness in `dir` to witness the logs whose checkpoint keys are `logs`
    /// (one per origin). Holds the folder's lock while open: one witness process per
    /// folder.
    ///
    /// # Errors
    ///
    /// [`LedgerError::NotALedger`] when `dir` has no `witness.json`;
    /// [`LedgerError::BadConfig`] for a bad one, or two keys for one origin; the errors
    /// of [`load_signing_key`]; [`LedgerError::Locked`] when another process serves it.
    pub fn open(dir: &Path, logs: &[VerifierKey]) -> Result<Witness> {
        let path = dir.join(WITNESS_FILE);
        let bytes = crate::files::read_bounded(&path, 64 * 1024).map_err(|e| match e {
            LedgerError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                LedgerError::NotALedger(dir.to_path_buf())
            }
            other => other,
        })?;
        let bad = |reason: String| LedgerError::BadConfig {
            path: path.clone(),
            reason,
        };
        let config: WitnessConfig = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("not a witness configuration: {e}")))?;
        if config.format != 1 {
            return Err(bad(format!("unknown format {}", config.format)));
        }
        let key = load_signing_key(&config.key_file)?;
        if WitnessKey::parse(&config.verifier_key)?
            != WitnessKey::new(&config.name, ed25519_public(&key)?)?
        {
            return Err(bad("the key file is not the witness's key".into()));
        }
        let mut by_origin = BTreeMap::new();
        for k in logs {
            if by_origin.insert(k.name.clone(), k.clone()).is_some() {
                return Err(bad(format!("two keys given for the log {}", k.name)));
            }
        }
        let lock = crate::ledger::LedgerLock::take_file(&path, true)?;
        Ok(Witness {
            dir: dir.to_path_buf(),
            name: config.name,
            key,
            logs: by_origin,
            state: Mutex::new(()),
            _lock: lock,
        })
    }

    /// The witness's verifier key.
    ///
    /// # Errors
    ///
    /// Only if the key turned into a non-Ed25519 key, which [`Witness::open`] refuses.
    pub fn key(&self) -> Result<WitnessKey> {
        WitnessKey::new(&self.name, ed25519_public(&self.key)?)
    }

    fn state_path(&self, origin: &str) -> PathBuf {
        self.dir.join(LOGS_DIR).join(format!(
            "{}.json",
            hex::encode(Sha256::digest(origin.as_bytes()))
        ))
    }

    fn load(&self, origin: &str) -> Result<Option<(u64, Hash)>> {
        let path = self.state_path(origin);
        let bytes = match crate::files::read_bounded(&path, 64 * 1024) {
            Ok(b) => b,
            Err(LedgerError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let bad = |reason: String| LedgerError::BadConfig {
            path: path.clone(),
            reason,
        };
        let st: LogState = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        let root: Hash = B64
            .decode(&st.root)
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| bad("the root is not 32 bytes of base64".into()))?;
        if st.origin != origin {
            return Err(bad(format!("holds the log {}, not {origin}", st.origin)));
        }
        Ok(Some((st.size, root)))
    }

    fn keep(&self, cp: &Checkpoint) -> Result<()> {
        let path = self.state_path(&cp.origin);
        let st = LogState {
            origin: cp.origin.clone(),
            size: cp.size,
            root: B64.encode(cp.root),
        };
        let text = serde_json::to_vec(&st).map_err(|e| LedgerError::BadConfig {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let temp = path.with_extension(format!("tmp-{}", std::process::id()));
        write_synced(&temp, &text)?;
        std::fs::rename(&temp, &path).map_err(|e| LedgerError::io("rename into", &path, e))?;
        sync_dir(&self.dir.join(LOGS_DIR))
    }

    /// Answer an `add-checkpoint` request body (`old SIZE`, proof lines, a blank line, the
    /// signed checkpoint) at `time`: the cosignature line(s) to send back, or the refusal
    /// tlog-witness prescribes.
    pub fn add_checkpoint(&self, body: &[u8], time: u64) -> std::result::Result<String, Refusal> {
        let text =
            std::str::from_utf8(body).map_err(|_| Refusal::new(400, "the body is not UTF-8"))?;
        let (head, note) = text
            .split_once("\n\n")
            .ok_or_else(|| Refusal::new(400, "no blank line after the proof"))?;
        let mut lines = head.split('\n');
        let old = lines
            .next()
            .and_then(|l| l.strip_prefix("old "))
            .filter(|n| {
                !n.is_empty()
                    && n.bytes().all(|b| b.is_ascii_digit())
                    && (*n == "0" || !n.starts_with('0'))
            })
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| Refusal::new(400, "the first line is not `old SIZE`"))?;
        let proof: Vec<Hash> = lines
            .map(|l| {
                B64.decode(l)
                    .ok()
                    .and_then(|b| Hash::try_from(b).ok())
                    .ok_or_else(|| Refusal::new(400, "a proof line is not a base64 hash"))
            })
            .collect::<std::result::Result<_, _>>()?;
        if proof.len() > MAX_PROOF_LINES {
            return Err(Refusal::new(400, "more than 63 proof lines"));
        }
        if note.len() > MAX_NOTE_BYTES {
            return Err(Refusal::new(
                400,
                "the checkpoint is larger than a note may be",
            ));
        }
        let origin = note.split('\n').next().unwrap_or_default();
        let Some(log_key) = self.logs.get(origin) else {
            return Err(Refusal::new(
                404,
                format!("this witness does not witness `{origin}`"),
            ));
        };
        let checked =
            open_note(note.as_bytes(), log_key).map_err(|e| Refusal::new(403, e.to_string()))?;
        let cp = Checkpoint::parse(checked).map_err(|e| Refusal::new(400, e.to_string()))?;
        if old > cp.size {
            return Err(Refusal::new(
                400,
                "the old size is larger than the checkpoint's",
            ));
        }
        if cp.size == 0 && cp.root != empty_root() {
            return Err(Refusal::new(
                422,
                "a checkpoint of 0 leaves must have the empty tree's root",
            ));
        }
        let _held = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let known = self
            .load(origin)
            .map_err(|e| Refusal::new(500, e.to_string()))?;
        let (size, root) = known.unwrap_or((0, empty_root()));
        if old != size {
            return Err(Refusal::new(409, format!("{size}\n")));
        }
        if old == 0 && !proof.is_empty() {
            return Err(Refusal::new(
                422,
                "a proof from the empty tree must be empty",
            ));
        }
        if old == cp.size && root != cp.root {
            return Err(Refusal::new(
                422,
                "the same size with another root: the log forked",
            ));
        }
        if old > 0 && old < cp.size && !verify_consistency(old, cp.size, &root, &cp.root, &proof) {
            return Err(Refusal::new(
                422,
                format!(
                    "the consistency proof from {old} to {} does not hold",
                    cp.size
                ),
            ));
        }
        self.keep(&cp)
            .map_err(|e| Refusal::new(500, e.to_string()))?;
        cosign(checked, &self.name, &self.key, time).map_err(|e| Refusal::new(500, e.to_string()))
    }
}

/// The body of an `add-checkpoint` request: `old SIZE`, the consistency proof from that
/// size (base64, a line each), a blank line, and the signed checkpoint note.
pub fn add_checkpoint_body(old: u64, proof: &[Hash], note: &[u8]) -> Vec<u8> {
    let mut body = format!("old {old}\n").into_bytes();
    for h in proof {
        body.extend_from_slice(B64.encode(h).as_bytes());
        body.push(b'\n');
    }
    body.push(b'\n');
    body.extend_from_slice(note);
    body
}

/// Whether `line` is one note signature line: `— NAME BASE64`, nothing more.
pub fn is_signature_line(line: &str) -> bool {
    line.strip_prefix("\u{2014} ")
        .and_then(|r| r.split_once(' '))
        .is_some_and(|(name, sig)| {
            valid_name(name) && !sig.is_empty() && B64.decode(sig).is_ok_and(|b| b.len() >= 4)
        })
}

/// Add cosignature `lines` to the checkpoint of the ledger folder `dir`, which must still
/// be `note` (the checkpoint they cosign): under the writer's lock, written to a
/// temporary file, synced and renamed into place. Lines the note already has are not
/// added twice. Returns the new note.
///
/// # Errors
///
/// [`LedgerError::BadNote`] when a line is not a signature line, or the checkpoint
/// changed meanwhile (an add); the errors of [`crate::LedgerLock::take`];
/// [`LedgerError::Io`] when it cannot be written.
pub fn add_cosignatures(dir: &Path, note: &[u8], lines: &[String]) -> Result<Vec<u8>> {
    if let Some(bad) = lines.iter().find(|l| !is_signature_line(l)) {
        return Err(LedgerError::BadNote(format!(
            "`{bad}` is not a note signature line"
        )));
    }
    let _lock = crate::ledger::LedgerLock::take(dir, true)?;
    let path = dir.join(crate::ledger::CHECKPOINT_FILE);
    let now = crate::files::read_bounded(&path, MAX_NOTE_BYTES as u64)?;
    if now != note {
        return Err(LedgerError::BadNote(
            "the checkpoint changed while it was being cosigned (a run was added); cosign \
             the new one"
                .into(),
        ));
    }
    let mut out = note.to_vec();
    let text = String::from_utf8_lossy(note).into_owned();
    for line in lines {
        if !text.lines().any(|l| l == line) {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }
    if out.len() > MAX_NOTE_BYTES {
        return Err(LedgerError::BadNote(
            "too many signatures for one note".into(),
        ));
    }
    let temp = dir.join(format!(
        ".{}.tmp-{}",
        crate::ledger::CHECKPOINT_FILE,
        std::process::id()
    ));
    write_synced(&temp, &out)?;
    std::fs::rename(&temp, &path).map_err(|e| LedgerError::io("rename into", &path, e))?;
    sync_dir(dir)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::sign_note;

    fn checkpoint(origin: &str, size: u64, root: Hash, key: &PrivateKey) -> Vec<u8> {
        let cp = Checkpoint {
            origin: origin.into(),
            size,
            root,
        };
        sign_note(&cp.to_text(), origin, key).unwrap().into_bytes()
    }

    #[test]
    fn add_checkpoint_answers_as_tlog_witness_prescribes() {
        let tmp = std::env::temp_dir().join(format!("provrun-witness-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let wfile = tmp.join("w.pem");
        std::fs::write(&wfile, PrivateKey::Ed25519([1; 32]).to_pem().unwrap()).unwrap();
        let log = PrivateKey::Ed25519([2; 32]);
        let log_vkey = VerifierKey::new("example.com/log", ed25519_public(&log).unwrap()).unwrap();
        let wkey = init_witness(&tmp.join("w"), &wfile, "w.example/1").unwrap();
        assert_eq!(WitnessKey::parse(&wkey.to_text()).unwrap(), wkey);
        assert!(
            WitnessKey::parse(&log_vkey.to_text()).is_err(),
            "a type-0x01 key is not a witness key"
        );
        let w = Witness::open(&tmp.join("w"), &[log_vkey]).unwrap();
        // A second process may not serve the same witness.
        assert!(matches!(
            Witness::open(&tmp.join("w"), &[]),
            Err(LedgerError::Locked(_))
        ));
        let leaf = |i: u8| crate::merkle::leaf_hash(&[i]);
        let root2 = crate::merkle::node_hash(&leaf(0), &leaf(1));
        let cp2 = checkpoint("example.com/log", 2, root2, &log);
        let status = |body: Vec<u8>| {
            w.add_checkpoint(&body, 7)
                .map(|_| 200)
                .unwrap_or_else(|r| r.status)
        };
        assert_eq!(status(b"nonsense".to_vec()), 400);
        let other = checkpoint("example.com/other", 2, root2, &log);
        assert_eq!(status(add_checkpoint_body(0, &[], &other)), 404);
        let forged = checkpoint("example.com/log", 2, root2, &PrivateKey::Ed25519([9; 32]));
        assert_eq!(status(add_checkpoint_body(0, &[], &forged)), 403);
        assert_eq!(status(add_checkpoint_body(3, &[], &cp2)), 400);
        assert_eq!(status(add_checkpoint_body(0, &[leaf(0)], &cp2)), 422);
        let empty_bad = checkpoint("example.com/log", 0, root2, &log);
        assert_eq!(status(add_checkpoint_body(0, &[], &empty_bad)), 422);
        // Cosigned from nothing; its line verifies; its time is the one given.
        let line = w
            .add_checkpoint(&add_checkpoint_body(0, &[], &cp2), 7)
            .unwrap();
        let mut note = cp2.clone();
        note.extend_from_slice(line.as_bytes());
        assert_eq!(cosignature_time(&note, &w.key().unwrap()).unwrap(), 7);
        // Now it holds 2: old 0 is a conflict that says so.
        let r = w
            .add_checkpoint(&add_checkpoint_body(0, &[], &cp2), 8)
            .unwrap_err();
        assert_eq!((r.status, r.body.as_str()), (409, "2\n"));
        // Same size, another root: a fork.
        let fork = checkpoint("example.com/log", 2, leaf(5), &log);
        assert_eq!(status(add_checkpoint_body(2, &[], &fork)), 422);
        // Growth to 3 with the right proof, and a wrong one.
        let root3 = crate::merkle::node_hash(&root2, &leaf(2));
        let cp3 = checkpoint("example.com/log", 3, root3, &log);
        assert_eq!(status(add_checkpoint_body(2, &[leaf(7)], &cp3)), 422);
        assert_eq!(status(add_checkpoint_body(2, &[leaf(2)], &cp3)), 200);
        drop(w);
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
