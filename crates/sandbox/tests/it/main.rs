//! The sandbox crate's integration tests, linked as one test binary instead of one per
//! file: each module below is a former `tests/*.rs` file, and `common` holds the
//! helpers they share.

mod common;

mod adversarial;
mod behaviour;
mod command;
mod program;
mod spawn;
mod trail;
