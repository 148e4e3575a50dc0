//! The context parameter must come first.
use provrun_tools::{tool, RunContext};

/// Context in the wrong place.
#[tool]
fn late_context(
    /// A name.
    name: String,
    ctx: &RunContext,
) -> String {
    let _ = ctx;
    name
}

fn main() {}
