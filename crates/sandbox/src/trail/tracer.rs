//! The tracer: `provrun-confine --trail --pid PID [--machinery DEV:INO]… [--max N]`.
//!
//! It runs outside the sandbox, as the user the command runs as (or root), attaches to
//! the stopped stub `PID` with `PTRACE_SEIZE` and the options `TRACEFORK`, `TRACEVFORK`,
//! `TRACECLONE`, `TRACEEXEC` and `EXITKILL` (never `PTRACE_SYSCALL`: the tracees stop only
//! at those events and at signals, which are passed on), then follows every task of the
//! tree with `waitpid(-1, __WALL)` until none is left. It writes [`Record`]s on stdout.
//!
//! - **The sandbox's own processes** are not in the trail: until the trail has begun, an
//!   exec of an executable named by `--machinery` (device and inode: bubblewrap, the
//!   helper) or by a process outside the trail is not recorded. The first exec of any
//!   other executable begins the trail; from then on only that process and what it
//!   starts are followed into records (a process forked before, such as the port
//!   forwarder, never is).
//! - **A new task** reports its first stop before or after its parent's fork event; it is
//!   held stopped until the parent's event says what it is (a thread of the parent, or a
//!   process the parent started), so nothing it does can come before its origin is known.
//!   (A parent killed between its fork and its event leaves the child held: it never runs,
//!   and dies with the sandbox.)
//! - **At an exec stop** the new image has not run: its arguments, its executable (opened
//!   through `/proc/PID/exe` and hashed, cached by device, inode, size, mtime and ctime),
//!   its working folder and its user are read then. An executable on a read-only mount
//!   (the system folders, read-only grants: nothing in the sandbox can change it) is
//!   hashed by a thread of its own from the descriptor opened at the stop, so that a large
//!   binary does not hold its program up; any other (a memfd, a file in a writable folder)
//!   is hashed before the program goes on.
//! - **Bounded**: after `--max` images, images are counted, not recorded.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::{BufWriter, Read as _, Write};
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::rc::Rc;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::sys::ptrace::{self, Event, Options};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use sha2::Digest as _;

use super::text::escape_bytes;
use super::wire::{Record, Start};

/// The most bytes of `/proc/PID/cmdline` read (the rest is counted as "more").
const CMDLINE_READ: u64 = 4 << 20;
/// The most bytes of one argument passed to the runtime (which cuts further after
/// masking secrets, so a secret across its own cut is still whole here).
const ARG_PASS_BYTES: usize = super::MAX_RECORDED_ARG_BYTES * 2;
/// The most bytes of arguments passed to the runtime for one image.
const ARGV_PASS_BYTES: usize = super::MAX_RECORDED_ARGV_BYTES * 2;
/// A cached digest is trusted only for files whose ctime is older than this when hashed:
/// a later change gives a later ctime, whatever the file system's timestamp granularity.
const CACHE_SETTLED: Duration = Duration::from_secs(2);

/// The tracer's arguments.
struct Args {
    pid: i32,
    machinery: Vec<(u64, u64)>,
    max: u64,
}

fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Args, String> {
    let mut out = Args {
        pid: 0,
        machinery: Vec::new(),
        max: super::MAX_TRAIL_PROCESSES,
    };
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .and_then(|v| v.into_string().ok())
                .ok_or_else(|| format!("`{}` needs a value", a.to_string_lossy()))
        };
        match a.to_str() {
            Some("--pid") => {
                out.pid = value()?.parse().map_err(|_| "--pid: not a number")?;
            }
            Some("--max") => out.max = value()?.parse().map_err(|_| "--max: not a number")?,
            Some("--machinery") => {
                let v = value()?;
                let (dev, ino) = v
                    .split_once(':')
                    .and_then(|(d, i)| Some((d.parse().ok()?, i.parse().ok()?)))
                    .ok_or_else(|| format!("--machinery {v}: expected DEV:INO"))?;
                out.machinery.push((dev, ino));
            }
            _ => return Err(format!("unknown argument `{}`", a.to_string_lossy())),
        }
    }
    if out.pid <= 0 {
        return Err("--pid is required".to_owned());
    }
    Ok(out)
}

