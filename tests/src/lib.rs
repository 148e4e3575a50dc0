//! End-to-end tests across the provrun crates; the tests live in `tests/tests/`.
//!
//! This library is empty on purpose: the package exists so the cross-crate tests are a
//! workspace member that `cargo test --workspace` runs, with no network.
