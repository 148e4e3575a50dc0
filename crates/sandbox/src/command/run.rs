//! `Sandbox::run_command`, `run_program` and `spawn_program`: the confined run itself.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::{Result, SandboxError};
use crate::limits::Limits;
use crate::sandbox::Sandbox;

use super::cgroup::Cgroup;
use super::child::{CHILD_STDERR_CAP, capture, exit_parts, kill_tree, kill_tree_and_wait};
use super::launch::Launch;
use super::outcome::{CommandOutcome, Confinement};
use super::probe::probe;
use super::traced::hold;
use super::{ConfinedChild, QUOTA_EVERY};

impl Sandbox {
    /// What this machine offers `run_command` (probed once per process).
    pub fn command_support() -> &'static Confinement {
        probe()
    }

    /// Runs `sh -c command` under confinement; see [`Sandbox::run_program`].
    ///
    /// # Errors
    ///
    /// As [`Sandbox::run_program`].
    pub fn run_command(&self, command: &str, timeout: Option<Duration>) -> Result<CommandOutcome> {
        let argv = ["/bin/sh", "-c", command].map(String::from);
        self.run_program(&argv, None, timeout)
    }

    /// Runs `argv` (a program found on the sandbox's `PATH`, and its arguments) under every
    /// confinement layer, with `stdin` as its standard input (none: `/dev/null`), in
    /// `/scratch`, for at most `timeout` (default `Limits::command_timeout_s`, ceiling
    /// `Limits::max_command_timeout_s`).
    ///
    /// Refused, before anything runs, when a layer is missing and the sandbox was not opened
    /// with [`Sandbox::allow_degraded_commands`]. Afterwards the quota is recounted: when the
    /// command left /output and /scratch over quota, the outcome says so and file writes
    /// that add bytes are refused. Whatever the command leaves behind (links, special files)
    /// is subject to the file tools' usual rules.
    ///
    /// # Errors
    ///
    /// [`SandboxError::NulInCommand`] for a NUL byte in `argv`;
    /// [`SandboxError::ConfinementMissing`] or [`SandboxError::CommandUserUnavailable`] when the
    /// command cannot be confined as required; [`SandboxError::CommandStart`] when it cannot be
    /// started or watched; the errors of [`Sandbox::recount`]. A command that fails or times
    /// out is not an error: its outcome says so.
    pub fn run_program(
        &self,
        argv: &[String],
        stdin: Option<Vec<u8>>,
        timeout: Option<Duration>,
    ) -> Result<CommandOutcome> {
        refuse_nul(argv, &[])?;
        let conf = self.confinement_for(argv)?;
        let limits = self.limits().clone();
        let timeout = command_timeout(&limits, timeout);
        let before = self.recount()?;
        let (mut cmd, program, cgroup, plan) =
            self.confined_command(conf, &Launch::command(argv, &[], &[], before.bytes, false))?;
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });

        let started = Instant::now();
        let mut child = spawn_or_clean_up(&mut cmd, &program, cgroup.as_ref())?;
        let traced = hold(self, &mut child, cgroup.as_ref(), plan)?;
        let cap = limits.command_output_bytes as usize;
        let out_rx = child.stdout.take().map(|s| capture(s, cap));
        let err_rx = child.stderr.take().map(|s| capture(s, cap));
        if let (Some(mut pipe), Some(data)) = (child.stdin.take(), stdin) {
            std::thread::spawn(move || {
                let _ = pipe.write_all(&data);
            });
        }

        let (status, stopped) = self.watch(&mut child, cgroup.as_ref(), started, timeout)?;
        let Stopped {
            timed_out,
            cancelled,
            over_quota,
        } = stopped;
        // The tree is gone with its PID namespace; kill the process group and the cgroup
        // too, for the layers that are there when namespaces are not.
        kill_tree(&mut child, cgroup.as_ref());
        if let Some(cg) = &cgroup {
            cg.remove();
        }
        let duration = started.elapsed();
        if let Some(traced) = traced {
            let trail = traced.finish();
            if let Some(sink) = &self.trail_config().sink {
                sink.push(trail);
            }
        }
        let (out, out_total) = collected(out_rx);
        let (err, err_total) = collected(err_rx);
        // The command ran: its outcome is kept even when what it left cannot be measured,
        // which then counts as over the quota (writes that add bytes are refused until a
        // later measurement succeeds).
        let usage = self.recount().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "/output and /scratch cannot be measured after a command; counted as over the quota");
            self.count_as_full()
        });
        let quota_exceeded =
            over_quota || usage.bytes > limits.max_total_bytes || usage.files > limits.max_files;
        let (exit_code, signal) = exit_parts(status);
        let (stdout, stdout_invalid_utf8) = decode_lossy(&out);
        let (stderr, stderr_invalid_utf8) = decode_lossy(&err);
        if stdout_invalid_utf8 + stderr_invalid_utf8 > 0 {
            tracing::warn!(
                stdout = stdout_invalid_utf8,
                stderr = stderr_invalid_utf8,
                "command output is not UTF-8: invalid sequences shown as U+FFFD"
            );
        }
        let outcome = CommandOutcome {
            exit_code,
            signal,
            stdout_truncated: out_total > out.len() as u64,
            stderr_truncated: err_total > err.len() as u64,
            stdout,
            stderr,
            stdout_invalid_utf8,
            stderr_invalid_utf8,
            stdout_bytes: out_total,
            stderr_bytes: err_total,
            timed_out,
            cancelled,
            quota_exceeded,
            duration_ms: duration.as_millis() as u64,
            usage,
            degraded: conf.degraded.clone(),
            confinement: conf.record(&limits, timeout, before.bytes),
        };
        tracing::info!(
            exit = ?outcome.exit_code,
            signal = ?outcome.signal,
            timed_out,
            quota_exceeded,
            ms = outcome.duration_ms,
            "command ran"
        );
        Ok(outcome)
    }

    /// Waits for a command's `child`, started at `started`, looking every 10 ms: when the
    /// run is cancelled, `timeout` passes or (every `QUOTA_EVERY`) /output and /scratch are
    /// over quota, kills its tree and waits for it to end. Returns its status and what
    /// stopped it, if anything.
    fn watch(
        &self,
        child: &mut Child,
        cgroup: Option<&Cgroup>,
        started: Instant,
        timeout: Duration,
    ) -> Result<(ExitStatus, Stopped)> {
        let deadline = started + timeout;
        let mut stopped = Stopped::default();
        let mut next_check = started + QUOTA_EVERY;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Ok((status, stopped)),
                Ok(None) => {}
                Err(e) => {
                    let _ = kill_tree_and_wait(child, cgroup);
                    return Err(SandboxError::CommandStart {
                        message: format!("waiting for the command: {e}"),
                    });
                }
            }
            let now = Instant::now();
            if self.stop_requested() {
                stopped.cancelled = true;
            } else if now >= deadline {
                stopped.timed_out = true;
            } else if now >= next_check {
                next_check = now + QUOTA_EVERY;
                if self.over_quota() {
                    stopped.over_quota = true;
                }
            }
            if stopped.timed_out || stopped.over_quota || stopped.cancelled {
                // Every process of the command is gone before its outcome is given.
                return match kill_tree_and_wait(child, cgroup) {
                    Ok(s) => Ok((s, stopped)),
                    Err(e) => Err(SandboxError::CommandStart {
                        message: format!("waiting for the command: {e}"),
                    }),
                };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts `argv` as a long-lived confined child with piped stdin, stdout and stderr —
    /// for a server that talks over its standard streams (an MCP stdio server). The layers
    /// are those of [`Sandbox::run_program`], and so is the refusal when one is missing and
    /// degraded mode is not allowed; there is no timeout: the caller ends the child with
    /// [`ConfinedChild::kill`] (dropping it kills it too). `env` is the child's whole
    /// environment beyond `PATH`, `HOME`, `TMPDIR` and `LANG`; `read_only` host paths (the
    /// server's program, its data) are made visible read-only at the same paths.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::spawn_server`].
    pub fn spawn_program(
        &self,
        argv: &[String],
        env: &[(String, String)],
        read_only: &[PathBuf],
    ) -> Result<ConfinedChild> {
        self.spawn_server(argv, env, read_only, false)
    }

    /// [`Sandbox::spawn_program`], with the host's network shared when `network` is true
    /// (the child then also sees `/etc/resolv.conf`, `/etc/hosts` and the system's CA
    /// certificates, read-only). Everything else is confined as without it.
    ///
    /// # Errors
    ///
    /// [`SandboxError::NulInCommand`] for a NUL byte in `argv` or `env`;
    /// [`SandboxError::ConfinementMissing`] or [`SandboxError::CommandUserUnavailable`] when the
    /// child cannot be confined as required; [`SandboxError::CommandStart`] when it cannot be
    /// started; the errors of [`Sandbox::recount`].
    pub fn spawn_server(
        &self,
        argv: &[String],
        env: &[(String, String)],
        read_only: &[PathBuf],
        network: bool,
    ) -> Result<ConfinedChild> {
        refuse_nul(argv, env)?;
        let conf = self.confinement_for(argv)?;
        let before = self.recount()?;
        let (mut cmd, program, cgroup, plan) = self.confined_command(
            conf,
            &Launch::command(argv, env, read_only, before.bytes, network),
        )?;
        cmd.stdin(Stdio::piped());
        let mut child = spawn_or_clean_up(&mut cmd, &program, cgroup.as_ref())?;
        let trail = hold(self, &mut child, cgroup.as_ref(), plan)?;
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stderr_closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Some(mut pipe) = child.stderr.take() {
            let keep = std::sync::Arc::clone(&stderr);
            let closed = std::sync::Arc::clone(&stderr_closed);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if let Ok(mut kept) = keep.lock() {
                                let room = CHILD_STDERR_CAP.saturating_sub(kept.len());
                                kept.extend_from_slice(&buf[..n.min(room)]);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                closed.store(true, std::sync::atomic::Ordering::SeqCst);
            });
        } else {
            stderr_closed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        tracing::info!(program = %argv[0], pid = child.id(), "confined child started");
        Ok(ConfinedChild {
            child,
            cgroup,
            stderr,
            stderr_closed,
            degraded: conf.degraded.clone(),
            trail,
        })
    }

    /// What confines a program here, checked before anything runs: refused when a layer
    /// is missing and degraded commands are not allowed, or when `argv` names no program.
    pub(super) fn confinement_for(&self, argv: &[String]) -> Result<&'static Confinement> {
        let conf = probe();
        if !conf.is_complete() && !self.degraded_allowed() {
            return Err(SandboxError::ConfinementMissing {
                missing: conf.missing_summary(),
            });
        }
        if argv.is_empty() {
            return Err(SandboxError::CommandStart {
                message: "no program given".to_owned(),
            });
        }
        Ok(conf)
    }
}

