//! `use provrun::prelude::*;` brings `#[tool]` and the names most programs need.
use provrun::prelude::*;

/// Shout a text.
#[tool]
fn shout(text: String) -> String {
    text.to_uppercase()
}

fn main() {
    let registry = ToolRegistry::linked();
    let out = registry.call("shout", r#"{"text": "hi"}"#, None).unwrap();
    assert_eq!(out.content, "HI");
}
