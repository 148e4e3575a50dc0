//! A downstream crate of tools, written the way the docs tell a user to: it depends on the
//! `provrun` facade alone and uses only its public API. Its tests (`tests/`) drive it from
//! outside, as a user's program would.

use provrun::tools::{RunContext, tool};

/// Count the words in a text.
#[tool(category = "read")]
pub fn word_count(text: String) -> usize {
    text.split_whitespace().count()
}

/// Say how many entries a folder of the sandbox has.
#[tool(category = "read")]
pub fn entry_count(ctx: &RunContext, path: String) -> Result<usize, String> {
    let listing = ctx.sandbox().list_dir(&path).map_err(|e| e.to_string())?;
    Ok(listing.entries.len())
}

/// Count the lines of a text file in the sandbox.
#[tool(category = "read")]
pub async fn line_count(ctx: &RunContext, path: String) -> Result<usize, String> {
    let text = ctx.read_to_string(&path).await.map_err(|e| e.to_string())?;
    Ok(text.lines().count())
}
