//! `use provrun::tool;` from a crate that depends on the facade alone.
use provrun::tool;

/// Add two numbers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {
    let registry = provrun::tools::ToolRegistry::linked();
    let out = registry.call("add", r#"{"a": 2, "b": 3}"#, None).unwrap();
    assert_eq!(out.content, "5");
}
