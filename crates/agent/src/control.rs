//! [`RunControl`]: what the caller holds while a run goes on — cancel it, answer permit
//! requests, and watch its progress as [`RunEvent`]s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::BoxFuture;
use provrun_evidence::RunStatus;
use provrun_model::{StreamDelta, Usage};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// Progress of a run, for callers that display it. Sent in the order things happen.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunEvent {
    /// A model request is about to be sent (`step` counts from 1).
    ModelRequest {
        /// Which request of the run.
        step: u32,
    },
    /// A piece of a streamed response.
    ModelDelta(StreamDelta),
    /// A model response arrived.
    ModelResponse {
        /// Which request of the run.
        step: u32,
        /// Its token usage.
        usage: Usage,
    },
    /// The text and reasoning of a model response, whole (sent after
    /// [`RunEvent::ModelResponse`], when the response has either): what a display shows
    /// of a response that was not streamed, or checks a streamed one against.
    ModelAnswer {
        /// Which request of the run.
        step: u32,
        /// The answer text, if any.
        text: Option<String>,
        /// The reasoning text the provider exposed, if any.
        reasoning: Option<String>,
    },
    /// A tool call begins (before hooks run).
    CallBegin {
        /// The call id as the model sent it (models reuse ids, and some send none).
        call_id: String,
        /// The call's id in the run, unique whatever the model sent (`STEP.N`); what
        /// [`RunControl::permit`] is best given.
        run_call_id: String,
        /// The tool.
        name: String,
        /// Its arguments as the model sent them.
        arguments: String,
        /// The tool's display label with the arguments filled in (`Read /input/a.txt`),
        /// when the tool has one (`x-summary`).
        summary: Option<String>,
        /// The tool's confirmation prompt with the arguments filled in (`Delete
        /// /output/a.txt?`), when the tool has one (`x-confirm`), whether or not this
        /// call waits for approval.
        confirm: Option<String>,
    },
    /// A tool call ended (or was denied, replaced or refused).
    ToolResult {
        /// The call id as the model sent it (models reuse ids, and some send none).
        call_id: String,
        /// The call's id in the run, unique whatever the model sent (`STEP.N`); what
        /// [`RunControl::permit`] is best given.
        run_call_id: String,
        /// The tool.
        name: String,
        /// Whether it succeeded.
        ok: bool,
        /// What the model sees.
        content: String,
    },
    /// A tool call waits for approval or for the caller (the run pauses), or a hook holds
    /// it for [`RunControl::permit`] (sent once the wait is on record).
    Deferred {
        /// The call id as the model sent it (models reuse ids, and some send none).
        call_id: String,
        /// The call's id in the run, unique whatever the model sent (`STEP.N`); what
        /// [`RunControl::permit`] is best given.
        run_call_id: String,
        /// The tool.
        name: String,
        /// The tool's confirmation prompt with the call's arguments filled in
        /// (`Delete /output/a.txt?`), when the tool has one (`x-confirm`).
        confirm: Option<String>,
    },
    /// A message the caller sent ([`RunControl::steer`]) was added to the history, as a
    /// user message, before model request `step`.
    Steered {
        /// The model request that first carries it.
        step: u32,
        /// The message.
        text: String,
    },
    /// The run ended.
    Finished {
        /// How.
        status: RunStatus,
    },
}

/// The caller's answer to a permit request (see [`RunControl::wait_permit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permit {
    /// Go ahead.
    Granted,
    /// Do not; the model is told this message.
    Denied(String),
    /// The run was cancelled while waiting.
    Cancelled,
}

#[derive(Default)]
struct Inner {
    /// Cancelled by [`RunControl::cancel`], through a clone given out by
    /// [`RunControl::cancellation_token`], or by the caller's token that this one is a
    /// child of ([`RunControl::with_cancellation`]).
    cancel: CancellationToken,
    /// Wakes permit waiters when a permit is given.
    notify: Notify,
    permits: Mutex<HashMap<String, Permit>>,
    events: Mutex<Option<mpsc::UnboundedSender<RunEvent>>>,
    /// Messages sent with `steer`, and the sources asked for more, not yet taken by the
    /// run.
    steering: Mutex<Steering>,
    /// The calls whose hooks run now, with how to record that one waits for a permit.
    waits: Mutex<Vec<PermitWait>>,
}

