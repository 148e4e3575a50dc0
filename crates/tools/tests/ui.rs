//! Compile-fail tests: misuse of `#[tool]` is a compile error with a readable message.

#[test]
fn misuse_of_the_tool_attribute_fails_to_compile_readably() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
