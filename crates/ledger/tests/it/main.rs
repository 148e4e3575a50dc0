//! The ledger crate's integration tests, one binary: the log against an in-memory model
//! (random adds across tile boundaries, every proof checked), what tampering `verify`
//! catches, concurrent writers, and SIGKILL during adds (the test re-runs itself as the
//! child that adds).

mod common;
mod concurrent;
mod crash;
mod durability;
mod go_interop;
mod model;
mod tamper;
