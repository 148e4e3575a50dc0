//! The attribute by its full path, without a `use`: `#[provrun::tool]` and
//! `#[provrun::tools::tool]`.

/// Negate a number.
#[provrun::tool]
fn negate(n: i64) -> i64 {
    -n
}

/// Double a number.
#[provrun::tools::tool(name = "twice")]
fn double(n: i64) -> i64 {
    n * 2
}

fn main() {
    let registry = provrun::tools::ToolRegistry::linked();
    assert_eq!(registry.call("negate", r#"{"n": 4}"#, None).unwrap().content, "-4");
    assert_eq!(registry.call("twice", r#"{"n": 4}"#, None).unwrap().content, "8");
}
