//! The model crate's integration tests, linked as one test binary instead of one per
//! file: each module below is a former `tests/*.rs` file, and `support` holds the
//! loopback server they share. The recorded traffic stays in `tests/fixtures/`.

mod support;

mod anthropic;
mod faults;
mod fixtures;
mod offline;
mod responses;
