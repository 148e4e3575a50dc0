//! Fuzz target: arbitrary bytes as the arguments of `#[tool]` calls. Whatever the model
//! sends, a call ends as a result (failed for bad arguments), never as a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use provrun_tools::{Json, ToolArgs, tool};
use serde::Deserialize;

/// A nested argument.
#[derive(Debug, Deserialize, provrun_tools::__private::schemars::JsonSchema)]
#[schemars(crate = "provrun_tools::__private::schemars")]
pub struct Item {
    /// A label.
    pub label: String,
    /// A weight.
    pub weight: Option<f64>,
}

/// A tool with arguments of many shapes.
#[tool]
fn shapes(
    /// Text.
    text: String,
    /// A small count.
    count: u8,
    /// A signed number.
    delta: Option<i64>,
    /// A flag.
    flag: Option<bool>,
    /// A list of items.
    items: Option<Vec<Item>>,
) -> Json<usize> {
    Json(
        text.len()
            + usize::from(count)
            + items.map_or(0, |i| i.len())
            + usize::from(flag == Some(true))
            + usize::from(delta.is_some()),
    )
}

/// A tool without arguments.
#[tool]
fn nothing() -> String {
    "nothing".to_string()
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    for tool in [ShapesTool::tool(), NothingTool::tool()] {
        let as_text = tool.call(ToolArgs::from(text.as_str()), None);
        let out = as_text.expect("a sync tool without context is always callable");
        if !out.ok {
            assert!(!out.content.is_empty(), "a failed call says why");
        }
        // The same arguments as a parsed value give the same verdict. (A JSON string value
        // is documented to be argument text itself, so it is left out.)
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data)
            && !value.is_string()
        {
            let same = tool.call(ToolArgs::from(value), None).unwrap();
            assert_eq!(same.ok, out.ok, "text and value arguments disagree");
        }
    }
});
