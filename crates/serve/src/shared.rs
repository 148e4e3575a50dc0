//! What replicas share when the store is a bucket (`s3://` or `file://`): everything one
//! `provrun serve` needs to know of the others' runs lives in the store beside the bundles,
//! written only with create-if-absent (`If-None-Match: *`), so no object is ever replaced
//! and any store that makes objects conditionally serves (docs/serve.md, "Replicas"):
//!
//! - `claims/run/<ID>`: the bundle id `ID` is taken. A new run's id is the first request's
//!   that makes this object; the others get a generated id.
//! - `threads/<THREAD>/<N>.json`: turn `N` (10 digits, from 1) of the thread is taken by a
//!   run (new or resumed). Made before the run starts: two replicas cannot both take turn
//!   `N`, so a thread has one run in flight, and an answer to an interrupt resumes once.
//! - `threads/<THREAD>/<N>.end.json`: turn `N` is over, and the thread's last run is the one
//!   named there (or none). A turn without its end is a run in flight.
//! - `index/<ID>/<MILLIS>-<SHA>.json`: one ended run segment of bundle `ID` (an index
//!   line, as `index.jsonl` holds), `MILLIS` its end (Unix milliseconds, 16 digits) and
//!   `SHA` the first 16 hex digits of its statement's SHA-256. The greatest key of an id is
//!   its latest segment.
//! - `threads/<THREAD>/<N>.lease/<K>.json`: the `K`th lease (10 digits, from 1) on the run
//!   of turn `N`: the replica holding it, the run, and until when. The holder makes the next
//!   one every third of its lease; a turn whose latest lease expired (its replica lost) is
//!   taken over by the replica that makes the next lease, which ends the run `failed`.
//! - `live/<ID>/<K>.tar`: the bundle `ID` as its run goes on (`K` 10 digits, the latest
//!   kept): every step recorded before a replica is lost is in the store.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use provrun_store::Objects;
use serde::{Deserialize, Serialize};

use crate::error::ServeError;
use crate::index::Entry;

/// The largest shared object read (a turn, an end, an index entry with its summary).
const MAX_OBJECT: u64 = 256 * 1024;

/// A thread's last ended run, as the index, the thread's last turn or the run's end says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LastRun {
    pub(crate) id: String,
    pub(crate) agent: String,
    pub(crate) status: String,
    pub(crate) statement_sha256: String,
}

impl From<&Entry> for LastRun {
    fn from(e: &Entry) -> Self {
        Self {
            id: e.id.clone(),
            agent: e.agent.clone(),
            status: e.status.clone(),
            statement_sha256: e.statement_sha256.clone(),
        }
    }
}

/// `threads/<THREAD>/<N>.json`: who took the turn.
#[derive(Debug, Serialize)]
struct TurnTaken<'a> {
    v: u32,
    /// The replica's address.
    server: &'a str,
    /// When (RFC 3339).
    at: String,
}

/// `threads/<THREAD>/<N>.end.json`: the thread's last run after the turn.
#[derive(Debug, Serialize, Deserialize)]
struct TurnEnded {
    v: u32,
    last: Option<LastRun>,
}

/// `threads/<THREAD>/<N>.lease/<K>.json`: a replica's hold on the run of turn `N`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Lease {
    pub(crate) v: u32,
    /// The replica holding the run (its address).
    pub(crate) server: String,
    /// The run's bundle id.
    pub(crate) run: String,
    /// The run's agent.
    pub(crate) agent: String,
    /// Until when the hold lasts unless a next lease is made (RFC 3339).
    pub(crate) until: String,
}

/// A turn whose replica was lost: its run is to be ended by whoever takes it over.
#[derive(Debug, Clone)]
pub(crate) struct LostTurn {
    /// The turn.
    pub(crate) turn: u64,
    /// The number of its latest lease (0: none was made).
    pub(crate) lease_no: u64,
    /// Its latest lease, when one was made.
    pub(crate) lease: Option<Lease>,
    /// The replica lost (from the lease, else the turn).
    pub(crate) server: String,
}

