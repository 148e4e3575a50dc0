//! End-to-end tests across the provrun crates; the tests live in `tests/tests/`.
//!
//! This library is empty on purpose: the package exists so the cross-crate tests are a
//! workspace member that `cargo test --workspace` runs, with no network.

/// The repository README, whose Rust example is compiled and run as a doctest here so that
/// it stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
