//! Small readers of a bundle and of paths that many of the CLI's test modules use.

use std::path::Path;

use serde_json::Value;

/// A bundle's events, each line of its log parsed as JSON.
pub fn events(bundle: &Path) -> Vec<Value> {
    std::fs::read_to_string(bundle.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> String {
    p.display().to_string()
}
