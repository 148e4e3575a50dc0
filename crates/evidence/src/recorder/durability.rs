//! The durability policy ([`Durability`]) and the future a write returns, which
//! resolves once the write is as durable as the policy promises ([`Durable`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::commit::SyncShared;
use crate::error::{EvidenceError, Result};

/// When the recorder forces evidence to stable storage (`fdatasync`).
///
/// Every policy writes each event line with one `write(2)` before `record` returns, so
/// a killed *process* (SIGKILL, panic) always leaves every recorded line in the file.
/// The policies differ in what survives a *machine* crash or power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Durability {
    /// Never fsync. Survives a process kill, not a power loss.
    Flush,
    /// fsync after every event before `record` returns: a returned event (and every blob
    /// it names) is on stable storage. One fsync per event.
    PerEvent,
    /// fsync when the caller calls [`Recorder::step`](super::Recorder::step) and at [`Recorder::finish`](super::Recorder::finish): after
    /// `step` returns, every earlier event and blob is durable; later ones may be lost
    /// (or torn) by a power loss.
    PerStep,
    /// One fsync at [`Recorder::finish`](super::Recorder::finish); nothing is durable before it returns.
    #[default]
    AtEnd,
    /// Like `PerEvent` (a returned event is durable), but the process-wide sync thread
    /// performs the syncs, and one batch (one `fdatasync` per file of the batch, all of
    /// their write-backs started first, so one journal commit covers them) covers every
    /// event and blob written before it started, however many tasks or runs wrote them.
    /// For many concurrent writers sharing a disk.
    GroupCommit,
}

impl Durability {
    pub(super) fn syncs(self) -> bool {
        self != Durability::Flush
    }
    pub(super) fn syncs_each_event(self) -> bool {
        matches!(self, Durability::PerEvent | Durability::GroupCommit)
    }
}

/// A write that has happened (its place in the log is fixed) and that resolves when it
/// is as durable as the recorder's [`Durability`] promises. Await it from async code, or
/// call [`Durable::wait`] to block.
#[must_use = "the event is written, but not yet durable until this resolves"]
pub struct Durable<T> {
    pub(super) state: DurableState<T>,
}

pub(super) enum DurableState<T> {
    Ready(Option<Result<T>>),
    Waiting {
        shared: Arc<SyncShared>,
        ticket: u64,
        value: Option<T>,
    },
}

impl<T> Durable<T> {
    pub(super) fn ready(r: Result<T>) -> Self {
        Durable {
            state: DurableState::Ready(Some(r)),
        }
    }

    /// Block the calling thread until the write is durable.
    ///
    /// # Errors
    ///
    /// The error of the write or sync waited for (e.g. [`EvidenceError::Io`],
    /// [`EvidenceError::LogBroken`]); [`EvidenceError::OutOfOrder`] if its value was
    /// already taken.
    pub fn wait(self) -> Result<T> {
        match self.state {
            DurableState::Ready(Some(r)) => r,
            DurableState::Ready(None) => Err(EvidenceError::OutOfOrder(
                "Durable polled after completion".into(),
            )),
            DurableState::Waiting {
                shared,
                ticket,
                value,
            } => {
                shared.wait(ticket)?;
                value.ok_or_else(|| {
                    EvidenceError::OutOfOrder("Durable polled after completion".into())
                })
            }
        }
    }
}

impl<T: Unpin> Future for Durable<T> {
    type Output = Result<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = self.get_mut();
        let done = || {
            Err(EvidenceError::OutOfOrder(
                "Durable polled after completion".into(),
            ))
        };
        match &mut this.state {
            DurableState::Ready(r) => Poll::Ready(r.take().unwrap_or_else(done)),
            DurableState::Waiting {
                shared,
                ticket,
                value,
            } => match shared.poll_ticket(*ticket, cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => Poll::Ready(value.take().ok_or_else(|| {
                    EvidenceError::OutOfOrder("Durable polled after completion".into())
                })),
            },
        }
    }
}
