//! Compile-fail tests: misuse of `#[tool]` is a compile error with a readable message.
//!
//! A test binary of its own, not a module of `tests/it`: trybuild compiles each
//! `tests/ui` case in a nested cargo build, far slower than every other test here, and
//! this binary links hardly more than trybuild, so keeping it apart costs little and
//! `cargo test --test it` skips it.

#[test]
fn misuse_of_the_tool_attribute_fails_to_compile_readably() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
