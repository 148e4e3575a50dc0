//! The linker pitfall of link-time registration, shown: this test binary depends on
//! `provrun-linker-probe` (a dev-dependency of this package) but never names it, so the
//! crate is not linked and its `#[tool] fn linker_probe` is missing from
//! `ToolRegistry::linked()`. `linker_fix.rs` is the same test with the one-line fix.
//!
//! Do not add any reference to `provrun_linker_probe` here: that would turn this test
//! into the fix and hide the pitfall it documents.
//!
//! A test binary of its own, not a module of `tests/it`: it checks that its binary links
//! the built-in tools and nothing else, and the other test files name the probe crate
//! (`linker_fix.rs`) or define `#[tool]`s of their own.

use provrun::tools::{BUILTIN_TOOLS, ToolRegistry};

#[test]
fn a_tools_crate_that_nothing_names_is_not_linked() {
    let linked = ToolRegistry::linked();
    // Registration itself works in this binary: the tools crate is linked (through the
    // facade) and its built-ins are there.
    for name in BUILTIN_TOOLS {
        assert!(linked.tool(name).is_some(), "built-in `{name}` is missing");
    }
    // But the probe crate, a dependency that no code names, was dropped, and with it its tool.
    assert!(
        linked.tool("linker_probe").is_none(),
        "`linker_probe` is registered although nothing names its crate; if the linker now \
         keeps unreferenced crates, update this test and the pitfall section in \
         crates/tools/src/lib.rs. Linked: {:?}",
        linked.names().collect::<Vec<_>>()
    );
    assert_eq!(linked.len(), BUILTIN_TOOLS.len());
}

#[test]
fn the_unknown_tool_error_leads_to_the_fix() {
    let err = ToolRegistry::linked()
        .get(&["linker_probe"])
        .expect_err("the probe's tool is not linked");
    let message = err.to_string();
    for needle in [
        "unknown tool `linker_probe`",
        "the linker dropped that crate",
        "use my_tools as _;",
        "integration-test file",
        "ToolRegistry::add",
    ] {
        assert!(
            message.contains(needle),
            "{needle:?} is missing from: {message}"
        );
    }
}