/// The tracer's whole life; its exit status, or why its arguments are wrong.
pub(crate) fn tracer_main(args: impl IntoIterator<Item = OsString>) -> Result<i32, String> {
    let args = parse(args)?;
    // Gone with the runtime (and then, by EXITKILL, the command with it); deaf to the
    // terminal's signals, which are the runtime's to pass on.
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let mut deaf = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        deaf.add(s);
    }
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&deaf), None);
    let mut tracer = Tracer::new(args);
    let code = tracer.run();
    tracer.flush();
    Ok(code)
}

/// What the trail knows of an image, handed down to a fork that never execs.
#[derive(Debug, Default)]
struct Facts {
    argv: Vec<String>,
    argc: u64,
    argv_bytes: u64,
    exe: String,
    sha256: Option<String>,
    size: Option<u64>,
    exe_error: Option<String>,
    cwd: Option<String>,
    uid: Option<u32>,
    /// The executable, when its digest is being made off the stop (read-only mount).
    pending: Option<PendingExe>,
}

/// An executable being hashed off the loop, as an image's facts keep it: its version, and
/// its descriptor only while a job still holds it (so that no descriptor outlives its
/// digest).
#[derive(Debug, Clone)]
struct PendingExe {
    key: FileKey,
    settled: bool,
    file: std::sync::Weak<std::fs::File>,
}

/// An executable to hash off the tracer's loop: opened at the exec stop, read with
/// positioned reads (so several images can share it).
#[derive(Debug, Clone)]
struct HashJob {
    file: Arc<std::fs::File>,
    key: FileKey,
    settled: bool,
}

/// A forked process of the trail that has no record yet.
#[derive(Debug)]
struct Pending {
    parent: Option<u64>,
    started: u64,
    facts: Rc<Facts>,
}

/// One process being followed.
#[derive(Debug, Default)]
struct Proc {
    /// In the trail (else: the sandbox's own, or not yet begun).
    trail: bool,
    /// Its current image's record, when it has one.
    image: Option<u64>,
    /// Forked, no record yet.
    pending: Option<Pending>,
    /// Its current image's facts.
    facts: Rc<Facts>,
}

/// A file's identity and version, for the digest cache.
type FileKey = (u64, u64, u64, i64, i64, i64, i64);

/// The records' writer, shared with the hashing thread.
type Out = Arc<Mutex<BufWriter<std::io::Stdout>>>;

/// Digests already made, by file version.
type Cache = Arc<Mutex<HashMap<FileKey, (String, u64)>>>;

struct Tracer {
    args: Args,
    out: Out,
    procs: HashMap<i32, Proc>,
    /// Threads that are not their group's leader, and their group.
    threads: HashMap<i32, i32>,
    /// New tasks stopped before their parent's event came.
    held: HashSet<i32>,
    /// The root is still to stop once (the stub's own `SIGSTOP`).
    root_stop_pending: bool,
    begun: bool,
    next_id: u64,
    not_recorded: u64,
    execs: u64,
    forks: u64,
    /// The counts last written.
    counted: (u64, u64, u64),
    cache: Cache,
    /// Executables to hash off the loop, with the record each digest belongs to.
    hashes: Option<mpsc::Sender<(u64, HashJob)>>,
    hashers: Vec<std::thread::JoinHandle<()>>,
}

