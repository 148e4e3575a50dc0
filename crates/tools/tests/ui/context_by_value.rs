//! The context is taken by reference.
use provrun_tools::{tool, RunContext};

/// Takes the context by value.
#[tool]
fn owned_context(ctx: RunContext) -> String {
    ctx.run_id().to_string()
}

fn main() {}