/// A thread's state in the store.
#[derive(Debug)]
pub(crate) enum ThreadState {
    /// Turn `turn` is taken and not over: a run of the thread is in flight.
    Busy,
    /// The run of the thread's last turn was held by a replica whose lease expired.
    Lost(LostTurn),
    /// The thread's last turn (0: none yet) and last run.
    Free { turn: u64, last: Option<LastRun> },
}

/// The objects replicas share, below the bucket store's prefix.
#[derive(Debug)]
pub(crate) struct Shared {
    objects: Objects,
    /// This replica, as turns name it.
    server: String,
    /// Index objects already read, by key (they are never replaced).
    read: Mutex<HashMap<String, Entry>>,
    /// How long this replica's leases last.
    lease: Duration,
}

fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

fn turn_key(thread: &str, turn: u64) -> String {
    format!("threads/{thread}/{turn:010}.json")
}

fn end_key(thread: &str, turn: u64) -> String {
    format!("threads/{thread}/{turn:010}.end.json")
}

fn lease_key(thread: &str, turn: u64, k: u64) -> String {
    format!("threads/{thread}/{turn:010}.lease/{k:010}.json")
}

fn parse_time(text: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(text)
        .ok()
        .or_else(|| humantime::parse_rfc3339(text).ok())
}

/// `threads/<THREAD>/<N>.json` as read back.
#[derive(Debug, Deserialize)]
struct TurnRead {
    #[serde(default)]
    server: String,
    at: String,
}

fn bad_object(objects: &Objects, key: &str, why: impl std::fmt::Display) -> ServeError {
    ServeError::Shared(format!(
        "the store's object `{}/{key}` is not what a server writes: {why}",
        objects.url()
    ))
}

impl Shared {
    /// The shared objects of the bucket store at `url`, for the replica `server`.
    pub(crate) fn open(url: &str, server: String, lease: Duration) -> Result<Self, ServeError> {
        Ok(Self {
            objects: Objects::open(url)?,
            server,
            read: Mutex::new(HashMap::new()),
            lease,
        })
    }

    /// This replica, as turns and leases name it.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// Take the bundle id `id` for a new run: `true` when this call made its claim.
    pub(crate) async fn claim_id(&self, id: &str) -> Result<bool, ServeError> {
        let body = serde_json::to_vec(&TurnTaken {
            v: 1,
            server: &self.server,
            at: now(),
        })
        .unwrap_or_default();
        Ok(self
            .objects
            .create(&format!("claims/run/{id}"), body)
            .await?)
    }

    /// Let the id go again (its request was refused before its run began).
    pub(crate) async fn release_id(&self, id: &str) -> Result<(), ServeError> {
        Ok(self.objects.delete(&format!("claims/run/{id}")).await?)
    }

    /// The thread's last turn and whether it is over.
    pub(crate) async fn thread(&self, thread: &str) -> Result<ThreadState, ServeError> {
        let keys = self.objects.list(&format!("threads/{thread}")).await?;
        let prefix = format!("threads/{thread}/");
        let mut last_turn = 0u64;
        for key in &keys {
            let Some(name) = key.strip_prefix(&prefix) else {
                continue;
            };
            if let Some(n) = name.strip_suffix(".json").filter(|n| !n.contains('.'))
                && let Ok(n) = n.parse::<u64>()
            {
                last_turn = last_turn.max(n);
            }
        }
        if last_turn == 0 {
            return Ok(ThreadState::Free {
                turn: 0,
                last: None,
            });
        }
        let key = end_key(thread, last_turn);
        match self.objects.get(&key, MAX_OBJECT).await? {
            None => self.in_flight(thread, last_turn, &keys).await,
            Some(bytes) => {
                let ended: TurnEnded = serde_json::from_slice(&bytes)
                    .map_err(|e| bad_object(&self.objects, &key, e))?;
                if let Some(last) = &ended.last
                    && provrun_store::check_id(&last.id).is_err()
                {
                    return Err(bad_object(&self.objects, &key, "the run's id is not safe"));
                }
                Ok(ThreadState::Free {
                    turn: last_turn,
                    last: ended.last,
                })
            }
        }
    }

