//! A ledger folder: its configuration (`ledger.json`), making one (`init`), the lock its
//! writers and readers take, and what readers ask of it: the checkpoint, where a leaf
//! is, and proofs against the current checkpoint.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use provrun_evidence::dsse::{PrivateKey, PublicKey};
use rustix::fs::{FlockOperation, flock};
use serde::{Deserialize, Serialize};

use crate::error::{LedgerError, Result};
use crate::files::{Folder, LogFiles, read_bounded};
use crate::merkle::{self, Hash, leaf_hash};
use crate::note::{Checkpoint, MAX_NOTE_BYTES, VerifierKey, sign_note};
use crate::tiles::{TILE_DIR, TileId, TileKind, TileReader, read_hashes_from, width_at};

/// The ledger's configuration file.
pub const CONFIG_FILE: &str = "ledger.json";
/// The ledger's current checkpoint (a signed note).
pub const CHECKPOINT_FILE: &str = "checkpoint";
/// The configuration format `init` writes.
const FORMAT: u64 = 1;
/// How long a writer or reader waits for another writer before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(120);

/// `ledger.json`: what the log is called, the key its checkpoints verify with, and where
/// the key that signs them is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The configuration format (1).
    pub format: u64,
    /// The checkpoints' origin line, and the signing key's name.
    pub origin: String,
    /// The verifier key of the checkpoints (`NAME+KEYHASH+BASE64`).
    pub verifier_key: String,
    /// The private key file (absolute) that adds sign with. Empty for a ledger in a
    /// bucket, whose configuration names only the verifier key (each writer is given the
    /// signing key).
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub key_file: PathBuf,
}

fn is_empty_path(p: &Path) -> bool {
    p.as_os_str().is_empty()
}

impl Config {
    /// Read and check `dir/ledger.json`.
    ///
    /// # Errors
    ///
    /// [`LedgerError::NotALedger`] when `ledger.json` is missing; [`LedgerError::BadConfig`]
    /// when it is not a configuration of the known format or its key's name is not the origin;
    /// [`LedgerError::BadVerifierKey`] for a bad key; [`LedgerError::Io`] or
    /// [`LedgerError::BadTile`] when the file cannot be read or is too large.
    pub fn read(dir: &Path) -> Result<Config> {
        Config::read_from(&Folder::new(dir))
    }

    /// Read and check the `ledger.json` of a ledger wherever it is.
    ///
    /// # Errors
    ///
    /// As [`Config::read`]; [`LedgerError::Remote`] when a remote ledger cannot be read.
    pub fn read_from(files: &dyn LogFiles) -> Result<Config> {
        let path = PathBuf::from(format!("{}/{CONFIG_FILE}", files.describe()));
        let bad = |reason: String| LedgerError::BadConfig {
            path: path.clone(),
            reason,
        };
        let bytes = files
            .read(CONFIG_FILE, 64 * 1024)?
            .ok_or_else(|| LedgerError::NotALedger(PathBuf::from(files.describe())))?;
        let config: Config = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("not a ledger configuration: {e}")))?;
        if config.format != FORMAT {
            return Err(bad(format!("unknown format {}", config.format)));
        }
        let key = config.key()?;
        if key.name != config.origin {
            return Err(bad("the verifier key's name is not the origin".into()));
        }
        Ok(config)
    }

    /// The checkpoints' verifier key.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadVerifierKey`] when `verifier_key` does not parse.
    pub fn key(&self) -> Result<VerifierKey> {
        VerifierKey::parse(&self.verifier_key)
    }
}

/// An Ed25519 private key from a key file (`provrun keygen`'s PKCS#8 PEM).
///
/// # Errors
///
/// [`LedgerError::Key`] when the file cannot be read or holds no private key;
/// [`LedgerError::KeyType`] when the key is not Ed25519.
pub fn load_signing_key(path: &Path) -> Result<PrivateKey> {
    let bytes = read_bounded(path, 64 * 1024)
        .map_err(|e| LedgerError::Key(format!("cannot read the key {}: {e}", path.display())))?;
    let key = PrivateKey::parse(&bytes)
        .map_err(|e| LedgerError::Key(format!("{}: {e}", path.display())))?;
    match key {
        PrivateKey::Ed25519(_) => Ok(key),
        other => Err(LedgerError::KeyType(other.algorithm().as_str().to_owned())),
    }
}

/// The Ed25519 public key of an Ed25519 private key.
pub(crate) fn ed25519_public(key: &PrivateKey) -> Result<[u8; 32]> {
    match key.public() {
        PublicKey::Ed25519(p) => Ok(p),
        other => Err(LedgerError::KeyType(other.algorithm().as_str().to_owned())),
    }
}