/// Why [`Sandbox::watch`] ended a command early (all false: the command ended by itself).
#[derive(Debug, Default, Clone, Copy)]
struct Stopped {
    /// The timeout passed.
    timed_out: bool,
    /// The run was asked to stop.
    cancelled: bool,
    /// /output and /scratch went over quota.
    over_quota: bool,
}

/// The time a command may take: `timeout`, or the default, no more than the ceiling and no
/// less than 100 ms.
fn command_timeout(limits: &Limits, timeout: Option<Duration>) -> Duration {
    let max_timeout = Duration::from_secs(limits.max_command_timeout_s);
    timeout
        .unwrap_or(Duration::from_secs(limits.command_timeout_s))
        .min(max_timeout)
        .max(Duration::from_millis(100))
}

/// Spawns `cmd`; when it cannot start, removes its pids cgroup and names only the
/// launcher's file in the error.
pub(super) fn spawn_or_clean_up(
    cmd: &mut Command,
    program: &Path,
    cgroup: Option<&Cgroup>,
) -> Result<Child> {
    cmd.spawn().map_err(|e| {
        if let Some(cg) = cgroup {
            cg.remove();
        }
        SandboxError::CommandStart {
            message: format!("{}: {e}", program_name(program)),
        }
    })
}

/// What one captured stream gave: its kept bytes and how many were written in all
/// (nothing when the reader has not answered within 2 s).
fn collected(rx: Option<mpsc::Receiver<(Vec<u8>, u64)>>) -> (Vec<u8>, u64) {
    rx.and_then(|rx| rx.recv_timeout(Duration::from_secs(2)).ok())
        .unwrap_or_default()
}

