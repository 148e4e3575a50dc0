//! The agent's only window on files.
//!
//! `provrun-sandbox` gives an agent three virtual roots, `/input` (read-only), `/output`
//! and `/scratch` (writable), each backed by a cap-std directory capability, and treats
//! every path a model sends as hostile input.
