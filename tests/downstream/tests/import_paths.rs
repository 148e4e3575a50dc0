//! Every path the docs show for `#[tool]` compiles and registers its tool from a crate that
//! depends on the `provrun` facade alone (no `provrun-tools`, `serde` or `schemars`).

#[test]
fn the_tool_attribute_works_through_every_documented_path() {
    let t = trybuild::TestCases::new();
    t.pass("tests/paths/*.rs");
}
