//! Tools are free functions.
use provrun_tools::tool;

struct S;

impl S {
    /// A method.
    #[tool]
    fn method(&self, x: u8) -> u8 {
        x
    }
}

fn main() {}