/// The caller's handle on a run: cancel it, grant or deny permits, watch its events.
///
/// Cheap to clone; every clone controls the same run. Create it before `execute`, keep a
/// clone, and act on it from another task.
///
/// Cancellation goes through a [`CancellationToken`]: [`RunControl::with_cancellation`]
/// makes a control that a caller's token cancels, and
/// [`RunControl::cancellation_token`] gives the run's token to code that waits on it or
/// stops the run through it.
#[derive(Clone, Default)]
pub struct RunControl {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RunControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControl")
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl RunControl {
    /// A fresh control: not cancelled, no permits, no event subscriber.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh control that is cancelled when `token` is (or by
    /// [`RunControl::cancel`]): the run follows a caller's own cancellation, e.g. a
    /// server's shutdown token or a request's. The control holds a child of `token`, so
    /// cancelling the run leaves the caller's token as it was.
    pub fn with_cancellation(token: &CancellationToken) -> Self {
        Self {
            inner: Arc::new(Inner {
                cancel: token.child_token(),
                ..Inner::default()
            }),
        }
    }

    /// The token this control cancels through (the same token, not a child): waiting on
    /// it waits for the run to be cancelled, and cancelling it cancels the run as
    /// [`RunControl::cancel`] does. To follow the run without being able to stop it,
    /// take a [`CancellationToken::child_token`] of it.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }

    /// Ask the run to stop. It ends cleanly at the next step boundary (or while waiting
    /// on the model or a permit), with a finished bundle of status `cancelled`.
    pub fn cancel(&self) {
        self.inner.cancel.cancel();
    }

    /// Whether the run was cancelled: by [`RunControl::cancel`], through
    /// [`RunControl::cancellation_token`], or by the token given to
    /// [`RunControl::with_cancellation`].
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Wait until the run is cancelled (at once when it already is).
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await;
    }

    /// Grant the permit that a hook waits on for this call.
    pub fn permit(&self, call_id: impl Into<String>) {
        self.set_permit(call_id.into(), Permit::Granted);
    }

    /// Deny the permit that a hook waits on for this call.
    pub fn deny(&self, call_id: impl Into<String>, message: impl Into<String>) {
        self.set_permit(call_id.into(), Permit::Denied(message.into()));
    }

    fn set_permit(&self, call_id: String, permit: Permit) {
        self.inner
            .permits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(call_id, permit);
        self.inner.notify.notify_waiters();
    }

    /// Wait for [`RunControl::permit`] or [`RunControl::deny`] of this call (consuming
    /// it), or for the run to be cancelled. A permit given before the wait counts.
    pub async fn wait_permit(&self, call_id: &str) -> Permit {
        self.wait_permit_for(&[call_id]).await
    }

    /// [`RunControl::wait_permit`] for a call known by several ids (its run id and the
    /// model's): the first id that has a permit, in the order given, answers.
    pub async fn wait_permit_for(&self, call_ids: &[&str]) -> Permit {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let found = {
                let mut permits = self
                    .inner
                    .permits
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                call_ids.iter().find_map(|id| permits.remove(*id))
            };
            if let Some(p) = found {
                return p;
            }
            if self.is_cancelled() {
                return Permit::Cancelled;
            }
            // The call waits: the run records it `deferred` (once), then says so.
            if let Some(wait) = self.take_wait(call_ids) {
                wait.record.await;
                self.emit(wait.event);
            }
            // A permit given, or a cancellation from wherever it comes: look again.
            tokio::select! {
                () = notified => {}
                () = self.inner.cancel.cancelled() => {}
            }
        }
    }

    /// Send the running agent a new user message: the run adds it to the history before
    /// its next model request and records it (a `steered` event, the text as a blob).
    /// Messages sent before the run starts go with its first request; a message sent
    /// after the model's last answer is not used. Empty messages (nothing but white space)
    /// are ignored.
    pub fn steer(&self, text: impl Into<String>) {
        self.lock_steering().push(text.into());
    }

    /// Ask `source` for new messages before every model request, and steer the run with
    /// each (as [`RunControl::steer`] does, after the messages already sent). This is how
    /// `provrun run --steer-file` follows its file: whatever the source has by the time a
    /// request is made goes with that request.
    pub fn steer_from(&self, source: impl FnMut() -> Vec<String> + Send + 'static) {
        self.lock_steering().sources.push(Box::new(source));
    }

    /// The messages to add before the next model request: those sent, then the
    /// sources', in order, empty ones left out.
    pub(crate) fn take_steering(&self) -> Vec<String> {
        // The sources run without the lock held, so one may call `steer` itself.
        let mut sources = std::mem::take(&mut self.lock_steering().sources);
        let mut out = self.lock_steering().take();
        for source in &mut sources {
            out.extend(source());
        }
        let mut steering = self.lock_steering();
        // Sent while the sources ran: after theirs. Sources added meanwhile stay, after.
        out.extend(steering.take());
        sources.append(&mut steering.sources);
        steering.sources = sources;
        out.retain(|t| !t.trim().is_empty());
        out
    }

    fn lock_steering(&self) -> std::sync::MutexGuard<'_, Steering> {
        self.inner
            .steering
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// While the hooks of a call run: how to record that it waits for a permit.
    pub(crate) fn register_wait(&self, wait: PermitWait) {
        self.inner
            .waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(wait);
    }

    /// The hooks of the call `run_call_id` are done: forget its wait if it never began.
    pub(crate) fn unregister_wait(&self, run_call_id: &str) {
        self.inner
            .waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|w| w.run_call_id != run_call_id);
    }

    /// The registered wait of the call one of `call_ids` names (its run id first, then
    /// the model's), taken so it is recorded once.
    fn take_wait(&self, call_ids: &[&str]) -> Option<PermitWait> {
        let mut waits = self
            .inner
            .waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let at = call_ids.iter().find_map(|id| {
            (waits.iter().position(|w| w.run_call_id == *id))
                .or_else(|| waits.iter().position(|w| w.call_id == *id))
        })?;
        Some(waits.remove(at))
    }

    /// Receive this run's [`RunEvent`]s from now on (a later call replaces the earlier
    /// receiver).
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<RunEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self
            .inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(tx);
        rx
    }

    /// Send an event to the subscriber, if any (a dropped receiver is fine).
    pub(crate) fn emit(&self, event: RunEvent) {
        let guard = self
            .inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = guard.as_ref() {
            let _ = tx.send(event);
        }
    }

    /// Whether anyone listens (to skip building events nobody reads).
    pub(crate) fn has_subscriber(&self) -> bool {
        self.inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|tx| !tx.is_closed())
    }
}

