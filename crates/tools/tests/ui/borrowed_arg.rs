//! Arguments must be owned: they are parsed from JSON.
use provrun_tools::tool;

/// Borrows its argument.
#[tool]
fn borrowed(
    /// A name.
    name: &str,
) -> String {
    name.to_string()
}

fn main() {}
