//! SIGKILL at any moment of an add: a child process (this test executable, re-run as
//! `crash_child_add`) adds leaves one or a few at a time, and is killed at a random
//! instant, many times over. After each kill the log must verify (a torn tail is at most
//! a warning), its checkpoint must never go back, and it must hold exactly the leaves
//! added so far, in order (none lost, none out of place); the next child's first add
//! removes a torn tail before writing. The number of kills is `PROVRUN_LEDGER_KILLS`
//! (default 40); `PROVRUN_CRASH_SEED` repeats a schedule.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use provrun_ledger::*;

use crate::common::{leaf, new_ledger};

const CHILD_ENV: &str = "PROVRUN_LEDGER_CRASH_CHILD";

fn child_test() -> &'static str {
    let path = concat!(module_path!(), "::crash_child_add");
    path.split_once("::").map_or(path, |(_krate, below)| below)
}

/// Not a test on its own: the child. `PROVRUN_LEDGER_CRASH_CHILD=DIR` adds leaves from
/// the ledger's current size on, in adds of 1 to 3, until killed (or 100,000 leaves).
/// It makes the file `DIR.started` first, so the parent's clock starts when it does.
#[test]
fn crash_child_add() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    std::fs::write(started(dir), "").unwrap();
    let mut next = Ledger::open(dir, None).unwrap().checkpoint().size;
    let mut step = 0u64;
    while next < 100_000 {
        let n = 1 + step % 3;
        let leaves: Vec<Vec<u8>> = (next..next + n).map(leaf).collect();
        let out = add_leaves(dir, &leaves, None).unwrap();
        if !out.repaired.is_empty() {
            println!("REPAIRED {}", out.repaired.len());
        }
        next += n;
        step += 1;
    }
}

/// The file a child makes when it starts.
fn started(dir: &Path) -> std::path::PathBuf {
    dir.with_extension("started")
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The log verifies, and holds exactly leaves `0..size` in order.
fn check(dir: &Path, at_least: u64) -> u64 {
    let report = verify_ledger(dir, None);
    assert!(report.ok, "CORRUPT after a kill: {report:#?}");
    let ledger = Ledger::open(dir, None).unwrap();
    let size = ledger.checkpoint().size;
    assert!(
        size >= at_least,
        "the checkpoint went back from {at_least} to {size}"
    );
    for i in (0..size).step_by(7).chain(size.checked_sub(1)) {
        assert_eq!(
            ledger.find(&leaf(i)).unwrap(),
            Some(i),
            "leaf {i} of {size}"
        );
    }
    assert_eq!(ledger.find(&leaf(size)).unwrap(), None);
    size
}

#[test]
fn a_sigkill_at_any_moment_of_an_add_leaves_a_log_that_verifies() {
    let kills: u64 = std::env::var("PROVRUN_LEDGER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seed = std::env::var("PROVRUN_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("ledger crash test: {kills} kills, PROVRUN_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = new_ledger(tmp.path());
    let mut size = 0u64;
    let mut torn_seen = 0;
    for _ in 0..kills {
        let _ = std::fs::remove_file(started(&dir));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", child_test(), "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !started(&dir).exists() {
            assert!(Instant::now() < deadline, "the child never started");
            std::thread::sleep(Duration::from_micros(200));
        }
        // Kill anywhere from before its first add to dozens of adds in.
        let wait = Duration::from_micros(rng.below(300_000));
        let start = Instant::now();
        while start.elapsed() < wait {
            std::thread::sleep(Duration::from_micros(200));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // What the killed add left beyond the checkpoint is a torn tail, never more.
        let report = verify_ledger(&dir, None);
        if report.checks.iter().any(|c| c.status == Status::Warn) {
            torn_seen += 1;
        }
        size = check(&dir, size);
    }
    eprintln!(
        "ledger crash test: {size} leaves after {kills} kills, {torn_seen} torn tail(s) seen and repaired"
    );
    // A last add repairs whatever the last kill left, and the log is clean.
    let out = add_leaves(&dir, &[leaf(size)], None).unwrap();
    assert_eq!(out.added[0].index, size);
    let report = verify_ledger(&dir, None);
    assert!(
        report.checks.iter().all(|c| c.status == Status::Pass),
        "{report:#?}"
    );
    assert!(size > 0, "no child ever added a leaf");
}
