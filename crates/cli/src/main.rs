//! The `provrun` command-line interface.
fn main() {}
