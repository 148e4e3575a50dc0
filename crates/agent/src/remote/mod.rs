//! Tools that run in MCP servers, as a run sees them: connected live at run start, or —
//! when replaying — answered from the recording without any server.
//!
//! Its modules, each using only those before it: `recorded` ([`RecordedMcp`] and its
//! recorded answers: no MCP client, always built), then either `live` (with the `mcp`
//! feature: [`Remote`] connects, lists, calls and stops the servers, and `as_tool` makes a
//! server's tool the loop's) or `off` (without it: the same interface, refusing agents
//! that name MCP servers and replays of runs that used them).

#[cfg(feature = "mcp")]
mod live;
#[cfg(not(feature = "mcp"))]
mod off;
mod recorded;

#[cfg(feature = "mcp")]
pub(crate) use live::{Remote, as_tool};
#[cfg(not(feature = "mcp"))]
pub(crate) use off::Remote;
pub use recorded::RecordedMcp;
