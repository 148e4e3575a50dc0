//! The evidence crate's integration tests, linked as one test binary instead of one per
//! file: each module below is a former `tests/*.rs` file, and `common` holds the helpers
//! they share. Fixtures stay in `tests/fixtures/`.

mod common;

mod bundle;
mod canonical_differential;
mod compat;
mod concurrency;
mod crash;
mod dsse;
mod events_once;
mod hostile;
mod observe;
mod outputs;
mod pending;
mod power_loss;
mod props;
mod redaction;
mod typed;