/// Threads hashing executables at once (a large binary does not hold up the small ones
/// queued behind it).
const HASHERS: usize = 2;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Tracer {
    fn new(args: Args) -> Self {
        let out: Out = Arc::new(Mutex::new(BufWriter::with_capacity(
            64 * 1024,
            std::io::stdout(),
        )));
        let cache: Cache = Arc::default();
        let (hashes, jobs) = mpsc::channel::<(u64, HashJob)>();
        let jobs = Arc::new(Mutex::new(jobs));
        let hashers: Vec<_> = (0..HASHERS)
            .filter_map(|i| {
                let (jobs, out, cache) = (Arc::clone(&jobs), Arc::clone(&out), Arc::clone(&cache));
                std::thread::Builder::new()
                    .name(format!("trail-hasher-{i}"))
                    .spawn(move || hash_jobs(&jobs, &out, &cache))
                    .ok()
            })
            .collect();
        Tracer {
            args,
            out,
            procs: HashMap::new(),
            threads: HashMap::new(),
            held: HashSet::new(),
            root_stop_pending: true,
            begun: false,
            next_id: 1,
            not_recorded: 0,
            execs: 0,
            forks: 0,
            counted: (0, 0, 0),
            cache,
            hashes: (!hashers.is_empty()).then_some(hashes),
            hashers,
        }
    }

    fn emit(&mut self, record: &Record) {
        emit_to(&self.out, record);
    }

    fn flush(&self) {
        if let Ok(mut out) = self.out.lock() {
            let _ = out.flush();
        }
    }

    /// Hands `job` to the hashing thread for record `id`.
    fn hash_later(&self, id: u64, job: HashJob) {
        if let Some(tx) = &self.hashes {
            let _ = tx.send((id, job));
        }
    }

    fn run(&mut self) -> i32 {
        let root = Pid::from_raw(self.args.pid);
        let options = Options::PTRACE_O_TRACEFORK
            | Options::PTRACE_O_TRACEVFORK
            | Options::PTRACE_O_TRACECLONE
            | Options::PTRACE_O_TRACEEXEC
            | Options::PTRACE_O_EXITKILL;
        if let Err(e) = ptrace::seize(root, options) {
            self.emit(&Record::Failed {
                error: format!("ptrace cannot attach to the command: {e}"),
            });
            return 1;
        }
        self.procs.insert(root.as_raw(), Proc::default());
        self.emit(&Record::Attached);
        self.flush();
        let mut error = None;
        loop {
            let status = match waitpid(None, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {
                    // Nothing waiting: the records so far go out before blocking.
                    self.counts();
                    self.flush();
                    waitpid(None, Some(WaitPidFlag::__WALL))
                }
                other => other,
            };
            match status {
                Ok(s) => self.on(s),
                Err(Errno::ECHILD) => break,
                Err(Errno::EINTR) => {}
                Err(e) => {
                    error = Some(format!("waiting for the traced processes: {e}"));
                    break;
                }
            }
        }
        // The digests still being made go out before the last line.
        self.hashes = None;
        for h in std::mem::take(&mut self.hashers) {
            let _ = h.join();
        }
        let (not_recorded, execs, forks) = (self.not_recorded, self.execs, self.forks);
        self.emit(&Record::Done {
            not_recorded,
            execs,
            forks,
            error,
            cpu_ms: own_cpu_ms(),
        });
        0
    }

    /// The counts so far, when they changed since they were last written.
    fn counts(&mut self) {
        let now = (self.not_recorded, self.execs, self.forks);
        if now != self.counted {
            self.counted = now;
            self.emit(&Record::Counts {
                not_recorded: now.0,
                execs: now.1,
                forks: now.2,
            });
        }
    }

    fn on(&mut self, status: WaitStatus) {
        match status {
            WaitStatus::Exited(pid, code) => self.ended(pid.as_raw(), Some(code), None),
            WaitStatus::Signaled(pid, signal, _) => {
                self.ended(pid.as_raw(), None, Some(signal as i32));
            }
            WaitStatus::Stopped(pid, signal) => {
                if self.root_stop_pending
                    && pid.as_raw() == self.args.pid
                    && signal == Signal::SIGSTOP
                {
                    // The stub's own stop: swallowed, the stub goes on to exec.
                    self.root_stop_pending = false;
                    let _ = ptrace::cont(pid, None);
                } else {
                    // A signal on its way to a tracee: passed on unchanged.
                    let _ = ptrace::cont(pid, signal);
                }
            }
            WaitStatus::PtraceEvent(pid, _, event) => self.event(pid, event),
            _ => {}
        }
    }

    fn event(&mut self, pid: Pid, event: i32) {
        let raw = pid.as_raw();
        if event == Event::PTRACE_EVENT_STOP as i32 {
            if raw == self.args.pid && self.root_stop_pending {
                self.root_stop_pending = false;
            } else if !self.procs.contains_key(&raw) && !self.threads.contains_key(&raw) {
                // A new task ahead of its parent's event: held until that comes.
                self.held.insert(raw);
                return;
            }
            // A known task's first stop, or a group stop (not kept: see docs/sandbox.md).
            let _ = ptrace::cont(pid, None);
            return;
        }
        if event == Event::PTRACE_EVENT_EXEC as i32 {
            let former = ptrace::getevent(pid).unwrap_or(raw.into()) as i32;
            if former != raw {
                // A thread execed: it is the process now, its old id is gone.
                self.threads.remove(&former);
            }
            self.exec(raw);
        } else if (event == Event::PTRACE_EVENT_FORK as i32
            || event == Event::PTRACE_EVENT_VFORK as i32
            || event == Event::PTRACE_EVENT_CLONE as i32)
            && let Ok(new) = ptrace::getevent(pid)
        {
            self.spawned(raw, new as i32, event == Event::PTRACE_EVENT_CLONE as i32);
        }
        let _ = ptrace::cont(pid, None);
    }

    /// `parent` (a task) made `new`, a thread of its own group or a process.
    fn spawned(&mut self, parent: i32, new: i32, clone: bool) {
        let group = self.threads.get(&parent).copied().unwrap_or(parent);
        let thread =
            clone && std::fs::symlink_metadata(format!("/proc/{group}/task/{new}")).is_ok();
        if thread {
            self.threads.insert(new, group);
        } else {
            let trail = self.procs.get(&group).is_some_and(|p| p.trail);
            let mut proc = Proc {
                trail,
                ..Proc::default()
            };
            if trail {
                self.forks += 1;
                let parent_image = self.materialize(group);
                let facts = self
                    .procs
                    .get(&group)
                    .map(|p| Rc::clone(&p.facts))
                    .unwrap_or_default();
                proc.pending = Some(Pending {
                    parent: parent_image,
                    started: now_us(),
                    facts,
                });
            }
            self.procs.insert(new, proc);
        }
        if self.held.remove(&new) {
            let _ = ptrace::cont(Pid::from_raw(new), None);
        }
    }

    /// The record of `pid`'s current image, written now if it is a fork that has none
    /// yet (its children need a parent to name).
    fn materialize(&mut self, pid: i32) -> Option<u64> {
        let proc = self.procs.get_mut(&pid)?;
        if proc.image.is_some() {
            return proc.image;
        }
        let pending = proc.pending.take()?;
        let id = self.take_id()?;
        let f = &pending.facts;
        let mut start = Start {
            id,
            parent: pending.parent,
            pid: pid as u32,
            exec: false,
            t: pending.started,
            argv: f.argv.clone(),
            argc: f.argc,
            argv_bytes: f.argv_bytes,
            exe: f.exe.clone(),
            sha256: f.sha256.clone(),
            size: f.size,
            exe_error: f.exe_error.clone(),
            cwd: f.cwd.clone(),
            uid: f.uid,
            hash_pending: false,
        };
        let mut job = None;
        if let Some(p) = &f.pending {
            // Its parent's executable, whose digest may not be made yet.
            match self.cache.lock().ok().and_then(|c| c.get(&p.key).cloned()) {
                Some((hex, size)) => {
                    start.sha256 = Some(hex);
                    start.size = Some(size);
                }
                None => match p.file.upgrade() {
                    Some(file) => {
                        start.hash_pending = true;
                        job = Some(HashJob {
                            file,
                            key: p.key,
                            settled: p.settled,
                        });
                    }
                    None => {
                        start.exe_error =
                            Some("not hashed again: its parent image's record has it".into());
                    }
                },
            }
        }
        if let Some(p) = self.procs.get_mut(&pid) {
            p.image = Some(id);
            p.facts = pending.facts;
        }
        self.emit(&Record::Start(start));
        if let Some(job) = job {
            self.hash_later(id, job);
        }
        Some(id)
    }

    /// The next record id, or `None` (counted) once the cap is reached.
    fn take_id(&mut self) -> Option<u64> {
        if self.next_id > self.args.max {
            self.not_recorded += 1;
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        Some(id)
    }

    fn exec(&mut self, pid: i32) {
        let t = now_us();
        let trail = self.procs.get(&pid).is_some_and(|p| p.trail);
        if !trail && (self.begun || !self.procs.contains_key(&pid)) {
            return;
        }
        let exe = ExeFile::open(pid);
        if !trail {
            let machinery = exe
                .key
                .is_some_and(|k| self.args.machinery.contains(&(k.0, k.1)));
            if machinery {
                return;
            }
            // The first exec of the command itself: the trail begins.
            self.begun = true;
            if let Some(p) = self.procs.get_mut(&pid) {
                p.trail = true;
            }
        }
        self.execs += 1;
        let (facts, job) = self.read_facts(pid, exe);
        let facts = Rc::new(facts);
        let Some(proc) = self.procs.get_mut(&pid) else {
            return;
        };
        let replaced = proc.image.take();
        let (parent, started) = match (replaced, proc.pending.take()) {
            (Some(old), _) => (Some(old), t),
            (None, Some(p)) => (p.parent, p.started),
            (None, None) => (None, t),
        };
        proc.facts = Rc::clone(&facts);
        if let Some(old) = replaced {
            self.emit(&Record::End {
                id: old,
                t,
                code: None,
                signal: None,
                replaced: true,
            });
        }
        let Some(id) = self.take_id() else {
            return;
        };
        if let Some(p) = self.procs.get_mut(&pid) {
            p.image = Some(id);
        }
        self.emit(&Record::Start(Start {
            id,
            parent,
            pid: pid as u32,
            exec: true,
            t: started,
            argv: facts.argv.clone(),
            argc: facts.argc,
            argv_bytes: facts.argv_bytes,
            exe: facts.exe.clone(),
            sha256: facts.sha256.clone(),
            size: facts.size,
            exe_error: facts.exe_error.clone(),
            cwd: facts.cwd.clone(),
            uid: facts.uid,
            hash_pending: job.is_some(),
        }));
        if let Some(job) = job {
            self.hash_later(id, job);
        }
    }

    /// What an exec stop shows of `pid`'s new image, and the job that will hash its
    /// executable when that is done off the stop.
    fn read_facts(&mut self, pid: i32, exe: ExeFile) -> (Facts, Option<HashJob>) {
        let (argv, argc, argv_bytes) = read_argv(pid);
        let path = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| escape_bytes(p.as_os_str().as_encoded_bytes()))
            .unwrap_or_default();
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))
            .ok()
            .map(|p| escape_bytes(p.as_os_str().as_encoded_bytes()));
        let uid = read_uid(pid);
        let cached = exe
            .key
            .and_then(|key| self.cache.lock().ok()?.get(&key).cloned());
        let mut job = None;
        let (sha256, size, exe_error) = match (exe.file, exe.key, cached) {
            (_, _, Some((hex, size))) => (Some(hex), Some(size), None),
            (Some(file), Some(key), None) if exe.read_only && self.hashes.is_some() => {
                // Nothing in the sandbox can change it: hashed off the stop.
                job = Some(HashJob {
                    file: Arc::new(file),
                    key,
                    settled: exe.settled,
                });
                (None, Some(key.2), None)
            }
            (Some(file), Some(key), None) => match hash(&file) {
                Ok((hex, size)) => {
                    if exe.settled
                        && let Ok(mut cache) = self.cache.lock()
                    {
                        cache.insert(key, (hex.clone(), size));
                    }
                    (Some(hex), Some(size), None)
                }
                Err(e) => (None, Some(key.2), Some(format!("reading it: {e}"))),
            },
            (_, key, None) => (None, key.map(|k| k.2), exe.error),
        };
        let facts = Facts {
            argv,
            argc,
            argv_bytes,
            exe: path,
            sha256,
            size,
            exe_error,
            cwd,
            uid,
            pending: job.as_ref().map(|j| PendingExe {
                key: j.key,
                settled: j.settled,
                file: Arc::downgrade(&j.file),
            }),
        };
        (facts, job)
    }

    /// `pid` (a task) is gone: its image ends with it.
    fn ended(&mut self, pid: i32, code: Option<i32>, signal: Option<i32>) {
        if self.threads.remove(&pid).is_some() {
            return;
        }
        let Some(proc) = self.procs.remove(&pid) else {
            return;
        };
        if proc.trail {
            let id = match proc.image {
                Some(id) => Some(id),
                None if proc.pending.is_some() => {
                    // A fork that never execed: recorded now, with its parent's image.
                    self.procs.insert(pid, proc);
                    let id = self.materialize(pid);
                    self.procs.remove(&pid);
                    id
                }
                None => None,
            };
            if let Some(id) = id {
                self.emit(&Record::End {
                    id,
                    t: now_us(),
                    code,
                    signal,
                    replaced: false,
                });
            }
        }
    }
}

