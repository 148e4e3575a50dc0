//! The OTel crate's integration tests as one test binary: each module below is a former
//! `tests/*.rs` file, and a new test goes into a module here rather than a new binary
//! (each binary links the whole dependency tree again).

mod fixtures;
mod mapping;
