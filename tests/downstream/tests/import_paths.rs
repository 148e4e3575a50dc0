//! Every path the docs show for `#[tool]` compiles and registers its tool from a crate that
//! depends on the `provrun` facade alone (no `provrun-tools`, `serde` or `schemars`).
//!
//! A test binary of its own, not a module of `tests/it`: trybuild builds and runs each
//! `tests/paths` case in a nested cargo build, far slower than every other test here, and
//! this binary links hardly more than trybuild, so keeping it apart costs little and
//! `cargo test --test it` skips it.

#[test]
fn the_tool_attribute_works_through_every_documented_path() {
    let t = trybuild::TestCases::new();
    t.pass("tests/paths/*.rs");
}
