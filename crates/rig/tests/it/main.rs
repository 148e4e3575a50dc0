//! The rig crate's integration tests, linked as one test binary instead of one per file:
//! each module below is a former `tests/*.rs` file. The recorded run stays in
//! `tests/fixtures/`.

mod offline_agent;
mod openai_loopback;
