//! The loop's state and the run-unique call ids: what the backend's loop carries from
//! turn to turn and what a paused run's bundle is read back into. A leaf module, shared by
//! the evidence middleware, [`crate::backend`] and the bundle readers.

use provrun_model::{Message, Usage};

/// What the run has seen so far: the loop's whole state.
#[derive(Debug, Clone, Default)]
pub(crate) struct LoopState {
    pub(crate) messages: Vec<Message>,
    pub(crate) usage: Usage,
    pub(crate) requests: u64,
    pub(crate) tool_calls: u64,
}

/// The run-unique id of the `index`th call (from 0) of the model's response to request
/// `step`: `STEP.N` with `N` from 1. Models reuse call ids across turns and some send none,
/// so the model's id cannot identify a call in a run; this id is derived from the run's
/// own history, so a resumed run and a replay give every call the same id again.
pub(crate) fn call_uid(step: u64, index: usize) -> String {
    format!("{step}.{}", index + 1)
}
