//! The `provrun` command-line interface, as a library so tests can drive it in-process.
