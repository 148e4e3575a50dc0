//! A tool needs a description for the model.
use provrun_tools::tool;

#[tool]
fn undocumented(x: u8) -> u8 {
    x
}

fn main() {}