/// An advisory lock on a ledger (`flock` on its `ledger.json`): exclusive for a writer,
/// shared for a reader. Released when dropped, or when its process ends.
#[derive(Debug)]
pub struct LedgerLock {
    _file: File,
}

impl LedgerLock {
    /// Take the lock, waiting for another writer (up to two minutes).
    ///
    /// # Errors
    ///
    /// [`LedgerError::Io`] when `ledger.json` cannot be opened or locked;
    /// [`LedgerError::Locked`] when another writer still holds the lock after two minutes.
    pub fn take(dir: &Path, exclusive: bool) -> Result<LedgerLock> {
        LedgerLock::take_waiting(&dir.join(CONFIG_FILE), dir, exclusive, LOCK_WAIT)
    }

    /// Take the lock on the file `path` (a witness's configuration) without waiting.
    ///
    /// # Errors
    ///
    /// [`LedgerError::Io`] when the file cannot be opened or locked;
    /// [`LedgerError::Locked`] when another process holds it.
    pub fn take_file(path: &Path, exclusive: bool) -> Result<LedgerLock> {
        LedgerLock::take_waiting(path, path, exclusive, Duration::ZERO)
    }

    fn take_waiting(
        path: &Path,
        name: &Path,
        exclusive: bool,
        wait: Duration,
    ) -> Result<LedgerLock> {
        let file = File::open(path).map_err(|e| LedgerError::io("open", path, e))?;
        let op = if exclusive {
            FlockOperation::NonBlockingLockExclusive
        } else {
            FlockOperation::NonBlockingLockShared
        };
        let deadline = Instant::now() + wait;
        loop {
            match flock(&file, op) {
                Ok(()) => return Ok(LedgerLock { _file: file }),
                Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(LedgerError::Locked(name.to_path_buf()));
                }
                Err(e) => return Err(LedgerError::io("lock", path, e.into())),
            }
        }
    }
}

/// Make a new, empty ledger at `dir` (a new or empty folder): `ledger.json`, `tile/`, and
/// the checkpoint of size 0 signed with the Ed25519 key in `key_file`, named `origin`.
/// The folder is built beside its path and renamed into place, so it appears whole.
/// Returns the checkpoints' verifier key.
///
/// # Errors
///
/// The errors of [`load_signing_key`]; [`LedgerError::BadName`] for an `origin` a note
/// cannot carry; [`LedgerError::NotEmpty`] when `dir` is a file or a non-empty folder;
/// [`LedgerError::Io`] when the new folder cannot be written, synced or renamed into place.
pub fn init(dir: &Path, key_file: &Path, origin: &str) -> Result<VerifierKey> {
    let key = load_signing_key(key_file)?;
    let vkey = VerifierKey::new(origin, ed25519_public(&key)?)?;
    if let Ok(mut entries) = std::fs::read_dir(dir)
        && entries.next().is_some()
    {
        return Err(LedgerError::NotEmpty(dir.to_path_buf()));
    }
    if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(LedgerError::NotEmpty(dir.to_path_buf()));
    }
    let key_file =
        std::path::absolute(key_file).map_err(|e| LedgerError::io("resolve", key_file, e))?;
    let config = Config {
        format: FORMAT,
        origin: origin.to_owned(),
        verifier_key: vkey.to_text(),
        key_file,
    };
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let building = parent.join(format!(".{name}.provrun-ledger-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    let made = (|| -> Result<()> {
        std::fs::create_dir_all(building.join(TILE_DIR))
            .map_err(|e| LedgerError::io("make", &building, e))?;
        let mut text =
            serde_json::to_string_pretty(&config).map_err(|e| LedgerError::BadConfig {
                path: building.join(CONFIG_FILE),
                reason: e.to_string(),
            })?;
        text.push('\n');
        write_synced(&building.join(CONFIG_FILE), text.as_bytes())?;
        let empty = Checkpoint {
            origin: origin.to_owned(),
            size: 0,
            root: merkle::empty_root(),
        };
        let note = sign_note(&empty.to_text(), origin, &key)?;
        write_synced(&building.join(CHECKPOINT_FILE), note.as_bytes())?;
        sync_dir(&building.join(TILE_DIR))?;
        sync_dir(&building)?;
        std::fs::rename(&building, dir).map_err(|e| LedgerError::io("rename into", dir, e))?;
        sync_dir(parent)
    })();
    if made.is_err() {
        let _ = std::fs::remove_dir_all(&building);
    }
    made.map(|()| vkey)
}

/// Write `bytes` to a new file at `path` and sync it.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let mut file = File::create(path).map_err(|e| LedgerError::io("create", path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| LedgerError::io("write", path, e))
}

