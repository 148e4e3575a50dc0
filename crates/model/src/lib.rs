//! Language models for provrun, behind one `Model` trait.
//!
//! `provrun-model` holds provider-neutral message history types, the `Model` trait, an
//! OpenAI-compatible backend, and offline models that need no network. It knows nothing of
//! files, tools' code or evidence.