/// The executable of a process at its exec stop, opened through `/proc/PID/exe`.
struct ExeFile {
    file: Option<std::fs::File>,
    key: Option<FileKey>,
    /// Its ctime is old enough for its digest to be cached.
    settled: bool,
    /// It sits on a read-only mount.
    read_only: bool,
    error: Option<String>,
}

impl ExeFile {
    fn open(pid: i32) -> ExeFile {
        let path = format!("/proc/{pid}/exe");
        match std::fs::File::open(&path) {
            Ok(file) => {
                let md = file.metadata().ok();
                let key = md.as_ref().map(key_of);
                let settled = md.as_ref().is_some_and(|m| {
                    let ctime = UNIX_EPOCH + Duration::new(m.ctime().max(0) as u64, 0);
                    SystemTime::now()
                        .duration_since(ctime)
                        .is_ok_and(|age| age > CACHE_SETTLED)
                });
                let read_only = rustix::fs::fstatvfs(&file)
                    .is_ok_and(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY));
                ExeFile {
                    file: Some(file),
                    key,
                    settled,
                    read_only,
                    error: None,
                }
            }
            Err(e) => {
                // Not readable (an execute-only file): its identity still counts.
                let key = std::fs::metadata(&path).ok().map(|m| key_of(&m));
                ExeFile {
                    file: None,
                    key,
                    settled: false,
                    read_only: false,
                    error: Some(format!("the tracer cannot open it: {e}")),
                }
            }
        }
    }
}