/// Sync a folder, so the names made in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| LedgerError::io("sync", dir, e))?;
    crate::probe::note(crate::probe::Op::SyncDir(dir.to_path_buf()));
    Ok(())
}

/// An inclusion proof as `provrun ledger proof --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InclusionProof {
    /// The leaf's index.
    pub index: u64,
    /// The size of the tree the proof is for.
    pub tree_size: u64,
    /// The proof's hashes, base64, nearest the leaf first.
    pub hashes: Vec<String>,
}

/// A consistency proof as `provrun ledger consistency --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsistencyProof {
    /// The proof's hashes, base64.
    pub hashes: Vec<String>,
}

/// Hashes as base64 text.
pub fn encode_hashes(hashes: &[Hash]) -> Vec<String> {
    use base64::Engine as _;
    hashes
        .iter()
        .map(|h| base64::engine::general_purpose::STANDARD.encode(h))
        .collect()
}

/// Base64 text as hashes.
///
/// # Errors
///
/// [`LedgerError::BadProof`] when a text is not the base64 of a 32-byte hash.
pub fn decode_hashes(text: &[String]) -> Result<Vec<Hash>> {
    use base64::Engine as _;
    text.iter()
        .map(|t| {
            base64::engine::general_purpose::STANDARD
                .decode(t)
                .ok()
                .and_then(|b| <Hash>::try_from(b).ok())
                .ok_or_else(|| LedgerError::BadProof(format!("`{t}` is not a base64 hash")))
        })
        .collect()
}

/// A ledger opened for reading, at its current checkpoint (checked against its key).
pub struct Ledger {
    dir: PathBuf,
    files: Arc<dyn LogFiles>,
    config: Option<Config>,
    key: VerifierKey,
    note: Vec<u8>,
    checkpoint: Checkpoint,
    _lock: Option<LedgerLock>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("at", &self.files.describe())
            .field("checkpoint", &self.checkpoint)
            .finish()
    }
}

impl Ledger {
    /// Open the ledger at `dir` for reading: its configuration and its checkpoint, which
    /// must verify with `key` when one is given (else with the key `ledger.json` names).
    /// Holds a shared lock while open, so no add runs meanwhile.
    ///
    /// # Errors
    ///
    /// The errors of [`Config::read`] and [`LedgerLock::take`]; [`LedgerError::BadVerifierKey`]
    /// for a bad configured key; the errors of [`Checkpoint::open`] when the checkpoint does not
    /// verify; [`LedgerError::Io`] or [`LedgerError::BadTile`] when it cannot be read.
    pub fn open(dir: &Path, key: Option<&VerifierKey>) -> Result<Ledger> {
        let config = Config::read(dir)?;
        let lock = LedgerLock::take(dir, false)?;
        Ledger::open_files_with(Arc::new(Folder::new(dir)), Some(config), key, Some(lock))
    }

    /// Open the ledger a command names, a folder or a URL (`s3://`, `file://`,
    /// `http(s)://`; see [`crate::files::open_files`]), for reading. Its checkpoint must
    /// verify with `key`, else with the key its `ledger.json` names; a URL whose
    /// `ledger.json` cannot be read needs `key`. A folder is held under a shared lock
    /// while open; a URL's objects are read as they are.
    ///
    /// # Errors
    ///
    /// As [`Ledger::open`]; [`LedgerError::Remote`] when the URL cannot be used or read;
    /// [`LedgerError::NotALedger`] when there is neither a checkpoint nor a configuration.
    pub fn open_at(location: &str, key: Option<&VerifierKey>) -> Result<Ledger> {
        if !location.contains("://") {
            return Ledger::open(Path::new(location), key);
        }
        let files = crate::files::open_files(location)?;
        let config = match Config::read_from(&*files) {
            Ok(c) => Some(c),
            Err(LedgerError::NotALedger(_)) if key.is_some() => None,
            Err(e) => return Err(e),
        };
        Ledger::open_files_with(files, config, key, None)
    }

    fn open_files_with(
        files: Arc<dyn LogFiles>,
        config: Option<Config>,
        key: Option<&VerifierKey>,
        lock: Option<LedgerLock>,
    ) -> Result<Ledger> {
        let key = match (key, &config) {
            (Some(k), _) => k.clone(),
            (None, Some(c)) => c.key()?,
            (None, None) => return Err(LedgerError::NotALedger(PathBuf::from(files.describe()))),
        };
        let note = files
            .read(CHECKPOINT_FILE, MAX_NOTE_BYTES as u64)?
            .ok_or_else(|| LedgerError::NotALedger(PathBuf::from(files.describe())))?;
        let checkpoint = Checkpoint::open(&note, &key)?;
        Ok(Ledger {
            dir: files
                .folder()
                .map_or_else(|| PathBuf::from(files.describe()), Path::to_path_buf),
            files,
            config,
            key,
            note,
            checkpoint,
            _lock: lock,
        })
    }