/// `bytes` as UTF-8, each invalid sequence replaced by U+FFFD, and how many there were.
pub(super) fn decode_lossy(bytes: &[u8]) -> (String, u64) {
    let mut text = String::with_capacity(bytes.len());
    let mut invalid = 0u64;
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            text.push(char::REPLACEMENT_CHARACTER);
            invalid += 1;
        }
    }
    (text, invalid)
}

/// Refuse a NUL byte in a command line or environment before anything is spawned (the
/// OS cannot pass one, and the launcher's own message would name host paths).
pub(super) fn refuse_nul(argv: &[String], env: &[(String, String)]) -> Result<()> {
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(SandboxError::NulInCommand {
            what: "command line",
        });
    }
    if env
        .iter()
        .any(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        return Err(SandboxError::NulInCommand {
            what: "environment",
        });
    }
    Ok(())
}

/// The launcher's file name only: a message the model sees names no host path.
pub(super) fn program_name(program: &Path) -> String {
    program.file_name().map_or_else(
        || "the launcher".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_is_replaced_and_counted() {
        assert_eq!(decode_lossy(b"plain"), ("plain".to_owned(), 0));
        let (text, n) = decode_lossy(b"a\xff\xfeb\xc3\x28c");
        assert_eq!(n, 3, "{text:?}");
        assert_eq!(text, "a\u{fffd}\u{fffd}b\u{fffd}(c");
        assert_eq!(text, String::from_utf8_lossy(b"a\xff\xfeb\xc3\x28c"));
    }
}
