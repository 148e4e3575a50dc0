//! Reading runs back from their bundles: the recorded responses a replay answers with,
//! the state a paused run resumes from, and what a replay takes from the recording
//! besides the model's responses. Below the backend (which resumes and replays with
//! these) and [`crate::replay`] (which drives the backend).
//!
//! Its modules, each using only those before it: `bundle` (a bundle's log as typed payloads,
//! its blobs, the recorded agent spec, the ids calls are known by), `responses` (the
//! model's recorded responses, the replay model), `paused` (a paused run's state),
//! `order` (the batches a turn's calls ran in), `replaying` (what a replay takes from the
//! recording).

mod bundle;
mod order;
mod paused;
mod replaying;
mod responses;

pub(crate) use bundle::{
    blob_of, bundle_err, calls_in, recorded_conversation, tool_result, typed_log,
};
pub use bundle::{recorded_agent, recorded_messages};
pub(crate) use order::order_difference;
pub use paused::waiting_calls;
pub(crate) use paused::{PausedTurn, read_paused};
pub(crate) use replaying::Replaying;
pub use responses::{recorded_responses, replay_model};