fn key_of(m: &std::fs::Metadata) -> FileKey {
    (
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    )
}

/// The SHA-256 of a file's bytes and their count, read with positioned reads from its
/// start (whatever the descriptor's offset).
fn hash(file: &std::fs::File) -> std::io::Result<(String, u64)> {
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match file.read_at(&mut buf, total) {
            Ok(0) => break,
            Ok(n) => {
                h.update(&buf[..n]);
                total += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((hex::encode(h.finalize()), total))
}

/// Writes one record line.
fn emit_to(out: &Out, record: &Record) {
    if let Ok(mut out) = out.lock()
        && serde_json::to_writer(&mut *out, record).is_ok()
    {
        let _ = out.write_all(b"\n");
    }
}

/// The hashing thread: each job's digest (from the cache when an earlier job made it),
/// written as a `hash` record and flushed, until the tracer lets go of the channel.
fn hash_jobs(jobs: &Mutex<mpsc::Receiver<(u64, HashJob)>>, out: &Out, cache: &Cache) {
    loop {
        let next = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((id, job)) = next else { return };
        let cached = cache.lock().ok().and_then(|c| c.get(&job.key).cloned());
        let result = match cached {
            Some(done) => Ok(done),
            None => hash(&job.file),
        };
        let record = match result {
            Ok((hex, size)) => {
                if job.settled
                    && let Ok(mut c) = cache.lock()
                {
                    c.insert(job.key, (hex.clone(), size));
                }
                Record::Hash {
                    id,
                    sha256: Some(hex),
                    size: Some(size),
                    error: None,
                }
            }
            Err(e) => Record::Hash {
                id,
                sha256: None,
                size: Some(job.key.2),
                error: Some(format!("reading it: {e}")),
            },
        };
        emit_to(out, &record);
        if let Ok(mut out) = out.lock() {
            let _ = out.flush();
        }
    }
}

/// The CPU time this process has used, user and system, in milliseconds (from
/// `/proc/self/stat`, in clock ticks of 1/100 s).
fn own_cpu_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (tick(11) + tick(12)) * 10
}

/// The argument vector of `pid` (escaped, cut to what the runtime needs), with the
/// number of arguments and their bytes in all.
fn read_argv(pid: i32) -> (Vec<String>, u64, u64) {
    let mut bytes = Vec::new();
    if let Ok(f) = std::fs::File::open(format!("/proc/{pid}/cmdline")) {
        let _ = f.take(CMDLINE_READ).read_to_end(&mut bytes);
    }
    if bytes.last() == Some(&0) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return (Vec::new(), 0, 0);
    }
    let mut argv = Vec::new();
    let (mut argc, mut total, mut kept) = (0u64, 0u64, 0usize);
    for arg in bytes.split(|b| *b == 0) {
        argc += 1;
        total += arg.len() as u64;
        if argv.len() < super::MAX_RECORDED_ARGS && kept < ARGV_PASS_BYTES {
            let text = escape_bytes(&arg[..arg.len().min(ARG_PASS_BYTES)]);
            kept += text.len();
            argv.push(text);
        }
    }
    (argv, argc, total)
}

/// The real uid of `pid`, as the host numbers it: the owner of `/proc/PID` (its
/// effective uid while it may be dumped), read from its status when that shows root.
fn read_uid(pid: i32) -> Option<u32> {
    let owner = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    if owner != 0 {
        return Some(owner);
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse() {
        let a = parse(
            ["--pid", "42", "--machinery", "1:2", "--max", "7"]
                .into_iter()
                .map(OsString::from),
        )
        .unwrap();
        assert_eq!((a.pid, a.machinery, a.max), (42, vec![(1, 2)], 7));
        assert!(parse(["--max", "1"].into_iter().map(OsString::from)).is_err());
        assert!(
            parse(
                ["--machinery", "x", "--pid", "1"]
                    .into_iter()
                    .map(OsString::from)
            )
            .is_err()
        );
    }

    #[test]
    fn this_process_has_arguments_and_a_user() {
        let me = std::process::id() as i32;
        let (argv, argc, bytes) = read_argv(me);
        assert!(argc >= 1 && !argv.is_empty() && bytes > 0);
        assert_eq!(read_uid(me), Some(rustix::process::getuid().as_raw()));
    }
}
