//! Tools that provrun agents call: `#[tool]`, `ToolRegistry`, `ToolOutput` and the built-ins.