    /// Turn `turn` has no end: busy while its latest lease (or, before any, the turn
    /// itself, for two leases' time) holds, else lost.
    async fn in_flight(
        &self,
        thread: &str,
        turn: u64,
        keys: &[String],
    ) -> Result<ThreadState, ServeError> {
        let prefix = format!("threads/{thread}/{turn:010}.lease/");
        let lease_no = keys
            .iter()
            .filter_map(|k| {
                k.strip_prefix(&prefix)?
                    .strip_suffix(".json")?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or(0);
        let now = SystemTime::now();
        if lease_no == 0 {
            let key = turn_key(thread, turn);
            let Some(bytes) = self.objects.get(&key, MAX_OBJECT).await? else {
                return Ok(ThreadState::Busy);
            };
            let taken: TurnRead =
                serde_json::from_slice(&bytes).map_err(|e| bad_object(&self.objects, &key, e))?;
            let at = parse_time(&taken.at)
                .ok_or_else(|| bad_object(&self.objects, &key, "`at` is not a time"))?;
            return Ok(if at + 2 * self.lease < now {
                ThreadState::Lost(LostTurn {
                    turn,
                    lease_no,
                    lease: None,
                    server: taken.server,
                })
            } else {
                ThreadState::Busy
            });
        }
        let key = lease_key(thread, turn, lease_no);
        let Some(bytes) = self.objects.get(&key, MAX_OBJECT).await? else {
            return Ok(ThreadState::Busy);
        };
        let lease: Lease =
            serde_json::from_slice(&bytes).map_err(|e| bad_object(&self.objects, &key, e))?;
        if provrun_store::check_id(&lease.run).is_err() {
            return Err(bad_object(&self.objects, &key, "the run's id is not safe"));
        }
        let until = parse_time(&lease.until)
            .ok_or_else(|| bad_object(&self.objects, &key, "`until` is not a time"))?;
        Ok(if until < now {
            ThreadState::Lost(LostTurn {
                turn,
                lease_no,
                server: lease.server.clone(),
                lease: Some(lease),
            })
        } else {
            ThreadState::Busy
        })
    }

    /// Make lease `k` of turn `turn` on the run `run` of `agent`, held by this replica for
    /// its lease time: `false` when lease `k` exists (another replica took the run over, or
    /// renewed it first).
    pub(crate) async fn make_lease(
        &self,
        thread: &str,
        turn: u64,
        k: u64,
        run: &str,
        agent: &str,
    ) -> Result<bool, ServeError> {
        let until = humantime::format_rfc3339_millis(SystemTime::now() + self.lease).to_string();
        let body = serde_json::to_vec(&Lease {
            v: 1,
            server: self.server.clone(),
            run: run.to_string(),
            agent: agent.to_string(),
            until,
        })
        .unwrap_or_default();
        Ok(self
            .objects
            .create(&lease_key(thread, turn, k), body)
            .await?)
    }

    /// The threads whose last turn has no end (runs in flight, or lost), from one listing
    /// of `threads/`.
    pub(crate) async fn unended_threads(&self) -> Result<Vec<String>, ServeError> {
        let keys = self.objects.list("threads").await?;
        // Per thread: its greatest turn, and whether that turn has its end.
        let mut last: HashMap<&str, (u64, bool)> = HashMap::new();
        for key in &keys {
            let mut parts = key.split('/');
            let (Some("threads"), Some(thread), Some(name), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (turn, end) = match name.strip_suffix(".end.json") {
                Some(n) => (n, true),
                None => match name.strip_suffix(".json") {
                    Some(n) => (n, false),
                    None => continue,
                },
            };
            let Ok(turn) = turn.parse::<u64>() else {
                continue;
            };
            let slot = last.entry(thread).or_insert((0, false));
            if turn > slot.0 {
                *slot = (turn, end);
            } else if turn == slot.0 {
                slot.1 |= end;
            }
        }
        Ok(last
            .into_iter()
            .filter(|(_, (turn, ended))| *turn > 0 && !ended)
            .map(|(thread, _)| thread.to_string())
            .collect())
    }

    /// Remove lease `k` of turn `turn` (a later one was made by its holder).
    pub(crate) async fn drop_lease(
        &self,
        thread: &str,
        turn: u64,
        k: u64,
    ) -> Result<(), ServeError> {
        Ok(self.objects.delete(&lease_key(thread, turn, k)).await?)
    }

    /// The thread's last run before turn `turn` (as turn `turn - 1`'s end names it).
    pub(crate) async fn last_before(
        &self,
        thread: &str,
        turn: u64,
    ) -> Result<Option<LastRun>, ServeError> {
        if turn <= 1 {
            return Ok(None);
        }
        let key = end_key(thread, turn - 1);
        let Some(bytes) = self.objects.get(&key, MAX_OBJECT).await? else {
            return Ok(None);
        };
        let ended: TurnEnded =
            serde_json::from_slice(&bytes).map_err(|e| bad_object(&self.objects, &key, e))?;
        Ok(ended
            .last
            .filter(|l| provrun_store::check_id(&l.id).is_ok()))
    }

    /// Put checkpoint `k` of the bundle `id` (a tar of it as its run goes on), then remove
    /// the one before.
    pub(crate) async fn checkpoint(
        &self,
        id: &str,
        k: u64,
        tar: Vec<u8>,
    ) -> Result<(), ServeError> {
        let key = format!("live/{id}/{k:010}.tar");
        if !self.objects.create(&key, tar).await? {
            return Err(bad_object(&self.objects, &key, "it exists already"));
        }
        if k > 1 {
            self.objects
                .delete(&format!("live/{id}/{:010}.tar", k - 1))
                .await?;
        }
        Ok(())
    }

    /// The number the bundle `id`'s next checkpoint takes: one past the greatest in the
    /// store (a segment's checkpoints left behind when they could not be deleted stay
    /// older than the next segment's).
    pub(crate) async fn next_checkpoint(&self, id: &str) -> Result<u64, ServeError> {
        let prefix = format!("live/{id}/");
        Ok(self
            .objects
            .list(&format!("live/{id}"))
            .await?
            .iter()
            .filter_map(|k| {
                k.strip_prefix(&prefix)?
                    .strip_suffix(".tar")?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or(0)
            + 1)
    }

    /// The latest checkpoint of the bundle `id`, if any.
    pub(crate) async fn latest_checkpoint(&self, id: &str) -> Result<Option<Vec<u8>>, ServeError> {
        let keys = self.objects.list(&format!("live/{id}")).await?;
        let prefix = format!("live/{id}/");
        let Some(key) = keys
            .iter()
            .filter(|k| k.strip_prefix(&prefix).is_some_and(|n| n.ends_with(".tar")))
            .max()
        else {
            return Ok(None);
        };
        Ok(self.objects.get(key, u64::MAX).await?)
    }

    /// Remove the bundle `id`'s checkpoints (its segment ended and its tar is stored).
    pub(crate) async fn clear_checkpoints(&self, id: &str) -> Result<(), ServeError> {
        for key in self.objects.list(&format!("live/{id}")).await? {
            self.objects.delete(&key).await?;
        }
        Ok(())
    }

    /// Take turn `turn` of the thread: `false` when another request took it first.
    pub(crate) async fn take_turn(&self, thread: &str, turn: u64) -> Result<bool, ServeError> {
        let body = serde_json::to_vec(&TurnTaken {
            v: 1,
            server: &self.server,
            at: now(),
        })
        .unwrap_or_default();
        Ok(self.objects.create(&turn_key(thread, turn), body).await?)
    }

    /// End turn `turn` of the thread with `last` as its last run.
    pub(crate) async fn end_turn(
        &self,
        thread: &str,
        turn: u64,
        last: Option<LastRun>,
    ) -> Result<(), ServeError> {
        let body = serde_json::to_vec(&TurnEnded { v: 1, last }).unwrap_or_default();
        self.objects.create(&end_key(thread, turn), body).await?;
        Ok(())
    }

    /// Write one ended segment's index entry.
    pub(crate) async fn add_entry(&self, entry: &Entry) -> Result<(), ServeError> {
        let ended = humantime::parse_rfc3339_weak(&entry.ended)
            .ok()
            .or_else(|| humantime::parse_rfc3339(&entry.ended).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis());
        let sha: String = entry.statement_sha256.chars().take(16).collect();
        let key = format!("index/{}/{ended:016}-{sha}.json", entry.id);
        let body = serde_json::to_vec(entry).unwrap_or_default();
        self.objects.create(&key, body).await?;
        Ok(())
    }

    /// Every run's latest entry, from every replica. Objects that are not entries are
    /// skipped (logged), as lines of `index.jsonl` that do not parse are.
    pub(crate) async fn entries(&self) -> Result<Vec<Entry>, ServeError> {
        let keys = self.objects.list("index").await?;
        // The greatest key of each id: its latest segment.
        let mut latest: HashMap<&str, &str> = HashMap::new();
        for key in &keys {
            let mut parts = key.split('/');
            let (Some("index"), Some(id), Some(_), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let slot = latest.entry(id).or_insert(key);
            if *slot < key.as_str() {
                *slot = key;
            }
        }
        let mut out = Vec::with_capacity(latest.len());
        let missing: Vec<&str> = {
            let read = self
                .read
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            latest
                .values()
                .filter(|k| !read.contains_key(**k))
                .copied()
                .collect()
        };
        for chunk in missing.chunks(16) {
            let got =
                futures_util::future::join_all(chunk.iter().map(|k| self.read_entry(k))).await;
            let mut read = self
                .read
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (key, entry) in chunk.iter().zip(got) {
                if let Some(entry) = entry? {
                    read.insert((*key).to_string(), entry);
                }
            }
        }
        let read = self
            .read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (id, key) in latest {
            if let Some(entry) = read.get(key).filter(|e| e.id == id) {
                out.push(entry.clone());
            }
        }
        Ok(out)
    }

    async fn read_entry(&self, key: &str) -> Result<Option<Entry>, ServeError> {
        let Some(bytes) = self.objects.get(key, MAX_OBJECT).await? else {
            return Ok(None);
        };
        match serde_json::from_slice::<Entry>(&bytes) {
            Ok(e) if provrun_store::check_id(&e.id).is_ok() => Ok(Some(e)),
            Ok(_) => {
                tracing::warn!(key, "an index object names an unsafe id: skipped");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(key, "an index object does not parse: skipped ({e})");
                Ok(None)
            }
        }
    }

    /// The bytes of the bundle `id`'s tar in the store, if there is one.
    pub(crate) async fn bundle_tar(&self, id: &str) -> Result<Option<Vec<u8>>, ServeError> {
        Ok(self.objects.get(&format!("{id}.tar"), u64::MAX).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(dir: &std::path::Path) -> Shared {
        let url = url_of(dir);
        Shared::open(&url, "127.0.0.1:1".into(), Duration::from_secs(30)).unwrap()
    }

    fn url_of(dir: &std::path::Path) -> String {
        format!("file://{}", dir.display())
    }

    fn entry(id: &str, ended: &str, status: &str, sha: &str) -> Entry {
        Entry {
            v: 1,
            id: id.into(),
            agent: "a".into(),
            thread: "t".into(),
            status: status.into(),
            started: "2026-01-01T00:00:00.000Z".into(),
            ended: ended.into(),
            duration_ms: 1,
            verified: true,
            statement_sha256: sha.into(),
            summary: None,
        }
    }

    #[tokio::test]
    async fn an_id_is_claimed_once_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (shared(dir.path()), shared(dir.path()));
        assert!(a.claim_id("r1").await.unwrap());
        assert!(!b.claim_id("r1").await.unwrap());
        a.release_id("r1").await.unwrap();
        assert!(b.claim_id("r1").await.unwrap());
    }

    #[tokio::test]
    async fn a_turn_is_taken_once_and_its_end_names_the_last_run() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (shared(dir.path()), shared(dir.path()));
        assert!(matches!(
            a.thread("t").await.unwrap(),
            ThreadState::Free {
                turn: 0,
                last: None
            }
        ));
        assert!(a.take_turn("t", 1).await.unwrap());
        assert!(!b.take_turn("t", 1).await.unwrap());
        assert!(matches!(b.thread("t").await.unwrap(), ThreadState::Busy));
        // Another thread whose name starts the same is another thread.
        assert!(matches!(
            b.thread("t2").await.unwrap(),
            ThreadState::Free { turn: 0, .. }
        ));
        let last = LastRun {
            id: "r1".into(),
            agent: "a".into(),
            status: "paused".into(),
            statement_sha256: "00".into(),
        };
        a.end_turn("t", 1, Some(last.clone())).await.unwrap();
        match b.thread("t").await.unwrap() {
            ThreadState::Free { turn, last: got } => {
                assert_eq!((turn, got), (1, Some(last)));
            }
            ThreadState::Busy | ThreadState::Lost(_) => panic!("the turn ended"),
        }
    }

    #[tokio::test]
    async fn a_turn_is_lost_once_its_latest_lease_runs_out_and_taken_over_once() {
        let dir = tempfile::tempdir().unwrap();
        let url = url_of(dir.path());
        let short = Shared::open(&url, "127.0.0.1:1".into(), Duration::from_millis(50)).unwrap();
        let (b, c) = (shared(dir.path()), shared(dir.path()));
        assert!(short.take_turn("t", 1).await.unwrap());
        assert!(short.make_lease("t", 1, 1, "r1", "a").await.unwrap());
        // Renewed: the latest lease is the one that counts.
        assert!(short.make_lease("t", 1, 2, "r1", "a").await.unwrap());
        assert!(!b.make_lease("t", 1, 2, "r1", "a").await.unwrap());
        tokio::time::sleep(Duration::from_millis(80)).await;
        let ThreadState::Lost(lost) = b.thread("t").await.unwrap() else {
            panic!("the lease ran out")
        };
        assert_eq!((lost.turn, lost.lease_no), (1, 2));
        let lease = lost.lease.unwrap();
        assert_eq!(
            (lease.run.as_str(), lease.server.as_str()),
            ("r1", "127.0.0.1:1")
        );
        // Of two replicas taking it over, one makes the next lease; then it is busy (held
        // by the taker) until the taker ends the turn.
        assert!(b.make_lease("t", 1, 3, "r1", "a").await.unwrap());
        assert!(!c.make_lease("t", 1, 3, "r1", "a").await.unwrap());
        assert!(matches!(c.thread("t").await.unwrap(), ThreadState::Busy));
        // Checkpoints: the latest kept, all removed at the end.
        b.checkpoint("r1", 1, b"one".to_vec()).await.unwrap();
        b.checkpoint("r1", 2, b"two".to_vec()).await.unwrap();
        assert_eq!(c.latest_checkpoint("r1").await.unwrap().unwrap(), b"two");
        assert_eq!(c.next_checkpoint("r1").await.unwrap(), 3);
        assert!(b.checkpoint("r1", 2, b"again".to_vec()).await.is_err());
        c.clear_checkpoints("r1").await.unwrap();
        assert_eq!(c.latest_checkpoint("r1").await.unwrap(), None);
        b.end_turn("t", 1, None).await.unwrap();
        assert!(matches!(
            c.thread("t").await.unwrap(),
            ThreadState::Free {
                turn: 1,
                last: None
            }
        ));
    }

    #[tokio::test]
    async fn the_threads_whose_last_turn_has_no_end_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let a = shared(dir.path());
        for (thread, turns, ended) in [("done", 2, 2), ("open", 3, 2), ("new", 1, 0)] {
            for n in 1..=turns {
                assert!(a.take_turn(thread, n).await.unwrap());
                if n <= ended {
                    a.end_turn(thread, n, None).await.unwrap();
                }
            }
        }
        assert!(a.make_lease("open", 3, 1, "r", "a").await.unwrap());
        let mut open = a.unended_threads().await.unwrap();
        open.sort();
        assert_eq!(open, ["new", "open"]);
    }

    #[tokio::test]
    async fn a_lease_that_is_no_servers_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let a = shared(dir.path());
        assert!(a.take_turn("t", 1).await.unwrap());
        let objects = Objects::open(&url_of(dir.path())).unwrap();
        for (k, bad) in [
            &b"{not json"[..],
            br#"{"v":1,"server":"x","run":"../x","agent":"a","until":"2026-01-01T00:00:00Z"}"#,
            br#"{"v":1,"server":"x","run":"r","agent":"a","until":"soon"}"#,
        ]
        .into_iter()
        .enumerate()
        {
            let key = lease_key("t", 1, k as u64 + 1);
            assert!(objects.create(&key, bad.to_vec()).await.unwrap());
            assert!(matches!(
                a.thread("t").await.unwrap_err(),
                ServeError::Shared(_)
            ));
        }
    }

    #[tokio::test]
    async fn a_turn_end_that_is_no_servers_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let a = shared(dir.path());
        assert!(a.take_turn("t", 1).await.unwrap());
        let objects = Objects::open(&url_of(dir.path())).unwrap();
        for bad in [
            &b"{not json"[..],
            br#"{"v":1,"last":{"id":"../x","agent":"a","status":"finished","statement_sha256":"0"}}"#,
        ] {
            let _ = objects.delete(&end_key("t", 1)).await;
            assert!(objects.create(&end_key("t", 1), bad.to_vec()).await.unwrap());
            assert!(matches!(
                a.thread("t").await.unwrap_err(),
                ServeError::Shared(_)
            ));
        }
    }

    #[tokio::test]
    async fn every_replica_lists_each_runs_latest_segment_and_skips_what_is_no_entry() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (shared(dir.path()), shared(dir.path()));
        a.add_entry(&entry("r1", "2026-01-01T00:00:01.000Z", "paused", "aa"))
            .await
            .unwrap();
        b.add_entry(&entry("r2", "2026-01-01T00:00:02.000Z", "finished", "bb"))
            .await
            .unwrap();
        let objects = Objects::open(&url_of(dir.path())).unwrap();
        objects
            .create("index/r3/x.json", b"{torn".to_vec())
            .await
            .unwrap();
        let mut ids: Vec<(String, String)> = b
            .entries()
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.id, e.status))
            .collect();
        ids.sort();
        assert_eq!(
            ids,
            [
                ("r1".into(), "paused".into()),
                ("r2".into(), "finished".into())
            ]
        );
        // The resume ends it on the other replica: its later segment wins everywhere.
        b.add_entry(&entry("r1", "2026-01-01T00:00:09.000Z", "finished", "cc"))
            .await
            .unwrap();
        for s in [&a, &b] {
            let r1 = s
                .entries()
                .await
                .unwrap()
                .into_iter()
                .find(|e| e.id == "r1")
                .unwrap();
            assert_eq!(
                (r1.status.as_str(), r1.statement_sha256.as_str()),
                ("finished", "cc")
            );
        }
    }
}
