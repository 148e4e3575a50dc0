//! A crate holding exactly one `#[tool]`, `linker_probe`, and nothing else.
//!
//! The end-to-end tests in `tests/tests/linker_*.rs` use it to show the linker pitfall of
//! link-time registration: a binary that depends on this crate but never names it does not
//! link it, so `ToolRegistry::linked()` lacks `linker_probe`; one `use provrun_linker_probe
//! as _;` brings it back.

use provrun_tools::tool;

/// Answer that the probe crate was linked.
#[tool(category = "other")]
pub fn linker_probe() -> &'static str {
    "linked"
}
