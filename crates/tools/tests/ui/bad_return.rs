//! A return type that cannot become a tool output.
use provrun_tools::tool;

struct Report;

/// Returns something unconvertible.
#[tool]
fn reports() -> Report {
    Report
}

fn main() {}
