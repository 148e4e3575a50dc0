//! The downstream crate's integration tests, linked as one test binary instead of one per
//! file: each module below is a former `tests/*.rs` file. Like any program of a user's, the
//! binary names `provrun_downstream` (in several modules), so its `#[tool]`s are linked.
//!
//! Two tests stay binaries of their own, each saying why: `tests/unlinked.rs` must never
//! name `provrun_downstream`, and `tests/import_paths.rs` is the trybuild runner of the
//! `tests/paths` crates.

mod async_tool;
mod custom_model;
mod hooks;
mod linked;
mod typed_events;
