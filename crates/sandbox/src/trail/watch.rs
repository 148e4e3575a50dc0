//! The runtime's side of a trail: the tracer started for one confined command, its
//! records read as they come (on a thread of their own), masked and capped into
//! [`ObservedProcess`]es, and the [`Trail`] when the command is over.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _};
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::text::{cut_at, mask_secrets};
use super::wire::{Record, Start};
use super::{
    ArgvCut, MAX_RECORDED_ARG_BYTES, MAX_RECORDED_ARGS, MAX_RECORDED_ARGV_BYTES, ObservedProcess,
    Trail, TrailSummary,
};

/// How long a command waits for the tracer to hold it before it is refused.
const ATTACH_WAIT: Duration = Duration::from_secs(20);
/// How long the end of a trail waits for the digests still being made (large
/// executables), after its processes are gone.
const HASH_WAIT: Duration = Duration::from_secs(120);
/// How much of the tracer's stderr is kept, to say why it failed.
const TRACER_STDERR_CAP: u64 = 4096;

/// What a command needs to be traced: the stub in front of it and the tracer beside it.
#[derive(Debug, Clone)]
pub(crate) struct TrailPlan {
    /// The helper's host path: the tracer runs it (outside the sandbox).
    pub helper: PathBuf,
    /// The name the helper answers to (`provrun-confine`).
    pub arg0: &'static str,
    /// Device and inode of the sandbox's own executables (bubblewrap, the helper).
    pub machinery: Vec<(u64, u64)>,
    /// Strings masked in the records.
    pub secrets: Arc<Vec<String>>,
    /// The most images recorded.
    pub max: u64,
}

impl TrailPlan {
    /// The plan for a command run by `helper` (its host path, started as `arg0`), under
    /// `bwrap` when given.
    pub(crate) fn new(
        helper: &Path,
        arg0: &'static str,
        bwrap: Option<&Path>,
        secrets: Arc<Vec<String>>,
    ) -> Self {
        let machinery = [Some(helper), bwrap]
            .into_iter()
            .flatten()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        TrailPlan {
            helper: helper.to_path_buf(),
            arg0,
            machinery,
            secrets,
            max: super::MAX_TRAIL_PROCESSES,
        }
    }

    /// The stub's arguments in front of `program` (reached at `stub` by the command's
    /// user), which then runs under the name `arg0` when given.
    pub(crate) fn stub_args(
        stub: &Path,
        arg0: Option<&str>,
        program: &Path,
    ) -> (PathBuf, Vec<std::ffi::OsString>) {
        let mut args: Vec<std::ffi::OsString> = vec![super::STUB_FLAG.into()];
        if let Some(name) = arg0 {
            args.extend(["--arg0".into(), name.into()]);
        }
        args.extend(["--".into(), program.as_os_str().to_owned()]);
        (stub.to_path_buf(), args)
    }
}

/// The records read so far.
#[derive(Debug, Default)]
struct Assembly {
    attached: Option<Result<(), String>>,
    open: BTreeMap<u64, ObservedProcess>,
    finished: Vec<ObservedProcess>,
    /// Images whose executable's digest is still to come.
    hash_pending: std::collections::BTreeSet<u64>,
    /// Ended images waiting for their digest.
    awaiting_hash: BTreeMap<u64, ObservedProcess>,
    recorded: u64,
    done: Option<(u64, u64, u64, Option<String>)>,
    /// The tracer's own CPU time, from its last line.
    cpu_ms: Option<u64>,
    /// The counts the tracer last wrote (not recorded, execs, forks).
    counts: (u64, u64, u64),
    unreadable: u64,
    /// The reader reached the end of the tracer's output.
    ended: bool,
}

