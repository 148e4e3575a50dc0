//! The tools crate's integration tests, linked as one test binary instead of one per
//! file: each module below is a former `tests/*.rs` file. Their `#[tool]` fns all register
//! in this binary, and no two share a name. Two tests stay binaries of their own:
//! `tests/registry.rs` checks the exact set of tools linked into its binary, and
//! `tests/ui.rs` is the trybuild compile-fail runner (see each file for why).

mod commands;
mod schemas;
mod tools_macro;
