//! Project automation: `cargo xtask ci`, `tidy`, `bench`, `fuzz`.
fn main() {}
