//! A parameter type that is neither Deserialize nor JsonSchema.
use provrun_tools::tool;

struct Opaque;

/// Takes something that cannot come from JSON.
#[tool]
fn takes_opaque(
    /// The thing.
    thing: Opaque,
) -> String {
    let _ = thing;
    String::new()
}

fn main() {}
