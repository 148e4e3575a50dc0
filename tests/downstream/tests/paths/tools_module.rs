//! `use provrun::tools::tool;`: the natural path through the facade, with a context, an
//! async tool, optional and list arguments, and options.
use provrun::tools::{RunContext, ToolCategory, tool};

/// Join words with a separator.
#[tool(category = "read", summary = "join words")]
fn join(words: Vec<String>, separator: Option<String>) -> String {
    words.join(&separator.unwrap_or_else(|| " ".into()))
}

/// List a folder of the sandbox.
#[tool(category = "read")]
async fn count_entries(ctx: &RunContext, path: String) -> Result<usize, String> {
    let listing = ctx.sandbox().list_dir(&path).map_err(|e| e.to_string())?;
    Ok(listing.entries.len())
}

fn main() {
    let registry = provrun::tools::ToolRegistry::linked();
    let out = registry
        .call("join", r#"{"words": ["a", "b"], "separator": "-"}"#, None)
        .unwrap();
    assert_eq!(out.content, "a-b");
    let join = registry.tool("join").unwrap();
    assert_eq!(join.category(), ToolCategory::Read);
    assert!(registry.tool("count_entries").is_some());
}