/// A tracer following one command.
#[derive(Debug)]
pub(crate) struct TrailWatch {
    tracer: Child,
    state: Arc<(Mutex<Assembly>, Condvar)>,
    reader: Option<std::thread::JoinHandle<()>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl TrailWatch {
    /// Starts the tracer on the stopped stub `pid` and waits until it holds it.
    ///
    /// # Errors
    ///
    /// Why the tracer could not start or attach (the stub is then still stopped: the
    /// caller kills it).
    pub(crate) fn start(plan: &TrailPlan, pid: u32) -> Result<TrailWatch, String> {
        let mut cmd = Command::new(&plan.helper);
        cmd.arg0(plan.arg0)
            .arg(super::TRACER_FLAG)
            .args(["--pid".to_owned(), pid.to_string()]);
        for (dev, ino) in &plan.machinery {
            cmd.args(["--machinery".to_owned(), format!("{dev}:{ino}")]);
        }
        cmd.args(["--max".to_owned(), plan.max.to_string()])
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Out of the terminal's reach: its signals are the runtime's to pass on.
            .process_group(0);
        let mut tracer = cmd
            .spawn()
            .map_err(|e| format!("the tracer cannot start: {e}"))?;
        let stdout = tracer.stdout.take();
        let stderr = tracer.stderr.take().map(|mut s| {
            std::thread::spawn(move || {
                // The head is kept; the rest is read and dropped, so the tracer never
                // blocks on a full pipe.
                let mut head = Vec::new();
                let _ = (&mut s).take(TRACER_STDERR_CAP).read_to_end(&mut head);
                let _ = std::io::copy(&mut s, &mut std::io::sink());
                String::from_utf8_lossy(&head).into_owned()
            })
        });
        let state = Arc::new((Mutex::new(Assembly::default()), Condvar::new()));
        let reader = stdout.map(|out| {
            let state = Arc::clone(&state);
            let secrets = Arc::clone(&plan.secrets);
            std::thread::spawn(move || read_records(out, &state, &secrets))
        });
        let mut watch = TrailWatch {
            tracer,
            state,
            reader,
            stderr,
        };
        match watch.wait_attached() {
            Ok(()) => Ok(watch),
            Err(e) => {
                let why = watch.stop();
                Err(match why {
                    Some(stderr) if !stderr.trim().is_empty() => {
                        format!("{e} ({})", stderr.trim())
                    }
                    _ => e,
                })
            }
        }
    }

    fn wait_attached(&self) -> Result<(), String> {
        let (lock, ready) = &*self.state;
        let deadline = Instant::now() + ATTACH_WAIT;
        let mut s = lock.lock().map_err(|_| "the trail's state is lost")?;
        loop {
            if let Some(result) = &s.attached {
                return result.clone();
            }
            if s.ended {
                return Err("the tracer ended before it attached".to_owned());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("the tracer did not attach in time".to_owned());
            }
            s = ready
                .wait_timeout(s, left)
                .map_err(|_| "the trail's state is lost")?
                .0;
        }
    }

    /// The images that have ended since the last call, in the order they began.
    pub(crate) fn take_finished(&self) -> Vec<ObservedProcess> {
        self.feed().take_finished()
    }

    /// A handle that takes the images that have ended, from any thread.
    pub(crate) fn feed(&self) -> TrailFeed {
        TrailFeed(Arc::clone(&self.state))
    }

    /// Waits up to `wait` for the tracer to see the last process end, then stops it; the
    /// images not taken yet (those still running, unended) and the summary.
    pub(crate) fn finish(mut self, wait: Duration) -> Trail {
        let mut deadline = Instant::now() + wait;
        // Once the tree is gone only digests are left to make: they are waited for longer.
        let hashing_deadline = Instant::now() + HASH_WAIT;
        loop {
            if Instant::now() >= deadline {
                let hashing = self
                    .state
                    .0
                    .lock()
                    .is_ok_and(|s| !s.hash_pending.is_empty());
                if hashing && Instant::now() < hashing_deadline {
                    deadline = Instant::now() + Duration::from_millis(100);
                } else {
                    break;
                }
            }
            if self.state.0.lock().is_ok_and(|s| s.ended) {
                break;
            }
            if let Ok(Some(_)) = self.tracer.try_wait() {
                // Gone: its last lines are still being read.
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let stderr = self.stop();
        let Ok(mut s) = self.state.0.lock() else {
            return Trail::default();
        };
        let mut processes = std::mem::take(&mut s.finished);
        let unhashed = std::mem::take(&mut s.awaiting_hash)
            .into_values()
            .chain(std::mem::take(&mut s.open).into_values())
            .map(|mut p| {
                if s.hash_pending.contains(&p.id) {
                    p.exe_error = Some("the tracer stopped before its digest was made".into());
                }
                p
            })
            .collect::<Vec<_>>();
        processes.extend(unhashed);
        processes.sort_by_key(|p| p.id);
        let (not_recorded, execs, forks, error) = s.done.clone().unwrap_or_default();
        let error = match (&s.done, error) {
            (None, _) => Some(match stderr {
                Some(text) if !text.trim().is_empty() => {
                    format!("the tracer stopped before the trail ended: {}", text.trim())
                }
                _ => "the tracer stopped before the trail ended".to_owned(),
            }),
            (Some(_), Some(e)) => Some(e),
            (Some(_), None) if s.unreadable > 0 => Some(format!(
                "{} of the tracer's records could not be read",
                s.unreadable
            )),
            (Some(_), None) => None,
        };
        Trail {
            processes,
            summary: TrailSummary {
                mechanism: "ptrace".to_owned(),
                processes: s.recorded,
                not_recorded,
                execs,
                forks,
                complete: error.is_none(),
                error,
                tracer_cpu_ms: s.cpu_ms,
            },
        }
    }

    /// Kills the tracer if it still runs and waits for it and its readers; its stderr.
    fn stop(&mut self) -> Option<String> {
        if let Ok(None) = self.tracer.try_wait() {
            let _ = self.tracer.kill();
        }
        let _ = self.tracer.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.stderr.take().and_then(|h| h.join().ok())
    }
}

impl Drop for TrailWatch {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A handle on a running trail, for a caller that records its processes while the
/// program runs (from another task than the one that waits for the program): each call of
/// [`TrailFeed::take_finished`] takes the processes that have ended since the last one.
/// The rest, and the summary, come when the program's trail is finished.
#[derive(Debug, Clone)]
pub struct TrailFeed(Arc<(Mutex<Assembly>, Condvar)>);

impl TrailFeed {
    /// The processes that have ended since the last call (through this handle or
    /// another), in the order they began.
    pub fn take_finished(&self) -> Vec<ObservedProcess> {
        let Ok(mut s) = self.0.0.lock() else {
            return Vec::new();
        };
        let mut done = std::mem::take(&mut s.finished);
        done.sort_by_key(|p| p.id);
        done
    }

    /// Waits up to `wait` until every digest being made has come (the executables of the
    /// images recorded so far are hashed off the tracer's loop); whether they all came.
    pub fn settle(&self, wait: Duration) -> bool {
        let (lock, ready) = &*self.0;
        let deadline = Instant::now() + wait;
        let Ok(mut s) = lock.lock() else {
            return false;
        };
        loop {
            if s.hash_pending.is_empty() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || s.ended {
                return false;
            }
            match ready.wait_timeout(s, left) {
                Ok((next, _)) => s = next,
                Err(_) => return false,
            }
        }
    }

    /// The processes still running (and those ended whose executable's digest is still
    /// being made), as they are now: not taken.
    pub fn running(&self) -> Vec<ObservedProcess> {
        self.0
            .0
            .lock()
            .map(|s| {
                s.awaiting_hash
                    .values()
                    .chain(s.open.values())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The trail's summary so far, for a program that still runs: what was recorded and
    /// counted until now, `complete` false and `error` saying the trail goes on.
    pub fn summary_so_far(&self) -> TrailSummary {
        let Ok(s) = self.0.0.lock() else {
            return TrailSummary::default();
        };
        let (not_recorded, execs, forks) = match &s.done {
            Some((n, e, f, _)) => (*n, *e, *f),
            None => s.counts,
        };
        TrailSummary {
            mechanism: "ptrace".to_owned(),
            processes: s.recorded,
            not_recorded,
            execs,
            forks,
            complete: false,
            error: Some(
                "the program was still running: its trail was read before its end".to_owned(),
            ),
            tracer_cpu_ms: None,
        }
    }
}

/// Reads the tracer's lines into `state` until its output ends.
fn read_records(
    out: std::process::ChildStdout,
    state: &(Mutex<Assembly>, Condvar),
    secrets: &[String],
) {
    let (lock, ready) = state;
    let mut lines = BufReader::with_capacity(64 * 1024, out);
    let mut line = Vec::new();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let record = serde_json::from_slice::<Record>(&line);
        let Ok(mut s) = lock.lock() else { break };
        match record {
            Ok(r) => apply(&mut s, r, secrets),
            // A torn last line of a killed tracer, or a bug: counted, never trusted.
            Err(_) => s.unreadable += 1,
        }
        ready.notify_all();
    }
    if let Ok(mut s) = lock.lock() {
        s.ended = true;
    }
    ready.notify_all();
}

fn apply(s: &mut Assembly, record: Record, secrets: &[String]) {
    match record {
        Record::Attached => s.attached = Some(Ok(())),
        Record::Failed { error } => s.attached = Some(Err(error)),
        Record::Start(start) => {
            s.recorded += 1;
            if start.hash_pending {
                s.hash_pending.insert(start.id);
            }
            let p = observed(start, secrets);
            s.open.insert(p.id, p);
        }
        Record::Hash {
            id,
            sha256,
            size,
            error,
        } => {
            s.hash_pending.remove(&id);
            let fill = |p: &mut ObservedProcess| {
                p.exe_sha256 = sha256;
                p.exe_size = size.or(p.exe_size);
                p.exe_error = error;
            };
            if let Some(p) = s.open.get_mut(&id) {
                fill(p);
            } else if let Some(mut p) = s.awaiting_hash.remove(&id) {
                fill(&mut p);
                s.finished.push(p);
            }
        }
        Record::End {
            id,
            t,
            code,
            signal,
            replaced,
        } => {
            if let Some(mut p) = s.open.remove(&id) {
                p.ended_us = Some(t);
                p.exit_code = code;
                p.signal = signal;
                p.replaced = replaced;
                if s.hash_pending.contains(&id) {
                    s.awaiting_hash.insert(id, p);
                } else {
                    s.finished.push(p);
                }
            }
        }
        Record::Counts {
            not_recorded,
            execs,
            forks,
        } => s.counts = (not_recorded, execs, forks),
        Record::Done {
            not_recorded,
            execs,
            forks,
            error,
            cpu_ms,
        } => {
            s.done = Some((not_recorded, execs, forks, error));
            s.cpu_ms = Some(cpu_ms);
        }
    }
}

/// A tracer's start record as the trail keeps it: secrets masked, arguments capped.
fn observed(start: Start, secrets: &[String]) -> ObservedProcess {
    let mut argv = Vec::new();
    let mut used = 0usize;
    let mut cut = start.argc > start.argv.len() as u64;
    for arg in &start.argv {
        let room = MAX_RECORDED_ARGV_BYTES - used;
        if argv.len() >= MAX_RECORDED_ARGS || room == 0 {
            cut = true;
            break;
        }
        let masked = mask_secrets(arg, secrets);
        let piece = cut_at(&masked, MAX_RECORDED_ARG_BYTES.min(room));
        cut |= piece.len() < masked.len();
        used += piece.len();
        argv.push(piece.to_owned());
    }
    ObservedProcess {
        id: start.id,
        parent: start.parent,
        pid: start.pid,
        exec: start.exec,
        argv,
        argv_cut: cut.then_some(ArgvCut {
            args: start.argc,
            bytes: start.argv_bytes,
        }),
        exe: mask_secrets(&start.exe, secrets),
        exe_sha256: start.sha256,
        exe_size: start.size,
        exe_error: start.exe_error,
        cwd: start.cwd.map(|c| mask_secrets(&c, secrets)),
        uid: start.uid,
        started_us: start.t,
        ..ObservedProcess::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(argv: Vec<String>) -> Start {
        Start {
            id: 1,
            argc: argv.len() as u64,
            argv_bytes: argv.iter().map(|a| a.len() as u64).sum(),
            argv,
            exe: "/usr/bin/env".into(),
            ..Start::default()
        }
    }

    #[test]
    fn arguments_are_masked_then_capped() {
        let secret = "sk-secret-0123456789".to_owned();
        let p = observed(
            start(vec!["env".into(), format!("KEY={secret}")]),
            std::slice::from_ref(&secret),
        );
        assert_eq!(p.argv, ["env", "KEY=********************"]);
        assert_eq!(p.argv_cut, None);

        let many: Vec<String> = (0..300).map(|i| format!("a{i}")).collect();
        let p = observed(start(many), &[]);
        assert_eq!(p.argv.len(), MAX_RECORDED_ARGS);
        assert_eq!(p.argv_cut.map(|c| c.args), Some(300));

        let long = "x".repeat(MAX_RECORDED_ARG_BYTES + 10);
        let p = observed(start(vec![long]), &[]);
        assert_eq!(p.argv[0].len(), MAX_RECORDED_ARG_BYTES);
        assert!(p.argv_cut.is_some());
    }

    #[test]
    fn an_image_ended_before_its_digest_waits_for_it() {
        let mut s = Assembly::default();
        let mut st = start(vec!["big".into()]);
        st.hash_pending = true;
        apply(&mut s, Record::Start(st), &[]);
        apply(
            &mut s,
            Record::End {
                id: 1,
                t: 9,
                code: Some(0),
                signal: None,
                replaced: false,
            },
            &[],
        );
        assert!(s.finished.is_empty(), "not before its digest");
        apply(
            &mut s,
            Record::Hash {
                id: 1,
                sha256: Some("ab".into()),
                size: Some(2),
                error: None,
            },
            &[],
        );
        assert_eq!(s.finished.len(), 1);
        assert_eq!(s.finished[0].exe_sha256.as_deref(), Some("ab"));
        assert_eq!(s.finished[0].exit_code, Some(0));
    }

    #[test]
    fn an_end_closes_its_start() {
        let mut s = Assembly::default();
        apply(&mut s, Record::Start(start(vec!["true".into()])), &[]);
        apply(
            &mut s,
            Record::End {
                id: 1,
                t: 9,
                code: Some(0),
                signal: None,
                replaced: false,
            },
            &[],
        );
        assert_eq!(s.finished.len(), 1);
        assert_eq!(s.finished[0].ended_us, Some(9));
        assert_eq!(s.finished[0].exit_code, Some(0));
        assert!(s.open.is_empty());
    }
}
