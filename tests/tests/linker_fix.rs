//! The fix for the linker pitfall: one `use my_tools_crate as _;` links the crate, and
//! with it its `#[tool]` registrations (compare `linker_pitfall.rs`, which omits it).
//!
//! A test binary of its own, not a module of `tests/it`: it checks that its binary links
//! the built-in tools and the probe's alone, and the `#[tool]`s of the other test files
//! would add to them.

use provrun::tools::{BUILTIN_TOOLS, ToolRegistry};
use provrun_linker_probe as _; // the fix: keep the crate, and with it its #[tool]s

#[test]
fn naming_the_crate_once_links_its_tools() {
    let linked = ToolRegistry::linked();
    let probe = linked
        .tool("linker_probe")
        .unwrap_or_else(|| {
            panic!(
                "`linker_probe` is missing although its crate is named; linked: {:?}",
                linked.names().collect::<Vec<_>>()
            )
        })
        .clone();
    assert_eq!(
        probe.description(),
        "Answer that the probe crate was linked."
    );
    let out = linked.call("linker_probe", (), None).unwrap();
    assert!(out.ok);
    assert_eq!(out.content, "linked");
    // The built-ins are still there, and nothing else slipped in.
    assert_eq!(linked.len(), BUILTIN_TOOLS.len() + 1);
}
