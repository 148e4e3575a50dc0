//! Procedural macros for provrun: the `#[tool]` attribute.
