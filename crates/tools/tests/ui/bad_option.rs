//! Unknown options and values are refused with the allowed ones listed.
use provrun_tools::tool;

/// Bad category.
#[tool(category = "dangerous")]
fn bad_category() -> u8 {
    1
}

/// Bad mode.
#[tool(mode = "elsewhere")]
fn bad_mode() -> u8 {
    1
}

/// Bad key.
#[tool(destructve)]
fn bad_key() -> u8 {
    1
}

fn main() {}
