//! The agent crate's integration tests, linked as one test binary instead of one per
//! file: each module below is a former `tests/*.rs` file.

mod conversation;
mod custom_model;
mod idle_handles;
mod model_limit;
mod run_started_details;
mod tool_timeout;
