//! The end-to-end tests across the provrun crates, linked as one test binary instead of
//! one per file: each module below is a former `tests/*.rs` file. Their `#[tool]` fns all
//! register in this binary, and no two share a name.
//!
//! Three tests stay binaries of their own, each saying why: `tests/readme.rs` has its own
//! `main` (it is the CLI when run as `provrun`), and `tests/linker_pitfall.rs` and
//! `tests/linker_fix.rs` check exactly which `#[tool]`s are linked into their binary.

mod agent_runs;
mod architecture;
mod call_order_props;
mod cancel_calls;
mod circles;
mod concurrency;
mod crash;
mod faults;
mod mcp_runs;
mod mcp_servers;
mod native_runs;
mod seed_behaviours;
mod steering;
mod tool_faults;
mod view_browser;
mod view_listing;
