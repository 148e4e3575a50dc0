//! The model crate's integration tests, linked as one test binary instead of one per
//! file: each module below is a former `tests/*.rs` file, and `support` holds the
//! loopback server they share. The recorded traffic stays in `tests/fixtures/`. All but
//! `offline` talk to a live backend, so they need the `http` feature.

#[cfg(feature = "http")]
mod support;

#[cfg(feature = "http")]
mod anthropic;
#[cfg(feature = "http")]
mod faults;
#[cfg(feature = "http")]
mod fixtures;
mod offline;
#[cfg(feature = "http")]
mod responses;
#[cfg(feature = "http")]
mod settings;
