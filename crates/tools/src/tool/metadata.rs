//! What a tool says about itself beyond its schema: where it runs ([`ToolMode`]), what
//! kind of thing it does ([`ToolCategory`]), and the `x-*` keys that carry these in its
//! schema.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::ToolError;

/// The schema key that says a tool may change state.
pub const X_DESTRUCTIVE_KEY: &str = "x-destructive";
/// The schema key that carries the tool's [`ToolCategory`].
pub const X_CATEGORY_KEY: &str = "x-category";
/// The schema key that carries a destructive tool's confirmation prompt.
pub const X_CONFIRM_KEY: &str = "x-confirm";
/// The schema key that carries a short display label for the tool.
pub const X_SUMMARY_KEY: &str = "x-summary";

/// Where a tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// Runs now, in this process.
    #[default]
    InProcess,
    /// The caller runs it: the run pauses with the call deferred and resumes with its result.
    ClientRoundTrip,
    /// Runs in an MCP server; its calls are imported into the evidence.
    RemoteMcp,
}

impl ToolMode {
    /// Every mode, in the order documented.
    pub const ALL: [ToolMode; 3] = [
        ToolMode::InProcess,
        ToolMode::ClientRoundTrip,
        ToolMode::RemoteMcp,
    ];

    /// The mode's name as manifests and JSON spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::InProcess => "in_process",
            ToolMode::ClientRoundTrip => "client_round_trip",
            ToolMode::RemoteMcp => "remote_mcp",
        }
    }
}

impl fmt::Display for ToolMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolMode {
    type Err = ToolError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ToolMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ToolError::InvalidMode {
                mode: s.to_string(),
            })
    }
}

/// A coarse, advisory grouping of tools, stamped into the schema as `x-category`.
///
/// It lets a display group tools and a policy reason about classes of capability; it
/// gates nothing by itself (that is the `destructive` flag's job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCategory {
    /// Reads state without changing it.
    Read,
    /// Creates or changes files or other state.
    Write,
    /// Runs programs.
    Execute,
    /// Talks to the network.
    Network,
    /// Looks things up.
    Search,
    /// Anything else.
    #[default]
    Other,
}

impl ToolCategory {
    /// The category's name as schemas and manifests spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCategory::Read => "read",
            ToolCategory::Write => "write",
            ToolCategory::Execute => "execute",
            ToolCategory::Network => "network",
            ToolCategory::Search => "search",
            ToolCategory::Other => "other",
        }
    }
}

impl fmt::Display for ToolCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
