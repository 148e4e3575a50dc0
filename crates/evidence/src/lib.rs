//! The runtime's own tamper-evident account of an agent run.
//!
//! `provrun-evidence` writes an append-only, hash-chained event log (`events.jsonl`),
//! content-addressed blobs and an in-toto statement into a bundle directory, and checks
//! such a bundle offline with `verify`. It knows nothing of models or tools: payloads are
//! plain JSON values and blobs are bytes.