/// A message source the loop asks before each model request.
pub(crate) type SteerSource = Box<dyn FnMut() -> Vec<String> + Send>;

/// The messages sent to a run and not yet taken, and the sources asked for more.
#[derive(Default)]
pub(crate) struct Steering {
    queued: Vec<String>,
    pub(crate) sources: Vec<SteerSource>,
}

impl Steering {
    pub(crate) fn push(&mut self, text: String) {
        self.queued.push(text);
    }

    /// Everything queued (the sources are asked by the caller, without the lock).
    pub(crate) fn take(&mut self) -> Vec<String> {
        std::mem::take(&mut self.queued)
    }
}

/// How to record that a call waits for a permit: registered with the run's control while
/// the call's hooks run, taken (once) by [`crate::RunControl::wait_permit_for`] when a
/// hook begins to wait.
pub(crate) struct PermitWait {
    pub(crate) run_call_id: String,
    pub(crate) call_id: String,
    /// The progress event to send.
    pub(crate) event: RunEvent,
    /// Writes the `deferred` event.
    pub(crate) record: BoxFuture<'static, ()>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// `fut` ends within a second (a test that hangs would say nothing).
    async fn within_a_second<F: std::future::Future>(fut: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(1), fut)
            .await
            .expect("it should have ended at once")
    }

    #[tokio::test]
    async fn cancel_reaches_the_token_given_out() {
        let control = RunControl::new();
        let token = control.cancellation_token();
        assert!(!token.is_cancelled());
        control.cancel();
        assert!(control.is_cancelled());
        within_a_second(token.cancelled()).await;
        within_a_second(control.cancelled()).await;
    }

    #[tokio::test]
    async fn cancelling_the_token_given_out_cancels_the_run() {
        let control = RunControl::new();
        let waiter = tokio::spawn({
            let control = control.clone();
            async move { control.wait_permit("1.1").await }
        });
        control.cancellation_token().cancel();
        assert!(control.is_cancelled());
        within_a_second(control.cancelled()).await;
        let permit = within_a_second(waiter).await.unwrap();
        assert_eq!(permit, Permit::Cancelled);
    }

    #[tokio::test]
    async fn the_callers_token_cancels_the_run() {
        let caller = CancellationToken::new();
        let control = RunControl::with_cancellation(&caller);
        assert!(!control.is_cancelled());
        let waiter = tokio::spawn({
            let control = control.clone();
            async move { control.wait_permit("1.1").await }
        });
        let stopped = tokio::spawn({
            let control = control.clone();
            async move { control.cancelled().await }
        });
        caller.cancel();
        assert!(control.is_cancelled());
        within_a_second(stopped).await.unwrap();
        assert_eq!(within_a_second(waiter).await.unwrap(), Permit::Cancelled);
    }

    #[tokio::test]
    async fn cancelling_the_run_leaves_the_callers_token_alone() {
        let caller = CancellationToken::new();
        let control = RunControl::with_cancellation(&caller);
        control.cancel();
        assert!(control.is_cancelled());
        assert!(!caller.is_cancelled());
    }

    #[tokio::test]
    async fn a_permit_still_answers_before_any_cancellation() {
        let control = RunControl::new();
        let waiter = tokio::spawn({
            let control = control.clone();
            async move { control.wait_permit("1.1").await }
        });
        tokio::task::yield_now().await;
        control.deny("1.1", "no");
        let permit = within_a_second(waiter).await.unwrap();
        assert_eq!(permit, Permit::Denied("no".into()));
        assert!(!control.is_cancelled());
    }
}