    /// The ledger's folder (for a ledger opened at a URL, the URL as a path).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where its files are read from.
    pub fn files(&self) -> &Arc<dyn LogFiles> {
        &self.files
    }

    /// Its configuration (a ledger opened at a URL without a readable `ledger.json`, with
    /// the key given, has none).
    pub fn configuration(&self) -> Option<&Config> {
        self.config.as_ref()
    }

    /// Its configuration.
    ///
    /// # Panics
    ///
    /// For a ledger opened at a URL without a readable `ledger.json` (use
    /// [`Ledger::configuration`]); a folder always has one.
    pub fn config(&self) -> &Config {
        self.config
            .as_ref()
            .expect("a ledger folder has its configuration")
    }

    /// The key its checkpoint was checked with.
    pub fn key(&self) -> &VerifierKey {
        &self.key
    }

    /// The current checkpoint.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// The current checkpoint's signed note, as stored.
    pub fn checkpoint_note(&self) -> &[u8] {
        &self.note
    }

    /// The index of the first leaf whose data is `leaf`, if the tree holds it.
    ///
    /// # Errors
    ///
    /// [`LedgerError::Io`] or [`LedgerError::BadTile`] when a level-0 tile cannot be read or is
    /// malformed.
    pub fn find(&self, leaf: &[u8]) -> Result<Option<u64>> {
        Ok(find_leaves_in(&*self.files, self.checkpoint.size, &[leaf_hash(leaf)])?[0])
    }

    /// The inclusion proof of leaf `index` in the current tree.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadProof`] when `index` is not below the tree size; [`LedgerError::Io`] or
    /// [`LedgerError::BadTile`] when a tile cannot be read or is malformed.
    pub fn inclusion_proof(&self, index: u64) -> Result<InclusionProof> {
        let size = self.checkpoint.size;
        if index >= size {
            return Err(LedgerError::BadProof(format!(
                "leaf {index} is not in a tree of {size}"
            )));
        }
        let mut tiles = TileReader::over(Box::new(&*self.files), size);
        let hashes = merkle::inclusion_proof(&mut tiles, index, size)?;
        Ok(InclusionProof {
            index,
            tree_size: size,
            hashes: encode_hashes(&hashes),
        })
    }

    /// The consistency proof from the tree of `from` leaves to the current one.
    ///
    /// # Errors
    ///
    /// [`LedgerError::BadProof`] when `from` is 0 or larger than the tree; [`LedgerError::Io`]
    /// or [`LedgerError::BadTile`] when a tile cannot be read or is malformed.
    pub fn consistency_proof(&self, from: u64) -> Result<ConsistencyProof> {
        let size = self.checkpoint.size;
        if from == 0 || from > size {
            return Err(LedgerError::BadProof(format!(
                "--from must be between 1 and the tree size {size}, not {from}"
            )));
        }
        let mut tiles = TileReader::over(Box::new(&*self.files), size);
        let hashes = merkle::consistency_proof(&mut tiles, from, size)?;
        Ok(ConsistencyProof {
            hashes: encode_hashes(&hashes),
        })
    }
}

/// For each of `wanted` (leaf hashes), the index of the first leaf of the tree of `size`
/// with that hash, read from the level-0 tiles of the folder `dir`.
pub(crate) fn find_leaves(dir: &Path, size: u64, wanted: &[Hash]) -> Result<Vec<Option<u64>>> {
    find_leaves_in(&Folder::new(dir), size, wanted)
}

/// [`find_leaves`] of a ledger wherever it is.
pub(crate) fn find_leaves_in(
    files: &dyn LogFiles,
    size: u64,
    wanted: &[Hash],
) -> Result<Vec<Option<u64>>> {
    let mut found = vec![None; wanted.len()];
    // Each wanted hash's positions in `wanted`: one lookup per stored hash, not a
    // comparison with every wanted one.
    let mut positions: std::collections::HashMap<&Hash, Vec<usize>> =
        std::collections::HashMap::with_capacity(wanted.len());
    for (i, w) in wanted.iter().enumerate() {
        positions.entry(w).or_default().push(i);
    }
    let mut index = 0u64;
    while !positions.is_empty() {
        let Some(width) = width_at(size, 0, index) else {
            break;
        };
        let id = TileId {
            kind: TileKind::Hashes(0),
            index,
            width,
        };
        for (i, h) in read_hashes_from(files, id)?.iter().enumerate() {
            if let Some(slots) = positions.remove(h) {
                for slot in slots {
                    found[slot] = Some(index * 256 + i as u64);
                }
            }
        }
        index += 1;
    }
    Ok(found)
}
